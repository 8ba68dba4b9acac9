// Record batch -> UnsafeRow rows (docs/UNSAFE_ROW.md).

#include <bit>
#include <cstring>
#include <limits>
#include <string>
#include <string_view>

#include "alkaid/format/unsafe_row.h"
#include "unsafe_row_internal.h"

namespace alkaid::format {

static_assert(std::endian::native == std::endian::little,
              "UnsafeRow values are little-endian; this encoder copies native values");

namespace internal {
namespace {

/// Writes the values of one row (and everything nested in it) at the end of
/// `out`. Positions are kept as indices into `out`, which reallocates.
class RowEncoder {
 public:
  explicit RowEncoder(std::vector<uint8_t>* out) : out_(out) {}

  /// A row of `fields` whose values are element `index` of each column.
  Status WriteRow(const std::vector<ArrayDataPtr>& columns, const FieldVector& fields,
                  int64_t index) {
    const int64_t n = static_cast<int64_t>(fields.size());
    const int64_t begin = Grow(NullBitsetBytes(n) + 8 * n);
    const int64_t slots = begin + NullBitsetBytes(n);
    for (int64_t f = 0; f < n; ++f) {
      const ArrayData* a = columns[static_cast<size_t>(f)].get();
      int64_t i = index;
      const RowKind kind = RowKindOf(*fields[static_cast<size_t>(f)]->type());
      ALKAID_ASSIGN_OR_RAISE(bool is_null, ResolveNull(a, i));
      const int64_t slot = slots + 8 * f;
      if (is_null) {
        SetNullBit(begin, f);
        if (kind == RowKind::kLongDecimal) {
          // Spark reserves the 16 bytes of a null long decimal too, so that
          // it can be set in place later; the slot keeps the offset, size 0.
          const int64_t at = Grow(16);
          StoreU64(out_->data() + slot, static_cast<uint64_t>(at - begin) << 32);
        }
        continue;
      }
      if (!IsVariableKind(kind)) {
        ALKAID_RETURN_NOT_OK(WriteFixed(kind, *a, i, slot));
        continue;
      }
      const int64_t at = static_cast<int64_t>(out_->size());
      ALKAID_ASSIGN_OR_RAISE(uint64_t size, WriteVariable(kind, *a, i, /*in_array=*/false));
      StoreU64(out_->data() + slot, (static_cast<uint64_t>(at - begin) << 32) | size);
    }
    return Status::OK();
  }

 private:
  /// Appends `n` zero bytes; returns where they start.
  int64_t Grow(int64_t n) {
    const size_t at = out_->size();
    out_->resize(at + static_cast<size_t>(n));
    return static_cast<int64_t>(at);
  }

  void SetNullBit(int64_t bitset, int64_t i) {
    out_->data()[bitset + (i >> 3)] |= static_cast<uint8_t>(1u << (i & 7));
  }

  /// Follows dictionaries to the value array and reports whether the value
  /// at `i` is null. On return `a`/`i` address the value itself.
  static Result<bool> ResolveNull(const ArrayData*& a, int64_t& i) {
    while (true) {
      if (a->type->id() == TypeId::kNull) return true;
      if (a->IsNull(i)) return true;
      if (a->type->id() != TypeId::kDictionary) return false;
      const auto& dict_type = static_cast<const DictionaryType&>(*a->type);
      const uint8_t* p = a->buffers[1]->data();
      const int64_t slot = a->offset + i;
      int64_t idx = 0;
      switch (dict_type.index_type()->id()) {
        case TypeId::kInt8:
          // NOLINTNEXTLINE(bugprone-signed-char-misuse,cert-str34-c): an int8 index is signed
          idx = reinterpret_cast<const int8_t*>(p)[slot];
          break;
        case TypeId::kUInt8: idx = p[slot]; break;
        case TypeId::kInt16: idx = reinterpret_cast<const int16_t*>(p)[slot]; break;
        case TypeId::kUInt16: idx = reinterpret_cast<const uint16_t*>(p)[slot]; break;
        case TypeId::kInt32: idx = reinterpret_cast<const int32_t*>(p)[slot]; break;
        case TypeId::kUInt32: idx = reinterpret_cast<const uint32_t*>(p)[slot]; break;
        case TypeId::kInt64: idx = reinterpret_cast<const int64_t*>(p)[slot]; break;
        default: {
          uint64_t u = reinterpret_cast<const uint64_t*>(p)[slot];
          idx = u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) ? -1
                                                                                : static_cast<int64_t>(u);
        }
      }
      if (a->dictionary == nullptr || idx < 0 || idx >= a->dictionary->length) {
        return Status::Invalid("dictionary index ", idx, " at slot ", i, " is outside the ",
                               a->dictionary == nullptr ? 0 : a->dictionary->length,
                               "-value dictionary");
      }
      a = a->dictionary.get();
      i = idx;
    }
  }

