//! The cost of one batch on the Rust side, counted with callgrind inside
//! three functions (docs/INTEROP.md, "Rust", has the commands):
//!
//! - `receive_one`: the C ABI's `next` plus the import into a
//!   `RecordBatch`;
//! - `send_one`: a loan of ROWS rows, its values written, published;
//! - `release_one`: the batch dropped (its block given back).
//!
//! The command:
//!
//!   valgrind --tool=callgrind --toggle-collect='*receive_one*' \
//!     alkaid_rust_next_cost BROKER ROWS BATCHES [int64]
//!
//! Each iteration sends a batch of ROWS rows (an int64 and a utf8 column;
//! with `int64`, the ping-pong's one int64 column), receives it and drops
//! it, nothing waiting: the data path of a message without the wait. The
//! difference of two BATCHES counts, divided by their difference, is the
//! cost per batch; comparing ROWS shows whether it depends on the rows. A
//! ping-pong round trip is two of each (a ping and its answer).

use std::hint::black_box;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use alkaid::{Consumer, ConsumerOptions, Producer, ProducerOptions, Received, WaitMode};
use arrow_array::types::Int64Type;
use arrow_schema::{DataType, Field, Schema};

#[path = "../private_broker.rs"]
mod private_broker;
use private_broker::PrivateBroker;

#[inline(never)]
fn receive_one(consumer: &mut Consumer) -> Received {
    consumer
        .next_batch(Some(Duration::from_secs(10)))
        .expect("a batch")
        .expect("not the end")
}

#[inline(never)]
fn send_one(producer: &Producer, rows: usize, first: usize, with_names: bool) {
    let var = [0, rows as i64 * 4];
    let mut loan = producer
        .loan(rows, if with_names { &var } else { &[] })
        .expect("loan");
    for (r, v) in loan
        .values_mut::<Int64Type>(0)
        .expect("ids")
        .iter_mut()
        .enumerate()
    {
        *v = (first + r) as i64;
    }
    if with_names {
        let (offsets, values) = loan.binary_mut(1).expect("names");
        for (r, o) in offsets.iter_mut().enumerate() {
            *o = (r * 4) as i32;
        }
        values.fill(b'a');
    }
    loan.publish().expect("publish");
}

#[inline(never)]
fn release_one(received: Received) {
    drop(black_box(received));
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() != 4 && !(args.len() == 5 && args[4] == "int64") {
        eprintln!("usage: {} BROKER ROWS BATCHES [int64]", args[0]);
        std::process::exit(2);
    }
    let with_names = args.len() == 4;
    let broker_bin = PathBuf::from(&args[1]);
    let rows: usize = args[2].parse().expect("ROWS");
    let batches: usize = args[3].parse().expect("BATCHES");
    let broker = PrivateBroker::start(&broker_bin, "rustcost", Duration::from_secs(30));
    let socket = broker.socket.clone();
    let mut fields = vec![Field::new("id", DataType::Int64, false)];
    if with_names {
        fields.push(Field::new("name", DataType::Utf8, false));
    }
    let schema = Arc::new(Schema::new(fields));
    let po = ProducerOptions {
        socket_path: Some(socket.clone()),
        arena_bytes: (rows as u64 * 24 + 4096) * 8,
        ..ProducerOptions::default()
    };
    let producer = Producer::open("cost", &schema, &po).expect("producer");
    let co = ConsumerOptions {
        wait_mode: WaitMode::BusyPoll,
        ..ConsumerOptions::with_socket(&socket)
    };
    let mut consumer = Consumer::open("cost", &co).expect("consumer");
    for i in 0..batches {
        send_one(&producer, rows, i * rows, with_names);
        let got = receive_one(&mut consumer);
        black_box(got.batch.num_rows());
        release_one(got);
    }
    drop(consumer);
    producer.close().expect("close");
    drop(broker);
    println!("received {batches} batches of {rows} rows");
}
