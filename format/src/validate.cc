#include "alkaid/format/validate.h"

#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>

#include "alkaid/format/record_batch.h"
#include "alkaid/format/shape_validator.h"
#include "validate_internal.h"

namespace alkaid::format {

namespace {

using BufferKind = DataTypeLayout::BufferKind;

// Hostile input may nest types arbitrarily deep; the validator recurses, so
// it stops here. IPC readers of other implementations use the same bound.
constexpr int kMaxNestingDepth = 64;

bool AddOverflows(int64_t a, int64_t b, int64_t* out) { return __builtin_add_overflow(a, b, out); }
bool MulOverflows(int64_t a, int64_t b, int64_t* out) { return __builtin_mul_overflow(a, b, out); }

/// Reads element `index` of `buffer` as T. memcpy: hostile buffers need not
/// be aligned. The caller has checked the bounds.
template <typename T>
T Load(const Buffer& buffer, int64_t index) {
  T v;
  std::memcpy(&v, buffer.data() + index * static_cast<int64_t>(sizeof(T)), sizeof(T));
  return v;
}

int64_t SizeOf(const std::shared_ptr<Buffer>& buffer) {
  return buffer == nullptr ? 0 : buffer->size();
}

/// Human name of buffer `i` of an array whose storage type is `type`.
const char* BufferName(const DataType& type, size_t i) {
  const TypeId id = type.id();
  if (IsUnion(id)) return i == 0 ? "type ids" : "offsets";
  if (id == TypeId::kNull) return "unused";
  if (i == 0) return "validity";
  if (IsBinaryLike(id) || IsLargeBinaryLike(id)) return i == 1 ? "offsets" : "data";
  if (IsBinaryView(id)) return i == 1 ? "views" : "data";
  if (IsListLike(id)) return "offsets";
  if (IsListView(id)) return i == 1 ? "offsets" : "sizes";
  if (id == TypeId::kDictionary) return "indices";
  return "values";
}

/// What the offsets of a binary or list array point into.
enum class OffsetBound { kDataBuffer, kChildArray };

template <typename... Args>
Status Invalid(const std::string& path, Args&&... args) {
  return Status::Invalid("field '", path, "': ", std::forward<Args>(args)...);
}

// ---------------------------------------------------------------------------
// Types

/// Checks a type tree for missing pointers and out-of-range parameters, so
/// that it may then be compared, printed and laid out safely.
Status CheckType(const DataType& type, const std::string& path, int depth) {
  if (depth > kMaxNestingDepth) {
    return Invalid(path, "type nests deeper than ", kMaxNestingDepth, " levels");
  }
  for (int i = 0; i < type.num_fields(); ++i) {
    const FieldPtr& f = type.field(i);
    if (f == nullptr) return Invalid(path, type.name(), " type: child field ", i, " is null");
    if (f->type() == nullptr) {
      return Invalid(path, type.name(), " type: child field '", f->name(), "' has no type");
    }
    ALKAID_RETURN_NOT_OK(CheckType(*f->type(), path + "." + f->name(), depth + 1));
  }
  switch (type.id()) {
    case TypeId::kDecimal32:
    case TypeId::kDecimal64:
    case TypeId::kDecimal128:
    case TypeId::kDecimal256: {
      const auto& d = static_cast<const DecimalType&>(type);
      const int expected_width = type.id() == TypeId::kDecimal32    ? 32
                                 : type.id() == TypeId::kDecimal64  ? 64
                                 : type.id() == TypeId::kDecimal128 ? 128
                                                                    : 256;
      if (d.bit_width() != expected_width) {
        return Invalid(path, type.name(), " type has bit width ", d.bit_width());
      }
      const int32_t max = DecimalType::MaxPrecision(d.bit_width());
      if (d.precision() < 1 || d.precision() > max) {
        return Invalid(path, type.name(), " precision ", d.precision(), " is outside [1, ", max,
                       "]");
      }
      return Status::OK();
    }
    case TypeId::kFixedSizeBinary: {
      const int32_t w = static_cast<const FixedSizeBinaryType&>(type).byte_width();
      // The upper bound keeps the width in bits (BitWidth) representable.
      if (w < 0 || w > std::numeric_limits<int32_t>::max() / 8) {
        return Invalid(path, "fixed_size_binary byte width ", w, " is out of range");
      }
      return Status::OK();
    }
    case TypeId::kList:
    case TypeId::kLargeList:
    case TypeId::kListView:
    case TypeId::kLargeListView:
      if (type.num_fields() != 1) {
        return Invalid(path, type.name(), " type has ", type.num_fields(),
                       " child fields, expected 1");
      }
      return Status::OK();
    case TypeId::kFixedSizeList: {
      if (type.num_fields() != 1) {
        return Invalid(path, type.name(), " type has ", type.num_fields(),
                       " child fields, expected 1");
      }
      const int32_t n = static_cast<const FixedSizeListType&>(type).list_size();
      if (n < 0) return Invalid(path, "fixed_size_list size ", n, " is negative");
      return Status::OK();
    }
    case TypeId::kMap: {
      if (type.num_fields() != 1) {
        return Invalid(path, "map type has ", type.num_fields(), " child fields, expected 1");
      }
      const Field& entries = *type.field(0);
      if (entries.type()->id() != TypeId::kStruct || entries.type()->num_fields() != 2) {
        return Invalid(path, "map entries must be a struct with two fields (key, value), got ",
                       entries.type()->ToString());
      }
      if (entries.nullable()) return Invalid(path, "map entries field must not be nullable");
      if (entries.type()->field(0)->nullable()) {
        return Invalid(path, "map key field must not be nullable");
      }
      return Status::OK();
    }
    case TypeId::kSparseUnion:
    case TypeId::kDenseUnion: {
      const auto& u = static_cast<const UnionType&>(type);
      if (u.num_fields() > UnionType::kMaxTypeCode + 1) {
        return Invalid(path, "union has ", u.num_fields(), " children; at most 128 allowed");
      }
      if (u.type_codes().size() != static_cast<size_t>(u.num_fields())) {
        return Invalid(path, "union has ", u.num_fields(), " children but ", u.type_codes().size(),
                       " type codes");
      }
      if (u.child_ids().size() != static_cast<size_t>(UnionType::kMaxTypeCode) + 1) {
        return Invalid(path, "union type has a malformed type code table");
      }
      for (size_t i = 0; i < u.type_codes().size(); ++i) {
        // NOLINTNEXTLINE(bugprone-signed-char-misuse,cert-str34-c): type codes are int8
        const int code = u.type_codes()[i];
        if (code < 0 || code > UnionType::kMaxTypeCode) {
          return Invalid(path, "union type code ", code, " is outside [0, 127]");
        }
        if (u.child_ids()[static_cast<size_t>(code)] != static_cast<int>(i)) {
          return Invalid(path, "union type code ", code, " is declared twice");
        }
      }
      return Status::OK();
    }
    case TypeId::kDictionary: {
      const auto& d = static_cast<const DictionaryType&>(type);
      if (d.index_type() == nullptr || !IsInteger(d.index_type()->id())) {
        return Invalid(path, "dictionary index type must be an integer type");
      }
      if (d.value_type() == nullptr) return Invalid(path, "dictionary value type is null");
      return CheckType(*d.value_type(), path + ".<dictionary>", depth + 1);
    }
    case TypeId::kRunEndEncoded: {
      if (type.num_fields() != 2) {
        return Invalid(path, "run_end_encoded type has ", type.num_fields(),
                       " child fields, expected 2");
      }
      const TypeId re = type.field(0)->type()->id();
      if (re != TypeId::kInt16 && re != TypeId::kInt32 && re != TypeId::kInt64) {
        return Invalid(path, "run end type must be int16, int32 or int64, got ",
                       type.field(0)->type()->ToString());
      }
      return Status::OK();
    }
    case TypeId::kExtension: {
      const auto& e = static_cast<const ExtensionType&>(type);
      if (e.storage_type() == nullptr) {
        return Invalid(path, "extension type '", e.extension_name(), "' has no storage type");
      }
      return CheckType(*e.storage_type(), path, depth + 1);
    }
    default:
      return Status::OK();
  }
}

// ---------------------------------------------------------------------------
// Arrays

/// Validates one array (and, recursively, its children and dictionary).
/// One instance per array; `path` names it in messages.
class ArrayValidator {
 public:
  ArrayValidator(const ArrayData& data, std::string path, int depth, bool full,
                 bool decimal_precision = true)
      : data_(data),
        path_(std::move(path)),
        depth_(depth),
        full_(full),
        decimal_precision_(decimal_precision) {}