  /// The unscaled value of a decimal slot, little-endian, `width` bytes.
  static const uint8_t* DecimalBytes(const ArrayData& a, int64_t i, int* width) {
    *width = static_cast<const DecimalType&>(*a.type).byte_width();
    return a.buffers[1]->data() + (a.offset + i) * *width;
  }

  /// Writes a fixed-width value's natural-width bytes at out[pos].
  Status WriteFixed(RowKind kind, const ArrayData& a, int64_t i, int64_t pos) {
    uint8_t* dst = out_->data() + pos;
    const int64_t slot = a.offset + i;
    switch (kind) {
      case RowKind::kBool:
        dst[0] = bit_util::GetBit(a.buffers[1]->data(), slot) ? 1 : 0;
        return Status::OK();
      case RowKind::kShortDecimal: {
        int width = 0;
        const uint8_t* le = DecimalBytes(a, i, &width);
        int64_t v = 0;
        if (width == 4) {
          int32_t v32;
          std::memcpy(&v32, le, 4);
          v = v32;
        } else {
          std::memcpy(&v, le, 8);
          const uint8_t ext = v < 0 ? 0xff : 0x00;
          for (int k = 8; k < width; ++k) {
            if (le[k] != ext) {
              return Status::Invalid("decimal at slot ", i, " does not fit the 18 digits of ",
                                     a.type->ToString());
            }
          }
        }
        std::memcpy(dst, &v, 8);
        return Status::OK();
      }
      default: {
        const int64_t w = ArrayElementWidth(kind);
        std::memcpy(dst, a.buffers[1]->data() + slot * w, static_cast<size_t>(w));
        return Status::OK();
      }
    }
  }

  static std::string_view BinaryValue(const ArrayData& a, int64_t i) {
    const int64_t slot = a.offset + i;
    const auto* data = reinterpret_cast<const char*>(
        a.buffers.size() > 2 && a.buffers[2] != nullptr ? a.buffers[2]->data() : nullptr);
    switch (a.type->id()) {
      case TypeId::kBinary:
      case TypeId::kString: {
        const auto* off = a.buffers[1]->data_as<int32_t>() + slot;
        return {data + off[0], static_cast<size_t>(off[1] - off[0])};
      }
      case TypeId::kLargeBinary:
      case TypeId::kLargeString: {
        const auto* off = a.buffers[1]->data_as<int64_t>() + slot;
        return {data + off[0], static_cast<size_t>(off[1] - off[0])};
      }
      default: {  // binary_view, utf8_view
        const uint8_t* view = a.buffers[1]->data() + slot * 16;
        int32_t len;
        std::memcpy(&len, view, 4);
        if (len <= 12) return {reinterpret_cast<const char*>(view + 4), static_cast<size_t>(len)};
        int32_t buf, off;
        std::memcpy(&buf, view + 8, 4);
        std::memcpy(&off, view + 12, 4);
        const auto& b = a.buffers[2 + static_cast<size_t>(buf)];
        return {reinterpret_cast<const char*>(b->data()) + off, static_cast<size_t>(len)};
      }
    }
  }

