#pragma once

/// \file
/// ArrayBuilder, the base of every array builder, and the two growable
/// buffers builders write into.
///
/// A builder accumulates values slot by slot and hands them out as an
/// ArrayData or typed Array with Finish(). All memory, every buffer of the
/// finished array included, comes from the MemoryPool given at
/// construction; buffers are 64-byte aligned and their padding is zero.
/// Finished arrays have offset 0, offsets that start at 0, and no validity
/// bitmap when they have no nulls (buffers[0] == nullptr).
///
/// Builders are not thread-safe; use one per thread. The pool must outlive
/// the builder and every array it produced.
///
/// Error behaviour: an append that fails (OutOfMemory, CapacityError,
/// Invalid) on a scalar builder leaves it unchanged. On nested builders the
/// parent slot is not added, but values already appended to child builders
/// stay; call Reset() to start over. Finish() leaves the builder empty
/// whether it succeeds or fails.

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "alkaid/common/export.h"
#include "alkaid/common/result.h"
#include "alkaid/common/status.h"
#include "alkaid/format/array.h"
#include "alkaid/format/array_data.h"
#include "alkaid/format/buffer.h"
#include "alkaid/format/memory_pool.h"
#include "alkaid/format/type.h"

namespace alkaid::format {

namespace internal {

/// A byte buffer that grows geometrically inside a pool allocation.
///
/// Reserve() is the only call that allocates; the Unsafe* calls write into
/// reserved space and cannot fail. Reserved bytes past length() are not
/// initialised (a recycled region holds the last batch's values); Finish
/// zeroes every byte it hands out past length(), so the finished buffer's
/// padding is zero. The bytes are a plain allocation of
/// the pool while they are being written (holding the pool's shared owner,
/// if it has one): the buffer object that owns them is made once, by
/// Finish. Movable, not copyable. Not API: builders use it.
class ALKAID_EXPORT BufferBuilder {
 public:
  explicit BufferBuilder(MemoryPool* pool) : pool_(pool) {}
  ~BufferBuilder() { Reset(); }
  BufferBuilder(const BufferBuilder&) = delete;
  BufferBuilder& operator=(const BufferBuilder&) = delete;
  BufferBuilder(BufferBuilder&& other) noexcept
      : pool_(other.pool_),
        owner_(std::move(other.owner_)),
        bytes_(other.bytes_),
        end_(other.end_),
        limit_(other.limit_) {
    other.bytes_ = other.end_ = other.limit_ = nullptr;
  }
  BufferBuilder& operator=(BufferBuilder&& other) noexcept {
    if (this != &other) {
      Reset();
      pool_ = other.pool_;
      owner_ = std::move(other.owner_);
      bytes_ = other.bytes_;
      end_ = other.end_;
      limit_ = other.limit_;
      other.bytes_ = other.end_ = other.limit_ = nullptr;
    }
    return *this;
  }

  /// Ensures `additional` more bytes can be appended without allocating.
  Status Reserve(int64_t additional) {
    // The common case (room left) inline; growing is out of line.
    if (additional >= 0 && additional <= limit_ - end_ && bytes_ != nullptr) return Status::OK();
    return Grow(additional);
  }
  Status Append(const void* data, int64_t n) {
    ALKAID_RETURN_NOT_OK(Reserve(n));
    UnsafeAppend(data, n);
    return Status::OK();
  }
  template <typename T>
  Status AppendValue(const T& value) {
    return Append(&value, static_cast<int64_t>(sizeof(T)));
  }
  Status AppendZeros(int64_t n) {
    ALKAID_RETURN_NOT_OK(Reserve(n));
    UnsafeAppendZeros(n);
    return Status::OK();
  }

  void UnsafeAppend(const void* data, int64_t n) {
    if (n > 0) std::memcpy(end_, data, static_cast<size_t>(n));
    end_ += n;
  }
  /// Appends one value by a store of its own type: the compiler then knows
  /// it writes none of the builder's fields (a memcpy could), and keeps the
  /// end of the bytes in a register over a loop of appends.
  template <typename T>
  void UnsafeAppendValue(const T& value) {
    if constexpr (std::is_scalar_v<T>) {
      using Unaligned __attribute__((aligned(1))) = T;  // any byte offset
      *reinterpret_cast<Unaligned*>(end_) = value;
    } else {
      std::memcpy(end_, &value, sizeof(T));  // a struct (the intervals)
    }
    end_ += sizeof(T);
  }
  void UnsafeAppendZeros(int64_t n) { UnsafeAppendFill(0, n); }
  void UnsafeAppendFill(uint8_t byte, int64_t n) {
    if (n > 0) std::memset(end_, byte, static_cast<size_t>(n));
    end_ += n;
  }

