//! Publishing record batches: by copy (`Producer::publish`) or written in
//! place in shared memory (`Producer::loan`, `Loan`).

use std::cell::Cell;
use std::marker::PhantomData;
use std::path::PathBuf;
use std::ptr;
use std::sync::Arc;
use std::time::Duration;

use alkaid_sys as sys;
use arrow_array::{Array, RecordBatch, StructArray};
use arrow_data::ffi::FFI_ArrowArray;
use arrow_schema::ffi::FFI_ArrowSchema;
use arrow_schema::{Schema, SchemaRef};

use crate::error::{check, Error, Result};
use crate::ffi_util::{array_ptr, c_path, c_string, finite_millis, import_schema, schema_ptr};
use crate::loan::Loan;

/// What a producer does when a consumer has not read the oldest slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Policy {
    /// Wait for it, up to `publish_timeout` (the default).
    #[default]
    BlockProducer,
    /// Overwrite it; the consumer sees the gap as `BatchInfo::lost_before`.
    DropOldest,
}

/// Whether a producer's arena is backed by transparent huge pages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum HugePages {
    /// No (the default).
    #[default]
    Off,
    /// If the kernel gives them.
    Try,
    /// Or open fails naming the cause.
    Require,
}

/// How a producer is opened. `ProducerOptions::default()` holds the C ABI's
/// defaults (`alkaid_producer_options_init_sized`); the topic settings apply only
/// if this producer creates the topic (the first producer's win).
#[derive(Debug, Clone)]
pub struct ProducerOptions {
    /// The broker's socket. `None` (default): `$ALKAID_BROKER_SOCKET`, else
    /// `$XDG_RUNTIME_DIR/alkaid/broker.sock`, else
    /// `/tmp/alkaid-<uid>/broker.sock`.
    pub socket_path: Option<PathBuf>,
    /// What to do with a slow consumer (default `BlockProducer`).
    pub policy: Policy,
    /// Slots of the channel, a power of two (0, default: the broker's, 1024).
    pub slot_count: u32,
    /// The arena's initial size (0, default: the broker's, 1 MiB).
    pub arena_bytes: u64,
    /// What the arena may grow to (0, default: the broker's).
    pub max_arena_bytes: u64,
    /// Huge pages for the arena (default `Off`).
    pub huge_pages: HugePages,
    /// Longest wait of a publish or a loan for a slot or arena space
    /// (default 5 s).
    pub publish_timeout: Duration,
    /// How long open waits for the consumers already attached to register,
    /// so that they see the first batch (default 10 s; zero: no wait).
    pub wait_for_consumers: Duration,
    /// How long close waits for the consumers to read every batch (default
    /// 5 s).
    pub drain_timeout: Duration,
    /// Whether the topic's producers stamp each batch with the time they
    /// publish it (CLOCK_REALTIME; a clock read per publish), which C++
    /// consumers read as `BatchOrigin::publish_ns` and `alkaid hz` shows
    /// (default false). C ABI version 2; an older library refuses it.
    pub publish_timestamps: bool,
    /// Fixed blocks in this producer's channel: bytes of each (rounded up
    /// to 64, at most 2^30; 0, default: none). A loan whose body fits (a
    /// `loan` of fixed-width, non-nullable columns: every column's values
    /// padded to 64) takes one, which costs the publish and the consumers'
    /// release less than an arena block; larger loans, or any while all
    /// are in use, take the arena. The broker counts them beside the arena
    /// against its shm limit (open fails with `CapacityError` beyond it).
    /// C ABI version 4; an older library refuses a non-zero value.
    pub fixed_block_bytes: u64,
    /// How many fixed blocks (at most 2^20; 0, default: twice the topic's
    /// slots). Non-zero without `fixed_block_bytes`: open fails (`Invalid`).
    pub fixed_block_count: u32,
}

impl Default for ProducerOptions {
    fn default() -> Self {
        Self {
            socket_path: None,
            policy: Policy::BlockProducer,
            slot_count: 0,
            arena_bytes: 0,
            max_arena_bytes: 0,
            huge_pages: HugePages::Off,
            publish_timeout: Duration::from_millis(5000),
            wait_for_consumers: Duration::from_millis(10000),
            drain_timeout: Duration::from_millis(5000),
            publish_timestamps: false,
            fixed_block_bytes: 0,
            fixed_block_count: 0,
        }
    }
}

/// Counters of a producer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ProducerStats {
    /// Batches published.
    pub published: u64,
    /// Body bytes copied into shared memory (loans copy none).
    pub copied_bytes: u64,
    /// Bodies the consumers have not returned yet.
    pub held_by_consumers: u64,
    /// Free arena bytes, as of the last publish.
    pub arena_bytes_free: u64,
}

