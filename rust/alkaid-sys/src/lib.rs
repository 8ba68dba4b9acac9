//! Raw declarations of Alkaid's C ABI, `capi/include/alkaid/alkaid.h`,
//! written by hand (no bindgen: the header is small and stable, and bindgen
//! would need libclang on every machine that builds the crate).
//!
//! Everything here is `unsafe` and follows the header's contract word for
//! word; the header is the documentation. The safe API is the `alkaid`
//! crate. The C enums are declared as `i32` with constants, so that any
//! value the library returns is defined behaviour in Rust.
//!
//! Layout checks against the header: `tests/layout.rs` (sizes and field
//! offsets of every struct, as a C compiler on x86-64/aarch64 Linux lays
//! them out).

#![allow(non_camel_case_types)]

use std::ffi::{c_char, c_int, c_void};

/// The interface version these declarations describe (`ALKAID_C_API_VERSION`).
pub const ALKAID_C_API_VERSION: i32 = 4;

// ---------------------------------------------------------------------------
// The Arrow C Data and C Stream Interface

/// `struct ArrowSchema` of the Arrow C Data Interface.
#[repr(C)]
#[derive(Debug)]
pub struct ArrowSchema {
    /// The type's format string.
    pub format: *const c_char,
    /// The field's name.
    pub name: *const c_char,
    /// Key-value metadata, binary encoded.
    pub metadata: *const c_char,
    /// `ARROW_FLAG_*`.
    pub flags: i64,
    /// Number of children.
    pub n_children: i64,
    /// The children.
    pub children: *mut *mut ArrowSchema,
    /// The dictionary's schema, for a dictionary-encoded type.
    pub dictionary: *mut ArrowSchema,
    /// Releases the struct; NULL once released.
    pub release: Option<unsafe extern "C" fn(*mut ArrowSchema)>,
    /// The producer's data.
    pub private_data: *mut c_void,
}

/// `struct ArrowArray` of the Arrow C Data Interface.
#[repr(C)]
#[derive(Debug)]
pub struct ArrowArray {
    /// Number of elements.
    pub length: i64,
    /// Number of nulls (-1: not computed).
    pub null_count: i64,
    /// Logical offset into the buffers.
    pub offset: i64,
    /// Number of buffers.
    pub n_buffers: i64,
    /// Number of children.
    pub n_children: i64,
    /// The buffers.
    pub buffers: *mut *const c_void,
    /// The children.
    pub children: *mut *mut ArrowArray,
    /// The dictionary, for a dictionary-encoded type.
    pub dictionary: *mut ArrowArray,
    /// Releases the struct; NULL once released.
    pub release: Option<unsafe extern "C" fn(*mut ArrowArray)>,
    /// The producer's data.
    pub private_data: *mut c_void,
}

/// `struct ArrowArrayStream` of the Arrow C Stream Interface.
#[repr(C)]
#[derive(Debug)]
pub struct ArrowArrayStream {
    /// Fills the stream's schema.
    pub get_schema: Option<unsafe extern "C" fn(*mut ArrowArrayStream, *mut ArrowSchema) -> c_int>,
    /// Fills the next array (released array at the end).
    pub get_next: Option<unsafe extern "C" fn(*mut ArrowArrayStream, *mut ArrowArray) -> c_int>,
    /// The last error's message.
    pub get_last_error: Option<unsafe extern "C" fn(*mut ArrowArrayStream) -> *const c_char>,
    /// Releases the stream; NULL once released.
    pub release: Option<unsafe extern "C" fn(*mut ArrowArrayStream)>,
    /// The producer's data.
    pub private_data: *mut c_void,
}

// ---------------------------------------------------------------------------
// Status codes and the enums (C enums of int32 range)