  /// `type_checked`: the caller already ran CheckType on data.type.
  Status Run(bool type_checked) {
    if (depth_ > kMaxNestingDepth) {
      return Invalid("array nests deeper than ", kMaxNestingDepth, " levels");
    }
    if (data_.type == nullptr) return Invalid("type is null");
    if (!type_checked) ALKAID_RETURN_NOT_OK(CheckType(*data_.type, path_, depth_));
    type_ = &StorageType(*data_.type);
    layout_ = &type_->layout();

    if (data_.length < 0) return Invalid("length ", data_.length, " is negative");
    if (data_.offset < 0) return Invalid("offset ", data_.offset, " is negative");
    if (AddOverflows(data_.offset, data_.length, &end_)) {
      return Invalid("offset ", data_.offset, " + length ", data_.length, " overflows");
    }
    ALKAID_RETURN_NOT_OK(CheckBufferCount());
    ALKAID_RETURN_NOT_OK(CheckChildren());
    ALKAID_RETURN_NOT_OK(CheckNullCount());
    ALKAID_RETURN_NOT_OK(CheckValidityBitmap());

    for (size_t i = 0; i < data_.child_data.size(); ++i) {
      ArrayValidator child(*data_.child_data[i], ChildPath(i), depth_ + 1, full_,
                           decimal_precision_);
      ALKAID_RETURN_NOT_OK(child.Run(/*type_checked=*/true));
    }
    ALKAID_RETURN_NOT_OK(CheckLayout());
    if (full_) ALKAID_RETURN_NOT_OK(CheckNullCountAgainstBitmap());
    return Status::OK();
  }

 private:
  template <typename... Args>
  Status Invalid(Args&&... args) const {
    return format::Invalid(path_, std::forward<Args>(args)...);
  }

  std::string ChildPath(size_t i) const {
    return path_ + "." + type_->field(static_cast<int>(i))->name();
  }

  const Buffer* buffer(size_t i) const { return data_.buffers[i].get(); }

  // -- Generic checks --------------------------------------------------------

