#pragma once

/// \file
/// Builders for the nested layouts: lists, list views, fixed-size lists,
/// maps, structs, sparse and dense unions, run-end encoded arrays, and
/// extension arrays (which wrap the builder of their storage type).
///
/// A nested builder owns its child builders. Values of a slot are appended
/// straight to the child builders (value_builder(), field_builder(i),
/// key_builder()/item_builder(), child_builder(i)); the parent call opens
/// the slot. The child builders' types must match the parent type's child
/// fields: MakeBuilder (builder.h) guarantees it; Finish reports a TypeError
/// when a hand-assembled builder violates it.

#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "alkaid/format/builder_base.h"

namespace alkaid::format {

/// What list and list-view builders share: one child array, and the start
/// offset of each slot in it. Append() opens a slot; the elements appended to
/// value_builder() until the next Append/Finish belong to it. Null slots are
/// empty.
template <typename OffsetT>
class ALKAID_EXPORT SlotOffsetsBuilder : public ArrayBuilder {
 public:
  using OffsetType = OffsetT;

  /// Opens a slot (null if !is_valid). CapacityError if the child already
  /// holds more elements than OffsetT can address.
  Status Append(bool is_valid = true);
  Status AppendNulls(int64_t n) override;
  Status AppendEmptyValues(int64_t n) override;
  Status Reserve(int64_t additional) override;
  void Reset() override;

  ArrayBuilder* value_builder() const { return children_[0].get(); }

 protected:
  SlotOffsetsBuilder(TypePtr type, std::unique_ptr<ArrayBuilder> value_builder, MemoryPool* pool);
  /// At Finish: checks that the builder builds a `want` type and that the
  /// child's length fits OffsetT; returns that length.
  Result<int64_t> CheckFinish(TypeId want) const;

  /// Start offset of each slot.
  internal::BufferBuilder offsets_;

 private:
  Status AppendSlots(int64_t n, bool is_valid);
};

extern template class SlotOffsetsBuilder<int32_t>;
extern template class SlotOffsetsBuilder<int64_t>;

/// list / large_list: each slot is a range of the child array given by
/// offsets (the final end offset is added at Finish).
template <typename OffsetT>
class ALKAID_EXPORT BaseListBuilder : public SlotOffsetsBuilder<OffsetT> {
 public:
  /// `type` is a list (int32_t) or large_list (int64_t) type whose value
  /// type is `value_builder`'s.
  BaseListBuilder(TypePtr type, std::unique_ptr<ArrayBuilder> value_builder, MemoryPool* pool)
      : SlotOffsetsBuilder<OffsetT>(std::move(type), std::move(value_builder), pool) {}

 protected:
  Result<ArrayDataPtr> FinishInternal() override;
};

extern template class BaseListBuilder<int32_t>;
extern template class BaseListBuilder<int64_t>;

class ALKAID_EXPORT ListBuilder : public BaseListBuilder<int32_t> {
 public:
  ListBuilder(TypePtr type, std::unique_ptr<ArrayBuilder> value_builder,
              MemoryPool* pool = default_memory_pool())
      : BaseListBuilder(std::move(type), std::move(value_builder), pool) {}
  /// A list<item: value type> builder.
  explicit ListBuilder(std::unique_ptr<ArrayBuilder> value_builder,
                       MemoryPool* pool = default_memory_pool());
};

class ALKAID_EXPORT LargeListBuilder : public BaseListBuilder<int64_t> {
 public:
  LargeListBuilder(TypePtr type, std::unique_ptr<ArrayBuilder> value_builder,
                   MemoryPool* pool = default_memory_pool())
      : BaseListBuilder(std::move(type), std::move(value_builder), pool) {}
  explicit LargeListBuilder(std::unique_ptr<ArrayBuilder> value_builder,
                            MemoryPool* pool = default_memory_pool());
};

/// list_view / large_list_view. Slots are appended like lists; the builder
/// writes offsets and sizes, laying the slots out in order in the child
/// (offsets increasing, size of slot i = elements appended while it was
/// open). Null slots get size 0.
template <typename OffsetT>
class ALKAID_EXPORT BaseListViewBuilder : public SlotOffsetsBuilder<OffsetT> {
 public:
  BaseListViewBuilder(TypePtr type, std::unique_ptr<ArrayBuilder> value_builder, MemoryPool* pool)
      : SlotOffsetsBuilder<OffsetT>(std::move(type), std::move(value_builder), pool) {}

