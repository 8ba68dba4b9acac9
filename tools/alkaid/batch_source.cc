#include "batch_source.h"

#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <string_view>
#include <vector>

#include "alkaid/format/ipc/io.h"

namespace alkaid::tools {

namespace ipc = format::ipc;

namespace {

constexpr std::string_view kAlkaidMagic = "ALKAID1";
constexpr std::string_view kArrowMagic = "ARROW1";

bool IsFileMagic(const uint8_t* data, std::size_t size) {
  for (std::string_view magic : {kAlkaidMagic, kArrowMagic}) {
    if (size >= magic.size() && std::memcmp(data, magic.data(), magic.size()) == 0) return true;
  }
  return false;
}

// Standard input whose first bytes were read already, to tell a stream
// from a file: those bytes first, then the rest as it arrives.
class PrefixedInputStream : public ipc::InputStream {
 public:
  PrefixedInputStream(std::vector<uint8_t> prefix, std::shared_ptr<ipc::InputStream> rest)
      : prefix_(std::move(prefix)), rest_(std::move(rest)) {}

  Result<int64_t> Read(int64_t n, void* out) override {
    if (n < 0) return Status::IndexError("read of negative length ", n);
    auto* p = static_cast<uint8_t*>(out);
    int64_t got = TakePrefix(n, p);
    if (got < n) {
      ALKAID_ASSIGN_OR_RAISE(int64_t from_rest, rest_->Read(n - got, p + got));
      got += from_rest;
    }
    position_ += got;
    return got;
  }

  Result<std::shared_ptr<format::Buffer>> Read(int64_t n) override {
    if (n < 0) return Status::IndexError("read of negative length ", n);
    if (offset_ == prefix_.size()) {
      // The source grows its buffer as data arrives, so a hostile length
      // never allocates much more than what is there.
      ALKAID_ASSIGN_OR_RAISE(auto buffer, rest_->Read(n));
      position_ += buffer->size();
      return buffer;
    }
    uint8_t head[16];
    const int64_t from_prefix = TakePrefix(std::min<int64_t>(n, sizeof(head)), head);
    ALKAID_ASSIGN_OR_RAISE(auto tail, rest_->Read(n - from_prefix));
    ALKAID_ASSIGN_OR_RAISE(auto buffer, format::AllocateBuffer(from_prefix + tail->size()));
    std::memcpy(buffer->mutable_data(), head, static_cast<std::size_t>(from_prefix));
    if (tail->size() > 0) {
      std::memcpy(buffer->mutable_data() + from_prefix, tail->data(),
                  static_cast<std::size_t>(tail->size()));
    }
    position_ += buffer->size();
    return std::shared_ptr<format::Buffer>(std::move(buffer));
  }

  Result<int64_t> Tell() const override { return position_; }
  Status Close() override { return rest_->Close(); }

 private:
  int64_t TakePrefix(int64_t n, uint8_t* out) {
    const auto k = static_cast<std::size_t>(
        std::min<int64_t>(n, static_cast<int64_t>(prefix_.size() - offset_)));
    if (k > 0) std::memcpy(out, prefix_.data() + offset_, k);
    offset_ += k;
    return static_cast<int64_t>(k);
  }

  std::vector<uint8_t> prefix_;
  std::size_t offset_ = 0;
  std::shared_ptr<ipc::InputStream> rest_;
  int64_t position_ = 0;
};

// Standard input that, while no byte is there to read, calls `idle` about
// every 100 ms.
class IdleAwareStdin : public ipc::InputStream {
 public:
  IdleAwareStdin(std::shared_ptr<ipc::InputStream> in, std::shared_ptr<std::function<void()>> idle)
      : in_(std::move(in)), idle_(std::move(idle)) {}

  Result<int64_t> Read(int64_t n, void* out) override {
    WaitReadable();
    return in_->Read(n, out);
  }
  Result<std::shared_ptr<format::Buffer>> Read(int64_t n) override {
    WaitReadable();
    return in_->Read(n);
  }
  Result<int64_t> Tell() const override { return in_->Tell(); }
  Status Close() override { return in_->Close(); }

 private:
  void WaitReadable() {
    while (true) {
      pollfd pfd{STDIN_FILENO, POLLIN, 0};
      const int ready = ::poll(&pfd, 1, 100);
      if (ready != 0) return;  // data, end of input or an error: the read says which
      if (*idle_) (*idle_)();
    }
  }

