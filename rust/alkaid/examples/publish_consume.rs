//! Publishes three batches on topic "ticks" and reads them back, zero-copy,
//! through the consumer's iterator. Needs a broker: `alkaid-broker &`
//! (or `--socket PATH` here and there).
//!     cargo run --example publish_consume [-- SOCKET]

use std::sync::Arc;

use alkaid::{Consumer, ConsumerOptions, Producer, ProducerOptions};
use arrow_array::{Float64Array, Int64Array, RecordBatch};
use arrow_schema::{DataType, Field, Schema};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let socket = std::env::args().nth(1).map(Into::into);
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("price", DataType::Float64, false),
    ]));
    let po = ProducerOptions {
        socket_path: Clone::clone(&socket),
        ..Default::default()
    };
    let producer = Producer::open("ticks", &schema, &po)?;
    let consumer = Consumer::open(
        "ticks",
        &ConsumerOptions {
            socket_path: socket,
            ..Default::default()
        },
    )?;
    for i in 0..3 {
        let batch = RecordBatch::try_new(
            schema.clone(),
            vec![
                Arc::new(Int64Array::from(vec![i, i + 1])),
                Arc::new(Float64Array::from(vec![1.5 * i as f64, 2.5])),
            ],
        )?;
        producer.publish(&batch)?;
    }
    producer.close()?; // the consumer's iterator ends after the last batch
    for batch in consumer {
        let batch = batch?; // its buffers are the producer's shared memory
        println!("{} rows: {:?}", batch.num_rows(), batch.column(0));
    }
    Ok(())
}
