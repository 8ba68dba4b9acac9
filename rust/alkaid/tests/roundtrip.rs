//! Round trips through a real broker within one process: publish by copy
//! and by loan, values equal on arrival, buffers in shared memory, batches
//! outliving their consumer and producer, a column subset, the end of the
//! stream, cancellation from another thread, lost-before counts, publish
//! times, the topic list.

mod common;

use std::sync::Arc;
use std::time::Duration;

use alkaid::{Broker, Consumer, ConsumerOptions, Policy, Producer, ProducerOptions, StatusCode};
use arrow_array::types::{Float64Type, Int64Type};
use arrow_array::{Array, Float64Array, Int64Array, RecordBatch, StringArray};
use common::{lies_in_shared_memory, test_batch, test_schema, wait_until, BrokerProcess};

const LONG: Option<Duration> = Some(Duration::from_secs(10));

#[test]
fn published_batches_arrive_equal_and_zero_copy() {
    let broker = BrokerProcess::start();
    let producer = Producer::open("t", &test_schema(), &broker.producer_options()).unwrap();
    let mut consumer = Consumer::open("t", &broker.consumer_options()).unwrap();
    assert_eq!(consumer.schema(), test_schema());
    let sent: Vec<RecordBatch> = (0..5)
        .map(|i| test_batch(i * 1000, 100 + i as usize))
        .collect();
    for b in &sent {
        producer.publish(b).unwrap();
    }
    for (i, want) in sent.iter().enumerate() {
        let got = consumer
            .next_batch(LONG)
            .unwrap()
            .expect("a batch, not the end");
        assert_eq!(&got.batch, want, "batch {i}");
        assert!(
            lies_in_shared_memory(&got.batch),
            "batch {i} was copied out of shared memory"
        );
        assert_eq!(got.info.lost_before, 0);
        assert_eq!(got.info.producer_pid, std::process::id());
        assert_eq!(consumer.last_info(), got.info);
    }
    let stats = producer.stats().unwrap();
    assert_eq!(stats.published, 5);
    assert!(stats.copied_bytes > 0);
    producer.close().unwrap();
    // The iterator: the end of the stream ends it.
    assert!(consumer.next().is_none());
}

#[test]
fn the_iterator_yields_every_batch_then_ends() {
    let broker = BrokerProcess::start();
    let producer = Producer::open("it", &test_schema(), &broker.producer_options()).unwrap();
    let consumer = Consumer::open("it", &broker.consumer_options()).unwrap();
    let sent: Vec<RecordBatch> = (0..20).map(|i| test_batch(i, 7)).collect();
    let publisher = std::thread::spawn(move || {
        for b in &sent {
            producer.publish(b).unwrap();
        }
        producer.close().unwrap();
        sent
    });
    let got: Vec<RecordBatch> = consumer.map(|b| b.unwrap()).collect();
    let sent = publisher.join().unwrap();
    assert_eq!(got, sent);
}

#[test]
fn a_loan_written_in_place_arrives_without_a_copy() {
    let broker = BrokerProcess::start();
    let producer = Producer::open("loan", &test_schema(), &broker.producer_options()).unwrap();
    let mut consumer = Consumer::open("loan", &broker.consumer_options()).unwrap();
    let words = ["alpha", "", "gamma", "delta"];
    let bytes: i64 = words.iter().map(|w| w.len() as i64).sum();
    let mut loan = producer.loan(4, &[0, bytes, 0]).unwrap();
    assert_eq!(loan.rows(), 4);
    loan.values_mut::<Int64Type>(0)
        .unwrap()
        .copy_from_slice(&[10, 20, 30, 40]);
    {
        let (offsets, values) = loan.binary_mut(1).unwrap();
        let mut at = 0usize;
        for (i, w) in words.iter().enumerate() {
            offsets[i] = at as i32;
            values[at..at + w.len()].copy_from_slice(w.as_bytes());
            at += w.len();
        }
        offsets[4] = at as i32;
    }
    // Row 1 of `name` null.
    loan.validity_mut(1).unwrap().expect("name is nullable")[0] &= !0b10;
    loan.set_null_count(1, 1).unwrap();
    loan.values_mut::<Float64Type>(2)
        .unwrap()
        .copy_from_slice(&[0.5, 1.5, 2.5, 3.5]);
    // Wrong type, out of range: refused before the C ABI.
    assert!(loan.values_mut::<Float64Type>(0).is_err());
    assert!(loan.values_mut::<Int64Type>(7).is_err());
    assert!(loan.binary_mut(0).is_err());
    assert!(
        loan.validity_mut(0).unwrap().is_none(),
        "id is not nullable"
    );
    loan.publish().unwrap();

    let got = consumer.next_batch(LONG).unwrap().unwrap().batch;
    let want = RecordBatch::try_new(
        test_schema(),
        vec![
            Arc::new(Int64Array::from(vec![10, 20, 30, 40])),
            Arc::new(StringArray::from(vec![
                Some("alpha"),
                None,
                Some("gamma"),
                Some("delta"),
            ])),
            Arc::new(Float64Array::from(vec![0.5, 1.5, 2.5, 3.5])),
        ],
    )
    .unwrap();
    assert_eq!(got, want);
    assert!(lies_in_shared_memory(&got));
    assert_eq!(
        producer.stats().unwrap().copied_bytes,
        0,
        "a loan is published without a copy"
    );
}

