//! Heap allocations per batch in steady state, counted by this test
//! binary's global allocator on the test's own thread (the crate's Rust
//! allocations; the C ABI's own, C++ ones are `capi_loan_alloc_test`'s):
//!
//! - a loan, its values written and its publish allocate nothing;
//! - receiving a batch of a flat schema allocates exactly arrow-rs's floor
//!   for a `RecordBatch` over foreign memory: one `Bytes` per non-empty
//!   buffer, one `Arc` per column's array and the batch's column `Vec`
//!   (the batch's owner, the C struct its buffers share, is the previous
//!   batch's, reused once that batch was dropped);
//! - dropping a received batch allocates nothing.
//!
//! One more allocation per batch anywhere on these paths fails the test.

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::Arc;
use std::time::Duration;

use alkaid::{Consumer, ConsumerOptions, Producer, WaitMode};
use arrow_array::types::{Float64Type, Int64Type};
use arrow_schema::{DataType, Field, Schema};
use common::BrokerProcess;

struct Counting;

thread_local! {
    // Const-initialised and without a destructor: usable from the
    // allocator at any point of the thread's life, allocating nothing.
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
}

fn count() {
    let _ = ALLOCATIONS.try_with(|c| c.set(c.get() + 1));
}

// SAFETY: every call is passed on to the system allocator unchanged.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count();
        // SAFETY: the caller's contract, passed on.
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count();
        // SAFETY: as alloc.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count();
        // SAFETY: as alloc.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: as alloc.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Allocations made on this thread by `f`, and its result.
fn allocations<T>(f: impl FnOnce() -> T) -> (u64, T) {
    let before = ALLOCATIONS.with(Cell::get);
    let out = f();
    (ALLOCATIONS.with(Cell::get) - before, out)
}

/// What sending, receiving and dropping `rounds` batches allocated, each
/// batch loaned, written by `fill` and published, received whole and
/// dropped, one at a time, after `warm` rounds that are not counted (the
/// C ABI makes its fixed-shape writer at the second loan of a row count).
struct Counts {
    send: u64,
    receive: u64,
    release: u64,
}

fn run(
    producer: &Producer,
    consumer: &mut Consumer,
    rows: usize,
    var_bytes: &[i64],
    fill: impl Fn(&mut alkaid::Loan<'_>, i64),
    warm: usize,
    rounds: usize,
) -> Counts {
    let mut c = Counts {
        send: 0,
        receive: 0,
        release: 0,
    };
    for i in 0..warm + rounds {
        let (send, ()) = allocations(|| {
            let mut loan = producer.loan(rows, var_bytes).unwrap();
            fill(&mut loan, i as i64);
            loan.publish().unwrap();
        });
        let (receive, got) = allocations(|| {
            consumer
                .next_batch(Some(Duration::from_secs(10)))
                .unwrap()
                .expect("a batch, not the end")
        });
        assert_eq!(got.batch.num_rows(), rows);
        let (release, ()) = allocations(|| drop(got));
        if i >= warm {
            c.send += send;
            c.receive += receive;
            c.release += release;
        }
    }
    c
}

fn open(broker: &BrokerProcess, topic: &str, schema: &Schema) -> (Producer, Consumer) {
    let producer = Producer::open(topic, schema, &broker.producer_options()).unwrap();
    let consumer = Consumer::open(
        topic,
        &ConsumerOptions {
            wait_mode: WaitMode::BusyPoll,
            ..broker.consumer_options()
        },
    )
    .unwrap();
    (producer, consumer)
}

const WARM: usize = 20;
const ROUNDS: u64 = 1000;

#[test]
fn the_ping_pong_schema_allocates_only_arrow_rs_floor() {
    // The ping-pong's batch: one int64 column, not nullable (a loan through
    // the C ABI's fixed-shape writers).
    let broker = BrokerProcess::start();
    let schema = Schema::new(vec![Field::new("v", DataType::Int64, false)]);
    let (producer, mut consumer) = open(&broker, "one", &schema);
    let fill = |loan: &mut alkaid::Loan<'_>, i: i64| {
        for (r, v) in loan
            .values_mut::<Int64Type>(0)
            .unwrap()
            .iter_mut()
            .enumerate()
        {
            *v = i + r as i64;
        }
    };
    let c = run(
        &producer,
        &mut consumer,
        8,
        &[],
        fill,
        WARM,
        ROUNDS as usize,
    );
    assert_eq!(
        c.send, 0,
        "a loan, its values and its publish allocate nothing"
    );
    // The values' Bytes, the array's Arc, the column Vec (the owner is
    // the previous batch's, reused).
    assert_eq!(
        c.receive,
        3 * ROUNDS,
        "allocations receiving {ROUNDS} batches"
    );
    assert_eq!(c.release, 0, "dropping a batch allocates nothing");
    drop(consumer);
    producer.close().unwrap();
}

#[test]
fn a_flat_schema_with_strings_and_nulls_allocates_only_arrow_rs_floor() {
    // int64, utf8 and a nullable float64 with a null in every batch (its
    // bitmap is a buffer of its own): the pool path of loans.
    let broker = BrokerProcess::start();
    let schema = Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("name", DataType::Utf8, false),
        Field::new("score", DataType::Float64, true),
    ]);
    let (producer, mut consumer) = open(&broker, "three", &schema);
    let rows = 10;
    let var = [0, rows as i64 * 3, 0];
    let fill = |loan: &mut alkaid::Loan<'_>, i: i64| {
        for (r, v) in loan
            .values_mut::<Int64Type>(0)
            .unwrap()
            .iter_mut()
            .enumerate()
        {
            *v = i + r as i64;
        }
        let (offsets, values) = loan.binary_mut(1).unwrap();
        for (r, o) in offsets.iter_mut().enumerate() {
            *o = 3 * r as i32;
        }
        values.fill(b'x');
        for (r, v) in loan
            .values_mut::<Float64Type>(2)
            .unwrap()
            .iter_mut()
            .enumerate()
        {
            *v = r as f64;
        }
        let validity = loan
            .validity_mut(2)
            .unwrap()
            .expect("a nullable column's bitmap");
        validity[0] &= !1; // row 0 null
        loan.set_null_count(2, 1).unwrap();
    };
    let c = run(
        &producer,
        &mut consumer,
        rows,
        &var,
        fill,
        WARM,
        ROUNDS as usize,
    );
    assert_eq!(
        c.send, 0,
        "a loan, its values and its publish allocate nothing"
    );
    // The column Vec; three arrays; five buffers (int64 values; utf8
    // offsets and bytes; float64 bitmap and values).
    assert_eq!(
        c.receive,
        (1 + 3 + 5) * ROUNDS,
        "allocations receiving {ROUNDS} batches"
    );
    assert_eq!(c.release, 0, "dropping a batch allocates nothing");
    drop(consumer);
    producer.close().unwrap();
}

#[test]
fn the_counting_allocator_counts() {
    // The check of the checker: an allocation on this thread is seen.
    let (n, v) = allocations(|| Arc::new(vec![1u8; 3]));
    assert_eq!(n, 2);
    assert_eq!(v.len(), 3);
}
