//! Broker management: the topics a broker knows, with their counters (what
//! `alkaid topics` shows).

use std::ffi::CStr;
use std::path::Path;
use std::ptr;

use alkaid_sys as sys;
use arrow_schema::Schema;

use crate::error::{check, Result};
use crate::ffi_util::{c_path, import_schema};
use crate::producer::Policy;

/// A connection to a broker for management requests. `Send`, not `Sync`.
pub struct Broker {
    raw: *mut sys::alkaid_broker,
}

// SAFETY: the C ABI lets a handle be used from any thread, one at a time.
unsafe impl Send for Broker {}

impl std::fmt::Debug for Broker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Broker")
    }
}

/// A topic and its counters.
#[derive(Debug, Clone, PartialEq)]
pub struct TopicInfo {
    /// The topic's name.
    pub name: String,
    /// Slots of each producer's channel.
    pub slot_count: u32,
    /// Each producer's initial arena.
    pub arena_bytes: u64,
    /// What each producer's arena may grow to.
    pub max_arena_bytes: u64,
    /// The topic's policy (`None`: a value this crate does not know).
    pub policy: Option<Policy>,
    /// An UnsafeRow topic (C++ only; not readable through this crate).
    pub row_topic: bool,
    /// Producers attached.
    pub producers: u32,
    /// Consumers attached.
    pub consumers: u32,
    /// Messages published, as the producers last reported.
    pub published: u64,
    /// Messages the slowest consumer has yet to read.
    pub depth: u64,
    /// Messages lost by slow consumers.
    pub drops: u64,
    /// Bodies the consumers hold.
    pub held: u64,
    /// Shared memory the topic's producers hold.
    pub shm_bytes: u64,
    /// Whether the topic's producers stamp publish times
    /// (`ProducerOptions::publish_timestamps`).
    pub publish_timestamps: bool,
    /// The topic's schema (`None` if the broker left it out of the list: it
    /// lists schemas up to 1 MiB in all).
    pub schema: Option<Schema>,
}

impl Broker {
    /// Connects to the broker at `socket_path` (`None`: the default, as for
    /// a producer). `IoError` naming the socket if none answers.
    pub fn connect(socket_path: Option<&Path>) -> Result<Self> {
        let socket = c_path(socket_path)?;
        let mut raw = ptr::null_mut();
        // SAFETY: valid pointers for the call.
        check(unsafe {
            sys::alkaid_broker_connect(
                socket.as_ref().map_or(ptr::null(), |s| s.as_ptr()),
                &mut raw,
            )
        })?;
        Ok(Self { raw })
    }

    /// Every topic the broker knows, with its counters and schema.
    pub fn list_topics(&mut self) -> Result<Vec<TopicInfo>> {
        let mut list = ptr::null_mut();
        // SAFETY: valid handle and out pointer.
        check(unsafe { sys::alkaid_broker_list_topics(self.raw, &mut list) })?;
        struct List(*mut sys::alkaid_topic_list);
        impl Drop for List {
            fn drop(&mut self) {
                // SAFETY: freed once.
                unsafe { sys::alkaid_topic_list_free(self.0) };
            }
        }
        let list = List(list);
        // SAFETY: a live list; entries and names valid while it is.
        let n = unsafe { sys::alkaid_topic_list_size(list.0) };
        let mut out = Vec::with_capacity(n);
        for i in 0..n {
            // SAFETY: i < size, so the entry is not NULL.
            let t = unsafe { &*sys::alkaid_topic_list_get(list.0, i) };
            // SAFETY: a valid C string owned by the list.
            let name = unsafe { CStr::from_ptr(t.name) }
                .to_string_lossy()
                .into_owned();
            // SAFETY: a live list, i in range.
            let schema =
                import_schema(|s| unsafe { sys::alkaid_topic_list_schema(list.0, i, s) }).ok();
            out.push(TopicInfo {
                name,
                slot_count: t.slot_count,
                arena_bytes: t.arena_bytes,
                max_arena_bytes: t.max_arena_bytes,
                policy: match t.policy {
                    sys::ALKAID_POLICY_BLOCK_PRODUCER => Some(Policy::BlockProducer),
                    sys::ALKAID_POLICY_DROP_OLDEST => Some(Policy::DropOldest),
                    _ => None,
                },
                row_topic: t.row_topic != 0,
                producers: t.producers,
                consumers: t.consumers,
                published: t.published,
                depth: t.depth,
                drops: t.drops,
                held: t.held,
                shm_bytes: t.shm_bytes,
                publish_timestamps: t.publish_timestamps != 0,
                schema,
            });
        }
        Ok(out)
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        // SAFETY: closed once.
        unsafe { sys::alkaid_broker_close(self.raw) };
    }
}
