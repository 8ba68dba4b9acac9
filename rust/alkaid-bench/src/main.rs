//! `alkaid latency --pattern pingpong` through the Rust crate: process A
//! (ping) loans a batch of one int64 column of the payload's size and fills
//! it with i, i+1, ... (not timed); then an untimed round trip of the same
//! size whose loan has only its first and last value written (both paths
//! back into the caches, as `alkaid latency` and the iceoryx2 peer do);
//! then it waits (untimed) until B, having answered the warm-up, is back
//! waiting for the next ping (a word in a small shared file, as `alkaid
//! latency`'s side A waits for its side B: B's own work after an answer,
//! its next loan, would otherwise be timed as latency of a ping that comes
//! while B is still busy); then it times publish -> process B (pong) takes
//! the batch from its `Consumer` iterator, checks the first and last value
//! and answers with a one-row batch (a loan made ahead, off the timed path)
//! -> A holds the answer. One-way latency = round trip / 2. A and B pinned
//! to CPUs 0 and 1. Each size has a producer of its own, its arena sized
//! for it (as `alkaid latency`'s fresh topic per size and the iceoryx2
//! peer's publisher per size). Both topics have 8 slots (`--slots`; the
//! iceoryx2 peer's services buffer two samples): with 64, a ring that
//! comes back to a slot after 32 round trips, a 16 MiB ping cost 100-250
//! ns more in the guest's fast regime, every step on both sides slower
//! after the untimed fills; with 4, 64 B cost 75-300 ns more in the slow
//! regime (docs/INTEROP.md, "The Rust ping-pong at 16 MiB"; which lines,
//! in either case, was not pinned down). Percentiles by nearest
//! rank. It starts its own broker (`--broker`, default the build tree's).
//! `--no-await-pong` leaves out the wait for B (the method before it was
//! added).
//!
//!   alkaid_rust_latency [--sizes 64,4096,...] [--count N] [--duration SEC]
//!                       [--mode spin|block] [--json FILE|-] [--no-pin]
//!                       [--broker PATH] [--no-await-pong] [--slots N]

use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use alkaid::{Consumer, ConsumerOptions, Producer, ProducerOptions, WaitMode};

mod private_broker;
use arrow_array::cast::AsArray;
use arrow_array::types::Int64Type;
use arrow_array::RecordBatch;
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use private_broker::PrivateBroker;

struct Options {
    sizes: Vec<usize>,
    count: usize,
    duration: f64,
    block: bool,
    json: Option<String>,
    pin: bool,
    broker: PathBuf,
    role_pong: Option<PathBuf>,
    await_pong: bool,
    flag: Option<PathBuf>,
    slots: u32,
}

fn parse() -> Result<Options, String> {
    let default_broker = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../build/release/broker/daemon/alkaid-broker");
    let mut o = Options {
        sizes: vec![64, 4096, 65536, 1 << 20, 16 << 20],
        count: 10000,
        duration: 10.0,
        block: false,
        json: None,
        pin: true,
        broker: default_broker,
        role_pong: None,
        await_pong: true,
        flag: None,
        slots: 8,
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut value = || args.next().ok_or(format!("{a} needs a value"));
        match a.as_str() {
            "--sizes" => {
                o.sizes = value()?
                    .split(',')
                    .map(|s| s.parse::<usize>().map_err(|e| format!("size {s}: {e}")))
                    .collect::<Result<_, _>>()?;
                if o.sizes.iter().any(|&s| s == 0 || s > 16 << 20) {
                    return Err("sizes are 1 B .. 16 MiB".into());
                }
            }
            "--count" => o.count = value()?.parse().map_err(|e| format!("--count: {e}"))?,
            "--duration" => {
                o.duration = value()?.parse().map_err(|e| format!("--duration: {e}"))?
            }
            "--mode" => {
                o.block = match value()?.as_str() {
                    "spin" => false,
                    "block" => true,
                    m => return Err(format!("--mode {m}: want spin or block")),
                }
            }
            "--json" => o.json = Some(value()?),
            "--no-pin" => o.pin = false,
            "--broker" => o.broker = PathBuf::from(value()?),
            "--role-pong" => o.role_pong = Some(PathBuf::from(value()?)),
            "--flag" => o.flag = Some(PathBuf::from(value()?)),
            "--no-await-pong" => o.await_pong = false,
            "--slots" => {
                o.slots = value()?.parse().map_err(|e| format!("--slots: {e}"))?;
                if o.slots < 2 || !o.slots.is_power_of_two() {
                    return Err("--slots: a power of two, at least 2".into());
                }
            }
            "-h" | "--help" => {
                println!("see the comment at the top of rust/alkaid-bench/src/main.rs");
                std::process::exit(0);
            }
            other => return Err(format!("unknown argument {other}")),
        }
    }
    Ok(o)
}

fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![Field::new("v", DataType::Int64, false)]))
}

fn pin(cpu: usize) {
    // SAFETY: a zeroed cpu_set_t is valid; sched_setaffinity reads it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

fn producer_options(socket: &Path, arena: u64, slots: u32) -> ProducerOptions {
    ProducerOptions {
        socket_path: Some(socket.to_path_buf()),
        arena_bytes: arena,
        max_arena_bytes: 512 << 20,
        slot_count: slots,
        ..ProducerOptions::default()
    }
}

fn consumer_options(socket: &Path, block: bool) -> ConsumerOptions {
    ConsumerOptions {
        wait_for_topic: None,
        wait_mode: if block {
            WaitMode::Block
        } else {
            WaitMode::BusyPoll
        },
        ..ConsumerOptions::with_socket(socket)
    }
}

/// Publishes a loan of `rows` rows holding first, first + 1, ...
fn send(producer: &Producer, rows: usize, first: i64) -> alkaid::Result<()> {
    let mut loan = producer.loan(rows, &[])?;
    for (i, v) in loan.values_mut::<Int64Type>(0)?.iter_mut().enumerate() {
        *v = first + i as i64;
    }
    loan.publish()
}

fn first_last(batch: &RecordBatch) -> (i64, i64, usize) {
    let v = batch.column(0).as_primitive::<Int64Type>().values();
    (v[0], v[v.len() - 1], v.len())
}

/// One word both processes map (a small file): what B answered last,
/// stored when it is back waiting for the next ping.
struct SharedWord {
    ptr: *mut libc::c_void,
}

impl SharedWord {
    const BYTES: usize = 64;

    /// Maps `path`, made 64 bytes long (zeros) when `create`.
    fn map(path: &Path, create: bool) -> std::io::Result<Self> {
        use std::os::fd::AsRawFd;
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(create)
            .truncate(create)
            .open(path)?;
        if create {
            file.set_len(Self::BYTES as u64)?;
        }
        // SAFETY: a shared mapping of a file of BYTES bytes; the mapping
        // outlives the descriptor, closed when `file` drops.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                Self::BYTES,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                file.as_raw_fd(),
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error());
        }
        Ok(Self { ptr })
    }

    fn word(&self) -> &AtomicI64 {
        // SAFETY: the mapping is page-aligned, BYTES long and lives as long
        // as `self`; both processes touch it only through atomics.
        unsafe { &*self.ptr.cast::<AtomicI64>() }
    }
}

impl Drop for SharedWord {
    fn drop(&mut self) {
        // SAFETY: our own mapping, unmapped once.
        unsafe { libc::munmap(self.ptr, Self::BYTES) };
    }
}

