//! Receiving a topic's batches zero-copy: arrow-rs `RecordBatch`es whose
//! buffers are the producer's shared memory.

use std::cell::Cell;
use std::ffi::CString;
use std::marker::PhantomData;
use std::os::fd::RawFd;
use std::path::PathBuf;
use std::ptr;
use std::sync::Arc;
use std::time::Duration;

use alkaid_sys as sys;
use arrow_array::ffi_stream::{FFI_ArrowArrayStream, RecordBatchStreamReader};
use arrow_array::{RecordBatch, RecordBatchReader};
use arrow_data::ffi::FFI_ArrowArray;
use arrow_schema::{ArrowError, SchemaRef};

use crate::error::{check, Error, Result};
use crate::ffi_util::{c_path, c_string, import_schema, millis};
use crate::import::{BatchImporter, BatchOwner};

/// How a consumer waits for the next batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum WaitMode {
    /// Spin: lowest latency, one core busy.
    BusyPoll,
    /// Sleep on a futex until the producer wakes it.
    Block,
    /// Spin a little, then block (the default).
    #[default]
    SpinThenBlock,
}

/// What a consumer checks of each batch before returning it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Verification {
    /// Offsets, lengths and buffer places (the default).
    #[default]
    Structure,
    /// And every value offset and index.
    Full,
    /// Copy out of shared memory, then verify fully.
    PrivateCopy,
}

/// How a consumer is opened; `ConsumerOptions::default()` holds the C ABI's
/// defaults (`alkaid_consumer_options_init_sized`).
#[derive(Debug, Clone)]
pub struct ConsumerOptions {
    /// The broker's socket (`None`: the default, as for a producer).
    pub socket_path: Option<PathBuf>,
    /// How long open waits for the topic to be created: zero (default)
    /// fails at once with `StatusCode::KeyError`, `None` waits without
    /// limit. A consumer that waited receives every batch from the first.
    pub wait_for_topic: Option<Duration>,
    /// Start at the oldest batch the channels still hold rather than the
    /// next one published (default false).
    pub from_oldest: bool,
    /// Receive only these columns, in this order (default: empty, all).
    pub columns: Vec<String>,
    /// How `next` waits (default `SpinThenBlock`).
    pub wait_mode: WaitMode,
    /// What is checked of each batch (default `Structure`).
    pub verification: Verification,
    /// How many received batches may be alive at once; beyond it `next`
    /// fails with `StatusCode::CapacityError` (default 0: no limit).
    pub max_held_batches: u64,
}

impl Default for ConsumerOptions {
    fn default() -> Self {
        Self {
            socket_path: None,
            wait_for_topic: Some(Duration::ZERO),
            from_oldest: false,
            columns: Vec::new(),
            wait_mode: WaitMode::SpinThenBlock,
            verification: Verification::Structure,
            max_held_batches: 0,
        }
    }
}

impl ConsumerOptions {
    /// The defaults with `socket_path` set.
    pub fn with_socket(path: impl Into<PathBuf>) -> Self {
        Self {
            socket_path: Some(path.into()),
            ..Self::default()
        }
    }
}

/// Where a batch came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct BatchInfo {
    /// The producer, as the broker numbers the topic's producers.
    pub producer_id: u64,
    /// The producer's process id.
    pub producer_pid: u32,
    /// The batch's place in that producer's channel.
    pub sequence: u64,
    /// Batches of that producer lost just before this one (drop-oldest
    /// topics).
    pub lost_before: u64,
    /// When the producer published it: CLOCK_REALTIME nanoseconds
    /// (comparable with `SystemTime::now()` since the epoch), taken just
    /// before it wrote the batch's slot. `None` unless the topic stamps
    /// publish times (`ProducerOptions::publish_timestamps` of the producer
    /// that created it).
    pub publish_ns: Option<u64>,
}

/// Counters of a consumer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ConsumerStats {
    /// Batches lost to overwrites.
    pub lost: u64,
    /// Batches handed out and not yet released.
    pub held: u64,
    /// Batches handed out so far.
    pub handed_out: u64,
    /// Nexts refused by `max_held_batches`.
    pub refused: u64,
    /// Producers the consumer reads from now.
    pub producers: u64,
}

/// A received batch and where it came from.
#[derive(Debug, Clone)]
pub struct Received {
    /// The batch; its buffers are the producer's shared memory, held until
    /// the last clone of every array in it is dropped (on any thread, also
    /// after the consumer and the producer are gone).
    pub batch: RecordBatch,
    /// Where it came from.
    pub info: BatchInfo,
}

impl Received {
    /// When the producer published the batch (CLOCK_REALTIME nanoseconds),
    /// if the topic stamps publish times: `info.publish_ns`.
    pub fn publish_ns(&self) -> Option<u64> {
        self.info.publish_ns
    }
}