  Status CheckBufferCount() const {
    const size_t expected = layout_->buffers.size();
    const size_t actual = data_.buffers.size();
    if (type_->id() == TypeId::kNull) {
      // The spec allocates no buffer for nulls; the layout lists one unused
      // slot. Either shape is accepted, but the slot must stay empty.
      if (actual > 1) return Invalid("has ", actual, " buffers, expected at most 1 (null type)");
      if (actual == 1 && data_.buffers[0] != nullptr) {
        return Invalid("null arrays have no buffers, but buffer 0 is present");
      }
      return Status::OK();
    }
    if (layout_->variadic ? actual >= expected : actual == expected) return Status::OK();
    std::string hint;
    if (!layout_->has_validity && actual == expected + 1) {
      hint = " (" + std::string(type_->name()) + " arrays have no validity bitmap)";
    }
    return Invalid("has ", actual, " buffers, expected ", layout_->variadic ? "at least " : "",
                   expected, hint);
  }

  Status CheckChildren() const {
    const size_t expected = static_cast<size_t>(type_->num_fields());
    if (data_.child_data.size() != expected) {
      return Invalid("has ", data_.child_data.size(), " children, expected ", expected, " for ",
                     type_->name());
    }
    for (size_t i = 0; i < expected; ++i) {
      const ArrayDataPtr& child = data_.child_data[i];
      const Field& f = *type_->field(static_cast<int>(i));
      if (child == nullptr) return Invalid("child ", i, " ('", f.name(), "') is null");
      if (child->type == nullptr) return Invalid("child ", i, " ('", f.name(), "') has no type");
      ALKAID_RETURN_NOT_OK(CheckType(*child->type, ChildPath(i), depth_ + 1));
      if (!child->type->Equals(*f.type())) {
        return Invalid("child ", i, " ('", f.name(), "') has type ", child->type->ToString(),
                       ", expected ", f.type()->ToString());
      }
    }
    return Status::OK();
  }

  Status CheckNullCount() const {
    const int64_t nc = data_.null_count;
    if (nc < kUnknownNullCount || nc > data_.length) {
      return Invalid("null_count ", nc, " is outside [0, length ", data_.length, "]");
    }
    if (type_->id() == TypeId::kNull) {
      if (nc != kUnknownNullCount && nc != data_.length) {
        return Invalid("null_count ", nc, " must equal the length ", data_.length,
                       " for the null type");
      }
      return Status::OK();
    }
    if (!layout_->has_validity) {
      if (nc > 0) {
        return Invalid("null_count ", nc, " must be 0: ", type_->name(),
                       " arrays have no validity bitmap");
      }
      return Status::OK();
    }
    if (data_.buffers[0] == nullptr && nc > 0) {
      return Invalid("null_count is ", nc, " but there is no validity bitmap");
    }
    return Status::OK();
  }

  Status CheckValidityBitmap() const {
    if (!layout_->has_validity || data_.buffers[0] == nullptr) return Status::OK();
    return CheckBitBuffer(0);
  }

  /// Buffer i must hold `required` bytes; `need` says why ("4 bytes x
  /// (offset 0 + length 5)"). A missing buffer is accepted only when nothing
  /// is required.
  /// `need()` describes the requirement; it is called only to report an
  /// error, so that a valid array costs no string formatting.
  template <typename Need>
  Status CheckBufferSize(size_t i, int64_t required, const Need& need) const {
    const Buffer* b = buffer(i);
    if (b == nullptr) {
      if (required == 0) return Status::OK();
      return Invalid("buffer ", i, " (", BufferName(*type_, i), ") is missing; ", need(), " = ",
                     required, " bytes are needed");
    }
    if (b->size() < 0) return Invalid("buffer ", i, " has negative size ", b->size());
    if (b->size() < required) {
      return Invalid("buffer ", i, " (", BufferName(*type_, i), ") is ", b->size(),
                     " bytes, too small for ", need(), " = ", required, " bytes");
    }
    return Status::OK();
  }

  std::string OffsetPlusLength(int extra = 0) const {
    std::string s =
        "(offset " + std::to_string(data_.offset) + " + length " + std::to_string(data_.length);
    if (extra != 0) s += " + " + std::to_string(extra);
    return s + ")";
  }

  /// Buffer i holds one bit per slot.
  Status CheckBitBuffer(size_t i) const {
    return CheckBufferSize(i, bit_util::BytesForBits(end_),
                           [this] { return OffsetPlusLength() + " bits"; });
  }

  /// Buffer i holds one `width`-byte value per slot.
  Status CheckFixedWidthBuffer(size_t i, int64_t width) const {
    int64_t required;
    if (MulOverflows(end_, width, &required)) {
      return Invalid("offset + length ", end_, " overflows at ", width, " bytes per value");
    }
    return CheckBufferSize(i, required, [this, width] {
      return std::to_string(width) + " bytes x " + OffsetPlusLength();
    });
  }

  /// Buffer i holds offset + length + 1 offsets when length > 0.
  Status CheckOffsetsBuffer(size_t i, int64_t width) const {
    if (data_.length == 0) return Status::OK();
    int64_t count;
    int64_t required;
    if (AddOverflows(end_, 1, &count) || MulOverflows(count, width, &required)) {
      return Invalid("offset + length ", end_, " overflows at ", width, " bytes per offset");
    }
    return CheckBufferSize(i, required, [this, width] {
      return std::to_string(width) + " bytes x " + OffsetPlusLength(1);
    });
  }

