// Record batch -> UnsafeRow rows (docs/UNSAFE_ROW.md).

#include <bit>
#include <cstring>
#include <limits>
#include <span>
#include <string>
#include <string_view>

#include "alkaid/format/unsafe_row.h"
#include "unsafe_row_internal.h"

namespace alkaid::format {

static_assert(std::endian::native == std::endian::little,
              "UnsafeRow values are little-endian; this encoder copies native values");

namespace internal {
namespace {

/// Writes the values of one row (and everything nested in it), or with
/// kWrite false only measures them. Positions are byte offsets from the
/// start of the output; every byte the row takes is inside some Grow()
/// region, zeroed before the values are stored, so padding is always zero.
///
/// Measuring follows exactly the steps of writing, so a measured size is the
/// size written; it skips only what sizes do not depend on (fixed-width
/// values, with their dictionary indices and short-decimal range checks).
/// Writing never trusts that: each
/// Grow() checks the room left, and a row that does not fit stops with
/// out_of_room() set and nothing stored past the end of the output.
template <bool kWrite>
class RowEncoder {
 public:
  /// Measures from position 0.
  RowEncoder() = default;
  /// Writes into `out`, from position 0.
  explicit RowEncoder(std::span<uint8_t> out)
      : data_(out.data()), capacity_(static_cast<int64_t>(out.size())) {}

  /// Bytes taken so far.
  int64_t size() const { return pos_; }
  /// Whether writing stopped because the output was too small.
  bool out_of_room() const { return out_of_room_; }

  /// A row of `fields` whose values are element `index` of each column.
  /// `kinds`, if given, is RowKindOf of each field (computed once per batch
  /// by the callers that encode many rows).
  Status WriteRow(const std::vector<ArrayDataPtr>& columns, const FieldVector& fields,
                  int64_t index, const RowKind* kinds = nullptr) {
    const int64_t n = static_cast<int64_t>(fields.size());
    int64_t begin = 0;
    if (!Grow(NullBitsetBytes(n) + 8 * n, &begin)) return OutOfRoom();
    const int64_t slots = begin + NullBitsetBytes(n);
    for (int64_t f = 0; f < n; ++f) {
      const RowKind kind =
          kinds != nullptr ? kinds[f] : RowKindOf(*fields[static_cast<size_t>(f)]->type());
      // A fixed-width value, null or not, takes its slot only.
      if (!kWrite && !IsVariableKind(kind)) continue;
      const ArrayData* a = columns[static_cast<size_t>(f)].get();
      int64_t i = index;
      ALKAID_ASSIGN_OR_RAISE(bool is_null, ResolveNull(a, i));
      const int64_t slot = slots + 8 * f;
      if (is_null) {
        SetNullBit(begin, f);
        if (kind == RowKind::kLongDecimal) {
          // Spark reserves the 16 bytes of a null long decimal too, so that
          // it can be set in place later; the slot keeps the offset, size 0.
          int64_t at = 0;
          if (!Grow(16, &at)) return OutOfRoom();
          StoreWord(slot, static_cast<uint64_t>(at - begin) << 32);
        }
        continue;
      }
      if (!IsVariableKind(kind)) {
        ALKAID_RETURN_NOT_OK(WriteFixed(kind, *a, i, slot));
        continue;
      }
      const int64_t at = pos_;
      ALKAID_ASSIGN_OR_RAISE(uint64_t size, WriteVariable(kind, *a, i, /*in_array=*/false));
      StoreWord(slot, (static_cast<uint64_t>(at - begin) << 32) | size);
    }
    return Status::OK();
  }

 private:
  /// Takes `n` more bytes (zeroed when writing); `*at` is where they start.
  /// False, with out_of_room() set, if they do not fit the output.
  bool Grow(int64_t n, int64_t* at) {
    *at = pos_;
    if constexpr (kWrite) {
      if (n > capacity_ - pos_) {
        out_of_room_ = true;
        return false;
      }
      if (n > 0) std::memset(data_ + pos_, 0, static_cast<size_t>(n));
    }
    pos_ += n;
    return true;
  }

  /// Stops the row; the caller sees out_of_room() and says how much room
  /// the row needed.
  static Status OutOfRoom() { return Status::CapacityError("the output is too small"); }