pub(crate) struct ConsumerHandle {
    pub(crate) raw: *mut sys::alkaid_consumer,
}

// SAFETY: the C ABI lets a consumer be used from any thread, one at a time;
// the one call that may run beside another is alkaid_consumer_cancel, which
// is all a shared `&ConsumerHandle` is used for outside the `Consumer`
// (not `Sync`). Close runs in Drop, when no one else holds the handle.
unsafe impl Send for ConsumerHandle {}
// SAFETY: see Send.
unsafe impl Sync for ConsumerHandle {}

impl Drop for ConsumerHandle {
    fn drop(&mut self) {
        // SAFETY: raw came from alkaid_consumer_open and is closed once.
        unsafe { sys::alkaid_consumer_close(self.raw) };
    }
}

/// Receives a topic's batches, zero-copy, as an
/// `Iterator<Item = Result<RecordBatch>>` that waits without limit for each
/// and ends when every producer it saw has closed (or died) and everything
/// was read. The iterator also ends after the first error it yields (say a
/// cancel); `next_batch` gives finer control.
///
/// A received batch's block goes back to the producer when the batch (every
/// array and buffer of it) is dropped, or, if that happens before the
/// consumer's next call (`next_batch`, the iterator), at that call: the
/// consumer keeps one reference to the last batch's C struct until then, so
/// that the drop frees only Rust objects and the release (and the struct's
/// allocation, reused) comes with the next call, before it waits. A consumer
/// that stops calling keeps its last batch's block until its next call or
/// its drop.
///
/// `Send` (move it to another thread) but not `Sync`: one thread at a time.
/// `ConsumerCanceller` stops its waits from another thread. The topic's
/// schema is imported once, at open, and each column's layout worked out
/// from it: a batch costs the C ABI's `next` and the wrapping of its
/// buffers, no schema parsing and no per-batch type checks.
pub struct Consumer {
    handle: Arc<ConsumerHandle>,
    importer: BatchImporter,
    /// The struct the next batch is exported into, allocated where the
    /// batch's buffers will share it; kept when `next` finds nothing.
    spare: Option<Arc<BatchOwner>>,
    /// The owner of the batch returned last, one reference of it, dropped
    /// at the next call: the batch's block goes back then if its user has
    /// dropped it (and the owner's allocation serves the next batch), else
    /// at the user's drop, as without it. So a batch dropped before the
    /// next call costs its user no release: the release comes at that
    /// call, before anything waits.
    last: Option<Arc<BatchOwner>>,
    last_info: BatchInfo,
    finished: bool,
    _not_sync: PhantomData<Cell<()>>,
}

impl std::fmt::Debug for Consumer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Consumer")
            .field("schema", self.importer.schema())
            .finish()
    }
}

/// Releases the batch in `last`, an owner no one else holds (its buffers
/// are all dropped), and returns the owner, empty, for the next batch.
///
/// # Safety
/// `last` is the only reference to its owner.
unsafe fn recycle(last: Arc<BatchOwner>) -> Arc<BatchOwner> {
    // Acquire: partner of the Release decrements of the owner's other
    // references (Arc's drop, on whichever thread dropped the buffers): the
    // reads of the batch come before its block goes back.
    std::sync::atomic::fence(std::sync::atomic::Ordering::Acquire);
    // SAFETY: the caller's promise: nothing else reads the struct.
    let ffi = unsafe { std::ptr::replace(last.as_mut_ptr(), FFI_ArrowArray::empty()) };
    drop(ffi); // its release gives the block back
    last
}

