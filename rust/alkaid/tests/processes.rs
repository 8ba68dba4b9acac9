//! Across processes: a Rust producer process and a Rust consumer process
//! (this test binary run again in a role, `child`), a producer process that
//! dies, and the C++ side (the `alkaid` tool) both ways through the broker.

mod common;

use std::io::Write;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use alkaid::{Broker, Consumer, ConsumerOptions, Producer, ProducerOptions};

use arrow_array::RecordBatch;
use common::{test_batch, test_schema, tool_bin, wait_until, BrokerProcess};

const ROLE: &str = "ALKAID_RUST_TEST_ROLE";
const BATCHES: i64 = 50;

/// Batch i of the child processes: rows and values differ per batch.
fn batch(i: i64) -> RecordBatch {
    test_batch(i * 1000, 10 + (i as usize % 17))
}

/// This binary again, running only `child` in `role`.
fn spawn_child(role: &str, socket: &PathBuf, topic: &str) -> Child {
    Command::new(std::env::current_exe().unwrap())
        .stdin(Stdio::piped())
        .args(["child", "--exact", "--nocapture", "--test-threads=1"])
        .env(ROLE, role)
        .env("ALKAID_TEST_SOCKET", socket)
        .env("ALKAID_TEST_TOPIC", topic)
        .spawn()
        .unwrap()
}

/// The roles of the child processes; without ALKAID_RUST_TEST_ROLE (a
/// plain test run) it does nothing.
#[test]
fn child() {
    let Ok(role) = std::env::var(ROLE) else {
        return;
    };
    let socket = PathBuf::from(std::env::var("ALKAID_TEST_SOCKET").unwrap());
    let topic = std::env::var("ALKAID_TEST_TOPIC").unwrap();
    let po = ProducerOptions {
        socket_path: Some(socket.clone()),
        wait_for_consumers: Duration::from_secs(5),
        ..ProducerOptions::default()
    };
    match role.as_str() {
        "producer" => {
            let p = Producer::open(&topic, &test_schema(), &po).unwrap();
            for i in 0..BATCHES {
                p.publish(&batch(i)).unwrap();
            }
            p.close().unwrap();
        }
        "consumer" => {
            let co = ConsumerOptions {
                wait_for_topic: None,
                ..ConsumerOptions::with_socket(&socket)
            };
            let c = Consumer::open(&topic, &co).unwrap();
            let got: Vec<RecordBatch> = c.map(|b| b.unwrap()).collect();
            let want: Vec<RecordBatch> = (0..BATCHES).map(batch).collect();
            assert_eq!(got.len(), want.len());
            assert!(got == want, "the batches differ");
        }
        "dying-producer" => {
            let p = Producer::open(&topic, &test_schema(), &po).unwrap();
            for i in 0..3 {
                p.publish(&batch(i)).unwrap();
            }
            // Dies holding its producer (no close, no end of stream) once
            // the parent, having read the batches, says so on stdin.
            let mut line = String::new();
            std::io::stdin().read_line(&mut line).unwrap();
            std::process::abort();
        }
        other => panic!("unknown role {other}"),
    }
}

fn wait_child(mut c: Child) -> Option<i32> {
    c.wait().unwrap().code()
}

/// Creates `topic` with a producer of its own (closed by the caller), so
/// that consumers attach to an existing topic and every later producer
/// waits for them to register before its first batch.
fn create_topic(broker: &BrokerProcess, topic: &str) -> Producer {
    Producer::open(topic, &test_schema(), &broker.producer_options()).unwrap()
}

/// Waits until `topic` has `n` consumers.
fn wait_for_consumers(broker: &BrokerProcess, topic: &str, n: u32) {
    let mut b = Broker::connect(Some(&broker.socket)).unwrap();
    assert!(
        wait_until(Duration::from_secs(30), || {
            b.list_topics()
                .unwrap()
                .iter()
                .any(|t| t.name == topic && t.consumers == n)
        }),
        "{n} consumers did not attach to {topic}"
    );
}

