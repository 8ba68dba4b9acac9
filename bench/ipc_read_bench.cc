// What an IPC stream reader pays per record batch Message of a shape it has
// read before (format::ipc::MessagePlan): a StreamDecoder is fed N framed
// Messages of the 10-column batch of ten_column_batch.h (zero-copy, one
// buffer per Message) and drops each batch at once. With --vary the eight
// Messages it cycles through have 0..7 rows more than --rows (the numbers
// differ: a varying plan); without, all N are one Message (an exact plan).
// With --reader, a RecordBatchStreamReader reads the same Messages from an
// in-memory InputStream (zero-copy slices) instead.
//
//   alkaid_ipc_read_bench N [--vary] [--reader] [--rows R]     (R: 1000)
//   valgrind --tool=callgrind --callgrind-out-file=cg.N.out alkaid_ipc_read_bench N
//   instructions per batch: (Ir at N = 30,000 - Ir at N = 10,000) / 20,000
//
// Prints the batches decoded and, where the library counts them, how many
// a plan made.

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "alkaid/format/ipc/io.h"
#include "alkaid/format/ipc/reader.h"
#include "alkaid/format/ipc/writer.h"
#include "ten_column_batch.h"

namespace af = alkaid::format;
namespace ipc = alkaid::format::ipc;

namespace {

class DropListener : public ipc::StreamListener {
 public:
  alkaid::Status OnRecordBatch(af::RecordBatchPtr) override {
    ++batches;
    return alkaid::Status::OK();
  }
  int64_t batches = 0;
};

std::shared_ptr<af::Buffer> Framed(const ipc::IpcPayload& payload) {
  auto sink = ipc::BufferOutputStream::Create().ValueOrDie();
  (void)ipc::WriteIpcPayload(payload, ipc::IpcWriteOptions{}, sink.get()).ValueOrDie();
  return sink->Finish().ValueOrDie();
}

// The planned count where ReadStats has one (a reader before plans has none).
template <typename Stats>
int64_t Planned(const Stats& s) {
  if constexpr (requires { s.num_planned_record_batches; }) {
    return s.num_planned_record_batches;
  } else {
    return -1;
  }
}

// The schema Message, then `n` of `messages` in turn, as one stream read
// in zero-copy slices (each read lies inside one Message: ReadMessage reads
// a prefix, a length, the metadata and the body).
class CyclingStream : public ipc::InputStream {
 public:
  CyclingStream(std::shared_ptr<af::Buffer> schema,
                const std::vector<std::shared_ptr<af::Buffer>>* messages, long n)
      : schema_(std::move(schema)), messages_(messages), left_(n), current_(schema_) {}

  alkaid::Result<int64_t> Read(int64_t n, void* out) override {
    ALKAID_ASSIGN_OR_RAISE(auto b, Read(n));
    if (b->size() > 0) std::memcpy(out, b->data(), static_cast<size_t>(b->size()));
    return b->size();
  }
  alkaid::Result<std::shared_ptr<af::Buffer>> Read(int64_t n) override {
    if (current_ != nullptr && offset_ == current_->size()) Advance();
    static const uint8_t kNone[8] = {};
    if (current_ == nullptr) return std::make_shared<af::Buffer>(kNone, 0);
    if (n > current_->size() - offset_) {
      return alkaid::Status::Invalid("a read across two Messages");
    }
    auto out = af::SliceBuffer(current_, offset_, n);
    offset_ += n;
    tell_ += n;
    return out;
  }
  alkaid::Result<int64_t> Tell() const override { return tell_; }
  alkaid::Status Close() override { return alkaid::Status::OK(); }

 private:
  void Advance() {
    offset_ = 0;
    if (left_ == 0) {
      current_ = nullptr;
      return;
    }
    current_ = (*messages_)[next_++ % messages_->size()];
    --left_;
  }

  std::shared_ptr<af::Buffer> schema_;
  const std::vector<std::shared_ptr<af::Buffer>>* messages_;
  long left_;
  size_t next_ = 0;
  std::shared_ptr<af::Buffer> current_;
  int64_t offset_ = 0;
  int64_t tell_ = 0;
};

int ReadWithReader(const std::shared_ptr<af::Buffer>& schema_message,
                   const std::vector<std::shared_ptr<af::Buffer>>& messages, long n) {
  CyclingStream stream(schema_message, &messages, n);
  auto reader = ipc::RecordBatchStreamReader::Open(&stream).ValueOrDie();
  int64_t batches = 0;
  while (true) {
    auto next = reader->ReadNext();
    if (!next.ok()) {
      std::fprintf(stderr, "%s\n", next.status().ToString().c_str());
      return 1;
    }
    if (*next == nullptr) break;
    ++batches;
  }
  std::printf("batches %lld planned %lld (reader)\n", static_cast<long long>(batches),
              static_cast<long long>(Planned(reader->stats())));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s N [--vary] [--reader] [--rows R]\n", argv[0]);
    return 2;
  }
  const long n = std::atol(argv[1]);
  bool vary = false;
  bool with_reader = false;
  int64_t rows = 1000;
  for (int i = 2; i < argc; ++i) {
    if (std::strcmp(argv[i], "--vary") == 0) {
      vary = true;
    } else if (std::strcmp(argv[i], "--reader") == 0) {
      with_reader = true;
    } else if (std::strcmp(argv[i], "--rows") == 0 && i + 1 < argc) {
      rows = std::atol(argv[++i]);
    } else {
      std::fprintf(stderr, "unknown argument %s\n", argv[i]);
      return 2;
    }
  }
  const auto first = alkaid::bench::TenColumnBatch(rows);
  ipc::DictionaryMemo ids;
  const auto schema_message = Framed(ipc::GetSchemaPayload(*first->schema(), ids).ValueOrDie());
  std::vector<std::shared_ptr<af::Buffer>> messages;
  for (int k = 0; k < 8; ++k) {
    const auto batch = alkaid::bench::TenColumnBatch(vary ? rows + k : rows);
    messages.push_back(Framed(ipc::GetRecordBatchPayload(*batch).ValueOrDie()));
  }
  if (with_reader) return ReadWithReader(schema_message, messages, n);
  auto listener = std::make_shared<DropListener>();
  ipc::StreamDecoder decoder(listener);
  if (!decoder.Consume(schema_message).ok()) return 1;
  for (long i = 0; i < n; ++i) {
    const auto st = decoder.Consume(messages[static_cast<size_t>(i % 8)]);
    if (!st.ok()) {
      std::fprintf(stderr, "%s\n", st.ToString().c_str());
      return 1;
    }
  }
  std::printf("batches %lld planned %lld\n", static_cast<long long>(listener->batches),
              static_cast<long long>(Planned(decoder.stats())));
  return 0;
}