impl Consumer {
    /// Connects to the broker and subscribes to `topic`. `KeyError` for an
    /// unknown topic (see `wait_for_topic`) or column, `IoError` if no
    /// broker answers.
    pub fn open(topic: &str, options: &ConsumerOptions) -> Result<Self> {
        let topic_c = c_string(topic, "topic")?;
        let socket = c_path(options.socket_path.as_deref())?;
        let names: Vec<CString> = options
            .columns
            .iter()
            .map(|c| c_string(c, "column"))
            .collect::<Result<_>>()?;
        let name_ptrs: Vec<*const std::ffi::c_char> = names.iter().map(|n| n.as_ptr()).collect();
        let mut o = std::mem::MaybeUninit::<sys::alkaid_consumer_options>::zeroed();
        // SAFETY: init fills the whole struct.
        let mut o = unsafe {
            sys::alkaid_consumer_options_init_sized(
                o.as_mut_ptr(),
                std::mem::size_of::<sys::alkaid_consumer_options>(),
            );
            o.assume_init()
        };
        o.socket_path = socket.as_ref().map_or(ptr::null(), |s| s.as_ptr());
        o.wait_for_topic_ms = millis(options.wait_for_topic);
        o.from_oldest = i32::from(options.from_oldest);
        if !name_ptrs.is_empty() {
            o.columns = name_ptrs.as_ptr();
            o.n_columns = name_ptrs.len();
        }
        o.wait_mode = match options.wait_mode {
            WaitMode::BusyPoll => sys::ALKAID_WAIT_BUSY_POLL,
            WaitMode::Block => sys::ALKAID_WAIT_BLOCK,
            WaitMode::SpinThenBlock => sys::ALKAID_WAIT_SPIN_THEN_BLOCK,
        };
        o.verification = match options.verification {
            Verification::Structure => sys::ALKAID_VERIFY_STRUCTURE,
            Verification::Full => sys::ALKAID_VERIFY_FULL,
            Verification::PrivateCopy => sys::ALKAID_VERIFY_PRIVATE_COPY,
        };
        o.max_held_batches = options.max_held_batches;
        let mut raw = ptr::null_mut();
        // SAFETY: every pointer is valid for the call (open copies names).
        check(unsafe { sys::alkaid_consumer_open(topic_c.as_ptr(), &o, &mut raw) })?;
        let handle = Arc::new(ConsumerHandle { raw });
        // SAFETY: a live consumer.
        let schema = Arc::new(import_schema(|out| unsafe {
            sys::alkaid_consumer_schema(raw, out)
        })?);
        Ok(Self {
            handle,
            importer: BatchImporter::new(schema),
            spare: None,
            last: None,
            last_info: BatchInfo::default(),
            finished: false,
            _not_sync: PhantomData,
        })
    }

    /// The schema of the batches (the topic's, narrowed to the column
    /// subset).
    pub fn schema(&self) -> SchemaRef {
        self.importer.schema().clone()
    }

    /// The next batch, waiting up to `timeout` (`None`: no limit; zero:
    /// only what is there). `Ok(None)` at the end of the stream;
    /// `Err` with `is_timed_out()` if none came in time, `is_cancelled()`
    /// after a cancel.
    pub fn next_batch(&mut self, timeout: Option<Duration>) -> Result<Option<Received>> {
        let owner = match self.last.take() {
            // SAFETY: no one else holds it (the count says so, and no one
            // can take a new reference from nothing; no Weak is ever made).
            Some(last) if Arc::strong_count(&last) == 1 => unsafe { recycle(last) },
            last => {
                drop(last); // the user's drop releases it
                self.spare
                    .take()
                    .unwrap_or_else(|| Arc::new(BatchOwner::empty()))
            }
        };
        let mut info = sys::alkaid_batch_info::default();
        // SAFETY: valid handle and out pointers; `owner` is not shared (the
        // spare is fresh or came back unfilled), so the struct may be
        // written. It is filled only on success, and then it is ours to
        // release (FFI_ArrowArray's Drop, with the owner's last reference).
        let status = unsafe {
            sys::alkaid_consumer_next_sized(
                self.handle.raw,
                millis(timeout),
                owner.as_mut_ptr().cast::<sys::ArrowArray>(),
                ptr::null_mut(),
                &mut info,
                std::mem::size_of::<sys::alkaid_batch_info>(),
            )
        };
        match status {
            sys::ALKAID_OK => {}
            other => {
                // Left untouched (empty) on anything but success.
                self.spare = Some(owner);
                return if other == sys::ALKAID_END_OF_STREAM {
                    Ok(None)
                } else {
                    Err(Error::last(other))
                };
            }
        }
        self.last = Some(owner.clone());
        // SAFETY: the library filled a valid struct array of the consumer's
        // schema, which no one else reads (`last` is ours). The import
        // shares `owner` among the buffers, and the struct is released,
        // giving the block back, when the last of them and `last` go.
        let batch = unsafe { self.importer.import_owned(owner) }?;
        let info = BatchInfo {
            producer_id: info.producer_id,
            producer_pid: info.producer_pid,
            sequence: info.sequence,
            lost_before: info.lost_before,
            publish_ns: (info.publish_ns != 0).then_some(info.publish_ns),
        };
        self.last_info = info;
        Ok(Some(Received { batch, info }))
    }

    /// Where the batch the iterator (or `next_batch`) returned last came
    /// from, its `lost_before` count included.
    pub fn last_info(&self) -> BatchInfo {
        self.last_info
    }

    /// The consumer's counters.
    pub fn stats(&self) -> Result<ConsumerStats> {
        let mut s = sys::alkaid_consumer_stats::default();
        // SAFETY: valid handle and out pointer.
        check(unsafe { sys::alkaid_consumer_stats_get(self.handle.raw, &mut s) })?;
        Ok(ConsumerStats {
            lost: s.lost,
            held: s.held,
            handed_out: s.handed_out,
            refused: s.refused,
            producers: s.producers,
        })
    }

