//! Bad input and failures give errors with the C ABI's status and message,
//! never a crash or a hang: no broker, a killed broker, unknown topics and
//! columns, a schema that is not the topic's, names with NUL bytes, too
//! many held batches.

mod common;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use alkaid::{Broker, Consumer, ConsumerOptions, Error, Producer, ProducerOptions, StatusCode};
use arrow_array::{Int32Array, RecordBatch};
use arrow_schema::{DataType, Field, Schema};
use common::{test_batch, test_schema, BrokerProcess};

const LONG: Option<Duration> = Some(Duration::from_secs(10));

fn code<T: std::fmt::Debug>(r: Result<T, Error>) -> (StatusCode, String) {
    let e = r.unwrap_err();
    (e.code().unwrap(), e.to_string())
}

#[test]
fn no_broker_is_an_io_error_naming_the_socket() {
    let socket = Path::new("/tmp/alkaid-test-no-such-broker.sock");
    let (c, m) = code(Broker::connect(Some(socket)));
    assert_eq!(c, StatusCode::IoError, "{m}");
    assert!(m.contains("no-such-broker"), "{m}");
    let po = ProducerOptions {
        socket_path: Some(socket.into()),
        ..ProducerOptions::default()
    };
    assert_eq!(
        code(Producer::open("t", &test_schema(), &po)).0,
        StatusCode::IoError
    );
    let co = ConsumerOptions::with_socket(socket);
    assert_eq!(code(Consumer::open("t", &co)).0, StatusCode::IoError);
}

#[test]
fn unknown_topics_and_bad_names_are_refused() {
    let broker = BrokerProcess::start();
    let (c, m) = code(Consumer::open("nothing", &broker.consumer_options()));
    assert_eq!(c, StatusCode::KeyError, "{m}");
    assert!(m.contains("nothing"), "{m}");
    let (c, m) = code(Producer::open(
        "a\0b",
        &test_schema(),
        &broker.producer_options(),
    ));
    assert_eq!(c, StatusCode::Invalid, "{m}");
    assert!(matches!(
        Consumer::open("a\0b", &broker.consumer_options()),
        Err(Error::InvalidArgument(_))
    ));
    let (c, m) = code(Producer::open(
        "",
        &test_schema(),
        &broker.producer_options(),
    ));
    assert_eq!(c, StatusCode::Invalid, "{m}");
}

#[test]
fn a_schema_that_is_not_the_topics_is_refused() {
    let broker = BrokerProcess::start();
    let producer = Producer::open("s", &test_schema(), &broker.producer_options()).unwrap();
    let mut consumer = Consumer::open("s", &broker.consumer_options()).unwrap();
    // A second producer with another schema.
    let other = Schema::new(vec![Field::new("x", DataType::Int32, false)]);
    let (c, m) = code(Producer::open("s", &other, &broker.producer_options()));
    assert_eq!(c, StatusCode::Invalid, "{m}");
    // A batch of another schema.
    let batch = RecordBatch::try_new(
        Arc::new(other),
        vec![Arc::new(Int32Array::from(vec![1, 2]))],
    )
    .unwrap();
    let (c, m) = code(producer.publish(&batch));
    assert_eq!(c, StatusCode::Invalid, "{m}");
    // Same names, one nullability changed.
    let mut fields: Vec<Field> = test_schema()
        .fields()
        .iter()
        .map(|f| f.as_ref().clone())
        .collect();
    fields[0] = Field::new("id", DataType::Int64, true);
    let renull = Schema::new(fields);
    let batch =
        RecordBatch::try_new(Arc::new(renull), test_batch(0, 3).columns().to_vec()).unwrap();
    assert_eq!(code(producer.publish(&batch)).0, StatusCode::Invalid);
    // Nothing of it arrived; a good batch still does.
    producer.publish(&test_batch(1, 4)).unwrap();
    assert_eq!(
        consumer.next_batch(LONG).unwrap().unwrap().batch,
        test_batch(1, 4)
    );
}

#[test]
fn too_many_held_batches_is_a_capacity_error() {
    let broker = BrokerProcess::start();
    let producer = Producer::open("held", &test_schema(), &broker.producer_options()).unwrap();
    let options = ConsumerOptions {
        max_held_batches: 1,
        ..broker.consumer_options()
    };
    let mut consumer = Consumer::open("held", &options).unwrap();
    producer.publish(&test_batch(0, 3)).unwrap();
    producer.publish(&test_batch(1, 3)).unwrap();
    let first = consumer.next_batch(LONG).unwrap().unwrap();
    let (c, m) = code(consumer.next_batch(LONG));
    assert_eq!(c, StatusCode::CapacityError, "{m}");
    drop(first);
    assert_eq!(
        consumer.next_batch(LONG).unwrap().unwrap().batch,
        test_batch(1, 3)
    );
}

#[test]
fn a_killed_broker_gives_errors_not_hangs() {
    let mut broker = BrokerProcess::start();
    let options = ProducerOptions {
        drain_timeout: Duration::from_millis(200),
        ..broker.producer_options()
    };
    let producer = Producer::open("dead", &test_schema(), &options).unwrap();
    let mut consumer = Consumer::open("dead", &broker.consumer_options()).unwrap();
    producer.publish(&test_batch(0, 3)).unwrap();
    let held = consumer.next_batch(LONG).unwrap().unwrap();
    broker.kill();
    // New connections fail with IoError; what was received stays readable.
    assert_eq!(
        code(Consumer::open("dead", &broker.consumer_options())).0,
        StatusCode::IoError
    );
    assert_eq!(
        code(Producer::open("dead", &test_schema(), &options)).0,
        StatusCode::IoError
    );
    assert_eq!(
        code(Broker::connect(Some(&broker.socket))).0,
        StatusCode::IoError
    );
    assert_eq!(held.batch, test_batch(0, 3));
    // The old handles answer within their timeouts and close.
    let _ = consumer.next_batch(Some(Duration::from_millis(200)));
    drop(held);
    drop(consumer);
    drop(producer);
    // A new broker of the same name sweeps the killed one's segments
    // (checked when it stops).
    broker.restart();
}
