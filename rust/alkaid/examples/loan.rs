//! Writes a batch in place in shared memory (a loan) and publishes it
//! without a copy. Needs a broker (see publish_consume).
//!     cargo run --example loan [-- SOCKET]

use std::sync::Arc;

use alkaid::{Consumer, ConsumerOptions, Producer, ProducerOptions};
use arrow_array::types::Int64Type;
use arrow_schema::{DataType, Field, Schema};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let socket: Option<std::path::PathBuf> = std::env::args().nth(1).map(Into::into);
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("word", DataType::Utf8, false),
    ]));
    let po = ProducerOptions {
        socket_path: socket.clone(),
        ..Default::default()
    };
    let producer = Producer::open("words", &schema, &po)?;
    let mut consumer = Consumer::open(
        "words",
        &ConsumerOptions {
            socket_path: socket,
            ..Default::default()
        },
    )?;

    let words = ["zero", "one", "two"];
    let bytes = words.iter().map(|w| w.len() as i64).sum();
    // One entry per column: the value bytes of the variable-width ones.
    let mut loan = producer.loan(words.len(), &[0, bytes])?;
    loan.values_mut::<Int64Type>(0)?.copy_from_slice(&[0, 1, 2]);
    let (offsets, values) = loan.binary_mut(1)?;
    let mut at = 0;
    for (i, w) in words.iter().enumerate() {
        offsets[i] = at as i32;
        values[at..at + w.len()].copy_from_slice(w.as_bytes());
        at += w.len();
    }
    offsets[words.len()] = at as i32;
    loan.publish()?;

    let received = consumer.next_batch(None)?.expect("a batch");
    println!("{:?}", received.batch.column(1));
    println!("copied bytes: {}", producer.stats()?.copied_bytes); // 0
    Ok(())
}