/// Loans of fixed-width columns none of which is nullable go through the C
/// ABI's fixed-shape writers (docs/INTEROP.md, "Loans through fixed-shape
/// writers"): two out at once, published newest first, of row counts that
/// come back, each batch arrives equal, in order, in shared memory and
/// without a copy.
#[test]
fn fixed_shape_loans_arrive_equal_and_in_order() {
    let broker = BrokerProcess::start();
    let schema = Arc::new(arrow_schema::Schema::new(vec![
        arrow_schema::Field::new("id", arrow_schema::DataType::Int64, false),
        arrow_schema::Field::new("x", arrow_schema::DataType::Float64, false),
    ]));
    let producer = Producer::open("fixed", &schema, &broker.producer_options()).unwrap();
    let mut consumer = Consumer::open("fixed", &broker.consumer_options()).unwrap();
    let batch = |first: i64, rows: usize| {
        RecordBatch::try_new(
            schema.clone(),
            vec![
                Arc::new(Int64Array::from_iter_values(first..first + rows as i64)),
                Arc::new(Float64Array::from_iter_values(
                    (0..rows).map(|r| r as f64 / 2.0),
                )),
            ],
        )
        .unwrap()
    };
    let fill = |loan: &mut alkaid::Loan<'_>, first: i64| {
        let rows = loan.rows();
        for (r, v) in loan
            .values_mut::<Int64Type>(0)
            .unwrap()
            .iter_mut()
            .enumerate()
        {
            *v = first + r as i64;
        }
        for (r, v) in loan
            .values_mut::<Float64Type>(1)
            .unwrap()
            .iter_mut()
            .enumerate()
        {
            *v = r as f64 / 2.0;
        }
        assert!(loan.validity_mut(0).unwrap().is_none());
        assert_eq!(rows, loan.rows());
    };
    for round in 0..12i64 {
        let rows = [1usize, 64, 1000][round as usize % 3];
        let mut a = producer.loan(rows, &[]).unwrap();
        let mut b = producer.loan(rows, &[]).unwrap();
        fill(&mut a, 10_000 * round);
        fill(&mut b, 10_000 * round + 5_000);
        b.publish().unwrap();
        a.publish().unwrap();
        for first in [10_000 * round + 5_000, 10_000 * round] {
            let got = consumer.next_batch(LONG).unwrap().unwrap().batch;
            assert_eq!(got, batch(first, rows));
            assert!(lies_in_shared_memory(&got));
        }
    }
    let stats = producer.stats().unwrap();
    assert_eq!(stats.published, 24);
    assert_eq!(stats.copied_bytes, 0);
}

