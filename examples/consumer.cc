// A consumer: subscribes to a topic and prints a line per batch until every
// producer of the topic has finished (end of stream).
//
//   ./consumer readings

#include <chrono>
#include <iostream>
#include <string>
#include <thread>

#include "alkaid/client/consumer.h"

int main(int argc, char** argv) {
  const std::string topic = argc > 1 ? argv[1] : "readings";

  // Subscribes; the broker supplies the topic's schema. Until a producer
  // has created the topic, Open fails with KeyError: wait for it (up to 30 s)
  // so the consumer can be started first.
  auto consumer = alkaid::client::Consumer::Open(topic);
  for (int i = 0;
       i < 1500 && !consumer.ok() && consumer.status().code() == alkaid::StatusCode::kKeyError;
       ++i) {
    if (i == 0) std::cout << "waiting for a producer to create '" << topic << "'\n";
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    consumer = alkaid::client::Consumer::Open(topic);
  }
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
