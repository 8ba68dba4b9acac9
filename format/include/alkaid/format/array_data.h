#pragma once

/// \file
/// ArrayData: the physical representation of an array (type, length, null
/// count, offset, buffers, children, dictionary), exactly as the format lays
/// it out. Typed accessors live in array.h.

#include <cstdint>
#include <memory>
#include <vector>

#include "alkaid/common/export.h"
#include "alkaid/format/bit_util.h"
#include "alkaid/format/buffer.h"
#include "alkaid/format/type.h"

namespace alkaid::format {

/// Marks a null count that has not been computed yet.
inline constexpr int64_t kUnknownNullCount = -1;

/// The buffers and children of one array.
///
/// `buffers` follow the type's layout (DataTypeLayout) in spec order; a null
/// entry where a validity bitmap would be means "no nulls" (null_count must
/// then be 0). For view types, data buffers follow the views buffer. `offset`
/// is the logical start within the buffers, so slicing copies nothing.
/// Dictionary arrays hold their indices here and the values in `dictionary`.
///
/// ArrayData is immutable once shared: build it, then hand out
/// shared_ptr<const ArrayData> or wrap it in an Array.
struct ALKAID_EXPORT ArrayData {
  TypePtr type;
  int64_t length = 0;
  int64_t null_count = 0;
  int64_t offset = 0;
  std::vector<std::shared_ptr<Buffer>> buffers;
  std::vector<ArrayDataPtr> child_data;
  ArrayDataPtr dictionary;

  static ArrayDataPtr Make(TypePtr type, int64_t length,
                           std::vector<std::shared_ptr<Buffer>> buffers,
                           int64_t null_count = kUnknownNullCount, int64_t offset = 0) {
    auto d = std::make_shared<ArrayData>();
    d->type = std::move(type);
    d->length = length;
    d->null_count = null_count;
    d->offset = offset;
    d->buffers = std::move(buffers);
    return d;
  }
  static ArrayDataPtr Make(TypePtr type, int64_t length,
                           std::vector<std::shared_ptr<Buffer>> buffers,
                           std::vector<ArrayDataPtr> child_data,
                           int64_t null_count = kUnknownNullCount, int64_t offset = 0) {
    auto d = Make(std::move(type), length, std::move(buffers), null_count, offset);
    d->child_data = std::move(child_data);
    return d;
  }

  /// A zero-copy slice [off, off + len) of this array (no bounds checks:
  /// callers check against `length`). Children are not sliced: offsets
  /// compose, as the format specifies.
  ArrayDataPtr Slice(int64_t off, int64_t len) const;

  /// The null count, computing it from the validity bitmap when unknown.
  /// For types without a validity bitmap (null, unions, run-end encoded) it
  /// is the stored value: length for null, 0 for the others.
  int64_t GetNullCount() const;

  /// True if buffer 0 is a validity bitmap that is present.
  bool HasValidityBitmap() const {
    return !buffers.empty() && buffers[0] != nullptr && type->layout().has_validity;
  }

  /// Validity from the bitmap alone (true when there is none). For the null
  /// type always false. Unions, run-end encoded and dictionary arrays have
  /// logical validity elsewhere; see Array::IsNull.
  bool IsValid(int64_t i) const {
    if (type->id() == TypeId::kNull) return false;
    if (!HasValidityBitmap()) return true;
    return bit_util::GetBit(buffers[0]->data(), offset + i);
  }
  bool IsNull(int64_t i) const { return !IsValid(i); }

  /// Pointer to element `offset` of buffer `i` viewed as T.
  template <typename T>
  const T* GetValues(int i) const {
    const auto& b = buffers[static_cast<size_t>(i)];
    return b == nullptr ? nullptr : b->data_as<T>() + offset;
  }
};

}  // namespace alkaid::format