#[test]
fn a_bad_loan_is_refused_and_its_space_returned() {
    let broker = BrokerProcess::start();
    let producer = Producer::open("badloan", &test_schema(), &broker.producer_options()).unwrap();
    let mut consumer = Consumer::open("badloan", &broker.consumer_options()).unwrap();
    let mut loan = producer.loan(2, &[0, 4, 0]).unwrap();
    {
        let (offsets, _) = loan.binary_mut(1).unwrap();
        offsets.copy_from_slice(&[0, 3, 1]); // decreasing
    }
    let err = loan.publish().unwrap_err();
    assert_eq!(err.code(), Some(StatusCode::Invalid), "{err}");
    assert!(err.to_string().contains("offset"), "{err}");
    // Wrong number of var_data_bytes entries.
    assert!(producer.loan(2, &[0, 4]).is_err());
    // Nothing was published; a dropped loan is discarded.
    drop(producer.loan(3, &[0, 9, 0]).unwrap());
    assert!(consumer
        .next_batch(Some(Duration::ZERO))
        .unwrap_err()
        .is_timed_out());
}

#[test]
fn batches_outlive_their_consumer_and_producer() {
    let broker = BrokerProcess::start();
    // The producer's close waits for the held body up to drain_timeout: the
    // body is still held when it closes, so keep that short.
    let options = ProducerOptions {
        drain_timeout: Duration::from_millis(100),
        ..broker.producer_options()
    };
    let producer = Producer::open("keep", &test_schema(), &options).unwrap();
    let mut consumer = Consumer::open("keep", &broker.consumer_options()).unwrap();
    producer.publish(&test_batch(7, 300)).unwrap();
    let got = consumer.next_batch(LONG).unwrap().unwrap().batch;
    let column = got.column(1).clone();
    drop(consumer);
    drop(producer);
    // Read after both are gone, and release on another thread.
    assert_eq!(got, test_batch(7, 300));
    std::thread::spawn(move || {
        assert_eq!(column.len(), 300);
        drop(column);
        drop(got);
    })
    .join()
    .unwrap();
    // Every segment goes once the broker stops (checked by its Drop).
}

#[test]
fn a_dropped_batch_goes_back_at_the_next_call_or_at_its_drop() {
    // The consumer keeps a reference to the last batch's C struct until its
    // next call: a batch dropped before it goes back at that call (before
    // the call waits), one still held then goes back at its drop.
    let broker = BrokerProcess::start();
    let producer = Producer::open("back", &test_schema(), &broker.producer_options()).unwrap();
    let mut consumer = Consumer::open("back", &broker.consumer_options()).unwrap();
    let held = |c: &Consumer| c.stats().unwrap().held;
    for i in 0..3 {
        producer.publish(&test_batch(i, 5)).unwrap();
    }
    // Dropped, then the next call (which finds a batch).
    let first = consumer.next_batch(LONG).unwrap().unwrap();
    drop(first);
    assert_eq!(
        held(&consumer),
        1,
        "given back at the next call, not at the drop"
    );
    let second = consumer.next_batch(LONG).unwrap().unwrap();
    assert_eq!(second.batch, test_batch(1, 5));
    assert_eq!(held(&consumer), 1, "the first went back at the call");
    // Held across a call that waits and finds nothing: it goes at its
    // drop, on another thread.
    let third = consumer.next_batch(LONG).unwrap().unwrap();
    assert_eq!(
        held(&consumer),
        1 + 1,
        "the second is still held by its user"
    );
    drop(second);
    assert_eq!(held(&consumer), 1, "the second went back at its drop");
    assert!(consumer
        .next_batch(Some(Duration::from_millis(20)))
        .unwrap_err()
        .is_timed_out());
    assert_eq!(held(&consumer), 1, "the third is still held by its user");
    std::thread::spawn(move || drop(third)).join().unwrap();
    assert_eq!(held(&consumer), 0, "the third went back at its drop");
    // Dropped after the last call: the consumer's drop gives it back.
    producer.publish(&test_batch(9, 5)).unwrap();
    let last = consumer.next_batch(LONG).unwrap().unwrap();
    drop(last);
    assert_eq!(held(&consumer), 1);
    drop(consumer);
    assert_eq!(producer.stats().unwrap().held_by_consumers, 0);
    producer.close().unwrap();
}

