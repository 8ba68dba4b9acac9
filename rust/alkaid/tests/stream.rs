//! The tokio `Stream` (feature `tokio`): two topics received on one thread
//! (a current-thread runtime), woken only by the consumers' descriptors.

#![cfg(feature = "tokio")]

mod common;

use std::future::poll_fn;
use std::pin::Pin;
use std::time::Duration;

use alkaid::{AsyncConsumer, Consumer, Producer};
use arrow_array::RecordBatch;
use common::{test_batch, test_schema, BrokerProcess};
use futures_core::Stream;

async fn next(s: &mut AsyncConsumer) -> Option<alkaid::Result<RecordBatch>> {
    poll_fn(|cx| Pin::new(&mut *s).poll_next(cx)).await
}

async fn collect(mut s: AsyncConsumer) -> Vec<RecordBatch> {
    let mut out = Vec::new();
    while let Some(b) = next(&mut s).await {
        out.push(b.unwrap());
    }
    out
}

#[tokio::test(flavor = "current_thread")]
async fn two_topics_on_one_thread_woken_by_their_descriptors() {
    let broker = BrokerProcess::start();
    let pa = Producer::open("a", &test_schema(), &broker.producer_options()).unwrap();
    let pb = Producer::open("b", &test_schema(), &broker.producer_options()).unwrap();
    // No recheck timer: only a wake of the descriptor lets a waiting stream
    // go on, so a broken wake fails the test (the bound below) instead of
    // being hidden by the timer.
    let ca = Consumer::open("a", &broker.consumer_options()).unwrap();
    let cb = Consumer::open("b", &broker.consumer_options()).unwrap();
    let sa = AsyncConsumer::with_recheck(ca, None).unwrap();
    let sb = AsyncConsumer::with_recheck(cb, None).unwrap();
    // Producers on another thread, with pauses, so that the streams sleep.
    let publisher = std::thread::spawn(move || {
        for i in 0..20 {
            pa.publish(&test_batch(i, 5)).unwrap();
            pb.publish(&test_batch(100 + i, 6)).unwrap();
            std::thread::sleep(Duration::from_millis(2));
        }
        pa.close().unwrap();
        pb.close().unwrap();
    });
    // The streams run in a task of their own: the bound's timer wakes only
    // the wait for the task, never polls the streams, so only their
    // descriptors can move them on.
    let both = tokio::spawn(async { tokio::join!(collect(sa), collect(sb)) });
    let (got_a, got_b) = tokio::time::timeout(Duration::from_secs(60), both)
        .await
        .expect("a stream was never woken")
        .unwrap();
    publisher.join().unwrap();
    assert_eq!(got_a, (0..20).map(|i| test_batch(i, 5)).collect::<Vec<_>>());
    assert_eq!(
        got_b,
        (0..20).map(|i| test_batch(100 + i, 6)).collect::<Vec<_>>()
    );
}

#[tokio::test(flavor = "current_thread")]
async fn a_cancelled_stream_yields_the_error_then_ends() {
    let broker = BrokerProcess::start();
    let _p = Producer::open("c", &test_schema(), &broker.producer_options()).unwrap();
    let c = Consumer::open("c", &broker.consumer_options()).unwrap();
    let canceller = c.canceller();
    let mut s = AsyncConsumer::new(c).unwrap();
    canceller.cancel().unwrap();
    let err = next(&mut s).await.expect("an item").unwrap_err();
    assert!(err.is_cancelled(), "{err}");
    assert!(next(&mut s).await.is_none());
}