/// The C handle, shared by the `Producer` and its `ProducerCanceller`s; it
/// is closed (end of stream, drain, free) when the last of them goes.
pub(crate) struct ProducerHandle {
    pub(crate) raw: *mut sys::alkaid_producer,
}

// SAFETY: the C ABI lets a producer be used from any thread, one at a time;
// the one call that may run beside another, from any thread, is
// alkaid_producer_cancel, which is all a shared `&ProducerHandle` is used
// for outside the `Producer` (which is not `Sync`, so only one thread at a
// time makes its other calls). Close runs in Drop, when no one else holds it.
unsafe impl Send for ProducerHandle {}
// SAFETY: see Send.
unsafe impl Sync for ProducerHandle {}

impl ProducerHandle {
    fn close(&mut self) -> Result<()> {
        let raw = std::mem::replace(&mut self.raw, ptr::null_mut());
        if raw.is_null() {
            return Ok(());
        }
        // SAFETY: raw came from alkaid_producer_open and is closed once.
        check(unsafe { sys::alkaid_producer_close(raw) })
    }
}

impl Drop for ProducerHandle {
    fn drop(&mut self) {
        let _ = self.close();
    }
}

/// Publishes record batches of one schema to a topic.
///
/// `Send` (move it to another thread) but not `Sync`: the C ABI's producer
/// is used by one thread at a time. To stop its waits from another thread,
/// take a `ProducerCanceller`. Dropping it closes it as `close` does.
pub struct Producer {
    pub(crate) handle: Arc<ProducerHandle>,
    schema: SchemaRef,
    _not_sync: PhantomData<Cell<()>>,
}

impl std::fmt::Debug for Producer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Producer")
            .field("schema", &self.schema)
            .finish()
    }
}

impl Producer {
    /// Connects to the broker, creates `topic` with `schema` or checks that
    /// the existing topic has that schema (`StatusCode::Invalid` naming both
    /// otherwise), and creates this producer's channel. `IoError` if no
    /// broker answers.
    pub fn open(topic: &str, schema: &Schema, options: &ProducerOptions) -> Result<Self> {
        let topic_c = c_string(topic, "topic")?;
        let socket = c_path(options.socket_path.as_deref())?;
        let mut o = std::mem::MaybeUninit::<sys::alkaid_producer_options>::zeroed();
        // SAFETY: init fills the whole struct.
        let mut o = unsafe {
            sys::alkaid_producer_options_init_sized(
                o.as_mut_ptr(),
                std::mem::size_of::<sys::alkaid_producer_options>(),
            );
            o.assume_init()
        };
        o.socket_path = socket.as_ref().map_or(ptr::null(), |s| s.as_ptr());
        o.policy = match options.policy {
            Policy::BlockProducer => sys::ALKAID_POLICY_BLOCK_PRODUCER,
            Policy::DropOldest => sys::ALKAID_POLICY_DROP_OLDEST,
        };
        o.slot_count = options.slot_count;
        o.arena_bytes = options.arena_bytes;
        o.max_arena_bytes = options.max_arena_bytes;
        o.huge_pages = match options.huge_pages {
            HugePages::Off => sys::ALKAID_HUGE_PAGES_OFF,
            HugePages::Try => sys::ALKAID_HUGE_PAGES_TRY,
            HugePages::Require => sys::ALKAID_HUGE_PAGES_REQUIRE,
        };
        // Finite durations only: the C ABI's ALKAID_FOREVER is not a usable
        // value for these (see rust/README.md, "Known limits").
        o.publish_timestamps = i32::from(options.publish_timestamps);
        o.fixed_block_bytes = options.fixed_block_bytes;
        o.fixed_block_count = options.fixed_block_count;
        o.publish_timeout_ms = finite_millis(options.publish_timeout);
        o.wait_for_consumers_ms = finite_millis(options.wait_for_consumers);
        o.drain_timeout_ms = finite_millis(options.drain_timeout);

        let mut ffi_schema = FFI_ArrowSchema::try_from(schema)?;
        let mut raw = ptr::null_mut();
        // SAFETY: every pointer is valid for the call; the schema is taken
        // (its release set to NULL), so dropping `ffi_schema` is a no-op.
        check(unsafe {
            sys::alkaid_producer_open(topic_c.as_ptr(), schema_ptr(&mut ffi_schema), &o, &mut raw)
        })?;
        let handle = Arc::new(ProducerHandle { raw });
        // The topic's schema, as the library has it (field order and
        // metadata as the topic was created).
        // SAFETY: raw is a live producer.
        let schema = import_schema(|out| unsafe { sys::alkaid_producer_schema(raw, out) })?;
        Ok(Self {
            handle,
            schema: Arc::new(schema),
            _not_sync: PhantomData,
        })
    }