/// `alkaid_status`.
pub type alkaid_status = i32;
/// Success.
pub const ALKAID_OK: alkaid_status = 0;
/// Malformed input or invalid argument.
pub const ALKAID_INVALID: alkaid_status = 1;
/// Operation not defined for this type.
pub const ALKAID_TYPE_ERROR: alkaid_status = 2;
/// Index or range out of bounds.
pub const ALKAID_INDEX_ERROR: alkaid_status = 3;
/// No such topic or column.
pub const ALKAID_KEY_ERROR: alkaid_status = 4;
/// A size or count beyond a limit.
pub const ALKAID_CAPACITY_ERROR: alkaid_status = 5;
/// Heap or shared memory exhausted.
pub const ALKAID_OUT_OF_MEMORY: alkaid_status = 6;
/// A system call failed; no broker answers.
pub const ALKAID_IO_ERROR: alkaid_status = 7;
/// Valid input this build cannot handle.
pub const ALKAID_NOT_IMPLEMENTED: alkaid_status = 8;
/// Metadata could not be encoded or decoded.
pub const ALKAID_SERIALIZATION_ERROR: alkaid_status = 9;
/// A named resource exists already.
pub const ALKAID_ALREADY_EXISTS: alkaid_status = 10;
/// A wait ended before its condition held.
pub const ALKAID_TIMED_OUT: alkaid_status = 11;
/// The caller may not do this.
pub const ALKAID_PERMISSION_DENIED: alkaid_status = 12;
/// The topic has ended: not a failure.
pub const ALKAID_END_OF_STREAM: alkaid_status = 13;
/// Stopped by a `*_cancel` call.
pub const ALKAID_CANCELLED: alkaid_status = 14;
/// Anything else.
pub const ALKAID_UNKNOWN: alkaid_status = 15;

/// `alkaid_policy`.
pub type alkaid_policy = i32;
/// Wait for the slowest consumer, up to `publish_timeout_ms`.
pub const ALKAID_POLICY_BLOCK_PRODUCER: alkaid_policy = 1;
/// Overwrite; the consumer sees a gap count.
pub const ALKAID_POLICY_DROP_OLDEST: alkaid_policy = 2;

/// `alkaid_huge_pages`.
pub type alkaid_huge_pages = i32;
/// No huge pages.
pub const ALKAID_HUGE_PAGES_OFF: alkaid_huge_pages = 0;
/// Huge pages if the kernel gives them.
pub const ALKAID_HUGE_PAGES_TRY: alkaid_huge_pages = 1;
/// Huge pages or open fails.
pub const ALKAID_HUGE_PAGES_REQUIRE: alkaid_huge_pages = 2;

/// `alkaid_wait_mode`.
pub type alkaid_wait_mode = i32;
/// Spin.
pub const ALKAID_WAIT_BUSY_POLL: alkaid_wait_mode = 0;
/// Sleep on a futex.
pub const ALKAID_WAIT_BLOCK: alkaid_wait_mode = 1;
/// Spin a little, then block (default).
pub const ALKAID_WAIT_SPIN_THEN_BLOCK: alkaid_wait_mode = 2;

/// `alkaid_verification`.
pub type alkaid_verification = i32;
/// Offsets, lengths and buffer places (default).
pub const ALKAID_VERIFY_STRUCTURE: alkaid_verification = 0;
/// And every value offset and index.
pub const ALKAID_VERIFY_FULL: alkaid_verification = 1;
/// Copy out of shared memory, then verify fully.
pub const ALKAID_VERIFY_PRIVATE_COPY: alkaid_verification = 2;

/// `ALKAID_FOREVER`: a duration meaning "no limit".
pub const ALKAID_FOREVER: i64 = -1;

// ---------------------------------------------------------------------------
// Handles and structs

/// Opaque producer handle.
#[repr(C)]
pub struct alkaid_producer {
    _private: [u8; 0],
}
/// Opaque consumer handle.
#[repr(C)]
pub struct alkaid_consumer {
    _private: [u8; 0],
}
/// Opaque loan handle.
#[repr(C)]
pub struct alkaid_loan {
    _private: [u8; 0],
}
/// Opaque broker connection handle.
#[repr(C)]
pub struct alkaid_broker {
    _private: [u8; 0],
}
/// Opaque topic list handle.
#[repr(C)]
pub struct alkaid_topic_list {
    _private: [u8; 0],
}

