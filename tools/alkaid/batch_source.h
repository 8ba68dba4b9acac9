#pragma once

// Reading an IPC input one batch at a time, as it arrives, so that `alkaid
// publish` can publish each batch as soon as it is complete.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "alkaid/common/result.h"
#include "alkaid/format/ipc/reader.h"
#include "alkaid/format/record_batch.h"

namespace alkaid::tools {

/// The batches of one IPC input, in order.
///
/// A stream (current or legacy framing, from a file or stdin) is decoded
/// message by message as it is read: Open returns once the schema message
/// is read, Next once the next record batch (and the dictionary batches
/// before it) is complete. A file (IPC file format) needs its footer: from
/// a path it is memory-mapped; from stdin it is read whole before Open
/// returns. Files' batches point into the mapping.
class BatchSource {
 public:
  ~BatchSource();

  /// `path`: a file, or "-" for stdin. Invalid for an empty input or a bad
  /// schema message.
  static Result<std::unique_ptr<BatchSource>> Open(const std::string& path);

  const format::SchemaPtr& schema() const { return schema_; }

  /// The next batch; null at the end of the input (the end-of-stream
  /// marker, or the input ending between two messages). Invalid for an
  /// input that ends inside a message ("stream truncated: ...") or a bad
  /// message; what came before it was returned already.
  Result<format::RecordBatchPtr> Next();

  /// Batches Next has returned.
  int64_t batches_read() const { return batches_read_; }

  /// "stdin" or the path.
  const std::string& name() const { return name_; }

  /// Called about every 100 ms while Next waits for standard input to
  /// have data (a producer polls its channel meanwhile, so that consumers
  /// that register while the input is idle are accepted).
  void set_idle(std::function<void()> idle) { *idle_ = std::move(idle); }

 private:
  BatchSource() = default;

  std::string name_;
  format::SchemaPtr schema_;
  std::unique_ptr<format::ipc::RecordBatchStreamReader> stream_;
  std::shared_ptr<format::ipc::RecordBatchFileReader> file_;
  int64_t batches_read_ = 0;
  // Shared with the stdin wrapper, which may outlive nothing but us.
  std::shared_ptr<std::function<void()>> idle_ = std::make_shared<std::function<void()>>();
};

}  // namespace alkaid::tools