#[test]
fn a_column_subset_arrives_in_the_order_asked() {
    let broker = BrokerProcess::start();
    let producer = Producer::open("sub", &test_schema(), &broker.producer_options()).unwrap();
    let options = ConsumerOptions {
        columns: vec!["score".into(), "id".into()],
        ..broker.consumer_options()
    };
    let mut consumer = Consumer::open("sub", &options).unwrap();
    let names: Vec<_> = consumer
        .schema()
        .fields()
        .iter()
        .map(|f| f.name().clone())
        .collect();
    assert_eq!(names, ["score", "id"]);
    let sent = test_batch(3, 50);
    producer.publish(&sent).unwrap();
    let got = consumer.next_batch(LONG).unwrap().unwrap().batch;
    assert_eq!(got, sent.project(&[2, 0]).unwrap());
    let unknown = ConsumerOptions {
        columns: vec!["nope".into()],
        ..broker.consumer_options()
    };
    assert_eq!(
        Consumer::open("sub", &unknown).unwrap_err().code(),
        Some(StatusCode::KeyError)
    );
}

#[test]
fn cancel_from_another_thread_ends_a_waiting_next() {
    let broker = BrokerProcess::start();
    let _producer = Producer::open("cancel", &test_schema(), &broker.producer_options()).unwrap();
    let mut consumer = Consumer::open("cancel", &broker.consumer_options()).unwrap();
    let canceller = consumer.canceller();
    let waiter = std::thread::spawn(move || {
        // Nothing is published: only the cancel ends this wait before its
        // 60 s (a broken cancel fails the test with TimedOut, not a hang).
        let r = consumer.next_batch(Some(Duration::from_secs(60)));
        (r, consumer)
    });
    // Cancel once the waiter is inside next (and also if it is not yet:
    // every later next is cancelled too).
    std::thread::sleep(Duration::from_millis(50));
    canceller.cancel().unwrap();
    let (r, mut consumer) = waiter.join().unwrap();
    let err = r.unwrap_err();
    assert!(err.is_cancelled(), "{err}");
    // The iterator yields the cancel, then ends.
    assert!(consumer
        .next()
        .expect("an item")
        .unwrap_err()
        .is_cancelled());
    assert!(
        consumer.next().is_none(),
        "the iterator ends after its error"
    );
    assert!(consumer
        .next_batch(Some(Duration::ZERO))
        .unwrap_err()
        .is_cancelled());
}

#[test]
fn cancel_ends_a_producer_waiting_for_room() {
    let broker = BrokerProcess::start();
    let options = ProducerOptions {
        slot_count: 2,
        publish_timeout: Duration::from_secs(60),
        drain_timeout: Duration::ZERO,
        ..broker.producer_options()
    };
    let producer = Producer::open("full", &test_schema(), &options).unwrap();
    // A consumer that never reads: the third publish waits without limit.
    let _consumer = Consumer::open("full", &broker.consumer_options()).unwrap();
    let canceller = producer.canceller();
    let publisher = std::thread::spawn(move || {
        let mut result = Ok(());
        for i in 0..3 {
            result = producer.publish(&test_batch(i, 10));
            if result.is_err() {
                break;
            }
        }
        result
    });
    std::thread::sleep(Duration::from_millis(50));
    canceller.cancel().unwrap();
    let err = publisher.join().unwrap().unwrap_err();
    assert!(err.is_cancelled(), "{err}");
}

#[test]
fn a_drop_oldest_consumer_sees_what_it_lost() {
    let broker = BrokerProcess::start();
    let options = ProducerOptions {
        slot_count: 4,
        policy: Policy::DropOldest,
        ..broker.producer_options()
    };
    let producer = Producer::open("drop", &test_schema(), &options).unwrap();
    let mut consumer = Consumer::open("drop", &broker.consumer_options()).unwrap();
    for i in 0..10 {
        producer.publish(&test_batch(i, 3)).unwrap();
    }
    let first = consumer.next_batch(LONG).unwrap().unwrap();
    assert!(first.info.lost_before > 0, "{:?}", first.info);
    // What arrives is the newest batches, intact.
    let id = first
        .batch
        .column(0)
        .as_any()
        .downcast_ref::<Int64Array>()
        .unwrap()
        .value(0);
    assert_eq!(first.batch, test_batch(id, 3));
    assert_eq!(consumer.stats().unwrap().lost, first.info.lost_before);
}

