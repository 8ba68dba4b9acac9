// A consumer that computes with Arrow C++: subscribes to a topic, hands the
// topic to Arrow C++ as an ArrowArrayStream (zero-copy: Arrow's buffers are
// the producer's shared memory) and, per batch, sums every numeric column
// with arrow::compute::Sum. Built only when Arrow C++ is available
// (cmake/AlkaidInterop.cmake: the libarrow and libarrow_compute of the
// project's pyarrow).
//
//   ./arrow_compute_consumer readings

// Arrow's ABI header first: Alkaid's c_data.h coexists with it.
#include <arrow/api.h>
#include <arrow/c/abi.h>
#include <arrow/c/bridge.h>
#include <arrow/compute/api.h>
#include <arrow/compute/initialize.h>

#include <chrono>
#include <iostream>
#include <string>

#include "alkaid/client/consumer.h"
#include "alkaid/format/c_data.h"

int main(int argc, char** argv) {
  const std::string topic = argc > 1 ? argv[1] : "readings";
  // Arrow 21 registers its compute kernels on request.
  if (auto st = arrow::compute::Initialize(); !st.ok()) {
    std::cerr << "arrow_compute_consumer: " << st.ToString() << "\n";
    return 1;
  }

  alkaid::client::ConsumerOptions options;
  options.wait_for_topic = std::chrono::seconds(30);
  // Foreign code may hold at most 64 batches (each pins a block of the
  // producer's arena) before get_next refuses with an error.
  options.max_exported_batches = 64;
  auto consumer = alkaid::client::Consumer::Open(topic, options);
  if (!consumer.ok()) {
    std::cerr << "arrow_compute_consumer: " << consumer.status().ToString() << "\n";
    return 1;
  }

  // The stream owns the consumer: each get_next is the next batch, the end
  // of the topic's stream ends it. Arrow's reader releases each batch when
  // its last reference goes, which returns the block to the producer, on
  // whichever thread that happens.
  ArrowArrayStream stream;
  if (auto st = alkaid::client::Consumer::ExportStream(std::move(*consumer), &stream); !st.ok()) {
    std::cerr << "arrow_compute_consumer: " << st.ToString() << "\n";
    return 1;
  }
  auto reader = arrow::ImportRecordBatchReader(&stream);
  if (!reader.ok()) {
    std::cerr << "arrow_compute_consumer: " << reader.status().ToString() << "\n";
    return 1;
  }
  std::cout << "schema: " << (*reader)->schema()->ToString() << "\n";

  int64_t batches = 0;
  while (true) {
    std::shared_ptr<arrow::RecordBatch> batch;
    if (auto st = (*reader)->ReadNext(&batch); !st.ok()) {
      std::cerr << "arrow_compute_consumer: " << st.ToString() << "\n";
      return 1;
    }
    if (batch == nullptr) break;  // every producer finished
    ++batches;
    std::cout << "batch " << batches << ": " << batch->num_rows() << " rows";
    for (int c = 0; c < batch->num_columns(); ++c) {
      if (!arrow::is_integer(batch->column(c)->type_id()) &&
          !arrow::is_floating(batch->column(c)->type_id())) {
        continue;
      }
      auto sum = arrow::compute::Sum(batch->column(c));
      if (!sum.ok()) {
        std::cerr << "arrow_compute_consumer: " << sum.status().ToString() << "\n";
        return 1;
      }
      std::cout << ", sum(" << batch->schema()->field(c)->name()
                << ") = " << sum->scalar()->ToString();
    }
    std::cout << "\n";
  }
  std::cout << batches << " batches\n";
  return 0;
}