  /// Start of the bytes; null before the first Reserve.
  uint8_t* mutable_data() { return bytes_; }
  const uint8_t* data() const { return bytes_; }
  template <typename T>
  T* mutable_data_as() {
    return reinterpret_cast<T*>(mutable_data());
  }
  template <typename T>
  const T* data_as() const {
    return reinterpret_cast<const T*>(data());
  }
  int64_t length() const { return end_ - bytes_; }
  int64_t capacity() const { return limit_ - bytes_; }
  /// True if `n` (>= 0) more bytes fit without a Reserve.
  bool HasRoom(int64_t n) const { return n <= limit_ - end_; }

  /// What TakeBytes hands out.
  struct Bytes {
    uint8_t* data = nullptr;
    int64_t size = 0;
    int64_t capacity = 0;
    std::shared_ptr<MemoryPool> owner;  // the pool's shared owner, or null
  };
  /// Finish's first half, for a caller that makes the buffer object
  /// itself: the bytes (length() of them, capacity padded to 64 and shrunk
  /// as Finish does, padding zero) and the shared owner of the pool they
  /// came from; leaves the builder empty. Requires an allocation
  /// (mutable_data() not null).
  Bytes TakeBytes(bool shrink_to_fit = true) {
    // Bytes that fill their capacity (a multiple of 64) have nothing to
    // shrink and no padding to zero: handed over inline.
    if (end_ != limit_) return TakeBytesPadded(shrink_to_fit);
    Bytes out;
    out.data = bytes_;
    out.size = out.capacity = end_ - bytes_;
    out.owner = std::move(owner_);
    bytes_ = end_ = limit_ = nullptr;
    return out;
  }
  /// True if the bytes belong to the pool's shared owner (an allocation
  /// from a pool with MemoryPool::shared_owner).
  bool has_owner() const { return owner_ != nullptr; }

  /// Hands out the bytes as a buffer of length() bytes (capacity padded to
  /// 64, padding zero) and leaves the builder empty. A builder that never
  /// allocated yields a zero-length buffer. With `shrink_to_fit`, spare
  /// capacity beyond the padded length is returned to the pool.
  Result<std::shared_ptr<Buffer>> Finish(bool shrink_to_fit = true);
  /// Drops the contents and gives the allocation back to the pool.
  void Reset() {
    if (bytes_ != nullptr) FreeBytes();
  }
  /// Drops the contents (Reset) and draws from `pool` from now on.
  void ResetTo(MemoryPool* pool) {
    Reset();
    pool_ = pool;
  }

 private:
  // Reserve's slow path: checks `additional` and grows the allocation.
  Status Grow(int64_t additional);
  // TakeBytes for bytes short of their capacity: shrinks and zeroes the
  // padding.
  Bytes TakeBytesPadded(bool shrink_to_fit);
  // Gives the allocation back to the pool and empties the builder.
  void FreeBytes();

  // Where the bytes come from: the pool's shared owner while there are
  // bytes, if it has one (MemoryPool::shared_owner: a ShmBatchPool's region),
  // so that bytes kept after the pool object went are still given back;
  // else the pool.
  MemoryPool* allocator() const { return owner_ != nullptr ? owner_.get() : pool_; }

  MemoryPool* pool_;
  std::shared_ptr<MemoryPool> owner_;  // set with the allocation, handed to Finish's buffer
  // The allocation (null without one), the end of the bytes appended and
  // the end of the capacity: pointers, so that a value's store cannot
  // alias them.
  uint8_t* bytes_ = nullptr;
  uint8_t* end_ = nullptr;
  uint8_t* limit_ = nullptr;
};

/// A growable bitmap (LSB bit order) on top of BufferBuilder.
class ALKAID_EXPORT BitmapBuilder {
 public:
  explicit BitmapBuilder(MemoryPool* pool) : bytes_(pool) {}

  /// Ensures `additional_bits` more bits can be appended without allocating.
  Status Reserve(int64_t additional_bits);
  void UnsafeAppend(bool bit) {
    if ((length_ & 7) == 0) bytes_.UnsafeAppendZeros(1);
    if (bit) {
      bytes_.mutable_data()[length_ >> 3] |= static_cast<uint8_t>(1u << (length_ & 7));
    } else {
      ++false_count_;
    }
    ++length_;
  }
  void UnsafeAppend(int64_t n, bool bit);
  Status Append(bool bit) {
    ALKAID_RETURN_NOT_OK(Reserve(1));
    UnsafeAppend(bit);
    return Status::OK();
  }

