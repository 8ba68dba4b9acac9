#pragma once

/// \file
/// DictionaryTracker: which dictionary messages a writer must send before a
/// record batch, given the dictionaries it sent before. Shared by the IPC
/// stream and file writers and by anything else that sends batches of
/// dictionary-encoded columns as a sequence of messages (the broker's
/// shared-memory publisher).

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "alkaid/common/export.h"
#include "alkaid/common/result.h"
#include "alkaid/format/array_data.h"
#include "alkaid/format/ipc/dictionary.h"
#include "alkaid/format/memory_pool.h"
#include "alkaid/format/record_batch.h"

namespace alkaid::format::ipc {

/// One dictionary message to send.
struct DictionaryChange {
  int64_t id = 0;
  /// The message appends `values` to the dictionary sent before.
  bool is_delta = false;
  /// What the message carries: the whole dictionary, or (delta) only the
  /// values appended. Null when there is nothing to send: the batch carries
  /// a new object with the values sent before; committing it lets later
  /// batches that reuse that object skip the comparison.
  ArrayDataPtr values;
  /// The whole dictionary once the message is applied (what the batch's
  /// columns point at).
  ArrayDataPtr dictionary;
};

/// Options of a DictionaryTracker.
struct DictionaryTrackerOptions {
  /// A dictionary that extends the one sent before (the old values are a
  /// prefix of the new) is sent as a delta of the new values only.
  bool emit_deltas = true;
  /// A dictionary that changed otherwise is sent whole as a replacement;
  /// when false (the file format) that is an error.
  bool allow_replacement = true;
  /// If set, Commit() keeps a deep copy of each dictionary in this pool
  /// instead of a reference to the batch's: for callers whose batches live
  /// in memory that may go away before the next batch (a shared-memory
  /// region). Later batches that carry the very same dictionary object are
  /// still recognised without comparing values, as long as it is alive.
  MemoryPool* copy_to = nullptr;
};

/// Remembers the dictionary last sent for every id and works out, for each
/// new batch, the messages that bring a reader up to date: none when the
/// batch uses the same dictionaries (the same object, or equal values), a
/// delta when a dictionary only grew at its end (per the options), a whole
/// dictionary otherwise. Nested dictionaries (dictionary values that contain
/// dictionary-encoded fields) come before the dictionaries that contain them.
///
/// Diff() does not change the tracker; Commit() records one change as sent,
/// so that a writer whose send fails halfway can retry with the rest.
/// Not thread-safe.
class ALKAID_EXPORT DictionaryTracker {
 public:
  /// `ids` maps every dictionary-encoded field of the schema to its id
  /// (DictionaryMemo::AssignIds); its dictionaries, if any, are ignored.
  DictionaryTracker(const DictionaryMemo& ids, DictionaryTrackerOptions options);

  /// The messages to send before `batch`, in order (skip those with null
  /// `values`, but commit them). Invalid if a column
  /// lacks its dictionary, if two fields sharing an id carry different
  /// dictionaries, or if a dictionary changed other than by appending while
  /// replacements are not allowed.
  Result<std::vector<DictionaryChange>> Diff(const RecordBatch& batch) const;

  /// Records `change` as sent. Fails only if copying (copy_to) fails.
  Status Commit(const DictionaryChange& change);

  /// Every dictionary sent so far, whole, in the order ids were first sent
  /// (nested dictionaries before those that contain them).
  const std::vector<std::pair<int64_t, ArrayDataPtr>>& current() const { return current_; }

  /// The field-to-id mapping given at construction.
  const DictionaryMemo& ids() const { return ids_; }

 private:
  Status Collect(const ArrayDataPtr& data, FieldPath* path,
                 std::vector<std::pair<int64_t, ArrayDataPtr>>* out) const;
  int Find(int64_t id) const;

  DictionaryMemo ids_;
  DictionaryTrackerOptions options_;
  // What was sent per id (the batch's dictionary, or a copy), and the
  // batch's object it came from, recognised by identity while alive.
  std::vector<std::pair<int64_t, ArrayDataPtr>> current_;
  std::vector<std::weak_ptr<const ArrayData>> sources_;
};

}  // namespace alkaid::format::ipc
