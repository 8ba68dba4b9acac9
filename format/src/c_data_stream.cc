// The Arrow C Stream Interface (c_data.h): export a stream of record batches
// from a "next batch" function, import one into a reader.

#include <cerrno>
#include <cstring>
#include <string>
#include <utility>

#include "alkaid/format/c_data.h"

namespace alkaid::format {
namespace {

struct ExportedStream {
  SchemaPtr schema;
  NextBatchFunction next;
  std::function<void()> on_release;  // copied into each exported batch
  std::string last_error;
};

ExportedStream* PrivateOf(ArrowArrayStream* stream) {
  return static_cast<ExportedStream*>(stream->private_data);
}

// errno-style code the interface asks for.
int ErrnoOf(const Status& st) {
  switch (st.code()) {
    case StatusCode::kOutOfMemory:
      return ENOMEM;
    case StatusCode::kInvalid:
    case StatusCode::kTypeError:
    case StatusCode::kIndexError:
    case StatusCode::kCapacityError:
      return EINVAL;
    case StatusCode::kNotImplemented:
      return ENOSYS;
    case StatusCode::kTimedOut:
      return ETIMEDOUT;
    case StatusCode::kCancelled:
      return ECANCELED;
    default:
      return EIO;
  }
}

int Fail(ArrowArrayStream* stream, const Status& st) {
  PrivateOf(stream)->last_error = st.ToString();
  return ErrnoOf(st);
}

int StreamGetSchema(ArrowArrayStream* stream, ArrowSchema* out) {
  Status st = ExportSchema(*PrivateOf(stream)->schema, out);
  return st.ok() ? 0 : Fail(stream, st);
}

int StreamGetNext(ArrowArrayStream* stream, ArrowArray* out) {
  ExportedStream* priv = PrivateOf(stream);
  Result<RecordBatchPtr> next = priv->next ? priv->next() : Result<RecordBatchPtr>(nullptr);
  if (!next.ok()) return Fail(stream, next.status());
  if (*next == nullptr) {
    *out = ArrowArray{};   // release == NULL: the end of the stream
    priv->next = nullptr;  // let go of what the function captured
    return 0;
  }
  const RecordBatch& batch = **next;
  if (!batch.schema()->Equals(*priv->schema)) {
    return Fail(stream, Status::Invalid("a batch's schema (", batch.schema()->ToString(false),
                                        ") differs from the stream's (",
                                        priv->schema->ToString(false), ")"));
  }
  Status st = ExportRecordBatch(*next, out, nullptr, priv->on_release);  // holds the batch
  return st.ok() ? 0 : Fail(stream, st);
}

const char* StreamGetLastError(ArrowArrayStream* stream) {
  const ExportedStream* priv = PrivateOf(stream);
  return priv->last_error.empty() ? nullptr : priv->last_error.c_str();
}

void StreamRelease(ArrowArrayStream* stream) {
  if (stream == nullptr || stream->release == nullptr) return;
  delete PrivateOf(stream);
  stream->release = nullptr;
  stream->private_data = nullptr;
}

}  // namespace

Status ExportRecordBatchStream(SchemaPtr schema, NextBatchFunction next, ArrowArrayStream* out) {
  return ExportRecordBatchStream(std::move(schema), std::move(next), out, nullptr);
}

Status ExportRecordBatchStream(SchemaPtr schema, NextBatchFunction next, ArrowArrayStream* out,
                               std::function<void()> on_release) {
  if (out == nullptr) return Status::Invalid("ExportRecordBatchStream: out is null");
  if (schema == nullptr) return Status::Invalid("ExportRecordBatchStream: schema is null");
  auto* priv = new ExportedStream{std::move(schema), std::move(next), std::move(on_release), {}};
  out->get_schema = &StreamGetSchema;
  out->get_next = &StreamGetNext;
  out->get_last_error = &StreamGetLastError;
  out->release = &StreamRelease;
  out->private_data = priv;
  return Status::OK();
}

Status ExportRecordBatchStream(SchemaPtr schema, std::vector<RecordBatchPtr> batches,
                               ArrowArrayStream* out) {
  auto state =
      std::make_shared<std::pair<std::vector<RecordBatchPtr>, size_t>>(std::move(batches), 0);
  NextBatchFunction next = [state]() -> Result<RecordBatchPtr> {
    auto& [list, pos] = *state;
    if (pos == list.size()) return RecordBatchPtr();
    return list[pos++];
  };
  return ExportRecordBatchStream(std::move(schema), std::move(next), out);
}

// --- Import ----------------------------------------------------------------

namespace {

Status StreamError(ArrowArrayStream* stream, int code, const char* what) {
  const char* message =
      stream->get_last_error != nullptr ? stream->get_last_error(stream) : nullptr;
  return Status::IOError("ArrowArrayStream ", what, " failed with errno ", code,
                         message != nullptr ? std::string(": ") + message : std::string());
}

}  // namespace

Result<std::unique_ptr<CStreamReader>> CStreamReader::Import(ArrowArrayStream* stream,
                                                             const CImportOptions& options) {
  if (stream == nullptr) return Status::Invalid("ArrowArrayStream pointer is null");
  if (stream->release == nullptr) return Status::Invalid("ArrowArrayStream is released already");
  std::unique_ptr<CStreamReader> reader(new CStreamReader());
  reader->stream_ = *stream;
  stream->release = nullptr;
  reader->options_ = options;
  ArrowArrayStream* s = &reader->stream_;
  if (s->get_schema == nullptr || s->get_next == nullptr) {
    return Status::Invalid("ArrowArrayStream has a null get_schema or get_next callback");
  }
  ArrowSchema c_schema{};
  const int rc = s->get_schema(s, &c_schema);
  if (rc != 0) return StreamError(s, rc, "get_schema");
  ALKAID_ASSIGN_OR_RAISE(reader->schema_, ImportSchema(&c_schema));
  return reader;
}

CStreamReader::~CStreamReader() {
  if (stream_.release != nullptr) stream_.release(&stream_);
}

Result<RecordBatchPtr> CStreamReader::Next() {
  if (finished_) return RecordBatchPtr();
  ArrowArray c_array{};
  const int rc = stream_.get_next(&stream_, &c_array);
  if (rc != 0) return StreamError(&stream_, rc, "get_next");
  if (c_array.release == nullptr) {
    finished_ = true;
    return RecordBatchPtr();
  }
  return ImportRecordBatch(&c_array, schema_, options_);
}

Result<std::vector<RecordBatchPtr>> CStreamReader::ReadAll() {
  std::vector<RecordBatchPtr> out;
  while (true) {
    ALKAID_ASSIGN_OR_RAISE(RecordBatchPtr b, Next());
    if (b == nullptr) return out;
    out.push_back(std::move(b));
  }
}

}  // namespace alkaid::format
