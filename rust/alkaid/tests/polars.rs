//! Received batches as polars DataFrames (feature `polars`, ctest's
//! `rust_polars_test`): the values arrive equal, and the numeric columns
//! are the producer's shared memory, not copies.

#![cfg(feature = "polars")]

mod common;

use std::time::Duration;

use alkaid::{Consumer, Producer};
use arrow_array::cast::AsArray;
use arrow_array::types::{Float64Type, Int64Type};
use arrow_array::Array as _;
use common::{lies_in_shared_memory, test_batch, test_schema, BrokerProcess};

#[test]
fn a_received_batch_is_a_dataframe_over_shared_memory() {
    let broker = BrokerProcess::start();
    let producer = Producer::open("pl", &test_schema(), &broker.producer_options()).unwrap();
    let mut consumer = Consumer::open("pl", &broker.consumer_options()).unwrap();
    let sent = test_batch(40, 1000);
    producer.publish(&sent).unwrap();
    let got = consumer
        .next_batch(Some(Duration::from_secs(10)))
        .unwrap()
        .unwrap()
        .batch;
    assert!(lies_in_shared_memory(&got));
    let df = alkaid::polars::to_dataframe(&got).unwrap();
    assert_eq!(df.shape(), (1000, 3));

    // Values: every column, nulls included.
    let ids = df.column("id").unwrap().i64().unwrap();
    let want_ids = sent.column(0).as_primitive::<Int64Type>();
    assert!((0..1000).all(|i| ids.get(i) == Some(want_ids.value(i))));
    let names = df.column("name").unwrap().str().unwrap();
    let want_names = sent.column(1).as_string::<i32>();
    assert!((0..1000).all(|i| names.get(i) == want_names.is_valid(i).then(|| want_names.value(i))));
    assert_eq!(names.null_count(), want_names.null_count());
    let scores = df.column("score").unwrap().f64().unwrap();
    let want_scores = sent.column(2).as_primitive::<Float64Type>();
    assert!(
        (0..1000).all(|i| scores.get(i) == want_scores.is_valid(i).then(|| want_scores.value(i)))
    );
    assert_eq!(scores.null_count(), want_scores.null_count());

    // No copy: the frame's numeric values are the received buffers.
    let id_values = ids.downcast_iter().next().unwrap().values().as_ptr();
    assert_eq!(
        id_values,
        got.column(0).as_primitive::<Int64Type>().values().as_ptr()
    );
    let score_values = scores.downcast_iter().next().unwrap().values().as_ptr();
    assert_eq!(
        score_values,
        got.column(2)
            .as_primitive::<Float64Type>()
            .values()
            .as_ptr()
    );

    // The frame outlives the batch, the consumer and the producer.
    drop(got);
    drop(consumer);
    drop(producer);
    assert_eq!(
        df.column("id").unwrap().i64().unwrap().get(999),
        Some(40 + 999)
    );
}