 protected:
  Result<ArrayDataPtr> FinishInternal() override;
};

extern template class BaseListViewBuilder<int32_t>;
extern template class BaseListViewBuilder<int64_t>;

class ALKAID_EXPORT ListViewBuilder : public BaseListViewBuilder<int32_t> {
 public:
  ListViewBuilder(TypePtr type, std::unique_ptr<ArrayBuilder> value_builder,
                  MemoryPool* pool = default_memory_pool())
      : BaseListViewBuilder(std::move(type), std::move(value_builder), pool) {}
};

class ALKAID_EXPORT LargeListViewBuilder : public BaseListViewBuilder<int64_t> {
 public:
  LargeListViewBuilder(TypePtr type, std::unique_ptr<ArrayBuilder> value_builder,
                       MemoryPool* pool = default_memory_pool())
      : BaseListViewBuilder(std::move(type), std::move(value_builder), pool) {}
};

/// fixed_size_list<T>[n]: after Append(), append exactly list_size()
/// elements to value_builder(). The next Append and Finish check the count
/// and fail with Invalid naming the slot if it differs. AppendNull(s) fills
/// the null slots' child range with empty values itself.
class ALKAID_EXPORT FixedSizeListBuilder : public ArrayBuilder {
 public:
  FixedSizeListBuilder(TypePtr type, std::unique_ptr<ArrayBuilder> value_builder,
                       MemoryPool* pool = default_memory_pool());

  Status Append(bool is_valid = true);
  Status AppendNulls(int64_t n) override;
  Status AppendEmptyValues(int64_t n) override;
  Status Reserve(int64_t additional) override;

  int32_t list_size() const { return list_size_; }
  ArrayBuilder* value_builder() const { return children_[0].get(); }

 protected:
  Result<ArrayDataPtr> FinishInternal() override;

 private:
  Status CheckChildLength(int64_t slots) const;
  Status AppendSlots(int64_t n, bool is_valid);
  int32_t list_size_;
};

/// map<K, V>: Append() opens a slot; append its keys to key_builder() and
/// the matching items to item_builder(). Keys must not be null and every key
/// needs an item: Append and Finish fail with Invalid (naming the slot and
/// entry) otherwise.
class ALKAID_EXPORT MapBuilder : public ArrayBuilder {
 public:
  MapBuilder(TypePtr type, std::unique_ptr<ArrayBuilder> key_builder,
             std::unique_ptr<ArrayBuilder> item_builder, MemoryPool* pool = default_memory_pool());

  Status Append(bool is_valid = true);
  Status AppendNulls(int64_t n) override;
  Status AppendEmptyValues(int64_t n) override;
  Status Reserve(int64_t additional) override;
  void Reset() override;

  ArrayBuilder* key_builder() const { return children_[0].get(); }
  ArrayBuilder* item_builder() const { return children_[1].get(); }

 protected:
  Result<ArrayDataPtr> FinishInternal() override;

 private:
  Status CheckEntries() const;
  Status AppendSlots(int64_t n, bool is_valid);
  internal::BufferBuilder offsets_;
};

/// struct<...>: Append(is_valid) records the slot's validity, and the
/// caller appends one value to every field builder (also for a null slot,
/// whose child values are then hidden). AppendNull(s) appends the child
/// values itself: nulls to nullable fields, empty values to the others.
/// Finish checks that every field has length() values.
class ALKAID_EXPORT StructBuilder : public ArrayBuilder {
 public:
  StructBuilder(TypePtr type, std::vector<std::unique_ptr<ArrayBuilder>> field_builders,
                MemoryPool* pool = default_memory_pool());

  Status Append(bool is_valid = true);
  Status AppendNulls(int64_t n) override;
  Status AppendEmptyValues(int64_t n) override;

  int num_fields() const { return num_children(); }
  ArrayBuilder* field_builder(int i) const { return child(i); }

 protected:
  Result<ArrayDataPtr> FinishInternal() override;
};

/// Common part of the union builders. Append(type_code) opens a slot of the
/// child declared with that code (Invalid for an undeclared code); the
/// caller then appends exactly one value to that child_builder. A null slot
/// (AppendNull) is a null of the first child. Union arrays have no validity
/// bitmap, so null_count() is 0.
class ALKAID_EXPORT UnionBuilder : public ArrayBuilder {
 public:
  /// Child index of `type_code`, or -1 if the type does not declare it.
  int child_id(int8_t type_code) const;
  /// Builder of child i (in field order, not by type code).
  ArrayBuilder* child_builder(int i) const { return child(i); }
  const UnionType& union_type() const { return *union_type_; }

  virtual Status Append(int8_t type_code) = 0;
  Status AppendNulls(int64_t n) override;
  Status AppendEmptyValues(int64_t n) override;
  Status Reserve(int64_t additional) override;
  void Reset() override;

 protected:
  UnionBuilder(TypePtr type, std::vector<std::unique_ptr<ArrayBuilder>> children, MemoryPool* pool);
  /// Checks the code and returns its child index.
  Result<int> ResolveCode(int8_t type_code) const;
  Status CheckChildTypes() const;
  /// At Finish: checks the builder builds `want` and that child i holds
  /// expected_length(i) values, then finishes every child. A mismatch reads
  /// "... has <n> values<before><expected><after>".
  Result<std::vector<ArrayDataPtr>> FinishChildren(
      TypeId want, const std::function<int64_t(int)>& expected_length, std::string_view before,
      std::string_view after);

  const UnionType* union_type_;
  internal::BufferBuilder types_;
};

/// sparse_union: every child has one value per slot. Append(code) appends a
/// placeholder to every other child (null if its field is nullable, else an
/// empty value); the caller appends the real value to the selected child.
class ALKAID_EXPORT SparseUnionBuilder : public UnionBuilder {
 public:
  SparseUnionBuilder(TypePtr type, std::vector<std::unique_ptr<ArrayBuilder>> children,
                     MemoryPool* pool = default_memory_pool());
  Status Append(int8_t type_code) override;

