// alkaid integration validate | json-to-ipc | ipc-to-json: Arrow's
// integration-test contract, with J in Arrow's JSON integration format.

#include <iostream>

#include "alkaid/format/compare.h"
#include "alkaid/format/json_integration.h"
#include "commands.h"
#include "input.h"
#include "output.h"

namespace alkaid::tools {

namespace ipc = format::ipc;
using format::TypeId;

namespace {

// The field at `path` (top-level index, then child indices; below a
// dictionary-encoded field the indices walk its value type's children).
Result<format::FieldPtr> FieldAt(const format::Schema& schema, const format::FieldPath& path) {
  if (path.empty() || path[0] < 0 || path[0] >= schema.num_fields()) {
    return Status::Invalid("dictionary field path does not name a schema field");
  }
  format::FieldPtr field = schema.field(path[0]);
  for (size_t i = 1; i < path.size(); ++i) {
    const format::DataType* type = field->type().get();
    if (type->id() == TypeId::kDictionary) {
      type = static_cast<const format::DictionaryType&>(*type).value_type().get();
    }
    if (path[i] < 0 || path[i] >= type->num_fields()) {
      return Status::Invalid("dictionary field path leaves the schema at depth ", i);
    }
    field = type->field(path[i]);
  }
  return field;
}

// The dictionary ids the JSON file declares, as a memo for the IPC writer.
Result<ipc::DictionaryMemo> IdsFromJson(const format::JsonIntegrationData& data) {
  ipc::DictionaryMemo memo;
  for (const auto& [path, id] : data.dictionary_ids) {
    ALKAID_ASSIGN_OR_RAISE(auto field, FieldAt(*data.schema, path));
    if (field->type()->id() != TypeId::kDictionary) {
      return Status::Invalid("field '", field->name(), "' has dictionary id ", id,
                             " but is not dictionary-encoded");
    }
    const auto& dict = static_cast<const format::DictionaryType&>(*field->type());
    ALKAID_RETURN_NOT_OK(memo.AddField(id, path, dict.value_type()));
  }
  return memo;
}

Status Compare(const format::JsonIntegrationData& expected, const IpcInput& actual) {
  if (!expected.schema->Equals(*actual.schema, /*check_metadata=*/true)) {
    return Status::Invalid("schemas differ:\n-- JSON:\n", expected.schema->ToString(), "-- IPC:\n",
                           actual.schema->ToString());
  }
  if (expected.batches.size() != actual.batches.size()) {
    return Status::Invalid("the JSON has ", expected.batches.size(), " batches, the IPC input ",
                           actual.batches.size());
  }
  format::EqualOptions options;
  options.check_metadata = true;
  for (size_t i = 0; i < expected.batches.size(); ++i) {
    ALKAID_RETURN_NOT_OK_CTX(
        format::CheckRecordBatchEquals(*expected.batches[i], *actual.batches[i], options),
        "batch " << i);
  }
  return Status::OK();
}

bool EndsWith(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

int RunIntegrationValidate(const IntegrationOptions& options) {
  const bool decimal_precision = !options.HasQuirk("no_decimal_validate");
  format::JsonReadOptions json_options;
  json_options.validate_decimal_precision = decimal_precision;
  auto json = format::ReadJsonIntegrationFile(options.json, json_options);
  if (!json.ok())
    return ReportError("integration validate", json.status().WithContext(options.json));
  ipc::IpcReadOptions read_options;
  read_options.validate_full = true;
  read_options.validate_decimal_precision = decimal_precision;
  auto input = ReadIpcInput(options.ipc, read_options);
  if (!input.ok())
    return ReportError("integration validate", input.status().WithContext(options.ipc));
  Status st = Compare(*json, *input);
  if (!st.ok()) {
    std::cerr << "alkaid integration validate: " << options.ipc << " does not hold the data of "
              << options.json << ": " << st.message() << "\n";
    return kExitFailure;
  }
  return kExitOk;
}

int RunJsonToIpc(const IntegrationOptions& options) {
  format::JsonReadOptions json_options;
  json_options.validate_decimal_precision = !options.HasQuirk("no_decimal_validate");
  auto json = format::ReadJsonIntegrationFile(options.json, json_options);
  if (!json.ok())
    return ReportError("integration json-to-ipc", json.status().WithContext(options.json));
  auto ids = IdsFromJson(*json);
  if (!ids.ok())
    return ReportError("integration json-to-ipc", ids.status().WithContext(options.json));
  Status st = WriteIpc(options.ipc, options.write, json->schema, json->batches, &*ids);
  if (!st.ok()) return ReportError("integration json-to-ipc", st);
  return kExitOk;
}

int RunIpcToJson(const IntegrationOptions& options) {
  // Every value is read to write the JSON: full validation first.
  ipc::IpcReadOptions read_options;
  read_options.validate_full = true;
  auto input = ReadIpcInput(options.ipc, read_options);
  if (!input.ok())
    return ReportError("integration ipc-to-json", input.status().WithContext(options.ipc));
  if (input->num_replaced_dictionaries > 0) {
    return ReportError(
        "integration ipc-to-json",
        Status::NotImplemented(options.ipc,
                               " replaces a dictionary mid-stream; the JSON integration "
                               "format holds one dictionary per id"));
  }
  format::JsonIntegrationData data;
  data.schema = input->schema;
  data.batches = input->batches;
  data.dictionary_ids = input->memo.field_ids();
  // After deltas the final dictionary extends every earlier one, so it serves all batches.
  for (int64_t id : input->memo.ids()) {
    auto dict = input->memo.GetDictionary(id);
    if (dict.ok()) data.dictionaries[id] = *dict;
  }
  Status st;
  if (options.json == "-") {
    auto text = format::WriteJsonIntegration(data);
    st = text.status();
    if (text.ok()) std::cout << *text << "\n";
  } else {
    st = format::WriteJsonIntegrationFile(options.json, data, EndsWith(options.json, ".gz"));
  }
  if (!st.ok()) return ReportError("integration ipc-to-json", st);
  return kExitOk;
}

}  // namespace alkaid::tools