/// `alkaid_producer_options` (initialise with
/// `alkaid_producer_options_init_sized(p, size_of::<alkaid_producer_options>())`,
/// what the header's `alkaid_producer_options_init` macro does).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct alkaid_producer_options {
    /// Set by the init function.
    pub struct_size: u32,
    /// The broker's socket, or NULL for the default.
    pub socket_path: *const c_char,
    /// What a producer does when a consumer is behind.
    pub policy: alkaid_policy,
    /// Slots of the channel (a power of two; 0: the broker's default).
    pub slot_count: u32,
    /// The arena's initial size (0: default).
    pub arena_bytes: u64,
    /// The arena's largest size (0: default).
    pub max_arena_bytes: u64,
    /// Transparent huge pages.
    pub huge_pages: alkaid_huge_pages,
    /// Longest wait of a publish or loan.
    pub publish_timeout_ms: i64,
    /// Open's wait for attached consumers to register.
    pub wait_for_consumers_ms: i64,
    /// Close's wait for the consumers to read everything.
    pub drain_timeout_ms: i64,
    /// Version 2: non-zero, the topic's producers stamp publish times (if
    /// this producer creates the topic).
    pub publish_timestamps: i32,
    /// Version 4: fixed blocks in the producer's channel, bytes of each (0:
    /// none) ...
    pub fixed_block_bytes: u64,
    /// ... and how many (0: twice the topic's slots).
    pub fixed_block_count: u32,
}

/// `ALKAID_PRODUCER_OPTIONS_SIZE_V2`: the producer options' size in
/// versions 2 and 3 (before the fixed blocks), which the library still takes.
pub const ALKAID_PRODUCER_OPTIONS_SIZE_V2: usize = 80;
/// `ALKAID_PRODUCER_OPTIONS_SIZE_V1`: the producer options' size in version
/// 1 (before `publish_timestamps`), which the library still takes.
pub const ALKAID_PRODUCER_OPTIONS_SIZE_V1: usize = 72;
/// `ALKAID_CONSUMER_OPTIONS_SIZE_V1`: the consumer options' size in version 1.
pub const ALKAID_CONSUMER_OPTIONS_SIZE_V1: usize = 64;

/// `alkaid_producer_stats`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct alkaid_producer_stats {
    /// Batches published.
    pub published: u64,
    /// Body bytes copied into shared memory.
    pub copied_bytes: u64,
    /// Bodies the consumers have not returned yet.
    pub held_by_consumers: u64,
    /// As of the last publish.
    pub arena_bytes_free: u64,
}

/// `alkaid_consumer_options` (initialise with
/// `alkaid_consumer_options_init_sized(p, size_of::<alkaid_consumer_options>())`).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct alkaid_consumer_options {
    /// Set by the init function.
    pub struct_size: u32,
    /// The broker's socket, or NULL for the default.
    pub socket_path: *const c_char,
    /// How long open waits for the topic (ms; -1 forever).
    pub wait_for_topic_ms: i64,
    /// Non-zero: start at the oldest batch still held.
    pub from_oldest: i32,
    /// Column subset by name (NULL: all).
    pub columns: *const *const c_char,
    /// Number of names in `columns`.
    pub n_columns: usize,
    /// How next waits.
    pub wait_mode: alkaid_wait_mode,
    /// What next checks.
    pub verification: alkaid_verification,
    /// Most batches held at once (0: no limit).
    pub max_held_batches: u64,
}

/// `alkaid_batch_info`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct alkaid_batch_info {
    /// As the broker numbers the topic's producers.
    pub producer_id: u64,
    /// The producer's process id.
    pub producer_pid: u32,
    /// The batch's place in that producer's channel.
    pub sequence: u64,
    /// Batches of that producer lost just before it.
    pub lost_before: u64,
    /// Version 3: when the producer published it (CLOCK_REALTIME
    /// nanoseconds; 0 unless the topic stamps publish times). Written only
    /// by `alkaid_consumer_next_sized`.
    pub publish_ns: u64,
}

/// `ALKAID_BATCH_INFO_SIZE_V1`: `alkaid_batch_info` in versions 1 and 2,
/// what `alkaid_consumer_next` writes.
pub const ALKAID_BATCH_INFO_SIZE_V1: usize = 32;