  Status CheckNullCountAgainstBitmap() const {
    if (!layout_->has_validity || data_.buffers[0] == nullptr ||
        data_.null_count == kUnknownNullCount) {
      return Status::OK();
    }
    const int64_t nulls =
        data_.length - bit_util::CountSetBits(buffer(0)->data(), data_.offset, data_.length);
    if (nulls != data_.null_count) {
      return Invalid("null_count ", data_.null_count,
                     " does not match the validity bitmap, which has ", nulls, " nulls");
    }
    return Status::OK();
  }

  bool IsValidSlot(int64_t j) const {
    const Buffer* bm = layout_->has_validity ? buffer(0) : nullptr;
    return bm == nullptr || bit_util::GetBit(bm->data(), data_.offset + j);
  }

  // -- Per-layout checks ------------------------------------------------------

  Status CheckLayout() const {
    switch (type_->id()) {
      case TypeId::kNull:
        return Status::OK();
      case TypeId::kBool:
        return CheckBitBuffer(1);
      case TypeId::kDecimal32:
      case TypeId::kDecimal64:
      case TypeId::kDecimal128:
      case TypeId::kDecimal256:
        return CheckDecimal();
      case TypeId::kBinary:
      case TypeId::kString:
        return CheckBinary<int32_t>();
      case TypeId::kLargeBinary:
      case TypeId::kLargeString:
        return CheckBinary<int64_t>();
      case TypeId::kBinaryView:
      case TypeId::kStringView:
        return CheckBinaryView();
      case TypeId::kList:
      case TypeId::kMap:
        return CheckList<int32_t>();
      case TypeId::kLargeList:
        return CheckList<int64_t>();
      case TypeId::kListView:
        return CheckListView<int32_t>();
      case TypeId::kLargeListView:
        return CheckListView<int64_t>();
      case TypeId::kFixedSizeList:
        return CheckFixedSizeList();
      case TypeId::kStruct:
        return CheckStruct();
      case TypeId::kSparseUnion:
      case TypeId::kDenseUnion:
        return CheckUnion();
      case TypeId::kDictionary:
        return CheckDictionary();
      case TypeId::kRunEndEncoded:
        return CheckRunEndEncoded();
      case TypeId::kExtension:
        break;  // StorageType never returns an extension
      default:
        if (IsFixedWidth(type_->id())) {
          return CheckFixedWidthBuffer(1, layout_->buffers[1].byte_width);
        }
        break;
    }
    return Invalid("cannot validate arrays of type ", type_->ToString());
  }

  Status CheckDecimal() const {
    const auto& d = static_cast<const DecimalType&>(*type_);
    const int width = d.byte_width();
    ALKAID_RETURN_NOT_OK(CheckFixedWidthBuffer(1, width));
    if (!full_ || !decimal_precision_ || data_.length == 0) return Status::OK();
    const uint8_t* values = buffer(1)->data();
    for (int64_t j = 0; j < data_.length; ++j) {
      if (!IsValidSlot(j)) continue;
      const uint8_t* p = values + (data_.offset + j) * width;
      if (!internal::DecimalFitsPrecision(p, width, d.precision())) {
        return Invalid("slot ", j, ": unscaled value ", internal::DecimalToString(p, width),
                       " has more digits than precision ", d.precision());
      }
    }
    return Status::OK();
  }

  Status CheckUtf8(int64_t j, const uint8_t* p, int64_t size) const {
    const internal::Utf8Error e = internal::FindInvalidUtf8(p, size);
    if (e.position < 0) return Status::OK();
    return Invalid("slot ", j, ": invalid UTF-8 at byte ", e.position, " of the value (", e.reason,
                   ")");
  }

  /// binary, string, large_binary, large_string.
  template <typename OffsetT>
  Status CheckBinary() const {
    ALKAID_RETURN_NOT_OK(CheckOffsetsBuffer(1, sizeof(OffsetT)));
    if (data_.length == 0) return Status::OK();
    const int64_t data_size = SizeOf(data_.buffers[2]);
    ALKAID_RETURN_NOT_OK(CheckFirstLastOffsets<OffsetT>(data_size, OffsetBound::kDataBuffer));
    if (!full_) return Status::OK();
    ALKAID_RETURN_NOT_OK(CheckAllOffsets<OffsetT>(data_size, OffsetBound::kDataBuffer));
    if (!IsUtf8(type_->id())) return Status::OK();
    const Buffer& offsets = *buffer(1);
    const uint8_t* chars = data_size > 0 ? buffer(2)->data() : nullptr;
    for (int64_t j = 0; j < data_.length; ++j) {
      if (!IsValidSlot(j)) continue;
      const int64_t start = Load<OffsetT>(offsets, data_.offset + j);
      const int64_t stop = Load<OffsetT>(offsets, data_.offset + j + 1);
      if (stop > start) ALKAID_RETURN_NOT_OK(CheckUtf8(j, chars + start, stop - start));
    }
    return Status::OK();
  }

  /// O(1): the first offset is not negative and the last lies within
  /// `bound` (the data buffer size or the child length) and after the first.
  template <typename OffsetT>
  Status CheckFirstLastOffsets(int64_t bound, OffsetBound kind) const {
    const Buffer& offsets = *buffer(1);
    const int64_t first = Load<OffsetT>(offsets, data_.offset);
    const int64_t last = Load<OffsetT>(offsets, end_);
    if (first < 0) return Invalid("slot 0: offset ", first, " is negative");
    if (last < first) {
      return Invalid("slot ", data_.length - 1, ": end offset ", last,
                     " is less than the first offset ", first, " (offsets must not decrease)");
    }
    if (last > bound) {
      return Invalid("slot ", data_.length - 1, ": end offset ", last, " is past the end of the ",
                     BoundText(bound, kind));
    }
    return Status::OK();
  }

