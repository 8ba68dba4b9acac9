// alkaid cat | schema | validate | convert

#include <iostream>
#include <sstream>

#include "alkaid/format/ipc/writer.h"
#include "alkaid/format/pretty_print.h"
#include "alkaid/format/validate.h"
#include "commands.h"
#include "input.h"
#include "output.h"

namespace alkaid::tools {

namespace ipc = format::ipc;
using format::DataType;
using format::Field;
using format::FieldPtr;
using format::TypeId;

int ReportError(const char* command, const Status& status) {
  std::cerr << "alkaid " << command << ": " << status.message() << "\n";
  switch (status.code()) {
    case StatusCode::kIOError:
    case StatusCode::kPermissionDenied:
    case StatusCode::kOutOfMemory:
      return kExitUsage;
    default:
      return kExitFailure;
  }
}

ipc::IpcWriteOptions MakeWriteOptions(const WriteChoice& choice) {
  ipc::IpcWriteOptions options;
  if (choice.compression == "lz4") options.compression = ipc::CompressionType::kLz4Frame;
  if (choice.compression == "zstd") options.compression = ipc::CompressionType::kZstd;
  if (choice.magic == "arrow") {
    options.magic = ipc::FileMagic::kArrow;
    // Arrow tools recognise extension types under their own namespace.
    options.extension_metadata_namespace = "ARROW";
  }
  return options;
}

Status WriteIpc(const std::string& path, const WriteChoice& choice, const format::SchemaPtr& schema,
                const std::vector<format::RecordBatchPtr>& batches,
                const ipc::DictionaryMemo* ids) {
  std::shared_ptr<ipc::FileOutputStream> sink;
  if (path == "-") {
    ALKAID_ASSIGN_OR_RAISE(sink, ipc::FileOutputStream::FromDescriptor(1));
  } else {
    ALKAID_ASSIGN_OR_RAISE(sink, ipc::FileOutputStream::Open(path));
  }
  const auto options = MakeWriteOptions(choice);
  std::unique_ptr<ipc::RecordBatchWriter> writer;
  if (choice.to == "file") {
    ALKAID_ASSIGN_OR_RAISE(writer, ipc::MakeFileWriter(sink.get(), schema, options, ids));
  } else {
    ALKAID_ASSIGN_OR_RAISE(writer, ipc::MakeStreamWriter(sink.get(), schema, options, ids));
  }
  for (size_t i = 0; i < batches.size(); ++i) {
    ALKAID_RETURN_NOT_OK_CTX(writer->WriteRecordBatch(*batches[i]), "writing batch " << i);
  }
  ALKAID_RETURN_NOT_OK(writer->Close());
  return sink->Close();
}

namespace {

void PrintMetadata(std::ostream& os, const format::MetadataPtr& md, int indent) {
  if (md == nullptr || md->empty()) return;
  for (size_t i = 0; i < md->size(); ++i) {
    os << std::string(static_cast<size_t>(indent), ' ') << "metadata: '" << md->key(i) << "' = '"
       << md->value(i) << "'\n";
  }
}

// Prints a field and its children; `path` locates it for the dictionary ids.
void PrintField(std::ostream& os, const Field& field, const ipc::DictionaryMemo& memo,
                std::vector<int>* path, int indent) {
  os << std::string(static_cast<size_t>(indent), ' ') << field.name() << ": "
     << field.type()->ToString();
  if (!field.nullable()) os << " not null";
  const DataType* type = field.type().get();
  if (type->id() == TypeId::kDictionary) {
    auto id = memo.GetId(*path);
    if (id.ok()) os << "  (dictionary id " << *id << ")";
    type = static_cast<const format::DictionaryType&>(*type).value_type().get();
  }
  os << "\n";
  PrintMetadata(os, field.metadata(), indent + 2);
  for (int i = 0; i < type->num_fields(); ++i) {
    path->push_back(i);
    PrintField(os, *type->field(i), memo, path, indent + 2);
    path->pop_back();
  }
}

std::string FormatSchema(const IpcInput& input) {
  std::ostringstream os;
  std::vector<int> path;
  for (int i = 0; i < input.schema->num_fields(); ++i) {
    path = {i};
    PrintField(os, *input.schema->field(i), input.memo, &path, 0);
  }
  const auto& md = input.schema->metadata();
  if (md != nullptr && !md->empty()) {
    os << "schema metadata:\n";
    PrintMetadata(os, md, 2);
  }
  return os.str();
}

}  // namespace

// Data that reads safely but is not valid in full (decimal values beyond
// their precision, which older Arrow versions wrote) is printed or
// converted as it is, with a warning per batch on stderr; `alkaid validate`
// reports it as invalid.
void WarnUnlessFullyValid(const char* command, const IpcInput& input) {
  for (size_t b = 0; b < input.batches.size(); ++b) {
    const Status st = format::ValidateFull(*input.batches[b]);
    if (!st.ok()) {
      std::cerr << "alkaid " << command << ": warning: batch " << b << ": " << st.message()
                << " (used as it is; alkaid validate reports it)\n";
    }
  }
}

int RunSchema(const std::string& path) {
  auto input = ReadIpcInput(path, {});
  if (!input.ok()) return ReportError("schema", input.status());
  WarnUnlessFullyValid("schema", *input);
  std::cout << FormatSchema(*input);
  return kExitOk;
}

int RunCat(const CatOptions& options) {
  // Printing reads every value with unchecked accessors: the batches must
  // pass full validation first (a corrupted offset would read out of bounds).
  // Decimal values beyond their precision are safe to print: warned about.
  ipc::IpcReadOptions read_options;
  read_options.validate_full = true;
  read_options.validate_decimal_precision = false;
  auto input = ReadIpcInput(options.input, read_options);
  if (!input.ok()) return ReportError("cat", input.status());
  WarnUnlessFullyValid("cat", *input);
  std::cout << "-- " << DescribeInput(*input) << ", " << input->batches.size() << " batch"
            << (input->batches.size() == 1 ? "" : "es") << "\n"
            << FormatSchema(*input);
  int64_t remaining = options.limit;
  for (size_t b = 0; b < input->batches.size() && remaining != 0; ++b) {
    const auto& batch = *input->batches[b];
    std::cout << "-- batch " << b << ": " << batch.num_rows() << " row"
              << (batch.num_rows() == 1 ? "" : "s") << "\n";
    PrintMetadata(std::cout, batch.metadata(), 2);
    std::vector<format::ArrayPtr> columns;
    columns.reserve(static_cast<size_t>(batch.num_columns()));
    for (int c = 0; c < batch.num_columns(); ++c) columns.push_back(batch.column(c));
    for (int64_t r = 0; r < batch.num_rows() && remaining != 0; ++r, --remaining) {
      std::cout << "{";
      for (int c = 0; c < batch.num_columns(); ++c) {
        if (c > 0) std::cout << ", ";
        std::cout << batch.schema()->field(c)->name() << ": "
                  << format::FormatValue(*columns[static_cast<size_t>(c)], r);
      }
      std::cout << "}\n";
    }
  }
  return kExitOk;
}

int RunValidate(const std::string& path) {
  ipc::IpcReadOptions options;
  options.validate_full = true;
  auto input = ReadIpcInput(path, options);
  if (!input.ok()) {
    const bool io = input.status().code() == StatusCode::kIOError ||
                    input.status().code() == StatusCode::kPermissionDenied;
    std::cerr << "alkaid validate: " << (path == "-" ? "<stdin>" : path) << ": "
              << input.status().message() << "\n";
    return io ? kExitUsage : kExitFailure;
  }
  // Readers validated every batch as decoded; check the final dictionaries too.
  for (int64_t id : input->memo.ids()) {
    auto dict = input->memo.GetDictionary(id);
    if (!dict.ok()) continue;  // declared but never sent: only an error if used
    Status st = format::ValidateFull(**dict, "dictionary " + std::to_string(id));
    if (!st.ok()) {
      std::cerr << "alkaid validate: " << path << ": " << st.message() << "\n";
      return kExitFailure;
    }
  }
  return kExitOk;
}

int RunConvert(const ConvertOptions& options) {
  auto input = ReadIpcInput(options.input, {});
  if (!input.ok()) return ReportError("convert", input.status());
  WarnUnlessFullyValid("convert", *input);
  Status st = WriteIpc(options.output, options.write, input->schema, input->batches, &input->memo);
  if (!st.ok()) return ReportError("convert", st);
  return kExitOk;
}

}  // namespace alkaid::tools
