#pragma once

#include <nanobind/nanobind.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "alkaid/client/producer.h"
#include "alkaid/format/c_data.h"

namespace alkaid::python {

namespace nb = nanobind;

/// alkaid.Producer (py_producer.cc has the docstrings). Used from one
/// thread at a time (the C++ producer's rule); a mutex taken with the GIL
/// released enforces it.
class PyProducer {
 public:
  PyProducer(const std::string& topic, nb::handle schema, const std::optional<std::string>& socket,
             uint32_t slot_count, uint64_t arena_bytes, const std::string& policy,
             double publish_timeout, double wait_for_consumers, double drain_timeout,
             std::optional<uint32_t> ring_slots, std::optional<uint64_t> segment_bytes,
             bool publish_timestamps);
  ~PyProducer();
  PyProducer(const PyProducer&) = delete;
  PyProducer& operator=(const PyProducer&) = delete;

  /// Publishes an object of the Arrow PyCapsule protocol; returns how many
  /// batches were published.
  uint64_t Publish(nb::handle obj);
  void Close();
  bool closed() const { return closed_.load(std::memory_order_acquire); }
  const std::string& topic() const { return topic_; }
  format::SchemaPtr schema() const { return schema_; }
  nb::dict Stats();

  /// For Loan, with `mutex()` held: the producer, null once closed.
  client::Producer* Get() { return producer_.get(); }
  /// InvalidError "the producer of topic ... is closed".
  Status ClosedStatus() const;
  std::mutex& mutex() { return mutex_; }

  /// What a loan needs of each column, worked out once per producer by the
  /// first loan: its numpy dtype, byte width and name (an interned str).
  struct LoanColumn {
    nb::object dtype;
    nb::object name;
    int64_t width = 0;
  };
  /// The loan columns (TypeError, as InvalidError, if the schema has a
  /// column a loan cannot lend), and numpy.frombuffer. Needs the GIL.
  const std::vector<LoanColumn>& LoanColumns();
  nb::handle frombuffer() const { return frombuffer_; }

 private:
  // True if `schema` describes exactly what the topic's schema exports to
  // (every format, name, flag and metadata byte): then it is the topic's
  // schema and need not be imported.
  bool IsTopicSchema(const ArrowSchema& schema) const;

  std::mutex mutex_;
  std::atomic<bool> closed_{false};  // set by Close before it takes mutex_
  std::unique_ptr<client::Producer> producer_;
  std::string topic_;
  format::SchemaPtr schema_;
  ArrowSchema exported_schema_{};  // schema_, exported once, for IsTopicSchema
  std::vector<LoanColumn> loan_columns_;
  nb::object frombuffer_;
};

void BindProducer(nb::module_& m);

}  // namespace alkaid::python