#[test]
fn a_rust_producer_process_to_a_rust_consumer_process() {
    let broker = BrokerProcess::start();
    let placeholder = create_topic(&broker, "x");
    let consumer = spawn_child("consumer", &broker.socket, "x");
    wait_for_consumers(&broker, "x", 1);
    let producer = spawn_child("producer", &broker.socket, "x");
    assert_eq!(wait_child(producer), Some(0), "the producer process failed");
    placeholder.close().unwrap();
    assert_eq!(wait_child(consumer), Some(0), "the consumer process failed");
}

#[test]
fn a_producer_that_dies_ends_the_stream_and_its_batches_stay_readable() {
    let broker = BrokerProcess::start();
    let placeholder = create_topic(&broker, "die");
    let mut consumer = Consumer::open("die", &broker.consumer_options()).unwrap();
    let mut dying = spawn_child("dying-producer", &broker.socket, "die");
    let held: Vec<RecordBatch> = (0..3)
        .map(|_| {
            consumer
                .next_batch(Some(Duration::from_secs(30)))
                .unwrap()
                .unwrap()
                .batch
        })
        .collect();
    dying.stdin.take().unwrap().write_all(b"die\n").unwrap();
    let status = dying.wait().unwrap();
    assert!(!status.success(), "the producer should have died");
    placeholder.close().unwrap();
    // The broker tells the consumer of the death: the stream ends (the
    // bound is far above the broker's liveness check, not a timing claim).
    assert!(consumer
        .next_batch(Some(Duration::from_secs(30)))
        .unwrap()
        .is_none());
    // The dead producer's shared memory still backs what was received.
    assert_eq!(held, (0..3).map(batch).collect::<Vec<_>>());
    drop(held);
}

/// Runs the `alkaid` tool; panics with its stderr if it fails.
fn tool(args: &[&str]) -> Child {
    Command::new(tool_bin())
        .args(args)
        .spawn()
        .unwrap_or_else(|e| panic!("running {}: {e}", tool_bin().display()))
}

#[test]
fn rust_to_cpp_to_rust_through_the_broker() {
    let broker = BrokerProcess::start();
    let socket = broker.socket.to_str().unwrap().to_string();
    let dir = std::env::temp_dir().join(format!("alkaid-rust-test-{}", broker.name));
    std::fs::create_dir_all(&dir).unwrap();
    let stream = dir.join("from-rust.arrows");
    let sent: Vec<RecordBatch> = (0..BATCHES).map(batch).collect();

    // Rust publishes on "r"; the C++ subscriber writes an IPC stream. The
    // producer that publishes opens after the subscriber attached, so it
    // waits for the subscriber to register with its channel.
    let placeholder = create_topic(&broker, "r");
    let subscriber = tool(&[
        "subscribe",
        "r",
        "--socket",
        &socket,
        "--out",
        stream.to_str().unwrap(),
        "--timeout",
        "30",
    ]);
    wait_for_consumers(&broker, "r", 1);
    let producer = Producer::open("r", &test_schema(), &broker.producer_options()).unwrap();
    for s in &sent {
        producer.publish(s).unwrap();
    }
    producer.close().unwrap();
    placeholder.close().unwrap();
    assert_eq!(wait_child(subscriber), Some(0), "alkaid subscribe failed");

    // The C++ publisher sends that stream on "c"; Rust receives it.
    // The consumer reads while the C++ producer opens: a producer waits for
    // the attached consumers to register with it, which they do in next.
    let placeholder = create_topic(&broker, "c");
    let consumer = Consumer::open("c", &broker.consumer_options()).unwrap();
    let reader = std::thread::spawn(move || consumer.map(|b| b.unwrap()).collect::<Vec<_>>());
    let publisher = tool(&[
        "publish",
        "c",
        stream.to_str().unwrap(),
        "--socket",
        &socket,
    ]);
    assert_eq!(wait_child(publisher), Some(0), "alkaid publish failed");
    placeholder.close().unwrap();
    let got: Vec<RecordBatch> = reader.join().unwrap();
    assert_eq!(got.len(), sent.len());
    assert!(
        got == sent,
        "what came back through C++ differs from what Rust sent"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