    /// A descriptor for poll/epoll (level-triggered; owned by the consumer,
    /// do not close it) that turns readable when `next_batch` may have news.
    /// Call `next_batch(Some(Duration::ZERO))` until it times out (which
    /// arms it), then sleep on it (with a timeout, about 100 ms: a producer
    /// that dies wakes it only through the broker, later). A `next_batch`
    /// that waits disarms it. The `tokio` feature's `AsyncConsumer` does
    /// all this.
    pub fn wait_fd(&self) -> Result<RawFd> {
        let mut fd: std::ffi::c_int = -1;
        // SAFETY: valid handle and out pointer.
        check(unsafe { sys::alkaid_consumer_wait_fd(self.handle.raw, &mut fd) })?;
        Ok(fd)
    }

    /// A handle that cancels this consumer from any thread.
    pub fn canceller(&self) -> ConsumerCanceller {
        ConsumerCanceller {
            handle: self.handle.clone(),
        }
    }

    /// The rest of the topic as an arrow-rs `RecordBatchReader`, through the
    /// C ABI's stream (`alkaid_consumer_stream`): for code that takes a
    /// reader (DataFusion, an IPC writer, `arrow::compute` over a stream).
    /// Each batch waits up to `batch_timeout` (`None`: no limit; after it
    /// the reader yields an error naming ETIMEDOUT); the reader ends at the
    /// end of the stream. A `ConsumerCanceller` taken before ends a waiting
    /// read with an error (ECANCELED). Batches are zero-copy, as `next`'s.
    pub fn into_reader(self, batch_timeout: Option<Duration>) -> Result<TopicReader> {
        let mut stream = FFI_ArrowArrayStream::empty();
        // SAFETY: a live consumer; FFI_ArrowArrayStream is the C struct
        // ArrowArrayStream (arrow-rs lays it out as the interface says), so
        // the pointer is one to the struct alkaid.h declares.
        check(unsafe {
            sys::alkaid_consumer_stream(
                self.handle.raw,
                millis(batch_timeout),
                (&mut stream as *mut FFI_ArrowArrayStream).cast::<sys::ArrowArrayStream>(),
            )
        })?;
        let reader = RecordBatchStreamReader::try_new(stream)?;
        Ok(TopicReader {
            reader,
            _consumer: self.handle,
        })
    }
}

/// A consumer as an arrow-rs `RecordBatchReader` (`Consumer::into_reader`):
/// an `Iterator<Item = Result<RecordBatch, ArrowError>>` to the end of the
/// topic's stream. `Send`; holds the consumer, closed when the reader and
/// every canceller are gone; batches it gave out outlive it.
pub struct TopicReader {
    // Dropped first: the stream borrows the consumer the handle keeps open.
    reader: RecordBatchStreamReader,
    _consumer: Arc<ConsumerHandle>,
}

impl std::fmt::Debug for TopicReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TopicReader")
            .field("schema", &self.reader.schema())
            .finish()
    }
}

impl Iterator for TopicReader {
    type Item = std::result::Result<RecordBatch, ArrowError>;

    fn next(&mut self) -> Option<Self::Item> {
        self.reader.next()
    }
}

impl RecordBatchReader for TopicReader {
    fn schema(&self) -> SchemaRef {
        self.reader.schema()
    }
}

impl Iterator for Consumer {
    type Item = Result<RecordBatch>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.finished {
            return None;
        }
        match self.next_batch(None) {
            Ok(Some(r)) => Some(Ok(r.batch)),
            Ok(None) => {
                self.finished = true;
                None
            }
            Err(e) => {
                self.finished = true;
                Some(Err(e))
            }
        }
    }
}

/// Cancels a consumer from any thread (`Send + Sync`, cheap to clone): a
/// `next` waiting now returns `StatusCode::Cancelled`, and so does every
/// later one. Holds the consumer's handle: it is closed when the last of the
/// consumer and its cancellers goes.
#[derive(Clone)]
pub struct ConsumerCanceller {
    handle: Arc<ConsumerHandle>,
}

impl std::fmt::Debug for ConsumerCanceller {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ConsumerCanceller")
    }
}

impl ConsumerCanceller {
    /// Cancels the consumer's waits, now and later.
    pub fn cancel(&self) -> Result<()> {
        // SAFETY: the handle is alive while this Arc is; cancel may run
        // beside any other call on the consumer.
        check(unsafe { sys::alkaid_consumer_cancel(self.handle.raw) })
    }
}
