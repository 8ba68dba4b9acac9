//! The structs' layout against what gcc makes of alkaid.h on x86-64 and
//! aarch64 Linux (the figures were printed by a C program with sizeof and
//! offsetof over the header; a field added to the header without its
//! declaration here fails this test).

use alkaid_sys::*;
use std::mem::{offset_of, size_of};

#[test]
fn structs_are_laid_out_as_in_the_header() {
    assert_eq!(size_of::<alkaid_producer_options>(), 96);
    assert_eq!(
        offset_of!(alkaid_producer_options, fixed_block_bytes),
        ALKAID_PRODUCER_OPTIONS_SIZE_V2
    );
    assert_eq!(offset_of!(alkaid_producer_options, fixed_block_count), 88);
    assert_eq!(
        offset_of!(alkaid_producer_options, publish_timestamps),
        ALKAID_PRODUCER_OPTIONS_SIZE_V1
    );
    assert_eq!(offset_of!(alkaid_producer_options, huge_pages), 40);
    assert_eq!(offset_of!(alkaid_producer_options, drain_timeout_ms), 64);
    assert_eq!(
        size_of::<alkaid_consumer_options>(),
        ALKAID_CONSUMER_OPTIONS_SIZE_V1
    );
    assert_eq!(offset_of!(alkaid_consumer_options, columns), 32);
    assert_eq!(offset_of!(alkaid_consumer_options, max_held_batches), 56);
    assert_eq!(size_of::<alkaid_batch_info>(), 40);
    assert_eq!(offset_of!(alkaid_batch_info, sequence), 16);
    assert_eq!(
        offset_of!(alkaid_batch_info, publish_ns),
        ALKAID_BATCH_INFO_SIZE_V1
    );
    assert_eq!(size_of::<alkaid_topic_info>(), 96);
    assert_eq!(offset_of!(alkaid_topic_info, publish_timestamps), 88);
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
    // SAFETY: init_sized fills the struct it is given, of the size given.
    unsafe {
        let mut p = std::mem::MaybeUninit::<alkaid_producer_options>::zeroed();
        alkaid_producer_options_init_sized(p.as_mut_ptr(), size_of::<alkaid_producer_options>());
        let p = p.assume_init();
        assert_eq!(p.struct_size as usize, size_of::<alkaid_producer_options>());
        assert_eq!((p.publish_timeout_ms, p.publish_timestamps), (5000, 0));
        assert_eq!((p.fixed_block_bytes, p.fixed_block_count), (0, 0));
        let mut c = std::mem::MaybeUninit::<alkaid_consumer_options>::zeroed();
        alkaid_consumer_options_init_sized(c.as_mut_ptr(), size_of::<alkaid_consumer_options>());
        assert_eq!(
            c.assume_init().struct_size as usize,
            size_of::<alkaid_consumer_options>()
        );
        assert!(alkaid_version() >= ALKAID_C_API_VERSION);
    }
}

#[test]
fn version_1_init_writes_version_1_bytes_only() {
    // SAFETY: the struct is larger than what version 1's init writes.
    unsafe {
        let mut p = std::mem::MaybeUninit::<alkaid_producer_options>::zeroed();
        p.as_mut_ptr()
            .cast::<u8>()
            .write_bytes(0xab, size_of::<alkaid_producer_options>());
        alkaid_producer_options_init(p.as_mut_ptr());
        let p = p.assume_init();
        assert_eq!(p.struct_size as usize, ALKAID_PRODUCER_OPTIONS_SIZE_V1);
        assert_eq!(p.publish_timestamps as u32, 0xabab_abab);
    }
}
