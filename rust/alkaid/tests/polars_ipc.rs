//! polars (the Rust crate, its own IPC reader) reads the IPC streams and
//! files Alkaid writes, with no codec, LZ4 and ZSTD (feature `polars-ipc`,
//! opt-in: `cargo test --features polars-ipc --test polars_ipc`). Each gold case of tests/data/arrow-gold is
//! converted by `alkaid convert`; polars reads the output from the file and
//! from memory (where it may read buffers in place, so that their alignment
//! in the stream matters: issue #30, §4) and must get what it gets from
//! Arrow C++'s own file of the case, and what arrow-rs's IPC reader reads
//! from the same bytes (handed to polars through the C Data Interface).
//! The case list is tests/interop/polars_ipc_test.py's (Python polars): a
//! case polars cannot read from Arrow C++ (a type it lacks) is listed, not
//! counted.

#![cfg(feature = "polars-ipc")]

mod common;

use std::fs::File;
use std::io::Cursor;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::process::Command;

use arrow_array::RecordBatch;
use polars::prelude::{DataFrame, IpcReader, IpcStreamReader, SerReader};

use common::tool_bin;

fn gold_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/data/arrow-gold/cpp-21.0.0")
}

/// What `f` returns, or its error or panic as text (polars panics on some
/// input it does not support; that is a failure to report, not a crash).
fn caught<T>(f: impl FnOnce() -> Result<T, String>) -> Result<T, String> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(panic) => Err(format!(
            "panicked: {}",
            panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default()
        )),
    }
}

/// polars' read of an IPC stream or file, from the file.
fn polars_read(path: &Path, stream: bool) -> Result<DataFrame, String> {
    caught(|| {
        let file = File::open(path).map_err(|e| e.to_string())?;
        let df = if stream {
            IpcStreamReader::new(file).finish()
        } else {
            IpcReader::new(file).finish()
        };
        df.map_err(|e| e.to_string())
    })
}

/// polars' read of the same bytes from memory.
fn polars_read_memory(bytes: &[u8], stream: bool) -> Result<DataFrame, String> {
    caught(|| {
        let cursor = Cursor::new(bytes);
        let df = if stream {
            IpcStreamReader::new(cursor).finish()
        } else {
            IpcReader::new(cursor).finish()
        };
        df.map_err(|e| e.to_string())
    })
}

/// arrow-rs's read of the same bytes, as a polars frame (one batch after
/// another; None for a stream of no batches).
fn arrow_read(bytes: &[u8], stream: bool) -> Result<Option<DataFrame>, String> {
    let batches: Vec<RecordBatch> = if stream {
        arrow_ipc::reader::StreamReader::try_new(Cursor::new(bytes), None)
            .map_err(|e| e.to_string())?
            .collect::<Result<_, _>>()
            .map_err(|e| e.to_string())?
    } else {
        arrow_ipc::reader::FileReader::try_new(Cursor::new(bytes), None)
            .map_err(|e| e.to_string())?
            .collect::<Result<_, _>>()
            .map_err(|e| e.to_string())?
    };
    let mut frame: Option<DataFrame> = None;
    for batch in &batches {
        let df = caught(|| alkaid::polars::to_dataframe(batch).map_err(|e| e.to_string()))?;
        frame = Some(match frame {
            None => df,
            Some(mut f) => {
                f.vstack_mut(&df).map_err(|e| e.to_string())?;
                f
            }
        });
    }
    Ok(frame)
}

fn convert(input: &Path, out: &Path, stream: bool, codec: Option<&str>) {
    let mut cmd = Command::new(tool_bin());
    cmd.arg("convert")
        .arg(input)
        .arg(out)
        .args(["--to", if stream { "stream" } else { "file" }]);
    if let Some(codec) = codec {
        cmd.args(["--compression", codec]);
    }
    if !stream {
        cmd.args(["--magic", "arrow"]);
    }
    let status = cmd.status().expect("alkaid convert");
    assert!(
        status.success(),
        "alkaid convert {}: {status}",
        input.display()
    );
}

/// One conversion's failures (empty: read equal everywhere).
fn check(out: &Path, stream: bool, reference: &DataFrame) -> Vec<String> {
    let mut failures = Vec::new();
    let bytes = std::fs::read(out).expect("reading the conversion");
    // Equality of two frames, a panic of polars' comparison as a failure.
    let equal = |a: &DataFrame| caught(|| Ok(a.equals_missing(reference)));
    for (how, got) in [
        ("from the file", polars_read(out, stream)),
        ("from memory", polars_read_memory(&bytes, stream)),
    ] {
        match got.and_then(|got| equal(&got)) {
            Err(e) => failures.push(format!("polars reading {how}: {e}")),
            Ok(false) => failures.push(format!(
                "polars reading {how}: not what it reads from Arrow C++'s file"
            )),
            Ok(true) => {}
        }
    }
    match arrow_read(&bytes, stream) {
        Err(e) => failures.push(format!("arrow-rs: {e}")),
        Ok(None) if reference.height() != 0 => {
            failures.push("arrow-rs read no batch; polars read rows".into())
        }
        Ok(None) => {}
        Ok(Some(df)) => match equal(&df) {
            Err(e) => failures.push(format!("arrow-rs's batches as a polars frame: {e}")),
            Ok(false) => failures.push("arrow-rs's batches as a polars frame: other values".into()),
            Ok(true) => {}
        },
    }
    failures
}

#[test]
fn polars_reads_what_alkaid_convert_writes_with_each_codec() {
    let gold = gold_dir();
    let mut cases: Vec<String> = std::fs::read_dir(&gold)
        .expect("the gold directory")
        .filter_map(|e| {
            e.ok()?
                .file_name()
                .to_str()?
                .strip_suffix(".arrow_file")
                .map(String::from)
        })
        .collect();
    cases.sort();
    let work = std::env::temp_dir().join(format!("alkaid-polars-ipc-{}", std::process::id()));
    std::fs::create_dir_all(&work).unwrap();
    let (mut checked, mut unreadable, mut failures) = (0, Vec::new(), Vec::new());
    for case in &cases {
        let reference_path = gold.join(format!("{case}.arrow_file"));
        let reference = match polars_read(&reference_path, false) {
            Ok(df) => df,
            Err(e) => {
                unreadable.push(format!("{case} ({})", e.lines().next().unwrap_or("")));
                continue;
            }
        };
        for codec in [None, Some("lz4"), Some("zstd")] {
            for stream in [true, false] {
                let kind = if stream { "stream" } else { "file" };
                let name = codec.unwrap_or("none");
                let out = work.join(format!("{case}.{name}.{kind}"));
                convert(&reference_path, &out, stream, codec);
                for f in check(&out, stream, &reference) {
                    failures.push(format!("{case} {name} {kind}: {f}"));
                }
                checked += 1;
            }
        }
    }
    std::fs::remove_dir_all(&work).unwrap();
    println!(
        "{checked} conversions checked ({} cases x 3 codecs x stream and file); polars reads {} \
         cases from Arrow C++ neither: {}",
        cases.len() - unreadable.len(),
        unreadable.len(),
        unreadable.join(", ")
    );
    assert!(checked > 0, "no case checked");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
