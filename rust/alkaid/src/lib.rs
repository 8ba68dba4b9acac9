//! Alkaid from Rust: Arrow record batches between processes on one host,
//! through a broker's topics, zero-copy through shared memory.
//!
//! A [`Consumer`] is an `Iterator<Item = Result<RecordBatch>>` of arrow-rs
//! batches whose buffers are the producer's shared memory (imported through
//! the Arrow C Data Interface, no copy; dropping the batch gives the block
//! back). A [`Producer`] publishes a `RecordBatch` with one copy
//! ([`Producer::publish`]) or lends shared memory to write a batch in place
//! ([`Producer::loan`], [`Loan`]), published without a copy.
//!
//! ```no_run
//! use std::sync::Arc;
//! use arrow_array::{Int64Array, RecordBatch};
//! use arrow_schema::{DataType, Field, Schema};
//! use alkaid::{Consumer, ConsumerOptions, Producer, ProducerOptions};
//!
//! let schema = Arc::new(Schema::new(vec![Field::new("id", DataType::Int64, false)]));
//! let producer = Producer::open("ticks", &schema, &ProducerOptions::default())?;
//! let consumer = Consumer::open("ticks", &ConsumerOptions::default())?;
//! let batch = RecordBatch::try_new(schema, vec![Arc::new(Int64Array::from(vec![1, 2, 3]))])?;
//! producer.publish(&batch)?;
//! producer.close()?;
//! for batch in consumer {
//!     println!("{} rows", batch?.num_rows());
//! }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Threads: `Producer`, `Consumer` and `Broker` are `Send`, not `Sync` (the
//! C ABI's handles are used by one thread at a time); [`ProducerCanceller`]
//! and [`ConsumerCanceller`] are `Send + Sync` (cancel is the one call that
//! may run beside another); received batches are `Send + Sync` and may be
//! dropped on any thread, after their consumer and producer are gone.
//!
//! The native library, `libalkaid_c.so`, is found by the `alkaid-sys` build
//! script (`rust/README.md`).

#![deny(missing_docs)]

mod broker;
mod consumer;
mod error;
mod ffi_util;
mod import;
mod loan;
#[cfg(feature = "polars")]
pub mod polars;
mod producer;
#[cfg(feature = "tokio")]
mod stream;

pub use broker::{Broker, TopicInfo};
pub use consumer::{
    BatchInfo, Consumer, ConsumerCanceller, ConsumerOptions, ConsumerStats, Received, TopicReader,
    Verification, WaitMode,
};
pub use error::{Error, Result, StatusCode};
pub use loan::Loan;
pub use producer::{
    HugePages, Policy, Producer, ProducerCanceller, ProducerOptions, ProducerStats,
};
#[cfg(feature = "tokio")]
pub use stream::AsyncConsumer;

/// The C ABI version the loaded library implements (`alkaid_version()`).
pub fn c_api_version() -> i32 {
    // SAFETY: no arguments, no state.
    unsafe { alkaid_sys::alkaid_version() }
}

/// The library's release, e.g. "0.1.0".
pub fn version() -> String {
    // SAFETY: a static C string.
    unsafe { std::ffi::CStr::from_ptr(alkaid_sys::alkaid_version_string()) }
        .to_string_lossy()
        .into_owned()
}