  int64_t length() const { return length_; }
  int64_t false_count() const { return false_count_; }
  const uint8_t* data() const { return bytes_.data(); }
  uint8_t* mutable_data() { return bytes_.mutable_data(); }

  /// The bitmap (BytesForBits(length()) bytes); leaves the builder empty.
  Result<std::shared_ptr<Buffer>> Finish();
  void Reset() {
    bytes_.Reset();
    length_ = 0;
    false_count_ = 0;
  }
  /// Drops the contents (Reset) and draws from `pool` from now on.
  void ResetTo(MemoryPool* pool) {
    Reset();
    bytes_.ResetTo(pool);
  }

 private:
  BufferBuilder bytes_;
  int64_t length_ = 0;
  int64_t false_count_ = 0;
};

}  // namespace internal

/// Base of all array builders.
///
/// The slot-level calls every builder supports are AppendNull(s),
/// AppendEmptyValue(s), Reserve, Finish and Reset; typed subclasses add
/// Append calls for their values. Nested builders own their child builders
/// and expose them (value_builder(), field_builder(i), child_builder(i)...);
/// children are also reachable generically through child(i).
class ALKAID_EXPORT ArrayBuilder {
 public:
  /// `type` is the type of the arrays this builder produces; `pool` supplies
  /// every buffer and must outlive the builder and its arrays.
  ArrayBuilder(TypePtr type, MemoryPool* pool);
  virtual ~ArrayBuilder();
  ArrayBuilder(const ArrayBuilder&) = delete;
  ArrayBuilder& operator=(const ArrayBuilder&) = delete;

  const TypePtr& type() const { return type_; }
  MemoryPool* memory_pool() const { return pool_; }
  /// Number of slots appended since construction or the last Finish/Reset.
  virtual int64_t length() const { return length_; }
  /// Number of null slots among them (0 for types without a validity
  /// bitmap: unions and run-end encoded arrays; length() for null).
  virtual int64_t null_count() const { return null_count_; }

  /// Appends one null slot. For nested types this also appends what the
  /// layout needs below it (see each builder).
  Status AppendNull() { return AppendNulls(1); }
  virtual Status AppendNulls(int64_t n) = 0;
  /// Appends one valid slot holding the type's empty value: 0, false, "",
  /// [], a struct of empty values, the first union child's empty value, the
  /// dictionary's empty value... For the null type this is a null.
  Status AppendEmptyValue() { return AppendEmptyValues(1); }
  virtual Status AppendEmptyValues(int64_t n) = 0;

  /// Ensures room for `additional` more slots without reallocating (for
  /// variable-size types: room for the offsets, not the bytes).
  virtual Status Reserve(int64_t additional);

  /// The built array data (offset 0); the builder is empty afterwards.
  Result<ArrayDataPtr> FinishData();
  /// FinishData() wrapped in the typed Array class for type().
  Result<ArrayPtr> Finish() {
    if (ArrayPtr linked = FinishLinked()) return linked;
    return FinishGeneral();
  }
  /// Discards everything appended (children included).
  virtual void Reset();
  /// Discards everything appended (as Reset) and takes every buffer from
  /// `pool` from now on: a builder kept from one batch to the next, each
  /// batch built in a pool of its own (client::BatchPublisher::NewPool), is
  /// pointed at the next pool rather than made again. After Finish or
  /// Reset a builder holds nothing of its pool, which may then go. The
  /// flat builders (null, boolean, fixed-width, binary and string) support
  /// it; the others fail with NotImplemented and are left as Reset leaves
  /// them, on their old pool.
  Status ResetTo(MemoryPool* pool) {
    // An empty builder that keeps nothing but this base and one value
    // buffer (flat_values_: the fixed-width builders), as Finish leaves
    // it: both pointed at `pool` inline, without the virtual Reset and
    // ResetBuffersTo (which would do just this).
    if (flat_values_ != nullptr && length_ == 0) {
      null_count_ = 0;
      has_bitmap_ = false;
      validity_.ResetTo(pool);
      flat_values_->ResetTo(pool);
      pool_ = pool;
      return Status::OK();
    }
    return ResetToGeneral(pool);
  }

  /// Child builders of nested types (none for flat types).
  int num_children() const { return static_cast<int>(children_.size()); }
  ArrayBuilder* child(int i) const { return children_[static_cast<size_t>(i)].get(); }