  /// Every offset (null slots included) is within `bound` and none decreases.
  template <typename OffsetT>
  Status CheckAllOffsets(int64_t bound, OffsetBound kind) const {
    const Buffer& offsets = *buffer(1);
    int64_t prev = Load<OffsetT>(offsets, data_.offset);
    for (int64_t j = 0; j < data_.length; ++j) {
      const int64_t next = Load<OffsetT>(offsets, data_.offset + j + 1);
      if (next > bound) {
        return Invalid("slot ", j, ": end offset ", next, " is past the end of the ",
                       BoundText(bound, kind));
      }
      if (next < prev) {
        return Invalid("slot ", j, ": end offset ", next, " is less than its start offset ", prev,
                       " (offsets must not decrease)");
      }
      prev = next;
    }
    return Status::OK();
  }

  /// "12-byte data buffer" or "child array (length 7)".
  static std::string BoundText(int64_t bound, OffsetBound kind) {
    if (kind == OffsetBound::kDataBuffer) return std::to_string(bound) + "-byte data buffer";
    return "child array (length " + std::to_string(bound) + ")";
  }

  Status CheckBinaryView() const {
    ALKAID_RETURN_NOT_OK(CheckFixedWidthBuffer(1, sizeof(BinaryViewHeader)));
    if (!full_ || data_.length == 0) return Status::OK();
    const Buffer& views = *buffer(1);
    const int64_t num_data_buffers = static_cast<int64_t>(data_.buffers.size()) - 2;
    const bool utf8 = IsUtf8(type_->id());
    // Views of null slots are unspecified and never read (validate.h).
    for (int64_t j = 0; j < data_.length; ++j) {
      if (!IsValidSlot(j)) continue;
      const auto v = Load<BinaryViewHeader>(views, data_.offset + j);
      const int32_t size = v.size();
      if (size < 0) return Invalid("slot ", j, ": view size ", size, " is negative");
      if (size <= BinaryViewHeader::kInlineSize) {
        for (int32_t k = size; k < BinaryViewHeader::kInlineSize; ++k) {
          if (v.inlined.data[k] != 0) {
            return Invalid("slot ", j, ": inline view of ", size,
                           " bytes is not zero-padded (byte ", k, " is ",
                           static_cast<int>(v.inlined.data[k]), ")");
          }
        }
        if (utf8) ALKAID_RETURN_NOT_OK(CheckUtf8(j, v.inlined.data, size));
        continue;
      }
      const int32_t index = v.ref.buffer_index;
      if (index < 0 || index >= num_data_buffers) {
        return Invalid("slot ", j, ": view references data buffer ", index, ", but the array has ",
                       num_data_buffers, " data buffers");
      }
      const int32_t off = v.ref.offset;
      if (off < 0) return Invalid("slot ", j, ": view offset ", off, " is negative");
      const auto& data_buffer = data_.buffers[static_cast<size_t>(index) + 2];
      const int64_t buffer_size = SizeOf(data_buffer);
      if (static_cast<int64_t>(off) + size > buffer_size) {
        return Invalid("slot ", j, ": view range [", off, ", ", static_cast<int64_t>(off) + size,
                       ") is past the end of the ", buffer_size, "-byte data buffer ", index,
                       " (buffer ", index + 2, ")");
      }
      const uint8_t* value = data_buffer->data() + off;
      if (std::memcmp(value, v.ref.prefix, 4) != 0) {
        return Invalid("slot ", j, ": view prefix does not match the first 4 bytes of the value");
      }
      if (utf8) ALKAID_RETURN_NOT_OK(CheckUtf8(j, value, size));
    }
    return Status::OK();
  }

  /// list, large_list and map.
  template <typename OffsetT>
  Status CheckList() const {
    ALKAID_RETURN_NOT_OK(CheckOffsetsBuffer(1, sizeof(OffsetT)));
    const ArrayData& child = *data_.child_data[0];
    if (data_.length > 0) {
      ALKAID_RETURN_NOT_OK(CheckFirstLastOffsets<OffsetT>(child.length, OffsetBound::kChildArray));
      if (full_)
        ALKAID_RETURN_NOT_OK(CheckAllOffsets<OffsetT>(child.length, OffsetBound::kChildArray));
    }
    if (type_->id() == TypeId::kMap) return CheckMapKeys(child);
    return Status::OK();
  }

  Status CheckMapKeys(const ArrayData& entries) const {
    // The entries child was validated (two children, buffers sized) already.
    const ArrayData& keys = *entries.child_data[0];
    // Structurally the recorded count is trusted; the full check counts the
    // bitmap when the count is unknown (and the keys' own full validation
    // has compared a known count with the bitmap).
    int64_t nulls = keys.null_count;
    if (full_ && nulls == kUnknownNullCount) nulls = keys.GetNullCount();
    if (nulls > 0) {
      return Invalid("map keys must not be null, but child '", ChildPath(0), ".",
                     entries.type->field(0)->name(), "' has ", nulls, " nulls");
    }
    return Status::OK();
  }

