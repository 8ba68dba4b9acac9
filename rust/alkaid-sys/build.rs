//! Finds libalkaid_c.so, in this order:
//!
//! 1. `ALKAID_LIB_DIR`: the directory that holds it;
//! 2. `ALKAID_PREFIX`: an installed prefix (`cmake --install`), its `lib/`
//!    (or `lib64/`);
//! 3. the CMake build tree of this checkout: `ALKAID_BUILD_DIR` if set, else
//!    `build/release` beside `rust/` (what `scripts/build.sh` makes), its
//!    `capi/`.
//!
//! The directory is passed on to dependents as `DEP_ALKAID_C_LIB_DIR`
//! (`links = "alkaid_c"`), so their build scripts can set an rpath.

use std::env;
use std::path::{Path, PathBuf};

const LIB_FILE: &str = "libalkaid_c.so";

fn main() {
    for var in ["ALKAID_LIB_DIR", "ALKAID_PREFIX", "ALKAID_BUILD_DIR"] {
        println!("cargo:rerun-if-env-changed={var}");
    }
    let manifest = PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("set by cargo"));
    let (dir, how) = if let Some(dir) = env::var_os("ALKAID_LIB_DIR") {
        (PathBuf::from(dir), "ALKAID_LIB_DIR")
    } else if let Some(prefix) = env::var_os("ALKAID_PREFIX") {
        let prefix = PathBuf::from(prefix);
        let lib64 = prefix.join("lib64");
        let dir = if lib64.join(LIB_FILE).exists() {
            lib64
        } else {
            prefix.join("lib")
        };
        (dir, "ALKAID_PREFIX")
    } else {
        let build = env::var_os("ALKAID_BUILD_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| manifest.join("../../build/release"));
        (
            build.join("capi"),
            "the CMake build tree (ALKAID_BUILD_DIR or build/release)",
        )
    };
    let dir = dir.canonicalize().unwrap_or(dir);
    let lib = dir.join(LIB_FILE);
    if !lib.exists() {
        panic!(
            "alkaid-sys: {} not found (looked in {}, from {how}). Build the C ABI first \
             (scripts/build.sh, or cmake --build --preset release --target alkaid_c), or point \
             ALKAID_LIB_DIR at the directory holding it, or ALKAID_PREFIX at an installed prefix.",
            LIB_FILE,
            dir.display()
        );
    }
    rerun_if_changed(&lib);
    println!("cargo:rustc-link-search=native={}", dir.display());
    println!("cargo:rustc-link-lib=dylib=alkaid_c");
    println!("cargo:lib_dir={}", dir.display());
    // This crate's own tests run without LD_LIBRARY_PATH as well.
    println!("cargo:rustc-link-arg=-Wl,-rpath,{}", dir.display());
}

fn rerun_if_changed(path: &Path) {
    println!("cargo:rerun-if-changed={}", path.display());
}