 protected:
  /// Builds the array data from the current contents. FinishData() calls it
  /// and then Reset().
  virtual Result<ArrayDataPtr> FinishInternal() = 0;
  /// Finish's path for a builder whose array's objects are already linked
  /// in its pool's object memory (a batch of the shape of the block's last
  /// one): fills them in and returns the array, the builder left empty; or
  /// null, the builder untouched, and Finish takes the general path. The
  /// default is null.
  virtual ArrayPtr FinishLinked() { return nullptr; }
  /// ResetTo's part for the buffers a subclass keeps (the builder is Reset
  /// already): points them at `pool`. The default, for builders that keep
  /// buffers or children this does not know of, is NotImplemented.
  virtual Status ResetBuffersTo(MemoryPool* pool);

  /// Makes room for `additional` validity bits. With `any_null`, also
  /// materialises the bitmap (lazily created at the first null: until then
  /// all slots are valid and no bitmap exists).
  Status ReserveValidity(int64_t additional, bool any_null);
  /// Records validity for one or `n` new slots and adds them to length();
  /// requires a prior ReserveValidity (with any_null if !valid).
  void UnsafeAppendValidity(bool valid) {
    if (has_bitmap_) {
      SyncValidity();
      validity_.UnsafeAppend(valid);
    }
    if (!valid) ++null_count_;
    ++length_;
  }
  void UnsafeAppendValidity(int64_t n, bool valid) {
    if (has_bitmap_) {
      SyncValidity();
      validity_.UnsafeAppend(n, valid);
    }
    if (!valid) null_count_ += n;
    length_ += n;
  }
  /// Adds one valid slot to length() and nothing else: if there is a
  /// bitmap, the slot's bit is written by the next call that extends or
  /// reads it (every slot after the bitmap's end is valid). Writes no memory
  /// but length_, so that a loop of appends keeps it in a register. Requires
  /// a prior ReserveValidity, as UnsafeAppendValidity.
  void UnsafeAppendValid() { ++length_; }
  /// True once a null made the validity bitmap (appends then reserve its bits).
  bool has_bitmap() const { return has_bitmap_; }
  /// Validity from a byte-per-slot array (nullptr: all valid).
  void UnsafeAppendValidityBytes(const uint8_t* valid_bytes, int64_t n);
  /// True if `valid_bytes` (may be null) marks any of its `n` slots null.
  static bool AnyNull(const uint8_t* valid_bytes, int64_t n);
  /// Validity of slot i appended so far.
  bool IsValidSlot(int64_t i) const {
    return !has_bitmap_ || i >= validity_.length() || bit_util::GetBit(validity_.data(), i);
  }
  /// The validity bitmap to put in buffers[0]: nullptr when there are no
  /// nulls. Empties the bitmap.
  Result<std::shared_ptr<Buffer>> FinishValidity();
  /// Checks that a count passed by the caller is non-negative.
  static Status CheckCount(int64_t n, const char* what);
  /// Prefix for error messages: the builder's type.
  std::string Where() const;

  /// A builder whose whole state is this base and one value buffer, and
  /// whose Reset and ResetBuffersTo do nothing else than reset that buffer
  /// and point it at the new pool, sets this to that buffer: ResetTo then
  /// takes its inline way. Null (the default): ResetTo calls them.
  internal::BufferBuilder* flat_values_ = nullptr;
  TypePtr type_;
  MemoryPool* pool_;
  // `long long`, not int64_t (`long`): the compiler's type-based alias
  // analysis then knows that an appended int64_t value (a store through the
  // value buffer) does not write them, and keeps them in registers over a
  // loop of appends. Same width as int64_t.
  long long length_ = 0;      // NOLINT(google-runtime-int): see above
  long long null_count_ = 0;  // NOLINT(google-runtime-int): see above
  std::vector<std::unique_ptr<ArrayBuilder>> children_;

 private:
  // Finish's way when FinishLinked has no array: FinishData, and the typed
  // array made over it.
  Result<ArrayPtr> FinishGeneral();
  // ResetTo's way for every builder but an empty flat one: Reset,
  // ResetBuffersTo.
  Status ResetToGeneral(MemoryPool* pool);
  // Writes the bits of the slots UnsafeAppendValid added (all valid), in
  // space reserved for them.
  void SyncValidity() {
    if (validity_.length() < length_) validity_.UnsafeAppend(length_ - validity_.length(), true);
  }

  internal::BitmapBuilder validity_;
  bool has_bitmap_ = false;
};
static_assert(sizeof(long long) ==
              sizeof(int64_t));  // NOLINT(google-runtime-int): the fields above

}  // namespace alkaid::format