  template <typename OffsetT>
  Status CheckListView() const {
    ALKAID_RETURN_NOT_OK(CheckFixedWidthBuffer(1, sizeof(OffsetT)));
    ALKAID_RETURN_NOT_OK(CheckFixedWidthBuffer(2, sizeof(OffsetT)));
    if (!full_ || data_.length == 0) return Status::OK();
    const int64_t child_length = data_.child_data[0]->length;
    const Buffer& offsets = *buffer(1);
    const Buffer& sizes = *buffer(2);
    for (int64_t j = 0; j < data_.length; ++j) {
      const int64_t off = Load<OffsetT>(offsets, data_.offset + j);
      const int64_t size = Load<OffsetT>(sizes, data_.offset + j);
      if (off < 0) return Invalid("slot ", j, ": offset ", off, " is negative");
      if (size < 0) return Invalid("slot ", j, ": size ", size, " is negative");
      // Both are non-negative, so the subtraction cannot overflow.
      if (off > child_length - size) {
        return Invalid("slot ", j, ": offset ", off, " + size ", size,
                       " is past the end of the child array (length ", child_length, ")");
      }
    }
    return Status::OK();
  }

  Status CheckFixedSizeList() const {
    const int64_t list_size = static_cast<const FixedSizeListType&>(*type_).list_size();
    int64_t required;
    if (MulOverflows(end_, list_size, &required)) {
      return Invalid("offset + length ", end_, " x list size ", list_size, " overflows");
    }
    const int64_t child_length = data_.child_data[0]->length;
    if (child_length < required) {
      return Invalid("child '", ChildPath(0), "' has length ", child_length, ", too short: need ",
                     required, " (offset + length ", end_, " x list size ", list_size, ")");
    }
    return Status::OK();
  }

  Status CheckStruct() const {
    for (size_t i = 0; i < data_.child_data.size(); ++i) {
      const int64_t child_length = data_.child_data[i]->length;
      if (child_length < end_) {
        return Invalid("child '", ChildPath(i), "' has length ", child_length,
                       ", too short for offset + length ", end_);
      }
    }
    return Status::OK();
  }

  Status CheckUnion() const {
    const auto& u = static_cast<const UnionType&>(*type_);
    const bool dense = u.mode() == UnionMode::kDense;
    ALKAID_RETURN_NOT_OK(CheckFixedWidthBuffer(0, 1));
    if (dense) {
      ALKAID_RETURN_NOT_OK(CheckFixedWidthBuffer(1, sizeof(int32_t)));
    } else {
      for (size_t i = 0; i < data_.child_data.size(); ++i) {
        const int64_t child_length = data_.child_data[i]->length;
        if (child_length < end_) {
          return Invalid("child '", ChildPath(i), "' has length ", child_length,
                         ", too short for offset + length ", end_, " of a sparse union");
        }
      }
    }
    if (!full_ || data_.length == 0) return Status::OK();
    // Every slot, null or not: a union's nulls live in its children, so the
    // type code and offset are read to find out.
    const uint8_t* codes = buffer(0)->data() + data_.offset;
    for (int64_t j = 0; j < data_.length; ++j) {
      // NOLINTNEXTLINE(bugprone-signed-char-misuse,cert-str34-c): type codes are int8
      const int code = static_cast<int8_t>(codes[j]);
      const int child = code < 0 ? -1 : u.child_ids()[static_cast<size_t>(code)];
      if (child < 0) {
        std::string declared;
        for (int8_t c : u.type_codes()) {
          declared += (declared.empty() ? "" : ", ") + std::to_string(int{c});
        }
        return Invalid(
            "slot ", j, ": type code ", code,
            " is not declared by the union (declared: ", declared.empty() ? "none" : declared, ")");
      }
      if (!dense) continue;
      const int64_t off = Load<int32_t>(*buffer(1), data_.offset + j);
      const int64_t child_length = data_.child_data[static_cast<size_t>(child)]->length;
      if (off < 0) return Invalid("slot ", j, ": offset ", off, " is negative");
      if (off >= child_length) {
        return Invalid("slot ", j, ": offset ", off, " is past the end of child '",
                       ChildPath(static_cast<size_t>(child)), "' (length ", child_length, ")");
      }
    }
    return Status::OK();
  }

  Status CheckDictionary() const {
    const auto& dict_type = static_cast<const DictionaryType&>(*type_);
    const int64_t index_width = BitWidth(dict_type.index_type()->id()) / 8;
    ALKAID_RETURN_NOT_OK(CheckFixedWidthBuffer(1, index_width));
    const ArrayDataPtr& dict = data_.dictionary;
    if (dict == nullptr) return Invalid("dictionary array has no dictionary attached");
    const std::string dict_path = path_ + ".<dictionary>";
    if (dict->type == nullptr) return format::Invalid(dict_path, "type is null");
    ALKAID_RETURN_NOT_OK(CheckType(*dict->type, dict_path, depth_ + 1));
    if (!dict->type->Equals(*dict_type.value_type())) {
      return Invalid("dictionary has type ", dict->type->ToString(), ", expected the value type ",
                     dict_type.value_type()->ToString());
    }
    ArrayValidator dict_validator(*dict, dict_path, depth_ + 1, full_, decimal_precision_);
    ALKAID_RETURN_NOT_OK(dict_validator.Run(/*type_checked=*/true));
    if (!full_ || data_.length == 0) return Status::OK();
    switch (dict_type.index_type()->id()) {
      case TypeId::kInt8:
        return CheckIndices<int8_t>(dict->length);
      case TypeId::kUInt8:
        return CheckIndices<uint8_t>(dict->length);
      case TypeId::kInt16:
        return CheckIndices<int16_t>(dict->length);
      case TypeId::kUInt16:
        return CheckIndices<uint16_t>(dict->length);
      case TypeId::kInt32:
        return CheckIndices<int32_t>(dict->length);
      case TypeId::kUInt32:
        return CheckIndices<uint32_t>(dict->length);
      case TypeId::kInt64:
        return CheckIndices<int64_t>(dict->length);
      case TypeId::kUInt64:
        return CheckIndices<uint64_t>(dict->length);
      default:
        return Invalid("dictionary index type must be an integer type");
    }
  }

