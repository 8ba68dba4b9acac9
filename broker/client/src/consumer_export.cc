// A Consumer's batches handed to foreign code through the Arrow C Data and
// C Stream Interfaces (Consumer::ExportBatch, Consumer::ExportStream), each
// counted by the consumer's ExportCounter (export_counter_internal.h).

#include <algorithm>
#include <chrono>
#include <memory>
#include <utility>

#include "alkaid/client/consumer.h"
#include "alkaid/format/c_data.h"
#include "export_counter_internal.h"

namespace alkaid::client {

using Clock = std::chrono::steady_clock;

Status internal::ExportCounter::Hold(const char* what) {
  const uint64_t before = held.fetch_add(1, std::memory_order_relaxed);
  if (max_held != 0 && before >= max_held) {
    held.fetch_sub(1, std::memory_order_relaxed);
    refused.fetch_add(1, std::memory_order_relaxed);
    return Status::CapacityError(what, ": ", max_held,
                                 " exported batches are held already (the foreign side has not "
                                 "released them; ConsumerOptions::max_exported_batches)");
  }
  refs.fetch_add(1, std::memory_order_relaxed);
  return Status::OK();
}

namespace {

// Consumer::ExportBatch's two overloads: `owner` (may be null) is the
// batch's pointer, held by the export instead of the columns.
Status ExportCounted(internal::ExportCounter* exports, const format::RecordBatch& batch,
                     const format::RecordBatchPtr* owner, ArrowArray* out,
                     ArrowSchema* out_schema) {
  if (out == nullptr) return Status::Invalid("Consumer::ExportBatch: null ArrowArray");
  // Given back when the foreign side releases the struct (on its thread,
  // also after this consumer is gone: the export holds the counter).
  ALKAID_RETURN_NOT_OK(exports->Hold("Consumer::ExportBatch"));
  auto counted = [exports] { exports->Drop(); };
  Status st = owner != nullptr ? format::ExportRecordBatch(*owner, out, out_schema, counted)
                               : format::ExportRecordBatch(batch, out, out_schema, counted);
  if (!st.ok()) {
    counted();  // not exported: its notice never runs
    return st;
  }
  exports->total.fetch_add(1, std::memory_order_relaxed);
  return Status::OK();
}

}  // namespace

Status Consumer::ExportBatch(const format::RecordBatch& batch, ArrowArray* out,
                             ArrowSchema* out_schema) {
  return ExportCounted(internal::ExportsOf(*impl_).get(), batch, nullptr, out, out_schema);
}

Status Consumer::ExportBatch(const format::RecordBatchPtr& batch, ArrowArray* out,
                             ArrowSchema* out_schema) {
  if (batch == nullptr) return Status::Invalid("Consumer::ExportBatch: the batch is null");
  return ExportCounted(internal::ExportsOf(*impl_).get(), *batch, &batch, out, out_schema);
}

namespace {

// The stream Consumer::ExportStream hands out: the format library's stream
// over Consumer::Next (`inner`), each array's release counted by the
// stream's release notice (a plain pointer to the counter, which each
// exported batch holds a reference on: no allocation per batch).
struct ConsumerStream {
  ArrowArrayStream inner{};
  std::shared_ptr<internal::ExportCounter> exports;
  std::unique_ptr<Consumer> owned;  // the static overload's
  // Set by the next function when it holds a place for the batch it returns.
  bool held = false;

