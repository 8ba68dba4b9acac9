#pragma once

// Helpers shared by the IPC tests: raw array construction and gold files.

#include <dirent.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "alkaid/format/ipc/io.h"
#include "alkaid/format/ipc/reader.h"
#include "alkaid/format/ipc/writer.h"
#include "alkaid/format/record_batch.h"

namespace alkaid::format::ipc::testing {

template <typename T>
std::shared_ptr<Buffer> Buf(const std::vector<T>& v) {
  auto r = Buffer::CopyOf(
      std::string_view(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T)));
  return *r;
}

inline ArrayDataPtr Int32s(const std::vector<int32_t>& v) {
  return ArrayData::Make(int32(), static_cast<int64_t>(v.size()), {nullptr, Buf(v)}, 0);
}

inline ArrayDataPtr Strings(const std::vector<std::string>& v) {
  std::vector<int32_t> offsets{0};
  std::string data;
  for (const auto& s : v) {
    data += s;
    offsets.push_back(static_cast<int32_t>(data.size()));
  }
  return ArrayData::Make(utf8(), static_cast<int64_t>(v.size()),
                         {nullptr, Buf(offsets), Buffer::FromString(data)}, 0);
}

inline ArrayDataPtr DictColumn(const std::vector<int32_t>& indices, ArrayDataPtr dict) {
  auto d = ArrayData::Make(dictionary(int32(), dict->type), static_cast<int64_t>(indices.size()),
                           {nullptr, Buf(indices)}, 0);
  d->dictionary = std::move(dict);
  return d;
}

inline std::vector<std::string> GoldCases() {
  std::vector<std::string> names;
  DIR* dir = opendir(ALKAID_GOLD_DIR);
  if (dir == nullptr) return names;
  while (dirent* e = readdir(dir)) {
    std::string n = e->d_name;
    const std::string suffix = ".stream";
    if (n.size() > suffix.size() &&
        n.compare(n.size() - suffix.size(), suffix.size(), suffix) == 0) {
      names.push_back(n.substr(0, n.size() - suffix.size()));
    }
  }
  closedir(dir);
  std::sort(names.begin(), names.end());
  return names;
}

inline std::string GoldPath(const std::string& name, const char* ext) {
  return std::string(ALKAID_GOLD_DIR) + "/" + name + ext;
}

inline Result<std::vector<RecordBatchPtr>> ReadStreamBuffer(std::shared_ptr<Buffer> data,
                                                            SchemaPtr* schema,
                                                            const IpcReadOptions& options = {}) {
  BufferReader reader(std::move(data));
  ALKAID_ASSIGN_OR_RAISE(auto r, RecordBatchStreamReader::Open(&reader, options));
  *schema = r->schema();
  return r->ReadAll();
}

inline Result<std::vector<RecordBatchPtr>> ReadFileBuffer(std::shared_ptr<Buffer> data,
                                                          SchemaPtr* schema,
                                                          const IpcReadOptions& options = {}) {
  ALKAID_ASSIGN_OR_RAISE(auto r, RecordBatchFileReader::Open(
                                     std::make_shared<BufferReader>(std::move(data)), options));
  *schema = r->schema();
  std::vector<RecordBatchPtr> out;
  for (int i = 0; i < r->num_record_batches(); ++i) {
    ALKAID_ASSIGN_OR_RAISE(auto b, r->ReadRecordBatch(i));
    out.push_back(std::move(b));
  }
  return out;
}

/// Writes `batches` as a stream (or file) into a buffer.
inline Result<std::shared_ptr<Buffer>> WriteBatches(const SchemaPtr& schema,
                                                    const std::vector<RecordBatchPtr>& batches,
                                                    const IpcWriteOptions& options, bool file,
                                                    WriteStats* stats = nullptr,
                                                    const DictionaryMemo* ids = nullptr) {
  ALKAID_ASSIGN_OR_RAISE(auto sink, BufferOutputStream::Create());
  std::unique_ptr<RecordBatchWriter> writer;
  if (file) {
    ALKAID_ASSIGN_OR_RAISE(writer, MakeFileWriter(sink.get(), schema, options, ids));
  } else {
    ALKAID_ASSIGN_OR_RAISE(writer, MakeStreamWriter(sink.get(), schema, options, ids));
  }
  for (const auto& b : batches) ALKAID_RETURN_NOT_OK(writer->WriteRecordBatch(*b));
  ALKAID_RETURN_NOT_OK(writer->Close());
  if (stats != nullptr) *stats = writer->stats();
  return sink->Finish();
}

}  // namespace alkaid::format::ipc::testing
