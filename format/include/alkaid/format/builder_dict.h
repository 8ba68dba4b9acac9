#pragma once

/// \file
/// DictionaryBuilder: dictionary-encodes values as they are appended.

#include <cstdint>
#include <deque>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_map>

#include "alkaid/format/builder_base.h"

namespace alkaid::format {

/// What DictionaryBuilder::FinishDelta hands out.
struct DictionaryDelta {
  /// The indices appended since the last finish, as a dictionary array with
  /// the whole dictionary so far attached.
  ArrayPtr array;
  /// Only the dictionary entries added since the previous Finish or
  /// FinishDelta (an array of the value type, possibly empty). An IPC writer
  /// sends these as a delta dictionary batch.
  ArrayPtr delta;
  /// Number of entries the dictionary had before `delta` (0 on the first
  /// finish, when `delta` is the whole dictionary).
  int64_t delta_offset = 0;
};

/// Builds dictionary<values: V, indices: I> arrays with a memo table: the
/// first occurrence of a value gets the next index, equal values (compared
/// byte for byte) share it.
///
/// Supported value types: every fixed-width type except boolean (integers,
/// floats, float16, dates, times, timestamps, durations, intervals,
/// fixed_size_binary, decimals), binary/utf8, their large variants and the
/// view types. Values are given as their bytes: fixed-width values as
/// byte_width() little-endian bytes (or through Append(T) for C numbers),
/// binary values as they are.
///
/// The memo persists across Finish calls, so consecutive arrays share
/// indices: Finish attaches the whole dictionary, FinishDelta also reports
/// the entries new since the previous finish. Reset() drops the appended
/// indices only; ResetFull() also forgets the dictionary.
///
/// When a new value would need an index past the largest value of the index
/// type, Append fails with CapacityError and nothing is added. The memo
/// table itself lives on the heap; every array buffer comes from the pool.
class ALKAID_EXPORT DictionaryBuilder : public ArrayBuilder {
 public:
  /// `type` must be a DictionaryType with a supported value type; otherwise
  /// every append and Finish fail with TypeError.
  DictionaryBuilder(TypePtr type, MemoryPool* pool = default_memory_pool());

  /// Appends a value given as its bytes (see the class comment). For
  /// fixed-width value types the size must be the byte width (Invalid
  /// otherwise).
  Status Append(std::string_view value);
  Status Append(const char* value) { return Append(std::string_view(value)); }
  /// Appends a C number; its size must match the value type's width and a
  /// floating-point number needs a floating-point value type (and vice
  /// versa).
  template <typename T>
  requires std::is_arithmetic_v<T> Status Append(T value) {
    ALKAID_RETURN_NOT_OK(CheckNumber(sizeof(T), std::is_floating_point_v<T>));
    return Append(std::string_view(reinterpret_cast<const char*>(&value), sizeof(T)));
  }
  /// Null slots have a null index (the dictionary gets no null entry).
  Status AppendNulls(int64_t n) override;
  /// Appends the value type's empty value (zero bytes or "") as a value.
  Status AppendEmptyValues(int64_t n) override;
  Status Reserve(int64_t additional) override;

  /// Adds the values of `values` (an array of the value type) to the memo
  /// in order, so a builder can continue an existing dictionary: the entry
  /// at position i of a fresh builder's dictionary is values[i]. Values
  /// already present keep their index; a null value becomes a null
  /// dictionary entry. The entries count as already sent: the next
  /// FinishDelta does not report them.
  Status InsertMemoValues(const Array& values);

  /// Entries in the dictionary so far.
  int64_t dictionary_length() const { return static_cast<int64_t>(entries_.size()); }

  /// Finishes the indices like Finish() and also returns the entries new
  /// since the previous Finish/FinishDelta.
  Result<DictionaryDelta> FinishDelta();

  /// Drops the indices appended since the last finish (the memo stays).
  void Reset() override;
  /// Drops the indices and the dictionary.
  void ResetFull();

  const TypePtr& value_type() const { return value_type_; }
  const TypePtr& index_type() const { return index_type_; }

 protected:
  Result<ArrayDataPtr> FinishInternal() override;

 private:
  Status CheckNumber(size_t size, bool is_float) const;
  /// Index of `value`, inserting it if new.
  Result<int64_t> GetOrInsert(std::string_view value);
  Result<int64_t> InsertNew(std::string_view value, bool is_null);
  void UnsafeAppendIndex(int64_t index);
  /// Dictionary entries [from, dictionary_length()) as an array.
  Result<ArrayDataPtr> BuildDictionary(int64_t from) const;

  Status init_status_;
  TypePtr value_type_;
  TypePtr index_type_;
  int index_width_ = 0;
  int64_t max_index_ = 0;
  /// Byte width of fixed-width values, -1 for binary-like values.
  int32_t value_width_ = -1;

  /// Entries in index order; a deque so the memo's keys stay valid.
  std::deque<std::string> entries_;
  std::unordered_map<std::string_view, int64_t> memo_;
  int64_t null_entry_ = -1;
  /// Entries already handed out by a previous Finish/FinishDelta.
  int64_t delta_start_ = 0;
  internal::BufferBuilder indices_;
};

}  // namespace alkaid::format
