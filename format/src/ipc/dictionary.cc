#include "alkaid/format/ipc/dictionary.h"

#include <algorithm>
#include <sstream>

#include "concatenate_internal.h"

namespace alkaid::format::ipc {

namespace {

std::string PathString(const FieldPath& path) {
  std::ostringstream ss;
  ss << "{";
  for (size_t i = 0; i < path.size(); ++i) ss << (i ? ", " : "") << path[i];
  ss << "}";
  return ss.str();
}

void AssignIdsIn(const Field& field, FieldPath* path,
                 std::vector<std::pair<FieldPath, TypePtr>>* out) {
  const DataType* type = field.type().get();
  if (type->id() == TypeId::kExtension) {
    type = static_cast<const ExtensionType*>(type)->storage_type().get();
  }
  if (type->id() == TypeId::kDictionary) {
    const auto& value_type = static_cast<const DictionaryType*>(type)->value_type();
    out->emplace_back(*path, value_type);
    type = value_type.get();
  }
  for (int i = 0; i < type->num_fields(); ++i) {
    path->push_back(i);
    AssignIdsIn(*type->field(i), path, out);
    path->pop_back();
  }
}

}  // namespace

Status DictionaryMemo::AddField(int64_t id, const FieldPath& path, TypePtr value_type) {
  if (field_ids_.count(path) != 0) {
    return Status::KeyError("field path ", PathString(path), " already has a dictionary id");
  }
  auto it = ids_.find(id);
  if (it != ids_.end()) {
    if (!it->second.first->Equals(*value_type)) {
      return Status::Invalid("dictionary id ", id, " is used with value types ",
                             it->second.first->ToString(), " and ", value_type->ToString());
    }
  } else {
    ids_.emplace(id, std::make_pair(std::move(value_type), path));
  }
  field_ids_.emplace(path, id);
  return Status::OK();
}

Status DictionaryMemo::AssignIds(const Schema& schema) {
  std::vector<std::pair<FieldPath, TypePtr>> fields;
  FieldPath path;
  for (int i = 0; i < schema.num_fields(); ++i) {
    path.assign(1, i);
    AssignIdsIn(*schema.field(i), &path, &fields);
  }
  int64_t next = ids_.empty() ? 0 : ids_.rbegin()->first + 1;
  for (auto& [p, value_type] : fields) {
    if (field_ids_.count(p) != 0) continue;
    ALKAID_RETURN_NOT_OK(AddField(next++, p, value_type));
  }
  return Status::OK();
}

Result<int64_t> DictionaryMemo::GetId(const FieldPath& path) const {
  auto it = field_ids_.find(path);
  if (it == field_ids_.end()) {
    return Status::KeyError("no dictionary id for field path ", PathString(path));
  }
  return it->second;
}

Result<TypePtr> DictionaryMemo::GetValueType(int64_t id) const {
  auto it = ids_.find(id);
  if (it == ids_.end()) return Status::KeyError("dictionary id ", id, " is not in the schema");
  return it->second.first;
}

Result<FieldPath> DictionaryMemo::GetFirstPath(int64_t id) const {
  auto it = ids_.find(id);
  if (it == ids_.end()) return Status::KeyError("dictionary id ", id, " is not in the schema");
  return it->second.second;
}

std::vector<int64_t> DictionaryMemo::ids() const {
  std::vector<int64_t> out;
  for (const auto& [id, info] : ids_) out.push_back(id);
  return out;
}

bool DictionaryMemo::HasDictionary(int64_t id) const { return dictionaries_.count(id) != 0; }

Result<ArrayDataPtr> DictionaryMemo::GetDictionary(int64_t id) const {
  auto it = dictionaries_.find(id);
  if (it == dictionaries_.end()) {
    return Status::KeyError("no dictionary has been read for id ", id);
  }
  return it->second;
}

Result<DictionaryUpdate> DictionaryMemo::AddDictionary(int64_t id, ArrayDataPtr values,
                                                       bool is_delta, bool allow_replacement,
                                                       MemoryPool* pool) {
  if (values == nullptr) return Status::Invalid("dictionary ", id, " is null");
  auto it = dictionaries_.find(id);
  if (it == dictionaries_.end()) {
    dictionaries_.emplace(id, std::move(values));
    return DictionaryUpdate::kNew;
  }
  if (is_delta) {
    ALKAID_ASSIGN_OR_RAISE(auto merged, internal::Concatenate({it->second, values}, pool));
    it->second = std::move(merged);
    return DictionaryUpdate::kDelta;
  }
  if (!allow_replacement) {
    return Status::Invalid("dictionary ", id, " is replaced, which the file format does not allow");
  }
  it->second = std::move(values);
  return DictionaryUpdate::kReplacement;
}

}  // namespace alkaid::format::ipc