/// Process B: answers every ping with its first value, until the ping
/// topic ends. With `--flag`, it stores the value it answered last there each
/// time it goes back to waiting for a ping.
fn pong(o: &Options, socket: &Path) -> alkaid::Result<()> {
    if o.pin {
        pin(1);
    }
    let answered = o
        .flag
        .as_deref()
        .map(|f| SharedWord::map(f, false).expect("mapping the shared word"));
    let mut consumer = Consumer::open("ping", &consumer_options(socket, o.block))?;
    let producer = Producer::open(
        "pong",
        &schema(),
        &producer_options(socket, 1 << 20, o.slots),
    )?;
    // The answer to the next ping is loaned ahead, off the timed path, as
    // alkaid latency's side B builds it ahead.
    let mut answer = producer.loan(1, &[])?;
    let mut last = i64::MIN;
    loop {
        if let Some(w) = &answered {
            // Release: everything done since the last answer comes before
            // the ping side reads this.
            w.word().store(last, Ordering::Release);
        }
        let Some(batch) = consumer.next() else { break };
        let batch = batch?;
        let (first, last_value, rows) = first_last(&batch);
        assert_eq!(
            last_value,
            first + rows as i64 - 1,
            "a ping's values are not what was sent"
        );
        drop(batch);
        answer.values_mut::<Int64Type>(0)?[0] = first;
        answer.publish()?;
        answer = producer.loan(1, &[])?;
        last = first;
    }
    drop(answer);
    producer.close()
}

/// Publishes a loan of `rows` rows whose first and last values are
/// `first` and `first + rows - 1` (the others as the arena held them: a
/// loan's values are not initialised), what the pong side checks.
fn send_ends(producer: &Producer, rows: usize, first: i64) -> alkaid::Result<()> {
    let mut loan = producer.loan(rows, &[])?;
    let values = loan.values_mut::<Int64Type>(0)?;
    values[0] = first;
    values[rows - 1] = first + rows as i64 - 1;
    loan.publish()
}

/// Takes answers until the one to the ping that started at `first`
/// (answers to earlier pings are skipped), each for at most 30 s: a ping or an
/// answer lost would otherwise leave this side spinning for good, at the
/// real-time priority timed runs give it. (A timeout costs the wait nothing
/// until its first 5 ms slice ends: no clock is read on the timed path.)
fn await_answer(answers: &mut Consumer, first: i64) -> alkaid::Result<()> {
    loop {
        let answer = match answers.next_batch(Some(Duration::from_secs(30))) {
            Ok(Some(received)) => received.batch,
            Ok(None) => panic!("the pong process ended early"),
            Err(e) if e.is_timed_out() => {
                panic!("no answer to the ping of {first} within 30 s")
            }
            Err(e) => return Err(e),
        };
        if first_last(&answer).0 == first {
            return Ok(());
        }
    }
}

/// Waits until the pong process, having answered `value`, is back waiting
/// for a ping (untimed; as alkaid latency's AwaitOtherSideWaiting).
fn await_pong_waiting(word: &SharedWord, value: i64) {
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut spins: u32 = 0;
    // Acquire: partner of the pong's release store.
    while word.word().load(Ordering::Acquire) != value {
        spins = spins.wrapping_add(1);
        if spins.is_multiple_of(1024) {
            assert!(
                Instant::now() < deadline,
                "the pong process did not wait again within 30 s"
            );
        }
        std::hint::spin_loop();
    }
}

/// One sample: a ping of `rows` rows filled with `first`, `first + 1`, ...
/// (not timed), an untimed warm-up round trip of the same size starting at
/// `warm_first` (and, with `pong_waiting`, the wait until the pong process
/// waits again), then the timed part: the ping's publish to its answer.
fn round_trip(
    producer: &Producer,
    answers: &mut Consumer,
    pong_waiting: Option<&SharedWord>,
    rows: usize,
    first: i64,
    warm_first: i64,
) -> alkaid::Result<Duration> {
    let mut ping = producer.loan(rows, &[])?;
    for (i, v) in ping.values_mut::<Int64Type>(0)?.iter_mut().enumerate() {
        *v = first + i as i64;
    }
    send_ends(producer, rows, warm_first)?;
    await_answer(answers, warm_first)?;
    if let Some(word) = pong_waiting {
        await_pong_waiting(word, warm_first);
    }
    let t0 = Instant::now();
    ping.publish()?;
    await_answer(answers, first)?;
    Ok(t0.elapsed())
}