  /// Appends a variable-width value (8-byte aligned, zero padded) and
  /// returns the size its slot records.
  Result<uint64_t> WriteVariable(RowKind kind, const ArrayData& a, int64_t i, bool in_array) {
    switch (kind) {
      case RowKind::kBinary: {
        std::string_view v = BinaryValue(a, i);
        const int64_t at = Grow(RoundUp8(static_cast<int64_t>(v.size())));
        if (!v.empty()) std::memcpy(out_->data() + at, v.data(), v.size());
        return static_cast<uint64_t>(v.size());
      }
      case RowKind::kLongDecimal: {
        int width = 0;
        const uint8_t* le = DecimalBytes(a, i, &width);
        uint8_t be[32];
        for (int k = 0; k < width; ++k) be[k] = le[width - 1 - k];
        // BigInteger.toByteArray: the fewest bytes that keep the sign bit.
        int start = 0;
        while (start < width - 1 && ((be[start] == 0x00 && (be[start + 1] & 0x80) == 0) ||
                                     (be[start] == 0xff && (be[start + 1] & 0x80) != 0))) {
          ++start;
        }
        const int n = width - start;
        if (n > 16) {
          return Status::Invalid("decimal at slot ", i, " needs ", n,
                                 " bytes, more than the 16 of a 38-digit Spark decimal");
        }
        // Rows reserve a fixed 16 bytes; arrays round the bytes up to 8.
        const int64_t at = Grow(in_array ? RoundUp8(n) : 16);
        std::memcpy(out_->data() + at, be + start, static_cast<size_t>(n));
        return static_cast<uint64_t>(n);
      }
      case RowKind::kArray: {
        const ArrayData& values = *a.child_data[0];
        const FieldPtr& elem = ListValueField(*a.type);
        int64_t start = 0, count = 0;
        const int64_t slot = a.offset + i;
        switch (a.type->id()) {
          case TypeId::kList: {
            const auto* off = a.buffers[1]->data_as<int32_t>() + slot;
            start = off[0];
            count = off[1] - off[0];
            break;
          }
          case TypeId::kLargeList: {
            const auto* off = a.buffers[1]->data_as<int64_t>() + slot;
            start = off[0];
            count = off[1] - off[0];
            break;
          }
          default: {
            count = static_cast<const FixedSizeListType&>(*a.type).list_size();
            start = slot * count;
          }
        }
        return WriteArray(values, start, count, *elem);
      }
      case RowKind::kMap: {
        const ArrayData& entries = *a.child_data[0];
        const auto* off = a.buffers[1]->data_as<int32_t>() + a.offset + i;
        const int64_t start = entries.offset + off[0];
        const int64_t count = off[1] - off[0];
        const auto& map_type = static_cast<const MapType&>(*a.type);
        const int64_t begin = Grow(8);
        ALKAID_ASSIGN_OR_RAISE(uint64_t key_size,
                               WriteArray(*entries.child_data[0], start, count,
                                          *map_type.key_field()));
        StoreU64(out_->data() + begin, key_size);
        ALKAID_ASSIGN_OR_RAISE(uint64_t value_size,
                               WriteArray(*entries.child_data[1], start, count,
                                          *map_type.item_field()));
        return 8 + key_size + value_size;
      }
      case RowKind::kStruct: {
        const int64_t begin = static_cast<int64_t>(out_->size());
        ALKAID_RETURN_NOT_OK(WriteRow(a.child_data, a.type->fields(), a.offset + i));
        return static_cast<uint64_t>(static_cast<int64_t>(out_->size()) - begin);
      }
      default: return Status::Invalid("internal: not a variable-width kind");
    }
  }

  /// Appends an UnsafeArrayData of elements [start, start + count) of
  /// `values`; returns its size.
  Result<uint64_t> WriteArray(const ArrayData& values, int64_t start, int64_t count,
                              const Field& elem) {
    const RowKind kind = RowKindOf(*elem.type());
    const int64_t width = ArrayElementWidth(kind);
    const int64_t bits = NullBitsetBytes(count);
    const int64_t begin = Grow(8 + bits + RoundUp8(count * width));
    StoreU64(out_->data() + begin, static_cast<uint64_t>(count));
    const int64_t elems = begin + 8 + bits;
    for (int64_t k = 0; k < count; ++k) {
      const ArrayData* a = &values;
      int64_t i = start + k;
      ALKAID_ASSIGN_OR_RAISE(bool is_null, ResolveNull(a, i));
      if (is_null) {
        SetNullBit(begin + 8, k);
        continue;
      }
      if (!IsVariableKind(kind)) {
        ALKAID_RETURN_NOT_OK(WriteFixed(kind, *a, i, elems + k * width));
        continue;
      }
      const int64_t at = static_cast<int64_t>(out_->size());
      ALKAID_ASSIGN_OR_RAISE(uint64_t size, WriteVariable(kind, *a, i, /*in_array=*/true));
      StoreU64(out_->data() + elems + 8 * k, (static_cast<uint64_t>(at - begin) << 32) | size);
    }
    return static_cast<uint64_t>(static_cast<int64_t>(out_->size()) - begin);
  }

