//! What the tests share: a real alkaid-broker process on a socket of its
//! own, the programs of the CMake build tree, a test batch, and the check
//! that a test left nothing in /dev/shm.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use alkaid::{Broker, ConsumerOptions, ProducerOptions};
use arrow_array::{ArrayRef, Float64Array, Int64Array, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema, SchemaRef};

/// The CMake build tree: `ALKAID_BUILD_DIR`, else build/release.
pub fn build_dir() -> PathBuf {
    std::env::var_os("ALKAID_BUILD_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../build/release"))
}

/// The broker program (`ALKAID_BROKER_BIN` overrides).
pub fn broker_bin() -> PathBuf {
    std::env::var_os("ALKAID_BROKER_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| build_dir().join("broker/daemon/alkaid-broker"))
}

/// The `alkaid` tool (C++), a peer for the cross-language tests.
pub fn tool_bin() -> PathBuf {
    build_dir().join("tools/alkaid/alkaid")
}

/// Names in /dev/shm starting with `prefix`.
pub fn shm_names(prefix: &str) -> Vec<String> {
    std::fs::read_dir("/dev/shm")
        .map(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with(prefix))
                .collect()
        })
        .unwrap_or_default()
}

/// Polls `cond` every 5 ms until it holds or `limit` passes (a bound for a
/// broken mechanism, not a timing assertion).
pub fn wait_until(limit: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let until = Instant::now() + limit;
    while Instant::now() < until {
        if cond() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    cond()
}

/// A real broker on a socket of its own, named so that its segments can be
/// found ("rt<pid>x<n>."); stopped with SIGTERM when dropped, after which
/// none of its segments may be left.
pub struct BrokerProcess {
    child: Option<Child>,
    pub name: String,
    pub socket: PathBuf,
}

static COUNTER: AtomicU32 = AtomicU32::new(0);

impl BrokerProcess {
    pub fn start() -> Self {
        let name = format!(
            "rt{}x{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        );
        let socket = PathBuf::from(format!("/tmp/alkaid-test-{name}.sock"));
        let mut b = Self {
            child: None,
            name,
            socket,
        };
        b.spawn();
        b
    }

    fn spawn(&mut self) {
        let bin = broker_bin();
        let child = Command::new(&bin)
            .args([
                "--socket",
                self.socket.to_str().unwrap(),
                "--name",
                &self.name,
            ])
            .args(["--log-level", "warn"])
            .spawn()
            .unwrap_or_else(|e| panic!("starting {}: {e}", bin.display()));
        self.child = Some(child);
        // Ready once it answers a request.
        let ok = wait_until(Duration::from_secs(10), || {
            Broker::connect(Some(&self.socket))
                .and_then(|mut b| b.list_topics())
                .is_ok()
        });
        assert!(ok, "the broker at {} did not answer", self.socket.display());
    }

    pub fn producer_options(&self) -> ProducerOptions {
        ProducerOptions {
            socket_path: Some(self.socket.clone()),
            arena_bytes: 4 << 20,
            wait_for_consumers: Duration::from_secs(5),
            ..ProducerOptions::default()
        }
    }

    pub fn consumer_options(&self) -> ConsumerOptions {
        ConsumerOptions::with_socket(&self.socket)
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().map(|c| c.id()).unwrap_or(0)
    }

    /// SIGTERM and wait; returns the exit status code.
    pub fn stop(&mut self) -> Option<i32> {
        let mut child = self.child.take()?;
        // SAFETY: a plain kill(2) of our own child.
        unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
        child.wait().ok().and_then(|s| s.code())
    }

    /// SIGKILL and wait (its socket is removed here; segments by the next
    /// broker of the same name, `restart`).
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
            let _ = std::fs::remove_file(&self.socket);
        }
    }

    /// A new broker of the same name and socket (it sweeps what a killed
    /// one left).
    pub fn restart(&mut self) {
        self.kill();
        self.spawn();
    }

    pub fn segments(&self) -> Vec<String> {
        shm_names(&format!("{}.", self.name))
    }
}

impl Drop for BrokerProcess {
    fn drop(&mut self) {
        self.stop();
        let _ = std::fs::remove_file(&self.socket);
        if !std::thread::panicking() {
            let left = self.segments();
            assert!(left.is_empty(), "segments left in /dev/shm: {left:?}");
        }
    }
}

/// id int64 not null, name utf8, score float64.
pub fn test_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("name", DataType::Utf8, true),
        Field::new("score", DataType::Float64, true),
    ]))
}

/// `rows` rows: id = base + r, name "n<r>" (null every 5th), score r / 2
/// (null every 7th).
pub fn test_batch(base: i64, rows: usize) -> RecordBatch {
    let id: ArrayRef = Arc::new(Int64Array::from_iter_values(
        (0..rows as i64).map(|r| base + r),
    ));
    let name: ArrayRef = Arc::new(StringArray::from_iter((0..rows).map(|r| {
        if r % 5 == 4 {
            None
        } else {
            Some(format!("n{r}"))
        }
    })));
    let score: ArrayRef = Arc::new(Float64Array::from_iter((0..rows).map(|r| {
        if r % 7 == 6 {
            None
        } else {
            Some(r as f64 / 2.0)
        }
    })));
    RecordBatch::try_new(test_schema(), vec![id, name, score]).unwrap()
}

/// Whether every buffer of `batch` lies inside one of the /proc/self/maps
/// ranges backed by /dev/shm (the producer's shared memory, not a copy).
pub fn lies_in_shared_memory(batch: &RecordBatch) -> bool {
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
    let ranges: Vec<(usize, usize)> = maps
        .lines()
        .filter(|l| l.contains("/dev/shm/"))
        .filter_map(|l| {
            let range = l.split_whitespace().next()?;
            let (a, b) = range.split_once('-')?;
            Some((
                usize::from_str_radix(a, 16).ok()?,
                usize::from_str_radix(b, 16).ok()?,
            ))
        })
        .collect();
    batch.columns().iter().all(|c| {
        let data = c.to_data();
        data.buffers().iter().all(|b| {
            let p = b.as_ptr() as usize;
            b.is_empty() || ranges.iter().any(|&(lo, hi)| p >= lo && p + b.len() <= hi)
        })
    })
}