struct Result1 {
    bytes: usize,
    samples: Vec<i64>,
    rate: f64,
}

fn ping(o: &Options, socket: &Path, flag: &Path) -> alkaid::Result<Vec<Result1>> {
    if o.pin {
        pin(0);
    }
    let word = o
        .await_pong
        .then(|| SharedWord::map(flag, true).expect("making the shared word"));
    // The first size's producer exists before the pong process, whose
    // consumer then finds it at once.
    let first = ping_producer(socket, o.sizes.first().copied().unwrap_or(64), o.slots)?;
    let mut pong = spawn_pong(o, socket, word.as_ref().map(|_| flag));
    let measured = measure(o, socket, first, word.as_ref());
    if measured.is_err() {
        let _ = pong.kill();
    }
    let _ = pong.wait();
    measured
}

/// The ping topic's producer for payloads of `bytes`: its arena holds four
/// of them (the ping, the warm-up, the one the pong side still holds, one
/// spare) and a megabyte for the hellos, as the iceoryx2 peer sizes its
/// publisher's data segment per size.
fn ping_producer(socket: &Path, bytes: usize, slots: u32) -> alkaid::Result<Producer> {
    Producer::open(
        "ping",
        &schema(),
        &producer_options(socket, 4 * bytes as u64 + (1 << 20), slots),
    )
}

/// Hellos through `producer` until the pong process answers one of them,
/// whichever (within 20 s): its consumer may find a new producer after a
/// first ping, which it then never sees. Waiting for the answer to the
/// latest hello instead would leave this side one answer behind for good
/// once an answer took longer than the 100 ms wait (a pong slow to find
/// the new producer), each answer then naming the hello before: a hang,
/// as `alkaid latency`'s side A says of its own hellos. Later answers to
/// hellos are skipped by `await_answer`. Returns the next unused tag.
fn hello(producer: &Producer, answers: &mut Consumer, first_tag: i64) -> alkaid::Result<i64> {
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut tag = first_tag;
    loop {
        assert!(
            Instant::now() < deadline,
            "the pong process answered none of {} hellos within 20 s",
            tag - first_tag
        );
        send(producer, 1, tag)?;
        tag += 1;
        match answers.next_batch(Some(Duration::from_millis(100))) {
            Ok(Some(b)) if (first_tag..tag).contains(&first_last(&b.batch).0) => return Ok(tag),
            Ok(Some(_)) => {}
            Ok(None) => panic!("the pong process ended"),
            Err(e) if e.is_timed_out() => {}
            Err(e) => return Err(e),
        }
    }
}

/// Every size's round trips, each through a producer of its own (opened,
/// greeted, then the last size's closed), as `alkaid latency` and the
/// iceoryx2 peer set up each size afresh: a producer whose arena served
/// other sizes first costs a 16 MiB ping 100-250 ns more (docs/PERFORMANCE.md).
fn measure(
    o: &Options,
    socket: &Path,
    first: Producer,
    pong_waiting: Option<&SharedWord>,
) -> alkaid::Result<Vec<Result1>> {
    let mut answers = Consumer::open("pong", &consumer_options(socket, o.block))?;
    let mut tag: i64 = 1 << 40;
    let mut out = Vec::new();
    let mut next_first: i64 = 0;
    let mut current: Option<Producer> = None;
    let mut first = Some(first);
    for &bytes in &o.sizes {
        let producer = match first.take() {
            Some(p) => p,
            None => ping_producer(socket, bytes, o.slots)?,
        };
        tag = hello(&producer, &mut answers, tag)?;
        if let Some(previous) = current.replace(producer) {
            previous.close()?;
        }
        let producer = current.as_ref().expect("just set");
        let rows = (bytes / 8).max(1);
        let mut samples = Vec::with_capacity(o.count);
        let started = Instant::now();
        while samples.len() < o.count
            && (o.duration <= 0.0 || started.elapsed().as_secs_f64() < o.duration)
        {
            let rt = round_trip(
                producer,
                &mut answers,
                pong_waiting,
                rows,
                next_first,
                next_first + rows as i64,
            )?;
            next_first += 2 * rows as i64;
            samples.push(rt.as_nanos() as i64 / 2);
        }
        let rate = samples.len() as f64 / started.elapsed().as_secs_f64();
        out.push(Result1 {
            bytes,
            samples,
            rate,
        });
    }
    // The last producer's close ends the ping topic, and so the pong process.
    if let Some(last) = current {
        last.close()?;
    }
    Ok(out)
}

