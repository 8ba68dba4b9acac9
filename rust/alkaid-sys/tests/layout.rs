//! The structs' layout against what gcc makes of alkaid.h on x86-64 and
//! aarch64 Linux (the figures were printed by a C program with sizeof and
//! offsetof over the header; a field added to the header without its
//! declaration here fails this test).

use alkaid_sys::*;
use std::mem::{offset_of, size_of};

#[test]
fn structs_are_laid_out_as_in_the_header() {
    assert_eq!(size_of::<alkaid_producer_options>(), 72);
    assert_eq!(offset_of!(alkaid_producer_options, huge_pages), 40);
    assert_eq!(offset_of!(alkaid_producer_options, drain_timeout_ms), 64);
    assert_eq!(size_of::<alkaid_consumer_options>(), 64);
    assert_eq!(offset_of!(alkaid_consumer_options, columns), 32);
    assert_eq!(offset_of!(alkaid_consumer_options, max_held_batches), 56);
    assert_eq!(size_of::<alkaid_batch_info>(), 32);
    assert_eq!(offset_of!(alkaid_batch_info, sequence), 16);
    assert_eq!(size_of::<alkaid_topic_info>(), 88);
    assert_eq!(offset_of!(alkaid_topic_info, policy), 32);
    assert_eq!(offset_of!(alkaid_topic_info, shm_bytes), 80);
    assert_eq!(size_of::<alkaid_producer_stats>(), 32);
    assert_eq!(size_of::<alkaid_consumer_stats>(), 40);
    assert_eq!(size_of::<ArrowSchema>(), 72);
    assert_eq!(size_of::<ArrowArray>(), 80);
    assert_eq!(size_of::<ArrowArrayStream>(), 40);
}

#[test]
fn options_init_sets_the_struct_size_rust_declares() {
    // SAFETY: init fills the struct it is given.
    unsafe {
        let mut p = std::mem::MaybeUninit::<alkaid_producer_options>::zeroed();
        alkaid_producer_options_init(p.as_mut_ptr());
        assert_eq!(
            p.assume_init().struct_size as usize,
            size_of::<alkaid_producer_options>()
        );
        let mut c = std::mem::MaybeUninit::<alkaid_consumer_options>::zeroed();
        alkaid_consumer_options_init(c.as_mut_ptr());
        assert_eq!(
            c.assume_init().struct_size as usize,
            size_of::<alkaid_consumer_options>()
        );
        assert!(alkaid_version() >= ALKAID_C_API_VERSION);
    }
}
