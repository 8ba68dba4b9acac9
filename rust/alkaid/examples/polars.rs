//! A received batch as a polars DataFrame without a copy (feature
//! `polars`). Needs a broker (see publish_consume).
//!     cargo run --features polars --example polars [-- SOCKET]

use std::sync::Arc;

use alkaid::{Consumer, ConsumerOptions, Producer, ProducerOptions};
use arrow_array::{Float64Array, Int64Array, RecordBatch};
use arrow_schema::{DataType, Field, Schema};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let socket: Option<std::path::PathBuf> = std::env::args().nth(1).map(Into::into);
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("price", DataType::Float64, false),
    ]));
    let po = ProducerOptions {
        socket_path: socket.clone(),
        ..Default::default()
    };
    let producer = Producer::open("prices", &schema, &po)?;
    let co = ConsumerOptions {
        socket_path: socket,
        ..Default::default()
    };
    let mut consumer = Consumer::open("prices", &co)?;
    producer.publish(&RecordBatch::try_new(
        schema,
        vec![
            Arc::new(Int64Array::from(vec![1, 2, 3])),
            Arc::new(Float64Array::from(vec![9.5, 7.25, 8.0])),
        ],
    )?)?;
    let batch = consumer.next_batch(None)?.expect("a batch").batch;
    let df = alkaid::polars::to_dataframe(&batch)?; // the same buffers, in shared memory
    println!("{df}");
    Ok(())
}