fn spawn_pong(o: &Options, socket: &Path, flag: Option<&Path>) -> Child {
    let mut c = Command::new(std::env::current_exe().expect("our own path"));
    c.arg("--role-pong")
        .arg(socket)
        .args(["--mode", if o.block { "block" } else { "spin" }])
        .args(["--slots", &o.slots.to_string()]);
    if let Some(f) = flag {
        c.arg("--flag").arg(f);
    }
    if !o.pin {
        c.arg("--no-pin");
    }
    c.spawn().expect("starting the pong process")
}

fn nearest_rank(sorted: &[i64], p: f64) -> i64 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = (p / 100.0 * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

fn main() {
    let o = match parse() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("alkaid_rust_latency: {e}");
            std::process::exit(2);
        }
    };
    if let Some(socket) = &o.role_pong {
        if let Err(e) = pong(&o, socket) {
            eprintln!("alkaid_rust_latency (pong): {e}");
            std::process::exit(1);
        }
        return;
    }
    let broker = PrivateBroker::start(&o.broker, "rustlat", Duration::from_secs(10));
    let socket = &broker.socket;
    let flag = socket.with_extension("word");
    let result = ping(&o, socket, &flag);
    let _ = std::fs::remove_file(&flag);
    drop(broker);
    let results = match result {
        Ok(r) => r,
        Err(e) => {
            eprintln!("alkaid_rust_latency: {e}");
            std::process::exit(1);
        }
    };
    let mode = if o.block { "block" } else { "spin" };
    println!("alkaid-rust ping-pong, mode {mode}; one-way latency = round trip / 2");
    println!(
        "{:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>9}",
        "payload", "p50_ns", "p90_ns", "p99_ns", "p99.9_ns", "max_ns", "samples"
    );
    let mut entries = Vec::new();
    for mut r in results {
        r.samples.sort_unstable();
        let s = &r.samples;
        let (p50, p90, p99, p999) = (
            nearest_rank(s, 50.0),
            nearest_rank(s, 90.0),
            nearest_rank(s, 99.0),
            nearest_rank(s, 99.9),
        );
        let max = s.last().copied().unwrap_or(0);
        let mean = s.iter().map(|&v| v as f64).sum::<f64>() / s.len().max(1) as f64;
        println!(
            "{:>10} {p50:>10} {p90:>10} {p99:>10} {p999:>10} {max:>10} {:>9}",
            r.bytes,
            s.len()
        );
        entries.push(format!(
            "    {{\"transport\": \"alkaid-rust\", \"mode\": \"{mode}\", \"pattern\": \"pingpong\", \
             \"payload_bytes\": {}, \"consumers\": 1, \"samples\": {}, \"p50_ns\": {p50}, \
             \"p90_ns\": {p90}, \"p99_ns\": {p99}, \"p999_ns\": {p999}, \"max_ns\": {max}, \
             \"mean_ns\": {mean:.1}, \"msgs_per_s\": {:.1}}}",
            r.bytes,
            s.len(),
            r.rate
        ));
    }
    if let Some(path) = &o.json {
        let doc = format!("{{\n  \"results\": [\n{}\n  ]\n}}\n", entries.join(",\n"));
        if path == "-" {
            print!("{doc}");
        } else {
            std::fs::write(path, doc).expect("writing the JSON");
        }
    }
}
