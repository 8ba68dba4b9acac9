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
#include "alkaid/common/result.h"
#include "alkaid/format/builder_primitive.h"

namespace format = alkaid::format;

namespace {

constexpr int64_t kRows = 1000;

// Builds batch `b` in a pool over a fresh region of the producer's
// shared-memory arena and publishes it. Nothing here throws: every step
// returns a Status, and the macros hand the first error back to the caller.
alkaid::Status PublishOne(alkaid::client::Producer& producer, int b) {
  ALKAID_ASSIGN_OR_RAISE(auto pool, producer.NewBatchPool(64 * 1024));
  format::Int32Builder sensors(pool.get());
  format::DoubleBuilder values(pool.get());
  // Reserving up front keeps the builders from growing (and wasting) the region.
  ALKAID_RETURN_NOT_OK(sensors.Reserve(kRows));
  ALKAID_RETURN_NOT_OK(values.Reserve(kRows));
  for (int64_t i = 0; i < kRows; ++i) {
    ALKAID_RETURN_NOT_OK(sensors.Append(static_cast<int32_t>(i % 16)));
    ALKAID_RETURN_NOT_OK(values.Append(b + static_cast<double>(i) / kRows));
  }
  ALKAID_ASSIGN_OR_RAISE(auto sensor_array, sensors.Finish());
  ALKAID_ASSIGN_OR_RAISE(auto value_array, values.Finish());
  ALKAID_ASSIGN_OR_RAISE(
      auto batch, format::RecordBatch::Make(producer.schema(), kRows, {sensor_array, value_array}));
  // Zero copy: only the batch's metadata goes through the channel.
  return producer.Publish(*batch, pool.get());
}

alkaid::Status Run(const std::string& topic, int batches) {
  // The schema is fixed when the topic is created; a producer with another
  // schema is refused by the broker.
  auto schema = format::schema(
      {format::field("sensor", format::int32(), false), format::field("value", format::float64())});
  // Connects to the broker (ALKAID_BROKER_SOCKET or the default socket),
  // creates or opens the topic and attaches.
  ALKAID_ASSIGN_OR_RAISE(auto producer, alkaid::client::Producer::Open(topic, schema));
  for (int b = 0; b < batches; ++b) {
    ALKAID_RETURN_NOT_OK(PublishOne(*producer, b));
    std::cout << "published batch " << b << "\n";
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  // Consumers read what was published, then get end of stream.
  return producer->Close();
}

}  // namespace

int main(int argc, char** argv) {
  const std::string topic = argc > 1 ? argv[1] : "readings";
  const int batches = argc > 2 ? std::atoi(argv[2]) : 50;
  const alkaid::Status st = Run(topic, batches);
  if (!st.ok()) {
    std::cerr << "producer: " << st.ToString() << "\n";
    return 1;
  }
  return 0;
}