  std::vector<uint8_t>* out_;
};

}  // namespace
}  // namespace internal

UnsafeRowWriter::UnsafeRowWriter(std::shared_ptr<const RecordBatch> batch)
    : batch_(std::move(batch)) {}
UnsafeRowWriter::~UnsafeRowWriter() = default;

Result<std::unique_ptr<UnsafeRowWriter>> UnsafeRowWriter::Make(
    std::shared_ptr<const RecordBatch> batch) {
  ALKAID_CHECK_INPUT(batch != nullptr, "UnsafeRowWriter needs a batch");
  ALKAID_RETURN_NOT_OK(CheckRowSchema(*batch->schema()));
  return std::unique_ptr<UnsafeRowWriter>(new UnsafeRowWriter(std::move(batch)));
}

Result<int64_t> UnsafeRowWriter::AppendRow(int64_t row, std::vector<uint8_t>* out) {
  if (row < 0 || row >= batch_->num_rows()) {
    return Status::IndexError("row ", row, " is outside the ", batch_->num_rows(), "-row batch");
  }
  const size_t begin = out->size();
  internal::RowEncoder encoder(out);
  Status st = encoder.WriteRow(batch_->columns(), batch_->schema()->fields(), row);
  if (!st.ok()) {
    out->resize(begin);
    return st.WithContext("row " + std::to_string(row));
  }
  const int64_t size = static_cast<int64_t>(out->size() - begin);
  if (size > std::numeric_limits<int32_t>::max()) {
    out->resize(begin);
    return Status::CapacityError("row ", row, " takes ", size,
                                 " bytes; an UnsafeRow holds at most 2^31 - 1");
  }
  return size;
}

Result<std::shared_ptr<Buffer>> UnsafeRowWriter::EncodeRow(int64_t row, MemoryPool* pool) {
  std::vector<uint8_t> bytes;
  ALKAID_ASSIGN_OR_RAISE(int64_t size, AppendRow(row, &bytes));
  ALKAID_ASSIGN_OR_RAISE(auto buffer, AllocateBuffer(size, pool));
  if (size > 0) std::memcpy(buffer->mutable_data(), bytes.data(), static_cast<size_t>(size));
  return std::shared_ptr<Buffer>(std::move(buffer));
}

Result<std::shared_ptr<Buffer>> EncodeRowBatch(const RecordBatch& batch, MemoryPool* pool) {
  // The writer keeps a shared_ptr; alias the caller's batch without owning it.
  std::shared_ptr<const RecordBatch> view(std::shared_ptr<const RecordBatch>(), &batch);
  ALKAID_ASSIGN_OR_RAISE(auto writer, UnsafeRowWriter::Make(view));
  std::vector<uint8_t> bytes;
  for (int64_t r = 0; r < batch.num_rows(); ++r) {
    const size_t prefix = bytes.size();
    bytes.resize(prefix + 4);
    ALKAID_ASSIGN_OR_RAISE(int64_t size, writer->AppendRow(r, &bytes));
    const auto u = static_cast<uint32_t>(size);
    uint8_t* p = bytes.data() + prefix;
    p[0] = static_cast<uint8_t>(u >> 24);
    p[1] = static_cast<uint8_t>(u >> 16);
    p[2] = static_cast<uint8_t>(u >> 8);
    p[3] = static_cast<uint8_t>(u);
  }
  ALKAID_ASSIGN_OR_RAISE(auto buffer, AllocateBuffer(static_cast<int64_t>(bytes.size()), pool));
  if (!bytes.empty()) std::memcpy(buffer->mutable_data(), bytes.data(), bytes.size());
  return std::shared_ptr<Buffer>(std::move(buffer));
}

}  // namespace alkaid::format
