// A consumer: subscribes to a topic and prints a line per batch until every
// producer of the topic has finished (end of stream).
//
//   ./consumer readings

#include <chrono>
#include <iostream>
#include <string>

#include "alkaid/client/consumer.h"

int main(int argc, char** argv) {
  const std::string topic = argc > 1 ? argv[1] : "readings";

  // Subscribes; the broker supplies the topic's schema. If no producer has
  // created the topic yet, wait for it (up to 30 s) with the broker: this
  // consumer then receives every batch from the first one, so it may be
  // started before the producer.
  alkaid::client::ConsumerOptions options;
  options.wait_for_topic = std::chrono::seconds(30);
  auto consumer = alkaid::client::Consumer::Open(topic, options);
  if (!consumer.ok()) {
    std::cerr << "consumer: " << consumer.status().ToString() << "\n";
    return 1;
  }
  std::cout << "schema: " << (*consumer)->schema()->ToString() << "\n";

  int64_t batches = 0;
  int64_t rows = 0;
  while (true) {
    // Waits up to one second. The batch is zero-copy: its buffers point
    // into the producer's shared memory, kept alive until `batch` is dropped.
    auto batch = (*consumer)->Next(std::chrono::seconds(1));
    if (!batch.ok()) {
      if (batch.status().code() == alkaid::StatusCode::kTimedOut) continue;
      if (batch.status().code() == alkaid::StatusCode::kEndOfStream) {
        std::cout << "end of stream: " << batch.status().message() << "\n";
        break;
      }
      std::cerr << "consumer: " << batch.status().ToString() << "\n";
      return 1;
    }
    ++batches;
    rows += (*batch)->num_rows();
    std::cout << "batch " << batches << ": " << (*batch)->num_rows() << " rows\n";
  }
  std::cout << batches << " batches, " << rows << " rows\n";
  return 0;
}
