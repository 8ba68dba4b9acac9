#include "alkaid/format/array_data.h"

namespace alkaid::format {

ArrayDataPtr ArrayData::Slice(int64_t off, int64_t len) const {
  auto out = std::make_shared<ArrayData>(*this);
  out->offset = offset + off;
  out->length = len;
  if (type->id() == TypeId::kNull) {
    out->null_count = len;
  } else if (null_count == 0 || len == 0) {
    out->null_count = 0;
  } else if (null_count != length || !type->layout().has_validity) {
    out->null_count = kUnknownNullCount;
  }
  // (all-null stays all-null: null_count == length keeps len below)
  if (null_count == length && null_count > 0 && type->layout().has_validity) out->null_count = len;
  return out;
}

int64_t ArrayData::GetNullCount() const {
  if (null_count != kUnknownNullCount) return null_count;
  switch (type->id()) {
    case TypeId::kNull:
      return length;
    case TypeId::kSparseUnion:
    case TypeId::kDenseUnion:
    case TypeId::kRunEndEncoded:
      return 0;
    default:
      break;
  }
  if (!HasValidityBitmap()) return 0;
  return length - bit_util::CountSetBits(buffers[0]->data(), offset, length);
}

}  // namespace alkaid::format