/// `alkaid_consumer_stats`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct alkaid_consumer_stats {
    /// Batches lost to overwrites.
    pub lost: u64,
    /// Batches handed out and not yet released.
    pub held: u64,
    /// Batches handed out so far.
    pub handed_out: u64,
    /// Nexts refused by max_held_batches.
    pub refused: u64,
    /// Producers the consumer reads from now.
    pub producers: u64,
}

/// `alkaid_topic_info`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct alkaid_topic_info {
    /// Valid as long as the list.
    pub name: *const c_char,
    /// Slots per producer channel.
    pub slot_count: u32,
    /// Each producer's initial arena.
    pub arena_bytes: u64,
    /// What each producer's arena may grow to.
    pub max_arena_bytes: u64,
    /// The topic's policy.
    pub policy: alkaid_policy,
    /// Non-zero: an UnsafeRow topic.
    pub row_topic: i32,
    /// Producers attached.
    pub producers: u32,
    /// Consumers attached.
    pub consumers: u32,
    /// Messages published.
    pub published: u64,
    /// Messages the slowest consumer has yet to read.
    pub depth: u64,
    /// Messages lost by slow consumers.
    pub drops: u64,
    /// Bodies the consumers hold.
    pub held: u64,
    /// Shared memory the topic's producers hold.
    pub shm_bytes: u64,
    /// Version 2: non-zero if the topic's producers stamp publish times.
    pub publish_timestamps: i32,
}

