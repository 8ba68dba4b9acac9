//! Gives this crate's tests, examples and binaries an rpath to
//! libalkaid_c.so's directory (found by alkaid-sys, `DEP_ALKAID_C_LIB_DIR`),
//! so they run without LD_LIBRARY_PATH. Crates that depend on `alkaid` set
//! their own rpath the same way, or run with LD_LIBRARY_PATH.
fn main() {
    println!("cargo:rerun-if-env-changed=DEP_ALKAID_C_LIB_DIR");
    if let Ok(dir) = std::env::var("DEP_ALKAID_C_LIB_DIR") {
        println!("cargo:rustc-link-arg=-Wl,-rpath,{dir}");
    }
}
