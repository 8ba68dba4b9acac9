#include "input.h"

#include <cstring>

#include "alkaid/format/ipc/io.h"
#include "alkaid/format/ipc/reader.h"

namespace alkaid::tools {

namespace ipc = format::ipc;

namespace {

Result<std::shared_ptr<format::Buffer>> ReadAllStdin() {
  ALKAID_ASSIGN_OR_RAISE(auto in, ipc::FileInputStream::Stdin());
  ALKAID_ASSIGN_OR_RAISE(auto sink, ipc::BufferOutputStream::Create());
  std::vector<uint8_t> chunk(1 << 16);
  while (true) {
    ALKAID_ASSIGN_OR_RAISE(int64_t n, in->Read(static_cast<int64_t>(chunk.size()), chunk.data()));
    if (n == 0) break;
    ALKAID_RETURN_NOT_OK(sink->Write(chunk.data(), n));
  }
  return sink->Finish();
}

bool StartsWith(const format::Buffer& buf, std::string_view magic) {
  return buf.size() >= static_cast<int64_t>(magic.size()) &&
         std::memcmp(buf.data(), magic.data(), magic.size()) == 0;
}

Status ReadFile(const std::shared_ptr<ipc::RandomAccessFile>& source,
                const ipc::IpcReadOptions& options, IpcInput* out) {
  ALKAID_ASSIGN_OR_RAISE(auto reader, ipc::RecordBatchFileReader::Open(source, options));
  out->kind = InputKind::kFile;
  out->magic = reader->magic();
  out->schema = reader->schema();
  for (int i = 0; i < reader->num_record_batches(); ++i) {
    ALKAID_ASSIGN_OR_RAISE(auto batch, reader->ReadRecordBatch(i));
    out->batches.push_back(std::move(batch));
  }
  out->memo = reader->dictionary_memo();
  return Status::OK();
}

Status ReadStream(const std::shared_ptr<format::Buffer>& bytes, const ipc::IpcReadOptions& options,
                  IpcInput* out) {
  auto source = std::make_shared<ipc::BufferReader>(bytes);
  ALKAID_ASSIGN_OR_RAISE(auto reader, ipc::RecordBatchStreamReader::Open(source, options));
  out->schema = reader->schema();
  ALKAID_ASSIGN_OR_RAISE(out->batches, reader->ReadAll());
  out->memo = reader->dictionary_memo();
  out->num_replaced_dictionaries = reader->stats().num_replaced_dictionaries;
  out->num_dictionary_deltas = reader->stats().num_dictionary_deltas;
  return Status::OK();
}

}  // namespace

Result<IpcInput> ReadIpcInput(const std::string& path, const ipc::IpcReadOptions& options) {
  std::shared_ptr<format::Buffer> bytes;
  std::shared_ptr<ipc::RandomAccessFile> source;
  if (path == "-") {
    ALKAID_ASSIGN_OR_RAISE(bytes, ReadAllStdin());
    source = std::make_shared<ipc::BufferReader>(bytes);
  } else {
    ALKAID_ASSIGN_OR_RAISE(auto mapped, ipc::MemoryMappedFile::Open(path));
    bytes = mapped->buffer();
    source = std::move(mapped);
  }
  if (bytes->size() == 0) return Status::Invalid("the input is empty");

  IpcInput out;
  if (StartsWith(*bytes, "ALKAID1") || StartsWith(*bytes, "ARROW1")) {
    ALKAID_RETURN_NOT_OK(ReadFile(source, options, &out));
  } else {
    const bool continuation = StartsWith(*bytes, "\xFF\xFF\xFF\xFF");
    ALKAID_RETURN_NOT_OK(ReadStream(bytes, options, &out));
    out.kind = continuation ? InputKind::kStream : InputKind::kLegacyStream;
  }
  return out;
}

std::string DescribeInput(const IpcInput& input) {
  switch (input.kind) {
    case InputKind::kStream:
      return "stream";
    case InputKind::kLegacyStream:
      return "legacy stream";
    case InputKind::kFile:
      return input.magic == ipc::FileMagic::kArrow ? "file (ARROW1)" : "file (ALKAID1)";
  }
  return "?";
}

}  // namespace alkaid::tools