  void StoreWord(int64_t pos, uint64_t v) {
    if constexpr (kWrite) StoreU64(data_ + pos, v);
  }

  void SetNullBit(int64_t bitset, int64_t i) {
    if constexpr (kWrite) data_[bitset + (i >> 3)] |= static_cast<uint8_t>(1u << (i & 7));
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
        case TypeId::kUInt8:
          idx = p[slot];
          break;
        case TypeId::kInt16:
          idx = reinterpret_cast<const int16_t*>(p)[slot];
          break;
        case TypeId::kUInt16:
          idx = reinterpret_cast<const uint16_t*>(p)[slot];
          break;
        case TypeId::kInt32:
          idx = reinterpret_cast<const int32_t*>(p)[slot];
          break;
        case TypeId::kUInt32:
          idx = reinterpret_cast<const uint32_t*>(p)[slot];
          break;
        case TypeId::kInt64:
          idx = reinterpret_cast<const int64_t*>(p)[slot];
          break;
        default: {
          uint64_t u = reinterpret_cast<const uint64_t*>(p)[slot];
          idx = u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())
                    ? -1
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

  /// Writes a fixed-width value's natural-width bytes at `pos` (its size
  /// is its slot's, so measuring has nothing to do).
  Status WriteFixed(RowKind kind, const ArrayData& a, int64_t i, int64_t pos) {
    if constexpr (!kWrite) return Status::OK();
    uint8_t* dst = data_ + pos;
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
        int64_t at = 0;
        if (!Grow(RoundUp8(static_cast<int64_t>(v.size())), &at)) return OutOfRoom();
        if constexpr (kWrite) {
          if (!v.empty()) std::memcpy(data_ + at, v.data(), v.size());
        }
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
        int64_t at = 0;
        if (!Grow(in_array ? RoundUp8(n) : 16, &at)) return OutOfRoom();
        if constexpr (kWrite) std::memcpy(data_ + at, be + start, static_cast<size_t>(n));
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
        int64_t begin = 0;
        if (!Grow(8, &begin)) return OutOfRoom();
        ALKAID_ASSIGN_OR_RAISE(uint64_t key_size, WriteArray(*entries.child_data[0], start, count,
                                                             *map_type.key_field()));
        StoreWord(begin, key_size);
        ALKAID_ASSIGN_OR_RAISE(uint64_t value_size, WriteArray(*entries.child_data[1], start, count,
                                                               *map_type.item_field()));
        return 8 + key_size + value_size;
      }
      case RowKind::kStruct: {
        const int64_t begin = pos_;
        ALKAID_RETURN_NOT_OK(WriteRow(a.child_data, a.type->fields(), a.offset + i));
        return static_cast<uint64_t>(pos_ - begin);
      }
      default:
        return Status::Invalid("internal: not a variable-width kind");
    }
  }

  /// Appends an UnsafeArrayData of elements [start, start + count) of
  /// `values`; returns its size.
  Result<uint64_t> WriteArray(const ArrayData& values, int64_t start, int64_t count,
                              const Field& elem) {
    const RowKind kind = RowKindOf(*elem.type());
    const int64_t width = ArrayElementWidth(kind);
    const int64_t bits = NullBitsetBytes(count);
    int64_t begin = 0;
    if (!Grow(8 + bits + RoundUp8(count * width), &begin)) return OutOfRoom();
    StoreWord(begin, static_cast<uint64_t>(count));
    const int64_t elems = begin + 8 + bits;
    // Fixed-width elements, null or not, take their slots only.
    if (!kWrite && !IsVariableKind(kind)) return static_cast<uint64_t>(pos_ - begin);
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
      const int64_t at = pos_;
      ALKAID_ASSIGN_OR_RAISE(uint64_t size, WriteVariable(kind, *a, i, /*in_array=*/true));
      StoreWord(elems + 8 * k, (static_cast<uint64_t>(at - begin) << 32) | size);
    }
    return static_cast<uint64_t>(pos_ - begin);
  }

  uint8_t* data_ = nullptr;  // null when measuring
  int64_t capacity_ = 0;     // bytes at data_
  int64_t pos_ = 0;          // bytes taken
  bool out_of_room_ = false;
};

}  // namespace
}  // namespace internal