  static ConsumerStream* Of(ArrowArrayStream* stream) {
    return static_cast<ConsumerStream*>(stream->private_data);
  }
  static int GetSchema(ArrowArrayStream* stream, ArrowSchema* out) {
    ConsumerStream* s = Of(stream);
    return s->inner.get_schema(&s->inner, out);
  }
  static int GetNext(ArrowArrayStream* stream, ArrowArray* out) {
    ConsumerStream* s = Of(stream);
    int rc = s->inner.get_next(&s->inner, out);
    if (!std::exchange(s->held, false)) return rc;
    if (rc != 0 || out->release == nullptr) {
      // The batch was refused (its schema, or its export failed: no
      // memory) and dropped: its release notice never runs.
      s->exports->Drop();
    } else {
      s->exports->total.fetch_add(1, std::memory_order_relaxed);
    }
    return rc;
  }
  static const char* GetLastError(ArrowArrayStream* stream) {
    ConsumerStream* s = Of(stream);
    return s->inner.get_last_error(&s->inner);
  }
  static void Release(ArrowArrayStream* stream) {
    ConsumerStream* s = Of(stream);
    s->inner.release(&s->inner);  // drops the next function first: it refers to the consumer
    delete s;
    stream->release = nullptr;
  }
};

// The next batch for the stream: waits per `timeout` in slices, so that a
// wait without limit needs no deadline arithmetic, and a stop is seen
// between two (every 5 ms when a stop is possible).
Result<format::RecordBatchPtr> NextForStream(Consumer* consumer, ConsumerStream* stream,
                                             std::chrono::nanoseconds timeout,
                                             const std::stop_token& stop) {
  // Dropped by the exported batch's notice, or below if there is none.
  ALKAID_RETURN_NOT_OK(stream->exports->Hold("Consumer stream get_next"));
  const bool forever = timeout == std::chrono::nanoseconds::max();
  const auto deadline = forever ? Clock::time_point::max() : Clock::now() + timeout;
  const std::chrono::nanoseconds longest =
      stop.stop_possible() ? std::chrono::milliseconds(5) : std::chrono::seconds(1);
  while (true) {
    if (stop.stop_requested()) {
      stream->exports->Drop();
      return Status::Cancelled("topic '", consumer->topic(), "': the stream was cancelled");
    }
    const auto slice =
        forever ? longest
                : std::clamp<std::chrono::nanoseconds>(deadline - Clock::now(), {}, longest);
    auto batch = consumer->Next(slice);
    if (batch.ok()) {
      stream->held = true;
      return batch;
    }
    if (batch.status().IsTimedOut() && (forever || Clock::now() < deadline)) continue;
    stream->exports->Drop();
    if (batch.status().code() == StatusCode::kEndOfStream) return format::RecordBatchPtr();
    return batch.status();
  }
}

Status MakeConsumerStream(Consumer* consumer, std::unique_ptr<Consumer> owned,
                          std::shared_ptr<internal::ExportCounter> exports,
                          const StreamExportOptions& options, ArrowArrayStream* out) {
  if (out == nullptr) return Status::Invalid("Consumer::ExportStream: null ArrowArrayStream");
  auto state = std::make_unique<ConsumerStream>();
  state->exports = std::move(exports);
  ConsumerStream* raw = state.get();
  const auto timeout = options.batch_timeout;
  internal::ExportCounter* counter = state->exports.get();
  ALKAID_RETURN_NOT_OK(format::ExportRecordBatchStream(
      consumer->schema(),
      [consumer, raw, timeout, stop = options.stop]() {
        return NextForStream(consumer, raw, timeout, stop);
      },
      &state->inner, [counter] { counter->Drop(); }));
  state->owned = std::move(owned);
  out->get_schema = ConsumerStream::GetSchema;
  out->get_next = ConsumerStream::GetNext;
  out->get_last_error = ConsumerStream::GetLastError;
  out->release = ConsumerStream::Release;
  out->private_data = state.release();
  return Status::OK();
}

}  // namespace

Status Consumer::ExportStream(ArrowArrayStream* out, const StreamExportOptions& options) {
  return MakeConsumerStream(this, nullptr, internal::ExportsOf(*impl_), options, out);
}

Status Consumer::ExportStream(std::unique_ptr<Consumer> consumer, ArrowArrayStream* out,
                              const StreamExportOptions& options) {
  if (consumer == nullptr) return Status::Invalid("Consumer::ExportStream: null consumer");
  Consumer* raw = consumer.get();
  auto exports = internal::ExportsOf(*raw->impl_);
  return MakeConsumerStream(raw, std::move(consumer), std::move(exports), options, out);
}

}  // namespace alkaid::client
