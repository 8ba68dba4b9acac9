#pragma once

/// \file
/// DictionaryMemo: which dictionary id each dictionary-encoded field uses, and
/// the current dictionary of each id.
///
/// Fields are named by their path: the child positions from the schema root
/// ({2} is the third top-level field, {2, 0} its first child). The children
/// of a dictionary-encoded field are those of its value type, so a dictionary
/// whose values contain dictionary-encoded fields (a nested dictionary) has
/// paths under its own field. Several fields may share one id; they must then
/// have the same value type.
///
/// Not thread-safe; readers and writers each own one.

#include <cstdint>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "alkaid/common/export.h"
#include "alkaid/common/result.h"
#include "alkaid/format/array_data.h"
#include "alkaid/format/memory_pool.h"
#include "alkaid/format/type.h"

namespace alkaid::format::ipc {

using FieldPath = std::vector<int>;

/// How a dictionary batch changed the memo.
enum class DictionaryUpdate : uint8_t {
  kNew,          ///< first dictionary for this id
  kReplacement,  ///< a non-delta batch replaced an existing dictionary
  kDelta,        ///< values were appended
};

class ALKAID_EXPORT DictionaryMemo {
 public:
  DictionaryMemo() = default;

  // --- field side (from the schema) ---

  /// Records that the field at `path` is encoded with dictionary `id` whose
  /// values have type `value_type`. Fails if the path is already mapped or
  /// if `id` is known with a different value type.
  Status AddField(int64_t id, const FieldPath& path, TypePtr value_type);
  /// Gives every dictionary-encoded field of `schema` that has no id yet a
  /// fresh id (pre-order, counting up from the largest known id + 1, or 0).
  Status AssignIds(const Schema& schema);

  Result<int64_t> GetId(const FieldPath& path) const;
  bool HasId(int64_t id) const { return ids_.count(id) != 0; }
  /// Value type of dictionary `id`.
  Result<TypePtr> GetValueType(int64_t id) const;
  /// Path of the first field that uses `id`.
  Result<FieldPath> GetFirstPath(int64_t id) const;
  /// Every (path, id) pair, ordered by path.
  const std::map<FieldPath, int64_t>& field_ids() const { return field_ids_; }
  /// Known ids, ascending.
  std::vector<int64_t> ids() const;
  int num_fields() const { return static_cast<int>(field_ids_.size()); }

  // --- data side (from dictionary batches) ---

  bool HasDictionary(int64_t id) const;
  /// The current dictionary of `id` (KeyError if none has arrived).
  Result<ArrayDataPtr> GetDictionary(int64_t id) const;
  /// Sets, replaces (`is_delta` false) or appends to (`is_delta` true; values
  /// are concatenated into new buffers from `pool`) the dictionary of `id`.
  /// With `allow_replacement` false (files), replacing an existing dictionary
  /// is an error. A delta for an id without dictionary becomes its first.
  Result<DictionaryUpdate> AddDictionary(int64_t id, ArrayDataPtr values, bool is_delta,
                                         bool allow_replacement = true,
                                         MemoryPool* pool = default_memory_pool());
  /// Forgets all dictionaries (keeps the field mapping).
  void ClearDictionaries() { dictionaries_.clear(); }

 private:
  std::map<FieldPath, int64_t> field_ids_;
  std::map<int64_t, std::pair<TypePtr, FieldPath>> ids_;
  std::map<int64_t, ArrayDataPtr> dictionaries_;
};

}  // namespace alkaid::format::ipc
