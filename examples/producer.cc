// A producer: publishes a batch of 1000 sensor readings every 100 ms to the
// topic "readings", building each batch directly in shared memory.
//
//   alkaid-broker &                 # terminal 1 (or any running broker)
//   ./consumer readings             # terminal 2
//   ./producer readings 50          # terminal 3: 50 batches, then end of stream

#include <chrono>
#include <cstdlib>
#include <iostream>
#include <string>
#include <thread>

#include "alkaid/client/producer.h"
#include "alkaid/format/builder_primitive.h"

namespace format = alkaid::format;

int main(int argc, char** argv) {
  const std::string topic = argc > 1 ? argv[1] : "readings";
  const int batches = argc > 2 ? std::atoi(argv[2]) : 50;

  // The schema is fixed when the topic is created; a producer with another
  // schema is refused by the broker.
  auto schema = format::schema({format::field("sensor", format::int32(), false),
                                format::field("value", format::float64())});

  // Connects to the broker (ALKAID_BROKER_SOCKET or the default socket),
  // creates or opens the topic and attaches. Nothing here throws: errors
  // are Status values.
  auto producer = alkaid::client::Producer::Open(topic, schema);
  if (!producer.ok()) {
    std::cerr << "producer: " << producer.status().ToString() << "\n";
    return 1;
  }

  constexpr int64_t kRows = 1000;
  for (int b = 0; b < batches; ++b) {
    // A pool over a fresh region of the producer's shared-memory segment:
    // builders given this pool write the columns in place.
    auto pool = (*producer)->NewBatchPool(64 * 1024);
    if (!pool.ok()) {
      std::cerr << "producer: " << pool.status().ToString() << "\n";
      return 1;
    }
    format::Int32Builder sensors(pool->get());
    format::DoubleBuilder values(pool->get());
    // Reserving up front keeps the builders from growing (and wasting) the region.
    if (!sensors.Reserve(kRows).ok() || !values.Reserve(kRows).ok()) return 1;
    for (int64_t i = 0; i < kRows; ++i) {
      (void)sensors.Append(static_cast<int32_t>(i % 16));
      (void)values.Append(b + static_cast<double>(i) / kRows);
    }
    auto sensor_array = sensors.Finish();
    auto value_array = values.Finish();
    if (!sensor_array.ok() || !value_array.ok()) return 1;
    auto batch = format::RecordBatch::Make(schema, kRows, {*sensor_array, *value_array});
    if (!batch.ok()) return 1;

    // Zero copy: only the batch's metadata goes through the ring.
    const alkaid::Status st = (*producer)->Publish(**batch, pool->get());
    if (!st.ok()) {
      std::cerr << "producer: " << st.ToString() << "\n";
      return 1;
    }
    std::cout << "published batch " << b << "\n";
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  // Consumers read what was published, then get end of stream.
  const alkaid::Status st = (*producer)->Close();
  if (!st.ok()) std::cerr << "producer: " << st.ToString() << "\n";
  return st.ok() ? 0 : 1;
}
