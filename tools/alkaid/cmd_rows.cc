// alkaid rows encode | decode: IPC data <-> UnsafeRow batch files
// (docs/UNSAFE_ROW.md, "The row batch file").

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>
#include <string>

#include "alkaid/format/unsafe_row.h"
#include "commands.h"
#include "input.h"
#include "output.h"

namespace alkaid::tools {

namespace {

Result<std::string> ReadAll(const std::string& path) {
  if (path == "-") {
    std::ostringstream os;
    os << std::cin.rdbuf();
    if (std::cin.bad()) return Status::IOError("cannot read stdin");
    return os.str();
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::FromErrno(errno, "cannot open " + path);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) return Status::IOError("cannot read ", path);
  return bytes;
}

Status WriteAll(const std::string& path, std::string_view bytes) {
  if (path == "-") {
    std::cout.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    std::cout.flush();
    return std::cout.good() ? Status::OK() : Status::IOError("cannot write stdout");
  }
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return Status::FromErrno(errno, "cannot create " + path);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out.close();
  return out.good() ? Status::OK() : Status::IOError("cannot write ", path);
}

}  // namespace

int RunRowsEncode(const RowsOptions& options) {
  // Encoding reads every value: full validation first.
  format::ipc::IpcReadOptions read_options;
  read_options.validate_full = true;
  auto input = ReadIpcInput(options.input, read_options);
  if (!input.ok()) return ReportError("rows encode", input.status());
  Status st = format::CheckRowSchema(*input->schema);
  if (!st.ok()) return ReportError("rows encode", st);
  std::string out;
  for (size_t b = 0; b < input->batches.size(); ++b) {
    auto rows = format::EncodeRowBatch(*input->batches[b]);
    if (!rows.ok()) {
      return ReportError("rows encode", rows.status().WithContext("batch " + std::to_string(b)));
    }
    out.append((*rows)->view());
  }
  st = WriteAll(options.output, out);
  if (!st.ok()) return ReportError("rows encode", st);
  return kExitOk;
}

int RunRowsDecode(const RowsOptions& options) {
  auto schema_input = ReadIpcInput(options.schema_from, {});
  if (!schema_input.ok()) return ReportError("rows decode", schema_input.status());
  const format::SchemaPtr& schema = schema_input->schema;
  auto out_schema = format::RowOutputSchema(*schema);
  if (!out_schema.ok()) return ReportError("rows decode", out_schema.status());
  auto bytes = ReadAll(options.input);
  if (!bytes.ok()) return ReportError("rows decode", bytes.status());
  auto rows = format::SplitRowBatch(*bytes);
  if (!rows.ok()) return ReportError("rows decode", rows.status());

  std::vector<format::RecordBatchPtr> batches;
  const size_t per_batch = static_cast<size_t>(options.batch_rows);
  for (size_t start = 0; start < rows->size(); start += per_batch) {
    const size_t end = std::min(rows->size(), start + per_batch);
    std::vector<std::string_view> chunk(rows->begin() + static_cast<std::ptrdiff_t>(start),
                                        rows->begin() + static_cast<std::ptrdiff_t>(end));
    std::vector<int64_t> bases;
    bases.reserve(chunk.size());
    for (const auto& r : chunk) bases.push_back(r.data() - bytes->data());
    auto batch = format::DecodeRows(chunk, schema, format::default_memory_pool(), &bases);
    if (!batch.ok()) {
      // Rows are numbered within the chunk; say where the chunk starts.
      return ReportError("rows decode",
                         batch.status().WithContext("rows from " + std::to_string(start)));
    }
    batches.push_back(*batch);
  }
  Status st = WriteIpc(options.output, WriteChoice{}, *out_schema, batches, nullptr);
  if (!st.ok()) return ReportError("rows decode", st);
  return kExitOk;
}

}  // namespace alkaid::tools