  template <typename IndexT>
  Status CheckIndices(int64_t dict_length) const {
    const Buffer& indices = *buffer(1);
    for (int64_t j = 0; j < data_.length; ++j) {
      if (!IsValidSlot(j)) continue;
      const IndexT index = Load<IndexT>(indices, data_.offset + j);
      // Compare in the index's own signedness: uint64 values above INT64_MAX
      // must not wrap into range.
      bool in_range;
      if constexpr (std::is_signed_v<IndexT>) {
        in_range = index >= 0 && static_cast<int64_t>(index) < dict_length;
      } else {
        in_range = static_cast<uint64_t>(index) < static_cast<uint64_t>(dict_length);
      }
      if (!in_range) {
        return Invalid("slot ", j, ": dictionary index ", +index, " is outside [0, ", dict_length,
                       ")");
      }
    }
    return Status::OK();
  }

  Status CheckRunEndEncoded() const {
    // Both children have been validated: their buffers are large enough.
    const ArrayData& run_ends = *data_.child_data[0];
    const ArrayData& values = *data_.child_data[1];
    const std::string run_ends_path = ChildPath(0);
    if (run_ends.null_count > 0) {
      return format::Invalid(run_ends_path, "run ends must not be null, but null_count is ",
                             run_ends.null_count);
    }
    if (values.length < run_ends.length) {
      return Invalid("values child has length ", values.length, ", shorter than the ",
                     run_ends.length, " run ends");
    }
    if (data_.length == 0) return full_ ? CheckRunEnds(run_ends, run_ends_path) : Status::OK();
    if (run_ends.length == 0) {
      return Invalid("run_ends is empty but the array has length ", data_.length);
    }
    const int64_t last = RunEndAt(run_ends, run_ends.length - 1);
    if (last < end_) {
      return format::Invalid(run_ends_path, "slot ", run_ends.length - 1, ": last run end ", last,
                             " is less than the parent's offset + length ", end_);
    }
    return full_ ? CheckRunEnds(run_ends, run_ends_path) : Status::OK();
  }

  static int64_t RunEndAt(const ArrayData& run_ends, int64_t k) {
    const Buffer& values = *run_ends.buffers[1];
    const int64_t at = run_ends.offset + k;
    switch (run_ends.type->id()) {
      case TypeId::kInt16:
        return Load<int16_t>(values, at);
      case TypeId::kInt32:
        return Load<int32_t>(values, at);
      default:
        return Load<int64_t>(values, at);
    }
  }

  static Status CheckRunEnds(const ArrayData& run_ends, const std::string& path) {
    const Buffer* bitmap = run_ends.buffers[0].get();
    int64_t prev = 0;
    for (int64_t k = 0; k < run_ends.length; ++k) {
      if (bitmap != nullptr && !bit_util::GetBit(bitmap->data(), run_ends.offset + k)) {
        return format::Invalid(path, "slot ", k, ": run end is null; run ends must not be null");
      }
      const int64_t v = RunEndAt(run_ends, k);
      if (v <= 0) {
        return format::Invalid(path, "slot ", k, ": run end ", v, " is not positive");
      }
      if (k > 0 && v <= prev) {
        return format::Invalid(path, "slot ", k, ": run end ", v,
                               " is not greater than the previous run end ", prev,
                               " (run ends must strictly increase)");
      }
      prev = v;
    }
    return Status::OK();
  }

  const ArrayData& data_;
  const std::string path_;
  const int depth_;
  const bool full_;
  const bool decimal_precision_;
  const DataType* type_ = nullptr;  // storage type of data_.type
  const DataTypeLayout* layout_ = nullptr;
  int64_t end_ = 0;  // offset + length, checked for overflow
};

Status ValidateImpl(const ArrayData& data, std::string_view name, bool full,
                    bool decimal_precision = true) {
  const std::string path(name);
  ArrayValidator validator(data, path, /*depth=*/0, full, decimal_precision);
  return validator.Run(/*type_checked=*/false);
}

Status ValidateBatch(const RecordBatch& batch, bool full, bool decimal_precision = true) {
  const Schema& schema = *batch.schema();
  if (batch.num_columns() != schema.num_fields()) {
    return Status::Invalid("record batch has ", batch.num_columns(), " columns but its schema ",
                           schema.num_fields(), " fields");
  }
  for (int i = 0; i < batch.num_columns(); ++i) {
    if (schema.field(i) == nullptr || schema.field(i)->type() == nullptr) {
      return Status::Invalid("record batch schema field ", i, " has no type");
    }
    const std::string& name = schema.field(i)->name();
    ALKAID_RETURN_NOT_OK(CheckType(*schema.field(i)->type(), name, 0));
    const ArrayDataPtr& column = batch.column_data(i);
    if (column == nullptr) return Invalid(name, "column ", i, " is null");
    if (column->length != batch.num_rows()) {
      return Invalid(name, "column ", i, " has length ", column->length, ", expected ",
                     batch.num_rows(), " rows");
    }
    ALKAID_RETURN_NOT_OK(ValidateImpl(*column, name, full, decimal_precision));
    if (!column->type->Equals(*schema.field(i)->type())) {
      return Invalid(name, "column ", i, " has type ", column->type->ToString(),
                     ", but the schema says ", schema.field(i)->type()->ToString());
    }
  }
  return Status::OK();
}

}  // namespace

Status Validate(const ArrayData& data, std::string_view name) {
  return ValidateImpl(data, name, /*full=*/false);
}

Status ValidateFull(const ArrayData& data, std::string_view name) {
  return ValidateImpl(data, name, /*full=*/true);
}

Status Validate(const RecordBatch& batch) { return ValidateBatch(batch, /*full=*/false); }

Status ValidateFull(const RecordBatch& batch) { return ValidateBatch(batch, /*full=*/true); }

Status ValidateFull(const ArrayData& data, std::string_view name,
                    const FullValidationOptions& options) {
  return ValidateImpl(data, name, /*full=*/true, options.decimal_precision);
}

Status ValidateFull(const RecordBatch& batch, const FullValidationOptions& options) {
  return ValidateBatch(batch, /*full=*/true, options.decimal_precision);
}

}  // namespace alkaid::format