 protected:
  Result<ArrayDataPtr> FinishInternal() override;

 private:
  Status FillSiblings(int selected);
};

/// dense_union: Append(code) records the selected child's current length as
/// the slot's offset; the caller appends the value to that child. Finish
/// checks each child holds exactly one value per slot that selects it.
class ALKAID_EXPORT DenseUnionBuilder : public UnionBuilder {
 public:
  DenseUnionBuilder(TypePtr type, std::vector<std::unique_ptr<ArrayBuilder>> children,
                    MemoryPool* pool = default_memory_pool());
  Status Append(int8_t type_code) override;
  Status Reserve(int64_t additional) override;
  void Reset() override;

 protected:
  Result<ArrayDataPtr> FinishInternal() override;

 private:
  internal::BufferBuilder offsets_;
  /// Slots that selected each child so far.
  std::vector<int64_t> counts_;
};

/// run_end_encoded<run_ends: int16|int32|int64, values: T>.
///
/// Two ways to append a run:
/// - AppendValue(bytes, run_length) / Append(x, run_length) for value types
///   with a plain byte representation (fixed-width types: the value's
///   little-endian bytes; boolean: one byte, non-zero is true; binary and
///   string types: the bytes). A run equal to the previous one (same bytes,
///   or both null) is merged into it.
/// - For any value type: append one value to value_builder() yourself, then
///   call AppendRun(run_length). Such runs are never merged.
/// A run end past the largest value of the run-end type fails with
/// CapacityError and leaves the builder unchanged. length() counts logical
/// slots; null_count() is 0 (nulls live in the values child).
class ALKAID_EXPORT RunEndEncodedBuilder : public ArrayBuilder {
 public:
  RunEndEncodedBuilder(TypePtr type, std::unique_ptr<ArrayBuilder> value_builder,
                       MemoryPool* pool = default_memory_pool());

  Status AppendValue(std::string_view bytes, int64_t run_length = 1);
  Status Append(std::string_view value, int64_t run_length = 1) {
    return AppendValue(value, run_length);
  }
  Status Append(const char* value, int64_t run_length = 1) {
    return AppendValue(std::string_view(value), run_length);
  }
  template <typename T>
  requires std::is_arithmetic_v<T> Status Append(T value, int64_t run_length = 1) {
    if constexpr (std::is_same_v<T, bool>) {
      const char b = value ? 1 : 0;
      return AppendValue(std::string_view(&b, 1), run_length);
    } else {
      return AppendValue(std::string_view(reinterpret_cast<const char*>(&value), sizeof(T)),
                         run_length);
    }
  }
  /// Closes a run of `run_length` slots whose value the caller has just
  /// appended to value_builder() (which must hold exactly one value per run).
  Status AppendRun(int64_t run_length);
  /// A null run of `n` slots (merged with a preceding null run).
  Status AppendNulls(int64_t n) override;
  /// A run of `n` empty values.
  Status AppendEmptyValues(int64_t n) override;
  Status Reserve(int64_t additional) override;
  void Reset() override;

  ArrayBuilder* value_builder() const { return children_[0].get(); }
  /// Runs appended so far.
  int64_t num_runs() const { return num_runs_; }

 protected:
  Result<ArrayDataPtr> FinishInternal() override;

 private:
  enum class LastRun : uint8_t { kNone, kNull, kBytes, kOpaque };
  /// Adds `run_length` slots to the last run (extend) or as a new run.
  Status AddRun(int64_t run_length, bool extend);
  void SetLastRunEnd(int64_t end);

  int run_end_width_;
  int64_t max_run_end_;
  internal::BufferBuilder run_ends_;
  int64_t num_runs_ = 0;
  LastRun last_kind_ = LastRun::kNone;
  std::string last_bytes_;
};

/// Builds extension arrays by wrapping the builder of the storage type:
/// append through storage_builder(); Finish gives arrays of the extension
/// type over the storage layout.
class ALKAID_EXPORT ExtensionBuilder : public ArrayBuilder {
 public:
  /// `type` must be an ExtensionType whose storage type is
  /// `storage_builder`'s type.
  ExtensionBuilder(TypePtr type, std::unique_ptr<ArrayBuilder> storage_builder,
                   MemoryPool* pool = default_memory_pool());

  ArrayBuilder* storage_builder() const { return children_[0].get(); }
  int64_t length() const override { return storage_builder()->length(); }
  int64_t null_count() const override { return storage_builder()->null_count(); }
  Status AppendNulls(int64_t n) override { return storage_builder()->AppendNulls(n); }
  Status AppendEmptyValues(int64_t n) override { return storage_builder()->AppendEmptyValues(n); }
  Status Reserve(int64_t additional) override { return storage_builder()->Reserve(additional); }

 protected:
  Result<ArrayDataPtr> FinishInternal() override;
};

}  // namespace alkaid::format