#[test]
fn the_topic_list_shows_topics_with_their_schema_and_counters() {
    let broker = BrokerProcess::start();
    let producer = Producer::open("listed", &test_schema(), &broker.producer_options()).unwrap();
    let mut consumer = Consumer::open("listed", &broker.consumer_options()).unwrap();
    producer.publish(&test_batch(0, 5)).unwrap();
    consumer.next_batch(LONG).unwrap().unwrap();
    let mut b = Broker::connect(Some(&broker.socket)).unwrap();
    // The published counter is what the producers last reported.
    assert!(wait_until(Duration::from_secs(10), || {
        b.list_topics()
            .unwrap()
            .iter()
            .any(|t| t.name == "listed" && t.published == 1)
    }));
    let topics = b.list_topics().unwrap();
    let t = topics.iter().find(|t| t.name == "listed").unwrap();
    assert_eq!((t.producers, t.consumers), (1, 1));
    assert_eq!(t.policy, Some(Policy::BlockProducer));
    assert!(!t.row_topic);
    assert!(!t.publish_timestamps);
    assert_eq!(t.schema.as_ref().unwrap(), test_schema().as_ref());
}

#[test]
fn publish_timestamps_reach_the_topic() {
    // ProducerOptions::publish_timestamps is a field of the C ABI's version
    // 2 options struct: the topic it creates shows it, the default does not.
    let broker = BrokerProcess::start();
    let stamped = ProducerOptions {
        publish_timestamps: true,
        ..broker.producer_options()
    };
    let a = Producer::open("stamped", &test_schema(), &stamped).unwrap();
    let b = Producer::open("plain", &test_schema(), &broker.producer_options()).unwrap();
    let mut list = Broker::connect(Some(&broker.socket)).unwrap();
    let topics = list.list_topics().unwrap();
    let stamps = |name: &str| {
        topics
            .iter()
            .find(|t| t.name == name)
            .map(|t| t.publish_timestamps)
    };
    assert_eq!(stamps("stamped"), Some(true));
    assert_eq!(stamps("plain"), Some(false));
    drop((a, b));
}

#[test]
fn a_stamped_topics_batches_carry_their_publish_time_others_none() {
    // BatchInfo::publish_ns (alkaid_consumer_next_sized, C ABI version 3):
    // on a stamped topic, the producer's CLOCK_REALTIME just before it
    // wrote the slot, so between the test's clock reads around the publish;
    // on a topic without stamps, None.
    let broker = BrokerProcess::start();
    let stamped = ProducerOptions {
        publish_timestamps: true,
        ..broker.producer_options()
    };
    let now_ns = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64
    };
    let a = Producer::open("stamped", &test_schema(), &stamped).unwrap();
    let b = Producer::open("plain", &test_schema(), &broker.producer_options()).unwrap();
    let mut on = Consumer::open("stamped", &broker.consumer_options()).unwrap();
    let mut off = Consumer::open("plain", &broker.consumer_options()).unwrap();
    let before = now_ns();
    a.publish(&test_batch(0, 3)).unwrap();
    let after = now_ns();
    b.publish(&test_batch(0, 3)).unwrap();
    let got = on.next_batch(LONG).unwrap().unwrap();
    let at = got
        .publish_ns()
        .expect("a stamped topic's batch has a publish time");
    assert!(
        (before..=after).contains(&at),
        "published at {at}, outside [{before}, {after}]"
    );
    assert_eq!(on.last_info().publish_ns, Some(at));
    let plain = off.next_batch(LONG).unwrap().unwrap();
    assert_eq!(plain.publish_ns(), None);
    assert_eq!(plain.info.publish_ns, None);
    drop((got, plain, on, off, a, b));
}

#[test]
fn versions_are_reported() {
    assert!(alkaid::c_api_version() >= alkaid_sys::ALKAID_C_API_VERSION);
    assert!(!alkaid::version().is_empty());
}

#[test]
fn the_topic_as_a_record_batch_reader_to_its_end() {
    use arrow_array::RecordBatchReader;
    let broker = BrokerProcess::start();
    let producer = Producer::open("t", &test_schema(), &broker.producer_options()).unwrap();
    let consumer = Consumer::open("t", &broker.consumer_options()).unwrap();
    let sent: Vec<RecordBatch> = (0..3).map(|i| test_batch(i * 10, 5)).collect();
    for b in &sent {
        producer.publish(b).unwrap();
    }
    // Close drains: it returns once the reader below has read everything.
    let closing = std::thread::spawn(move || producer.close());
    let reader = consumer.into_reader(LONG).unwrap();
    assert_eq!(reader.schema(), test_schema());
    let got: Vec<RecordBatch> = reader
        .collect::<std::result::Result<_, _>>()
        .expect("every batch, then the end");
    assert_eq!(got, sent);
    assert!(
        got.iter().all(lies_in_shared_memory),
        "copied out of shared memory"
    );
    closing.join().unwrap().unwrap();
}