    /// The topic's schema.
    pub fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    /// The topic's schema, borrowed (no reference count touched: a loan's
    /// accessors look their column's type up here on every call).
    pub(crate) fn schema_ref(&self) -> &Schema {
        &self.schema
    }

    pub(crate) fn raw(&self) -> *mut sys::alkaid_producer {
        self.handle.raw
    }

    /// Publishes `batch`, copying its buffers once into shared memory. The
    /// batch is validated in full (offsets, indices, UTF-8) and its schema
    /// must equal the topic's (`StatusCode::Invalid` naming both otherwise).
    /// Waits up to `publish_timeout` for room.
    pub fn publish(&self, batch: &RecordBatch) -> Result<()> {
        let array = StructArray::from(batch.clone());
        let mut ffi_array = FFI_ArrowArray::new(&array.to_data());
        let mut ffi_schema = FFI_ArrowSchema::try_from(batch.schema().as_ref())?;
        // SAFETY: both structs are taken by the call (released by the
        // library once it is done with them), on success and error alike.
        check(unsafe {
            sys::alkaid_producer_publish(
                self.raw(),
                array_ptr(&mut ffi_array),
                schema_ptr(&mut ffi_schema),
            )
        })
    }

    /// Lends space for a batch of `rows` rows in the producer's arena, every
    /// buffer laid out, to be written in place and published without a
    /// copy (`Loan`). `var_data_bytes` gives, per column of the topic's
    /// schema, the bytes of a variable-width column's values (ignored for
    /// other columns); empty when the schema has none. Waits up to
    /// `publish_timeout` for arena space.
    pub fn loan(&self, rows: usize, var_data_bytes: &[i64]) -> Result<Loan<'_>> {
        let rows = i64::try_from(rows)
            .map_err(|_| Error::InvalidArgument(format!("{rows} rows do not fit an i64")))?;
        let mut raw = ptr::null_mut();
        let data = if var_data_bytes.is_empty() {
            ptr::null()
        } else {
            var_data_bytes.as_ptr()
        };
        // SAFETY: the slice is valid for its length; raw is filled on success.
        check(unsafe {
            sys::alkaid_producer_loan(self.raw(), rows, data, var_data_bytes.len(), &mut raw)
        })?;
        Ok(Loan::new(self, raw, rows))
    }

    /// The producer's counters.
    pub fn stats(&self) -> Result<ProducerStats> {
        let mut s = sys::alkaid_producer_stats::default();
        // SAFETY: valid handle and out pointer.
        check(unsafe { sys::alkaid_producer_stats_get(self.raw(), &mut s) })?;
        Ok(ProducerStats {
            published: s.published,
            copied_bytes: s.copied_bytes,
            held_by_consumers: s.held_by_consumers,
            arena_bytes_free: s.arena_bytes_free,
        })
    }

    /// A handle that cancels this producer's waits from any thread.
    pub fn canceller(&self) -> ProducerCanceller {
        ProducerCanceller {
            handle: self.handle.clone(),
        }
    }

    /// Ends the stream (consumers read what was published, then their
    /// iterators end), waits up to `drain_timeout` for them to read it, and
    /// frees the producer. If a `ProducerCanceller` of it is still alive,
    /// that happens when the last one is dropped instead, and this returns
    /// `Ok(())` at once.
    pub fn close(self) -> Result<()> {
        match Arc::try_unwrap(self.handle) {
            Ok(mut handle) => handle.close(),
            Err(_) => Ok(()),
        }
    }
}

/// Cancels a producer's waits from any thread (`Send + Sync`, cheap to
/// clone): the wait in progress (for room, for arena space, close's drain)
/// ends with `StatusCode::Cancelled`, and so does every later wait. Holds
/// the producer's handle: the producer is closed when the last of it and its
/// cancellers goes.
#[derive(Clone)]
pub struct ProducerCanceller {
    handle: Arc<ProducerHandle>,
}

impl std::fmt::Debug for ProducerCanceller {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ProducerCanceller")
    }
}

impl ProducerCanceller {
    /// Cancels the producer's waits, now and later.
    pub fn cancel(&self) -> Result<()> {
        // SAFETY: the handle is alive while this Arc is; cancel may run
        // beside any other call on the producer.
        check(unsafe { sys::alkaid_producer_cancel(self.handle.raw) })
    }
}