  std::shared_ptr<ipc::InputStream> in_;
  std::shared_ptr<std::function<void()>> idle_;
};

// All of `in`, after `prefix`.
Result<std::shared_ptr<format::Buffer>> ReadAll(const std::vector<uint8_t>& prefix,
                                                ipc::InputStream* in) {
  ALKAID_ASSIGN_OR_RAISE(auto sink, ipc::BufferOutputStream::Create());
  ALKAID_RETURN_NOT_OK(sink->Write(prefix.data(), static_cast<int64_t>(prefix.size())));
  std::vector<uint8_t> chunk(1 << 16);
  while (true) {
    ALKAID_ASSIGN_OR_RAISE(int64_t n, in->Read(static_cast<int64_t>(chunk.size()), chunk.data()));
    if (n == 0) break;
    ALKAID_RETURN_NOT_OK(sink->Write(chunk.data(), n));
  }
  return sink->Finish();
}

}  // namespace

BatchSource::~BatchSource() = default;

Result<std::unique_ptr<BatchSource>> BatchSource::Open(const std::string& path) {
  std::unique_ptr<BatchSource> source(new BatchSource());
  source->name_ = path == "-" ? "stdin" : path;
  std::shared_ptr<ipc::RandomAccessFile> whole;  // a file's bytes, for the file reader
  if (path == "-") {
    ALKAID_ASSIGN_OR_RAISE(auto in, ipc::FileInputStream::Stdin());
    // Enough to see either file magic; a stream's first message is longer.
    std::vector<uint8_t> prefix(8);
    ALKAID_ASSIGN_OR_RAISE(int64_t got,
                           in->Read(static_cast<int64_t>(prefix.size()), prefix.data()));
    prefix.resize(static_cast<std::size_t>(got));
    if (prefix.empty()) return Status::Invalid("stdin: the input is empty");
    if (IsFileMagic(prefix.data(), prefix.size())) {
      ALKAID_ASSIGN_OR_RAISE(auto bytes, ReadAll(prefix, in.get()));
      whole = std::make_shared<ipc::BufferReader>(std::move(bytes));
    } else {
      auto waiting = std::make_shared<IdleAwareStdin>(std::move(in), source->idle_);
      auto stream = std::make_shared<PrefixedInputStream>(std::move(prefix), std::move(waiting));
      auto reader = ipc::RecordBatchStreamReader::Open(std::move(stream));
      if (!reader.ok()) return reader.status().WithContext("stdin");
      source->stream_ = std::move(*reader);
    }
  } else {
    ALKAID_ASSIGN_OR_RAISE(auto mapped, ipc::MemoryMappedFile::Open(path));
    const auto& bytes = mapped->buffer();
    if (bytes->size() == 0) return Status::Invalid(path, ": the input is empty");
    if (IsFileMagic(bytes->data(), static_cast<std::size_t>(bytes->size()))) {
      whole = std::move(mapped);
    } else {
      auto reader = ipc::RecordBatchStreamReader::Open(std::make_shared<ipc::BufferReader>(bytes));
      if (!reader.ok()) return reader.status().WithContext(path);
      source->stream_ = std::move(*reader);
    }
  }
  if (whole != nullptr) {
    auto reader = ipc::RecordBatchFileReader::Open(std::move(whole));
    if (!reader.ok()) return reader.status().WithContext(source->name_);
    source->file_ = std::move(*reader);
    source->schema_ = source->file_->schema();
  } else {
    source->schema_ = source->stream_->schema();
  }
  return source;
}

Result<format::RecordBatchPtr> BatchSource::Next() {
  format::RecordBatchPtr batch;
  if (file_ != nullptr) {
    if (batches_read_ >= file_->num_record_batches()) return batch;
    auto read = file_->ReadRecordBatch(static_cast<int>(batches_read_));
    if (!read.ok()) return read.status().WithContext(name_);
    batch = std::move(*read);
  } else {
    auto read = stream_->ReadNext();
    if (!read.ok()) return read.status().WithContext(name_);
    batch = std::move(*read);
  }
  if (batch != nullptr) ++batches_read_;
  return batch;
}

}  // namespace alkaid::tools
