#pragma once

#include <nanobind/nanobind.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "alkaid/client/batch_publisher.h"
#include "alkaid/client/producer.h"
#include "alkaid/client/writer_cache.h"
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
             bool publish_timestamps, uint64_t fixed_block_bytes, uint32_t fixed_block_count);
  ~PyProducer();
  PyProducer(const PyProducer&) = delete;
  PyProducer& operator=(const PyProducer&) = delete;

  /// Publishes an object of the Arrow PyCapsule protocol; returns how many
  /// batches were published.
  uint64_t Publish(nb::handle obj);
  void Close();
  bool closed() const { return closed_.load(std::memory_order_acquire); }
  const std::string& topic() const { return topic_; }
  uint64_t fixed_block_bytes() const;
  uint32_t fixed_block_count() const;
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
  /// True if loans make their views through numpy's C API (py_numpy.h),
  /// as LoanColumns found.
  bool numpy_c_api() const { return numpy_c_api_; }

  /// With mutex() held: a writer of batches of `rows` rows with a region
  /// begun (Begin(Fill::kNone)): an idle one of those rows, or one made
  /// when client::WriterCache says so (rows that come back; at most eight
  /// writers, each taking a line of the channel's shape table for good);
  /// null when such batches go another way (every column must be numeric or
  /// temporal). Errors: a wait for space cut short or timed out.
  Result<std::unique_ptr<client::FixedShapeWriter>> TakeWriter(int64_t rows);
  /// With mutex() held: gives back a writer TakeWriter lent, after its
  /// publish (`begun`: its publish failed, and the region it holds serves
  /// the next batch); the oldest idle one goes beyond WriterCache::kMaxIdle.
  void KeepWriter(int64_t rows, std::unique_ptr<client::FixedShapeWriter> writer, bool begun);

 private:
  // True if `schema` describes exactly what the topic's schema exports to
  // (every format, name, flag and metadata byte): then it is the topic's
  // schema and need not be imported.
  bool IsTopicSchema(const ArrowSchema& schema) const;
  // Publishes `array` (of the topic's schema) through a FixedShapeWriter
  // when it lays out as a writer's (TakeWriter): its values copied straight
  // into a region and published with the metadata encoded once, no import,
  // no batch object. False (nothing done) for an array that does not
  // qualify; Cancelled (nothing done) when it would have to wait and `stop`
  // is requested. Holds mutex_.
  Result<bool> PublishSameLayout(const ArrowArray& array);
  // Publishes `*array` (moved from; released either way), a batch exported
  // as a struct array, with `schema` its schema when it is not the topic's
  // (imported with it and checked); without, it is the topic's. Returns 1.
  uint64_t PublishArray(ArrowArray* array, ArrowSchema* schema);
  // A pyarrow.RecordBatch (arrow_batch_type_) whose schema pyarrow finds
  // equal to arrow_schema_, exported without its schema
  // (RecordBatch._export_to_c_device) and published. False (nothing done,
  // no Python error set) when it does not qualify (another schema, data
  // off the CPU, an export that fails): the PyCapsule protocol then
  // publishes it or says what is wrong.
  bool PublishArrowBatch(nb::handle batch);
  // After a batch was published through the PyCapsule protocol with the
  // topic's schema: if it is a pyarrow.RecordBatch (the first one seen),
  // keeps its type and schema for PublishArrowBatch, when its pyarrow has
  // what that needs (the device export, pyarrow 16 and later).
  void LearnArrowBatch(nb::handle batch);

  std::mutex mutex_;
  std::atomic<bool> closed_{false};  // set by Close before it takes mutex_
  std::unique_ptr<client::Producer> producer_;
  std::string topic_;
  format::SchemaPtr schema_;
  ArrowSchema exported_schema_{};  // schema_, exported once, for IsTopicSchema
  std::vector<LoanColumn> loan_columns_;
  nb::object frombuffer_;
  bool numpy_c_api_ = false;
  // The writers' state, under mutex_. fixed_widths_: each column's byte
  // width if every column is numeric or temporal (empty: no writers).
  // writers_ (declared after producer_: destroyed before it): the idle
  // writers by row count, `begun` if the region a failed publish left
  // serves the next batch.
  struct IdleWriter {
    bool begun;
    std::unique_ptr<client::FixedShapeWriter> writer;
  };
  std::vector<int64_t> fixed_widths_;
  client::WriterCache<IdleWriter> writers_;
  // The pyarrow fast path (PublishArrowBatch), touched with the GIL held:
  // pyarrow's RecordBatch type and a pyarrow.Schema our own comparison
  // (IsTopicSchema) found to be the topic's; both unset until a
  // pyarrow.RecordBatch with the topic's schema was published the general
  // way (pyarrow is never imported here).
  // arrow_batch_probed_: LearnArrowBatch looked at a pyarrow.RecordBatch
  // (and so never looks again, even if it found no fast path).
  nb::object arrow_batch_type_;
  nb::object arrow_schema_;
  bool arrow_batch_probed_ = false;
  // What PublishSameLayout copied (stats(): arrow_copied, copied_bytes).
  uint64_t same_layout_published_ = 0;
  uint64_t same_layout_bytes_ = 0;
};

void BindProducer(nb::module_& m);

}  // namespace alkaid::python