extern "C" {
    /// `alkaid_version`.
    pub fn alkaid_version() -> i32;
    /// `alkaid_version_string`.
    pub fn alkaid_version_string() -> *const c_char;
    /// `alkaid_status_name`.
    pub fn alkaid_status_name(status: alkaid_status) -> *const c_char;
    /// `alkaid_last_error`.
    pub fn alkaid_last_error() -> *const c_char;

    /// `alkaid_producer_options_init_sized`: the defaults in the first
    /// `struct_size` bytes (zeros past the fields the library knows).
    pub fn alkaid_producer_options_init_sized(
        options: *mut alkaid_producer_options,
        struct_size: usize,
    );
    /// `alkaid_producer_options_init`, the function: version 1's, which
    /// writes `ALKAID_PRODUCER_OPTIONS_SIZE_V1` bytes (no
    /// `publish_timestamps`); use `alkaid_producer_options_init_sized`.
    pub fn alkaid_producer_options_init(options: *mut alkaid_producer_options);
    /// `alkaid_producer_open`.
    pub fn alkaid_producer_open(
        topic: *const c_char,
        schema: *mut ArrowSchema,
        options: *const alkaid_producer_options,
        out: *mut *mut alkaid_producer,
    ) -> alkaid_status;
    /// `alkaid_producer_publish`.
    pub fn alkaid_producer_publish(
        producer: *mut alkaid_producer,
        array: *mut ArrowArray,
        schema: *mut ArrowSchema,
    ) -> alkaid_status;
    /// `alkaid_producer_schema`.
    pub fn alkaid_producer_schema(
        producer: *mut alkaid_producer,
        out: *mut ArrowSchema,
    ) -> alkaid_status;
    /// `alkaid_producer_stats_get`.
    pub fn alkaid_producer_stats_get(
        producer: *mut alkaid_producer,
        out: *mut alkaid_producer_stats,
    ) -> alkaid_status;
    /// `alkaid_producer_cancel`.
    pub fn alkaid_producer_cancel(producer: *mut alkaid_producer) -> alkaid_status;
    /// `alkaid_producer_close`.
    pub fn alkaid_producer_close(producer: *mut alkaid_producer) -> alkaid_status;

    /// `alkaid_producer_loan`.
    pub fn alkaid_producer_loan(
        producer: *mut alkaid_producer,
        rows: i64,
        var_data_bytes: *const i64,
        n_columns: usize,
        out: *mut *mut alkaid_loan,
    ) -> alkaid_status;
    /// `alkaid_loan_buffer`.
    pub fn alkaid_loan_buffer(
        loan: *mut alkaid_loan,
        column: i32,
        buffer: i32,
        data: *mut *mut c_void,
        size: *mut i64,
    ) -> alkaid_status;
    /// `alkaid_loan_set_null_count`.
    pub fn alkaid_loan_set_null_count(
        loan: *mut alkaid_loan,
        column: i32,
        null_count: i64,
    ) -> alkaid_status;
    /// `alkaid_producer_publish_loan`.
    pub fn alkaid_producer_publish_loan(
        producer: *mut alkaid_producer,
        loan: *mut alkaid_loan,
    ) -> alkaid_status;
    /// `alkaid_loan_discard`.
    pub fn alkaid_loan_discard(loan: *mut alkaid_loan);

    /// `alkaid_consumer_options_init_sized`: as the producer's.
    pub fn alkaid_consumer_options_init_sized(
        options: *mut alkaid_consumer_options,
        struct_size: usize,
    );
    /// `alkaid_consumer_options_init`, the function: version 1's; use
    /// `alkaid_consumer_options_init_sized`.
    pub fn alkaid_consumer_options_init(options: *mut alkaid_consumer_options);
    /// `alkaid_consumer_open`.
    pub fn alkaid_consumer_open(
        topic: *const c_char,
        options: *const alkaid_consumer_options,
        out: *mut *mut alkaid_consumer,
    ) -> alkaid_status;
    /// `alkaid_consumer_next`.
    pub fn alkaid_consumer_next(
        consumer: *mut alkaid_consumer,
        timeout_ms: i64,
        out: *mut ArrowArray,
        out_schema: *mut ArrowSchema,
        info: *mut alkaid_batch_info,
    ) -> alkaid_status;
    /// `alkaid_consumer_next_sized` (version 3).
    pub fn alkaid_consumer_next_sized(
        consumer: *mut alkaid_consumer,
        timeout_ms: i64,
        out: *mut ArrowArray,
        out_schema: *mut ArrowSchema,
        info: *mut alkaid_batch_info,
        info_size: usize,
    ) -> alkaid_status;
    /// `alkaid_consumer_schema`.
    pub fn alkaid_consumer_schema(
        consumer: *mut alkaid_consumer,
        out: *mut ArrowSchema,
    ) -> alkaid_status;
    /// `alkaid_consumer_stream`.
    pub fn alkaid_consumer_stream(
        consumer: *mut alkaid_consumer,
        batch_timeout_ms: i64,
        out: *mut ArrowArrayStream,
    ) -> alkaid_status;
    /// `alkaid_consumer_stats_get`.
    pub fn alkaid_consumer_stats_get(
        consumer: *mut alkaid_consumer,
        out: *mut alkaid_consumer_stats,
    ) -> alkaid_status;
    /// `alkaid_consumer_wait_fd`.
    pub fn alkaid_consumer_wait_fd(consumer: *mut alkaid_consumer, fd: *mut c_int)
        -> alkaid_status;
    /// `alkaid_consumer_cancel`.
    pub fn alkaid_consumer_cancel(consumer: *mut alkaid_consumer) -> alkaid_status;
    /// `alkaid_consumer_close`.
    pub fn alkaid_consumer_close(consumer: *mut alkaid_consumer) -> alkaid_status;

    /// `alkaid_broker_connect`.
    pub fn alkaid_broker_connect(
        socket_path: *const c_char,
        out: *mut *mut alkaid_broker,
    ) -> alkaid_status;
    /// `alkaid_broker_list_topics`.
    pub fn alkaid_broker_list_topics(
        broker: *mut alkaid_broker,
        out: *mut *mut alkaid_topic_list,
    ) -> alkaid_status;
    /// `alkaid_broker_close`.
    pub fn alkaid_broker_close(broker: *mut alkaid_broker);
    /// `alkaid_topic_list_size`.
    pub fn alkaid_topic_list_size(list: *const alkaid_topic_list) -> usize;
    /// `alkaid_topic_list_get`.
    pub fn alkaid_topic_list_get(
        list: *const alkaid_topic_list,
        index: usize,
    ) -> *const alkaid_topic_info;
    /// `alkaid_topic_list_schema`.
    pub fn alkaid_topic_list_schema(
        list: *const alkaid_topic_list,
        index: usize,
        out: *mut ArrowSchema,
    ) -> alkaid_status;
    /// `alkaid_topic_list_free`.
    pub fn alkaid_topic_list_free(list: *mut alkaid_topic_list);
}
