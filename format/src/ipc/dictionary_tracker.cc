#include "alkaid/format/ipc/dictionary_tracker.h"

#include <map>
#include <utility>

#include "alkaid/format/array.h"
#include "alkaid/format/compare.h"
#include "concatenate_internal.h"

namespace alkaid::format::ipc {

DictionaryTracker::DictionaryTracker(const DictionaryMemo& ids, DictionaryTrackerOptions options)
    : ids_(ids), options_(options) {
  ids_.ClearDictionaries();
}

int DictionaryTracker::Find(int64_t id) const {
  for (size_t i = 0; i < current_.size(); ++i) {
    if (current_[i].first == id) return static_cast<int>(i);
  }
  return -1;
}

namespace {

// A copy of `data` whose every buffer, nested dictionaries included, comes
// from `pool`.
Result<ArrayDataPtr> DeepCopy(const ArrayDataPtr& data, MemoryPool* pool);

Status CopyNestedDictionaries(ArrayData* data, MemoryPool* pool) {
  if (data->dictionary != nullptr) {
    ALKAID_ASSIGN_OR_RAISE(data->dictionary, DeepCopy(data->dictionary, pool));
  }
  for (const auto& child : data->child_data) {
    if (child != nullptr) ALKAID_RETURN_NOT_OK(CopyNestedDictionaries(child.get(), pool));
  }
  return Status::OK();
}

Result<ArrayDataPtr> DeepCopy(const ArrayDataPtr& data, MemoryPool* pool) {
  ALKAID_ASSIGN_OR_RAISE(auto copy, internal::Concatenate({data}, pool));
  ALKAID_RETURN_NOT_OK(CopyNestedDictionaries(copy.get(), pool));
  return copy;
}

}  // namespace

// Collects (id, dictionary) pairs, nested dictionaries before the
// dictionaries whose values contain them.
Status DictionaryTracker::Collect(const ArrayDataPtr& data, FieldPath* path,
                                  std::vector<std::pair<int64_t, ArrayDataPtr>>* out) const {
  const DataType* storage = &StorageType(*data->type);
  if (storage->id() == TypeId::kDictionary) {
    if (data->dictionary == nullptr) {
      return Status::Invalid("dictionary-encoded column without a dictionary at path size ",
                             path->size());
    }
    ALKAID_ASSIGN_OR_RAISE(int64_t id, ids_.GetId(*path));
    // The dictionary's own children map to paths under this field.
    const ArrayData& values = *data->dictionary;
    for (size_t i = 0; i < values.child_data.size(); ++i) {
      path->push_back(static_cast<int>(i));
      ALKAID_RETURN_NOT_OK(Collect(values.child_data[i], path, out));
      path->pop_back();
    }
    out->emplace_back(id, data->dictionary);
    return Status::OK();
  }
  for (size_t i = 0; i < data->child_data.size(); ++i) {
    path->push_back(static_cast<int>(i));
    ALKAID_RETURN_NOT_OK(Collect(data->child_data[i], path, out));
    path->pop_back();
  }
  return Status::OK();
}

Result<std::vector<DictionaryChange>> DictionaryTracker::Diff(const RecordBatch& batch) const {
  std::vector<DictionaryChange> changes;
  if (ids_.num_fields() == 0) return changes;
  std::vector<std::pair<int64_t, ArrayDataPtr>> dicts;
  FieldPath path;
  for (int i = 0; i < batch.num_columns(); ++i) {
    path.assign(1, i);
    ALKAID_RETURN_NOT_OK(Collect(batch.column_data(i), &path, &dicts));
  }
  std::map<int64_t, ArrayDataPtr> seen;
  for (const auto& [id, dict] : dicts) {
    auto [it, inserted] = seen.emplace(id, dict);
    if (!inserted) {
      if (it->second != dict && !ArrayEquals(*MakeArray(it->second), *MakeArray(dict))) {
        return Status::Invalid("fields sharing dictionary id ", id,
                               " carry different dictionaries in one batch");
      }
      continue;
    }
    const int index = Find(id);
    if (index < 0) {
      changes.push_back({id, false, dict, dict});
      continue;
    }
    const ArrayDataPtr* last = &current_[static_cast<size_t>(index)].second;
    if (*last == dict || sources_[static_cast<size_t>(index)].lock() == dict) continue;
    auto dict_array = MakeArray(dict);
    const auto last_array = MakeArray(*last);
    if (ArrayEquals(*last_array, *dict_array)) {
      // Equal values in another object: nothing to send, but the new object
      // is what later batches will most likely reuse.
      changes.push_back({id, true, nullptr, dict});
      continue;
    }
    const int64_t old_length = (*last)->length;
    if (options_.emit_deltas && dict->length > old_length &&
        ArrayEquals(*last_array, *dict_array->Slice(0, old_length))) {
      changes.push_back({id, true, dict->Slice(old_length, dict->length - old_length), dict});
      continue;
    }
    if (!options_.allow_replacement) {
      return Status::Invalid("dictionary ", id,
                             " changed other than by appending; the file format cannot replace "
                             "dictionaries");
    }
    changes.push_back({id, false, dict, dict});
  }
  return changes;
}

Status DictionaryTracker::Commit(const DictionaryChange& change) {
  ArrayDataPtr stored = change.dictionary;
  const int index = Find(change.id);
  if (options_.copy_to != nullptr) {
    if (change.values == nullptr && index >= 0) {
      // Equal values: the copy kept already describes them.
      stored = current_[static_cast<size_t>(index)].second;
    } else {
      ALKAID_ASSIGN_OR_RAISE(stored, DeepCopy(change.dictionary, options_.copy_to));
    }
  }
  if (index < 0) {
    current_.emplace_back(change.id, std::move(stored));
    sources_.emplace_back(change.dictionary);
  } else {
    current_[static_cast<size_t>(index)].second = std::move(stored);
    sources_[static_cast<size_t>(index)] = change.dictionary;
  }
  return Status::OK();
}

}  // namespace alkaid::format::ipc
