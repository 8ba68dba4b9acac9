//! The Python side through the broker, both ways: a Python producer
//! (`alkaid.Producer`, pyarrow batches) to a Rust consumer, and a Rust
//! producer to a Python consumer that checks every value. Needs the Python
//! module of the build tree (build/release/python) and the project's .venv;
//! without them the test says so and passes, except under CI=true, where it
//! fails.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use alkaid::{Consumer, Producer};
use arrow_array::RecordBatch;
use common::{build_dir, test_batch, test_schema, wait_until, BrokerProcess};

/// pyarrow batch `i` of Python, the same values as `test_batch(i * 100, 10 + i)`.
const PY_COMMON: &str = r#"
import sys
import alkaid, pyarrow as pa
schema = pa.schema([pa.field("id", pa.int64(), nullable=False), ("name", pa.utf8()),
                    ("score", pa.float64())])
def batch(i):
    rows, base = 10 + i, i * 100
    return pa.record_batch([
        pa.array([base + r for r in range(rows)], pa.int64()),
        pa.array([None if r % 5 == 4 else "n%d" % r for r in range(rows)], pa.utf8()),
        pa.array([None if r % 7 == 6 else r / 2 for r in range(rows)], pa.float64()),
    ], schema=schema)
socket, topic, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
"#;

const PY_PRODUCER: &str = r#"
with alkaid.Producer(topic, schema, socket=socket) as p:
    for i in range(n):
        p.publish(batch(i))
"#;

const PY_CONSUMER: &str = r#"
with alkaid.Consumer(topic, socket=socket) as c:
    got = [pa.record_batch(b) for b in c]
assert len(got) == n, (len(got), n)
for i, b in enumerate(got):
    assert b.equals(batch(i)), (i, b, batch(i))
print("python consumer: %d batches equal" % n)
"#;

const BATCHES: usize = 12;

fn rust_batch(i: usize) -> RecordBatch {
    test_batch(i as i64 * 100, 10 + i)
}

/// The .venv's Python with the build tree's module on its path, or None
/// (and a note) when either is missing outside CI.
fn python() -> Option<Command> {
    let python = std::env::var_os("ALKAID_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.venv/bin/python"));
    let module_dir = build_dir().join("python");
    let has_module = std::fs::read_dir(module_dir.join("alkaid"))
        .map(|d| {
            d.filter_map(|e| e.ok())
                .any(|e| e.file_name().to_string_lossy().starts_with("_alkaid"))
        })
        .unwrap_or(false);
    if !python.exists() || !has_module {
        let why = format!(
            "no Python peer: {} or the module in {} is missing (scripts/build.sh builds it)",
            python.display(),
            module_dir.display()
        );
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "CI=true: {why}"
        );
        eprintln!("{why}: the Python test is skipped");
        return None;
    }
    let mut c = Command::new(python);
    c.env("PYTHONPATH", module_dir);
    Some(c)
}

#[test]
fn python_to_rust_and_rust_to_python() {
    let Some(mut py_producer) = python() else {
        return;
    };
    let Some(mut py_consumer) = python() else {
        return;
    };
    let broker = BrokerProcess::start();
    let socket = broker.socket.to_str().unwrap().to_string();
    let n = BATCHES.to_string();

    // Python -> Rust: the Rust consumer reads while the Python producer
    // joins the topic (which waits for it to register).
    let placeholder = Producer::open("py", &test_schema(), &broker.producer_options()).unwrap();
    let consumer = Consumer::open("py", &broker.consumer_options()).unwrap();
    let reader = std::thread::spawn(move || consumer.map(|b| b.unwrap()).collect::<Vec<_>>());
    let status = py_producer
        .arg("-c")
        .arg(format!("{PY_COMMON}{PY_PRODUCER}"))
        .args([&socket, "py", &n])
        .status()
        .unwrap();
    assert!(status.success(), "the Python producer failed");
    placeholder.close().unwrap();
    let got = reader.join().unwrap();
    assert_eq!(got, (0..BATCHES).map(rust_batch).collect::<Vec<_>>());

    // Rust -> Python: the Python consumer attaches first; the Rust producer
    // that publishes opens after it.
    let placeholder = Producer::open("rp", &test_schema(), &broker.producer_options()).unwrap();
    let mut child = py_consumer
        .arg("-c")
        .arg(format!("{PY_COMMON}{PY_CONSUMER}"))
        .args([&socket, "rp", &n])
        .spawn()
        .unwrap();
    let mut b = alkaid::Broker::connect(Some(&broker.socket)).unwrap();
    assert!(wait_until(std::time::Duration::from_secs(30), || {
        b.list_topics()
            .unwrap()
            .iter()
            .any(|t| t.name == "rp" && t.consumers == 1)
    }));
    let producer = Producer::open("rp", &test_schema(), &broker.producer_options()).unwrap();
    for i in 0..BATCHES {
        producer.publish(&rust_batch(i)).unwrap();
    }
    producer.close().unwrap();
    placeholder.close().unwrap();
    assert!(
        child.wait().unwrap().success(),
        "the Python consumer failed"
    );
}
