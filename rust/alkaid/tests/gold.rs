//! Arrow's gold cases (tests/data/arrow-gold) through Rust and both C++
//! sides: `alkaid publish` (C++) sends each IPC stream on a topic, a Rust
//! consumer receives every batch zero-copy and a Rust producer publishes it
//! again (one copy, fully validated) on a second topic, and `alkaid
//! subscribe` (C++) writes that topic out. `alkaid cat` of what came out
//! must equal `alkaid cat` of the gold file: schema, metadata (the order of
//! the keys aside: arrow-rs keeps them in a HashMap) and every value.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use alkaid::{Consumer, ConsumerOptions, Producer};
use common::{tool_bin, wait_until, BrokerProcess};

fn gold_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/data/arrow-gold/cpp-21.0.0")
}

/// Whether the broker lists a consumer waiting for `topic` to be created.
fn awaited(broker: &BrokerProcess, topic: &str) -> bool {
    let out = Command::new(tool_bin())
        .args([
            "topics",
            "--socket",
            broker.socket.to_str().unwrap(),
            "--json",
        ])
        .output()
        .expect("alkaid topics");
    let text = String::from_utf8_lossy(&out.stdout);
    text.split("\"awaited\"")
        .nth(1)
        .is_some_and(|rest| rest.contains(&format!("\"name\": \"{topic}\"")))
}

fn cat(path: &Path) -> String {
    let out = Command::new(tool_bin())
        .arg("cat")
        .arg(path)
        .output()
        .expect("alkaid cat");
    assert!(
        out.status.success(),
        "alkaid cat {}: {}",
        path.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `alkaid cat`'s text with each run of metadata lines sorted: arrow-rs
/// keeps a schema's and a field's metadata in a HashMap, so the order of
/// the keys (not their values) is lost on the way through Rust.
fn metadata_sorted(text: &str) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut run: Vec<&str> = Vec::new();
    for line in text.lines() {
        if line.trim_start().starts_with("metadata:") {
            run.push(line);
            continue;
        }
        run.sort_unstable();
        out.extend(run.drain(..).map(String::from));
        out.push(line.to_string());
    }
    run.sort_unstable();
    out.extend(run.drain(..).map(String::from));
    out.join("\n")
}

/// One gold stream through C++ -> Rust -> Rust -> C++; the error names the
/// step that failed.
fn relay(broker: &BrokerProcess, i: usize, gold: &Path, out: &Path) -> Result<(), String> {
    let socket = broker.socket.to_str().unwrap().to_string();
    let (t_in, t_out) = (format!("in{i}"), format!("out{i}"));
    let mut subscriber = Command::new(tool_bin())
        .args([
            "subscribe",
            &t_out,
            "--socket",
            &socket,
            "--out",
            out.to_str().unwrap(),
        ])
        .args(["--timeout", "30"])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    assert!(wait_until(Duration::from_secs(30), || awaited(
        broker, &t_out
    )));
    let options = ConsumerOptions {
        wait_for_topic: None,
        ..broker.consumer_options()
    };
    let producer_options = broker.producer_options();
    let t_in2 = t_in.clone();
    let relay = std::thread::spawn(move || -> Result<usize, String> {
        let consumer = Consumer::open(&t_in2, &options).map_err(|e| format!("consumer: {e}"))?;
        let producer = Producer::open(&t_out, &consumer.schema(), &producer_options)
            .map_err(|e| format!("producer: {e}"))?;
        let mut n = 0;
        for batch in consumer {
            let batch = batch.map_err(|e| format!("receive: {e}"))?;
            producer
                .publish(&batch)
                .map_err(|e| format!("publish: {e}"))?;
            n += 1;
        }
        producer.close().map_err(|e| format!("close: {e}"))?;
        Ok(n)
    });
    assert!(wait_until(Duration::from_secs(30), || awaited(
        broker, &t_in
    )));
    let publisher = Command::new(tool_bin())
        .args(["publish", &t_in])
        .arg(gold)
        .args(["--socket", &socket])
        .output()
        .unwrap();
    let relayed = relay.join().unwrap();
    let sub = subscriber.wait().unwrap();
    if !publisher.status.success() {
        return Err(format!(
            "alkaid publish: {}",
            String::from_utf8_lossy(&publisher.stderr)
        ));
    }
    relayed?;
    if !sub.success() {
        let mut err = String::new();
        use std::io::Read;
        subscriber
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut err)
            .unwrap();
        return Err(format!("alkaid subscribe: {err}"));
    }
    let (want, got) = (metadata_sorted(&cat(gold)), metadata_sorted(&cat(out)));
    if want != got {
        return Err(format!(
            "differs:\n--- gold\n{want}\n--- through Rust\n{got}"
        ));
    }
    Ok(())
}

#[test]
fn every_gold_case_goes_through_rust_and_back_to_cpp_unchanged() {
    let broker = BrokerProcess::start();
    let dir = std::env::temp_dir().join(format!("alkaid-rust-gold-{}", broker.name));
    std::fs::create_dir_all(&dir).unwrap();
    let mut cases: Vec<PathBuf> = std::fs::read_dir(gold_dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "stream"))
        .collect();
    cases.sort();
    assert!(
        cases.len() >= 30,
        "gold cases not found in {}",
        gold_dir().display()
    );
    let mut failed = Vec::new();
    for (i, gold) in cases.iter().enumerate() {
        let out = dir.join(format!("{i}.arrows"));
        if let Err(e) = relay(&broker, i, gold, &out) {
            failed.push(format!(
                "{}: {e}",
                gold.file_name().unwrap().to_string_lossy()
            ));
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(
        failed.is_empty(),
        "{} of {} cases failed:\n{}",
        failed.len(),
        cases.len(),
        failed.join("\n")
    );
}