#[test]
fn a_topic_reader_times_out_and_follows_its_consumers_cancel() {
    let broker = BrokerProcess::start();
    let producer = Producer::open("t", &test_schema(), &broker.producer_options()).unwrap();
    let consumer = Consumer::open("t", &broker.consumer_options()).unwrap();
    let mut timed = consumer
        .into_reader(Some(Duration::from_millis(20)))
        .unwrap();
    let err = timed.next().expect("an error, not the end").unwrap_err();
    assert!(err.to_string().contains("nothing within"), "{err}");
    drop(timed);
    let consumer = Consumer::open("t", &broker.consumer_options()).unwrap();
    let canceller = consumer.canceller();
    let mut reader = consumer.into_reader(None).unwrap();
    // Only the cancel ends this read (waiting without limit).
    let reading = std::thread::spawn(move || {
        let first = reader.next();
        (first, reader)
    });
    canceller.cancel().unwrap();
    let (first, mut reader) = reading.join().unwrap();
    let err = first.expect("an error, not the end").unwrap_err();
    assert!(err.to_string().contains("cancelled"), "{err}");
    assert!(reader.next().expect("still cancelled").is_err());
    drop(reader);
    producer.close().unwrap();
}

#[test]
fn fixed_blocks_reach_the_broker_and_carry_loans() {
    // ProducerOptions::fixed_block_bytes (C ABI version 4): the broker
    // counts the fixed area in the topic's shared memory (beside a topic
    // without it), loans of a fixed-width shape that fit arrive as any
    // other, and a count without bytes is refused before the broker.
    use arrow_schema::{DataType, Field, Schema};
    let broker = BrokerProcess::start();
    let schema = Arc::new(Schema::new(vec![Field::new("v", DataType::Int64, false)]));
    const ROWS: usize = 64; // 512 bytes of values: one block each
    let fixed = ProducerOptions {
        fixed_block_bytes: 512,
        fixed_block_count: 32,
        ..broker.producer_options()
    };
    let a = Producer::open("fixed", &schema, &fixed).unwrap();
    let b = Producer::open("plain", &schema, &broker.producer_options()).unwrap();
    let mut consumer = Consumer::open("fixed", &broker.consumer_options()).unwrap();
    for n in 0..40i64 {
        let mut loan = a.loan(ROWS, &[]).unwrap();
        for (r, v) in loan
            .values_mut::<Int64Type>(0)
            .unwrap()
            .iter_mut()
            .enumerate()
        {
            *v = n * 1000 + r as i64;
        }
        loan.publish().unwrap();
        let got = consumer.next_batch(LONG).unwrap().unwrap().batch;
        let col = got.column(0).as_any().downcast_ref::<Int64Array>().unwrap();
        assert_eq!(
            (col.len(), col.value(0), col.value(ROWS - 1)),
            (ROWS, n * 1000, n * 1000 + 63)
        );
    }
    let mut list = Broker::connect(Some(&broker.socket)).unwrap();
    let topics = list.list_topics().unwrap();
    let shm = |name: &str| topics.iter().find(|t| t.name == name).unwrap().shm_bytes;
    // 32 blocks of 512 bytes, and the page the area starts on.
    assert_eq!(shm("fixed") - shm("plain"), 32 * 512 + 4096);
    drop((a, b));

    let bad = ProducerOptions {
        fixed_block_count: 8,
        ..broker.producer_options()
    };
    let Err(e) = Producer::open("bad", &schema, &bad) else {
        panic!("a count without a size was accepted");
    };
    assert_eq!(e.code(), Some(StatusCode::Invalid), "{e}");
    assert!(
        e.to_string()
            .contains("fixed_block_count 8 without fixed_block_bytes"),
        "{e}"
    );
}