// ---- ShapeValidator (shape_validator.h) -----------------------------------------

namespace alkaid::format {

namespace {

int64_t LoadWidth(const uint8_t* p, int64_t i, int width) {
  switch (width) {
    case 2: {
      int16_t v;
      std::memcpy(&v, p + i * 2, 2);
      return v;
    }
    case 4: {
      int32_t v;
      std::memcpy(&v, p + i * 4, 4);
      return v;
    }
    default: {
      int64_t v;
      std::memcpy(&v, p + i * 8, 8);
      return v;
    }
  }
}

// Adds the checks of `data` (at `column`, `path`) and its children; false
// if a verdict would read values the checks do not cover.
bool CollectChecks(const ArrayData& data, uint32_t column, std::vector<uint32_t>* path,
                   std::vector<ShapeValidator::Check>* out) {
  const DataType& t = StorageType(*data.type);
  using Check = ShapeValidator::Check;
  switch (t.id()) {
    case TypeId::kDictionary:
      return false;
    case TypeId::kBinary:
    case TypeId::kString:
    case TypeId::kLargeBinary:
    case TypeId::kLargeString:
      if (data.length > 0) {
        Check c;
        c.width = t.id() == TypeId::kBinary || t.id() == TypeId::kString ? 4 : 8;
        c.column = column;
        c.children = *path;
        c.first_at = data.offset;
        c.last_at = data.offset + data.length;
        c.bound = SizeOf(data.buffers[2]);
        out->push_back(std::move(c));
      }
      break;
    case TypeId::kList:
    case TypeId::kMap:
    case TypeId::kLargeList:
      if (data.length > 0) {
        Check c;
        c.width = t.id() == TypeId::kLargeList ? 8 : 4;
        c.column = column;
        c.children = *path;
        c.first_at = data.offset;
        c.last_at = data.offset + data.length;
        c.bound = data.child_data[0]->length;
        out->push_back(std::move(c));
      }
      break;
    case TypeId::kRunEndEncoded: {
      const ArrayData& run_ends = *data.child_data[0];
      if (data.length > 0 && run_ends.length > 0) {
        Check c;
        c.kind = Check::Kind::kRunEnd;
        c.width = static_cast<uint8_t>(run_ends.type->layout().buffers[1].byte_width);
        c.column = column;
        c.children = *path;
        c.children.push_back(0);
        c.last_at = run_ends.offset + run_ends.length - 1;
        c.bound = data.offset + data.length;
        out->push_back(std::move(c));
      }
      break;
    }
    default:
      break;
  }
  for (uint32_t k = 0; k < data.child_data.size(); ++k) {
    path->push_back(k);
    const bool ok = CollectChecks(*data.child_data[k], column, path, out);
    path->pop_back();
    if (!ok) return false;
  }
  return true;
}

}  // namespace

std::unique_ptr<ShapeValidator> ShapeValidator::Make(const RecordBatch& prototype) {
  std::vector<Check> checks;
  std::vector<uint32_t> path;
  for (int i = 0; i < prototype.num_columns(); ++i) {
    if (!CollectChecks(*prototype.column_data(i), static_cast<uint32_t>(i), &path, &checks)) {
      return nullptr;
    }
  }
  return std::unique_ptr<ShapeValidator>(new ShapeValidator(std::move(checks)));
}

Status ShapeValidator::Validate(const RecordBatch& batch) const {
  for (const Check& c : checks_) {
    const ArrayData* a = batch.column_data(static_cast<int>(c.column)).get();
    for (uint32_t k : c.children) a = a->child_data[k].get();
    const uint8_t* values = a->buffers[1]->data();
    const int64_t last = LoadWidth(values, c.last_at, c.width);
    bool ok;
    if (c.kind == Check::Kind::kRunEnd) {
      ok = last >= c.bound;
    } else {
      const int64_t first = LoadWidth(values, c.first_at, c.width);
      ok = first >= 0 && last >= first && last <= c.bound;
    }
    // Validate's own words for what is wrong.
    if (!ok) return format::Validate(batch);
  }
  return Status::OK();
}

}  // namespace alkaid::format
