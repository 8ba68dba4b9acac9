//! What the ping-pong's timed publish costs right after the untimed fill
//! of its batch, counted with callgrind inside `timed_publish` (with
//! `--cache-sim=yes`, its cache misses too; docs/INTEROP.md, "Rust", has
//! the commands):
//!
//!   valgrind --tool=callgrind --cache-sim=yes --toggle-collect='*timed_publish*' \
//!     alkaid_rust_fill_cost BROKER ROWS SAMPLES [SLOTS]
//!
//! Each sample does what a sample of `alkaid_rust_latency`'s ping side does,
//! in one process: loan the ping (ROWS int64 values) and write every value;
//! loan, write the ends of and publish a warm-up of the same size, receive
//! it and drop it; then publish the ping (`timed_publish`), receive it and
//! drop it. Comparing ROWS 8 with ROWS 2097152 (16 MiB) shows what the fill
//! leaves cold for the publish: the instructions are the same, the misses
//! are not. SLOTS is the topic's slot count (default 64; the ping-pong's
//! topics have 4).

use std::hint::black_box;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use alkaid::{Consumer, ConsumerOptions, Loan, Producer, ProducerOptions, WaitMode};
use arrow_array::types::Int64Type;
use arrow_schema::{DataType, Field, Schema};

#[path = "../private_broker.rs"]
mod private_broker;
use private_broker::PrivateBroker;

#[inline(never)]
fn timed_publish(loan: Loan<'_>) {
    loan.publish().expect("publish");
}

fn receive(consumer: &mut Consumer) {
    let got = consumer
        .next_batch(Some(Duration::from_secs(10)))
        .expect("a batch")
        .expect("not the end");
    black_box(got.batch.num_rows());
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() != 4 && args.len() != 5 {
        eprintln!("usage: {} BROKER ROWS SAMPLES [SLOTS]", args[0]);
        std::process::exit(2);
    }
    let broker_bin = PathBuf::from(&args[1]);
    let rows: usize = args[2].parse().expect("ROWS");
    let samples: usize = args[3].parse().expect("SAMPLES");
    let slots: u32 = args.get(4).map_or(64, |s| s.parse().expect("SLOTS"));
    let broker = PrivateBroker::start(&broker_bin, "rustfill", Duration::from_secs(30));
    let socket = broker.socket.clone();
    let schema = Arc::new(Schema::new(vec![Field::new("v", DataType::Int64, false)]));
    let po = ProducerOptions {
        socket_path: Some(socket.clone()),
        arena_bytes: 4 * (rows as u64 * 8) + (1 << 20),
        max_arena_bytes: 512 << 20,
        slot_count: slots,
        ..ProducerOptions::default()
    };
    let producer = Producer::open("fill", &schema, &po).expect("producer");
    let co = ConsumerOptions {
        wait_mode: WaitMode::BusyPoll,
        ..ConsumerOptions::with_socket(&socket)
    };
    let mut consumer = Consumer::open("fill", &co).expect("consumer");
    for s in 0..samples {
        let first = (s * 2 * rows) as i64;
        let mut ping = producer.loan(rows, &[]).expect("loan");
        for (i, v) in ping
            .values_mut::<Int64Type>(0)
            .expect("values")
            .iter_mut()
            .enumerate()
        {
            *v = first + i as i64;
        }
        let mut warm = producer.loan(rows, &[]).expect("loan");
        let values = warm.values_mut::<Int64Type>(0).expect("values");
        values[0] = first + rows as i64;
        values[rows - 1] = first + 2 * rows as i64 - 1;
        warm.publish().expect("publish");
        receive(&mut consumer);
        timed_publish(ping);
        receive(&mut consumer);
    }
    drop(consumer);
    producer.close().expect("close");
    drop(broker);
    println!("{samples} samples of {rows} rows");
}