namespace {

/// Spark's limit: a row's size is an int.
constexpr int64_t kMaxRowBytes = std::numeric_limits<int32_t>::max();

Status CheckRowNumber(const RecordBatch& batch, int64_t row) {
  if (row < 0 || row >= batch.num_rows()) {
    return Status::IndexError("row ", row, " is outside the ", batch.num_rows(), "-row batch");
  }
  return Status::OK();
}

Status RowTooLarge(int64_t row, int64_t size) {
  return Status::CapacityError("row ", row, " takes ", size,
                               " bytes; an UnsafeRow holds at most 2^31 - 1");
}

/// What encoding many rows of one schema computes once: each top-level
/// field's kind, and whether every row has the same size.
struct RowPlan {
  explicit RowPlan(const Schema& schema) {
    const int64_t n = schema.num_fields();
    fixed_size = internal::NullBitsetBytes(n) + 8 * n;
    for (const auto& f : schema.fields()) {
      kinds.push_back(internal::RowKindOf(*f->type()));
      if (internal::IsVariableKind(kinds.back())) all_fixed = false;
    }
  }
  std::vector<internal::RowKind> kinds;
  /// No variable-width field: every row takes fixed_size bytes.
  bool all_fixed = true;
  int64_t fixed_size = 0;
};

/// The size of row `row` (a valid row number) of a checked batch.
Result<int64_t> MeasureRow(const RecordBatch& batch, int64_t row, const RowPlan* plan = nullptr) {
  if (plan != nullptr && plan->all_fixed) return plan->fixed_size;
  internal::RowEncoder<false> measure;
  Status st = measure.WriteRow(batch.columns(), batch.schema()->fields(), row,
                               plan != nullptr ? plan->kinds.data() : nullptr);
  if (!st.ok()) return st.WithContext("row " + std::to_string(row));
  if (measure.size() > kMaxRowBytes) return RowTooLarge(row, measure.size());
  return measure.size();
}

/// Writes row `row` (a valid row number) of a checked batch at the start of
/// `out`. If it does not fit, sets `*out_of_room` and returns an error the
/// caller replaces with one naming the sizes.
Result<int64_t> WriteRowInto(const RecordBatch& batch, int64_t row, std::span<uint8_t> out,
                             bool* out_of_room, const RowPlan* plan = nullptr) {
  internal::RowEncoder<true> encoder(out);
  Status st = encoder.WriteRow(batch.columns(), batch.schema()->fields(), row,
                               plan != nullptr ? plan->kinds.data() : nullptr);
  *out_of_room = encoder.out_of_room();
  if (!st.ok()) return st.WithContext("row " + std::to_string(row));
  if (encoder.size() > kMaxRowBytes) return RowTooLarge(row, encoder.size());
  return encoder.size();
}

/// EncodedRowBatchSize of a checked batch.
Result<int64_t> MeasureBatch(const RecordBatch& batch) {
  const RowPlan plan(*batch.schema());
  if (plan.all_fixed) return batch.num_rows() * (4 + plan.fixed_size);
  int64_t total = 0;
  for (int64_t r = 0; r < batch.num_rows(); ++r) {
    ALKAID_ASSIGN_OR_RAISE(int64_t size, MeasureRow(batch, r, &plan));
    total += 4 + size;
  }
  return total;
}

/// EncodeRowBatchInto of a checked batch.
Result<int64_t> WriteBatchInto(const RecordBatch& batch, std::span<uint8_t> out) {
  const RowPlan plan(*batch.schema());
  const int64_t capacity = static_cast<int64_t>(out.size());
  int64_t pos = 0;
  for (int64_t r = 0; r < batch.num_rows(); ++r) {
    bool out_of_room = capacity - pos < 4;
    Result<int64_t> size = 0;
    if (!out_of_room) {
      size = WriteRowInto(batch, r, out.subspan(static_cast<size_t>(pos) + 4), &out_of_room, &plan);
    }
    if (out_of_room) {
      // Rare: measure the whole batch to say how much room it needed.
      ALKAID_ASSIGN_OR_RAISE(int64_t needed, MeasureBatch(batch));
      return Status::CapacityError("the row batch takes ", needed, " bytes, more than the ",
                                   capacity, "-byte output (row ", r, ", at byte offset ", pos,
                                   ", does not fit)");
    }
    ALKAID_RETURN_NOT_OK(size.status());
    const auto u = static_cast<uint32_t>(*size);
    uint8_t* p = out.data() + pos;
    p[0] = static_cast<uint8_t>(u >> 24);
    p[1] = static_cast<uint8_t>(u >> 16);
    p[2] = static_cast<uint8_t>(u >> 8);
    p[3] = static_cast<uint8_t>(u);
    pos += 4 + *size;
  }
  return pos;
}

}  // namespace

