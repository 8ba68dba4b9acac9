//! The consumer as a `futures_core::Stream` for tokio (feature `tokio`):
//! many topics waited on from one thread, through each consumer's pollable
//! descriptor (`alkaid_consumer_wait_fd`) registered with tokio's reactor.

use std::future::Future;
use std::os::fd::{AsRawFd, RawFd};
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use arrow_array::RecordBatch;
use futures_core::Stream;
use tokio::io::unix::AsyncFd;
use tokio::io::Interest;
use tokio::time::Sleep;

use crate::consumer::{BatchInfo, Consumer};
use crate::error::Result;

/// How long the stream sleeps on the descriptor before it asks again: a
/// producer that dies wakes the descriptor only through the broker, later
/// (the C ABI's advice for alkaid_consumer_wait_fd).
const RECHECK: Duration = Duration::from_millis(100);

/// The descriptor, borrowed from the consumer (which owns and closes it).
struct WaitFd(RawFd);

impl AsRawFd for WaitFd {
    fn as_raw_fd(&self) -> RawFd {
        self.0
    }
}

/// A [`Consumer`] as a `Stream<Item = Result<RecordBatch>>` that never
/// blocks its thread: each poll takes what is there (`next_batch` with
/// timeout 0) and otherwise waits on the consumer's descriptor through
/// tokio's reactor (`AsyncFd`). It ends like the iterator: at the end of the
/// stream, or after the first error it yields. Needs a tokio runtime with IO
/// and time enabled.
pub struct AsyncConsumer {
    // Declared before `consumer`: deregistered before the consumer closes
    // the descriptor.
    fd: AsyncFd<WaitFd>,
    recheck: Option<(Duration, Pin<Box<Sleep>>)>,
    consumer: Consumer,
    finished: bool,
}

impl std::fmt::Debug for AsyncConsumer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AsyncConsumer")
            .field("consumer", &self.consumer)
            .finish()
    }
}

impl AsyncConsumer {
    /// Wraps `consumer`; call within a tokio runtime. Besides the
    /// descriptor, it asks again every 100 ms (a producer that dies wakes
    /// the descriptor only through the broker, later).
    pub fn new(consumer: Consumer) -> Result<Self> {
        Self::with_recheck(consumer, Some(RECHECK))
    }

    /// As `new`, asking again after `recheck` without a wake (`None`: only
    /// when the descriptor wakes it).
    pub fn with_recheck(consumer: Consumer, recheck: Option<Duration>) -> Result<Self> {
        let fd = consumer.wait_fd()?;
        // SAFETY: the descriptor is the consumer's, open until the consumer
        // closes; this struct holds the consumer and drops (or, in
        // into_inner, deregisters) the AsyncFd first.
        let fd = unsafe { AsyncFd::register_with_interest(WaitFd(fd), Interest::READABLE) }
            .map_err(|e| crate::error::Error::Alkaid {
                code: crate::error::StatusCode::IoError,
                message: format!("registering the consumer's descriptor with tokio: {e}"),
            })?;
        Ok(Self {
            fd,
            recheck: recheck.map(|d| (d, Box::pin(tokio::time::sleep(d)))),
            consumer,
            finished: false,
        })
    }

    /// The consumer (its schema, stats, canceller, last batch info).
    pub fn consumer(&self) -> &Consumer {
        &self.consumer
    }

    /// Where the batch returned last came from.
    pub fn last_info(&self) -> BatchInfo {
        self.consumer.last_info()
    }

    /// The consumer back.
    pub fn into_inner(self) -> Consumer {
        let Self { fd, consumer, .. } = self;
        drop(fd);
        consumer
    }
}

impl Stream for AsyncConsumer {
    type Item = Result<RecordBatch>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        if this.finished {
            return Poll::Ready(None);
        }
        loop {
            match this.consumer.next_batch(Some(Duration::ZERO)) {
                Ok(Some(r)) => return Poll::Ready(Some(Ok(r.batch))),
                Ok(None) => {
                    this.finished = true;
                    return Poll::Ready(None);
                }
                Err(e) if e.is_timed_out() => {}
                Err(e) => {
                    this.finished = true;
                    return Poll::Ready(Some(Err(e)));
                }
            }
            // Nothing there, and the descriptor is armed (next with timeout
            // 0 that timed out arms it): sleep on it, or on the recheck timer.
            match this.fd.poll_read_ready(cx) {
                Poll::Ready(Ok(mut guard)) => {
                    // Level-triggered: the next call of next drains the
                    // wake; clear tokio's readiness so that it polls again.
                    guard.clear_ready();
                    continue;
                }
                Poll::Ready(Err(e)) => {
                    this.finished = true;
                    return Poll::Ready(Some(Err(crate::error::Error::Alkaid {
                        code: crate::error::StatusCode::IoError,
                        message: format!("waiting on the consumer's descriptor: {e}"),
                    })));
                }
                Poll::Pending => {}
            }
            let Some((period, timer)) = this.recheck.as_mut() else {
                return Poll::Pending;
            };
            match timer.as_mut().poll(cx) {
                Poll::Ready(()) => {
                    let next = tokio::time::Instant::now() + *period;
                    timer.as_mut().reset(next);
                    continue;
                }
                Poll::Pending => return Poll::Pending,
            }
        }
    }
}
