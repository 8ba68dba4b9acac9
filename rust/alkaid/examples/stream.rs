//! Two topics received on one thread with tokio (feature `tokio`): each
//! consumer is a `Stream` woken through its pollable descriptor. Needs a
//! broker (see publish_consume).
//!     cargo run --features tokio --example stream [-- SOCKET]

use std::future::poll_fn;
use std::pin::Pin;
use std::sync::Arc;

use alkaid::{AsyncConsumer, Consumer, ConsumerOptions, Producer, ProducerOptions};
use arrow_array::{Int64Array, RecordBatch};
use arrow_schema::{DataType, Field, Schema};
use futures_core::Stream;

async fn drain(name: &str, mut s: AsyncConsumer) -> alkaid::Result<()> {
    while let Some(batch) = poll_fn(|cx| Pin::new(&mut s).poll_next(cx)).await {
        println!("{name}: {} rows", batch?.num_rows());
    }
    Ok(())
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let socket: Option<std::path::PathBuf> = std::env::args().nth(1).map(Into::into);
    let schema = Arc::new(Schema::new(vec![Field::new("v", DataType::Int64, false)]));
    let po = ProducerOptions {
        socket_path: socket.clone(),
        ..Default::default()
    };
    let co = ConsumerOptions {
        socket_path: socket,
        ..Default::default()
    };
    let (pa, pb) = (
        Producer::open("a", &schema, &po)?,
        Producer::open("b", &schema, &po)?,
    );
    let sa = AsyncConsumer::new(Consumer::open("a", &co)?)?;
    let sb = AsyncConsumer::new(Consumer::open("b", &co)?)?;
    std::thread::spawn(move || -> alkaid::Result<()> {
        for i in 0..3 {
            let batch = RecordBatch::try_new(
                Arc::new(Schema::new(vec![Field::new("v", DataType::Int64, false)])),
                vec![Arc::new(Int64Array::from(vec![i; 4]))],
            )
            .expect("a valid batch");
            pa.publish(&batch)?;
            pb.publish(&batch)?;
        }
        pa.close()?;
        pb.close()
    });
    let (ra, rb) = tokio::join!(drain("a", sa), drain("b", sb));
    ra?;
    rb?;
    Ok(())
}