UnsafeRowWriter::UnsafeRowWriter(std::shared_ptr<const RecordBatch> batch)
    : batch_(std::move(batch)) {}
UnsafeRowWriter::~UnsafeRowWriter() = default;

Result<std::unique_ptr<UnsafeRowWriter>> UnsafeRowWriter::Make(
    std::shared_ptr<const RecordBatch> batch) {
  ALKAID_CHECK_INPUT(batch != nullptr, "UnsafeRowWriter needs a batch");
  ALKAID_RETURN_NOT_OK(CheckRowSchema(*batch->schema()));
  return std::unique_ptr<UnsafeRowWriter>(new UnsafeRowWriter(std::move(batch)));
}

Result<int64_t> UnsafeRowWriter::RowSize(int64_t row) const {
  ALKAID_RETURN_NOT_OK(CheckRowNumber(*batch_, row));
  return MeasureRow(*batch_, row);
}

Result<int64_t> UnsafeRowWriter::WriteRow(int64_t row, std::span<uint8_t> out) const {
  ALKAID_RETURN_NOT_OK(CheckRowNumber(*batch_, row));
  bool out_of_room = false;
  Result<int64_t> size = WriteRowInto(*batch_, row, out, &out_of_room);
  if (out_of_room) {
    // Rare: measure the row to say how much room it needed.
    ALKAID_ASSIGN_OR_RAISE(int64_t needed, MeasureRow(*batch_, row));
    return Status::CapacityError("row ", row, " takes ", needed, " bytes, more than the ",
                                 out.size(), "-byte output");
  }
  return size;
}

Result<int64_t> UnsafeRowWriter::AppendRow(int64_t row, std::vector<uint8_t>* out) {
  ALKAID_ASSIGN_OR_RAISE(int64_t size, RowSize(row));
  const size_t begin = out->size();
  out->resize(begin + static_cast<size_t>(size));
  Result<int64_t> written =
      WriteRow(row, std::span<uint8_t>(out->data() + begin, static_cast<size_t>(size)));
  if (!written.ok()) out->resize(begin);
  return written;
}

Result<std::shared_ptr<Buffer>> UnsafeRowWriter::EncodeRow(int64_t row, MemoryPool* pool) {
  ALKAID_ASSIGN_OR_RAISE(int64_t size, RowSize(row));
  ALKAID_ASSIGN_OR_RAISE(auto buffer, AllocateBuffer(size, pool));
  ALKAID_RETURN_NOT_OK(
      WriteRow(row, std::span<uint8_t>(buffer->mutable_data(), static_cast<size_t>(size)))
          .status());
  return std::shared_ptr<Buffer>(std::move(buffer));
}

Result<int64_t> EncodedRowBatchSize(const RecordBatch& batch) {
  ALKAID_RETURN_NOT_OK(CheckRowSchema(*batch.schema()));
  return MeasureBatch(batch);
}

Result<int64_t> EncodeRowBatchInto(const RecordBatch& batch, std::span<uint8_t> out) {
  ALKAID_RETURN_NOT_OK(CheckRowSchema(*batch.schema()));
  return WriteBatchInto(batch, out);
}

Result<std::shared_ptr<Buffer>> EncodeRowBatch(const RecordBatch& batch, MemoryPool* pool) {
  ALKAID_RETURN_NOT_OK(CheckRowSchema(*batch.schema()));
  ALKAID_ASSIGN_OR_RAISE(int64_t size, MeasureBatch(batch));
  ALKAID_ASSIGN_OR_RAISE(auto buffer, AllocateBuffer(size, pool));
  ALKAID_RETURN_NOT_OK(
      WriteBatchInto(batch, std::span<uint8_t>(buffer->mutable_data(), static_cast<size_t>(size)))
          .status());
  return std::shared_ptr<Buffer>(std::move(buffer));
}

}  // namespace alkaid::format
