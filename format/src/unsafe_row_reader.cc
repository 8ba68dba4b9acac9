// UnsafeRow rows -> record batch (docs/UNSAFE_ROW.md). Nothing read is
// trusted: every offset and size is checked against the enclosing row or
// array before the bytes behind it are touched.

#include <bit>
#include <cstring>
#include <string>
#include <string_view>

#include "alkaid/format/builder.h"
#include "alkaid/format/unsafe_row.h"
#include "unsafe_row_internal.h"
#include "validate_internal.h"

namespace alkaid::format {

static_assert(std::endian::native == std::endian::little,
              "UnsafeRow values are little-endian; this decoder reads native values");

namespace internal {
namespace {

/// A row, array or map inside the row being decoded. `at` is the offset of
/// data[0] in the caller's coordinates (the row batch, or the row).
struct Region {
  const uint8_t* data;
  int64_t size;
  int64_t at;
};

/// One step of the path printed in errors: ".name", "[index]" or both.
struct PathStep {
  std::string_view name;
  int64_t index = -1;
};

/// The element layout of one UnsafeArrayData.
struct ArrayLayout {
  int64_t count;
  int64_t elements;  // offset of the elements region
  int64_t end;       // end of the elements region (8-aligned)
};

class RowDecoder {
 public:
  explicit RowDecoder(MemoryPool* pool) : pool_(pool) {}

  Status Init(const SchemaPtr& out_schema) {
    schema_ = out_schema;
    for (const auto& f : schema_->fields()) {
      ALKAID_ASSIGN_OR_RAISE(auto b, MakeBuilder(f->type(), pool_));
      builders_.push_back(std::move(b));
    }
    return Status::OK();
  }

  Status DecodeRow(std::string_view row, int64_t row_index, int64_t base) {
    row_ = row_index;
    path_.clear();
    Region r{reinterpret_cast<const uint8_t*>(row.data()), static_cast<int64_t>(row.size()), base};
    if (r.size % 8 != 0) return Fail(r, 0, "the row size ", r.size, " is not a multiple of 8");
    return DecodeFields(r, schema_->fields(),
                        [this](int k) { return builders_[static_cast<size_t>(k)].get(); });
  }

  Result<RecordBatchPtr> Finish(int64_t num_rows) {
    std::vector<ArrayDataPtr> columns;
    for (auto& b : builders_) {
      ALKAID_ASSIGN_OR_RAISE(auto data, b->FinishData());
      columns.push_back(std::move(data));
    }
    return RecordBatch::Make(schema_, num_rows, std::move(columns));
  }

 private:
  template <typename... Args>
  Status Fail(const Region& r, int64_t offset, Args&&... args) const {
    std::string path;
    for (const auto& step : path_) {
      if (!step.name.empty()) {
        if (!path.empty()) path += '.';
        path += step.name;
      }
      if (step.index >= 0) path += "[" + std::to_string(step.index) + "]";
    }
    return Status::Invalid("row ", row_, ", field '", path, "', byte ", r.at + offset, ": ",
                           std::forward<Args>(args)...);
  }

  /// A nested row (top-level or struct) of `fields`; `builder_of(k)` is the
  /// builder of field k.
  template <typename BuilderOf>
  Status DecodeFields(const Region& r, const FieldVector& fields, BuilderOf&& builder_of) {
    const int64_t n = static_cast<int64_t>(fields.size());
    const int64_t slots = NullBitsetBytes(n);
    const int64_t fixed_end = slots + 8 * n;
    if (fixed_end > r.size) {
      return Fail(r, 0, "a row of ", n, " fields needs ", fixed_end,
                  " bytes of null bits and slots but has ", r.size);
    }
    for (int64_t f = 0; f < n; ++f) {
      const Field& field = *fields[static_cast<size_t>(f)];
      path_.push_back({field.name(), -1});
      ArrayBuilder* b = builder_of(static_cast<int>(f));
      if (bit_util::GetBit(r.data, f)) {
        if (!field.nullable()) return Fail(r, f >> 3, "null in a non-nullable field");
        ALKAID_RETURN_NOT_OK(b->AppendNull());
      } else {
        ALKAID_RETURN_NOT_OK(DecodeValue(field, b, r, slots + 8 * f, fixed_end, false));
      }
      path_.pop_back();
    }
    return Status::OK();
  }

  /// The value of `field` whose slot (fixed-width value or offset/size word)
  /// is at r.data + at. Variable data must lie in [fixed_end, r.size).
  Status DecodeValue(const Field& field, ArrayBuilder* b, const Region& r, int64_t at,
                     int64_t fixed_end, bool in_array) {
    const DataType& type = *field.type();
    const RowKind kind = RowKindOf(type);
    const uint8_t* p = r.data + at;
    switch (kind) {
      case RowKind::kUnknown:
        return Fail(r, at, "a value of the null (UNKNOWN) type must have its null bit set");
      case RowKind::kBool:
        if (p[0] > 1) return Fail(r, at, "boolean byte is ", int{p[0]}, ", not 0 or 1");
        return static_cast<BooleanBuilder*>(b)->Append(p[0] != 0);
      case RowKind::kInt8:
      case RowKind::kInt16:
      case RowKind::kInt32:
      case RowKind::kInt64:
      case RowKind::kFloat:
      case RowKind::kDouble:
        return static_cast<FixedWidthBuilder*>(b)->AppendRaw(p);
      case RowKind::kShortDecimal: {
        int64_t v;
        std::memcpy(&v, p, 8);
        Status st = static_cast<DecimalBuilder*>(b)->AppendUnscaled(v);
        if (!st.ok()) return Fail(r, at, st.message());
        return Status::OK();
      }
      default:
        break;
    }
    const uint64_t word = LoadU64(p);
    const int64_t offset = static_cast<int64_t>(word >> 32);
    const int64_t size = static_cast<int64_t>(word & 0xffffffffu);
    if (offset < fixed_end || offset % 8 != 0 || offset + size > r.size) {
      return Fail(r, at, "variable-width value at offset ", offset, " with size ", size,
                  " is not an 8-aligned range inside bytes [", fixed_end, ", ", r.size, ") of its ",
                  in_array ? "array" : "row");
    }
    const Region v{r.data + offset, size, r.at + offset};
    switch (kind) {
      case RowKind::kBinary:
        return AppendBinary(type, b, v);
      case RowKind::kLongDecimal:
        return AppendLongDecimal(type, b, v);
      case RowKind::kArray:
        return DecodeList(type, b, v);
      case RowKind::kMap:
        return DecodeMap(static_cast<const MapType&>(type), b, v);
      case RowKind::kStruct: {
        if (v.size % 8 != 0) return Fail(v, 0, "struct size ", v.size, " is not a multiple of 8");
        auto* sb = static_cast<StructBuilder*>(b);
        ALKAID_RETURN_NOT_OK(sb->Append(true));
        return DecodeFields(v, type.fields(), [sb](int k) { return sb->field_builder(k); });
      }
      default:
        return Fail(r, at, "internal: unexpected kind");
    }
  }

  Status AppendBinary(const DataType& type, ArrayBuilder* b, const Region& v) {
    if (IsUtf8(type.id())) {
      Utf8Error e = FindInvalidUtf8(v.data, v.size);
      if (e.position >= 0) return Fail(v, e.position, "invalid UTF-8: ", e.reason);
    }
    std::string_view s(reinterpret_cast<const char*>(v.data), static_cast<size_t>(v.size));
    switch (type.id()) {
      case TypeId::kBinary:
      case TypeId::kString:
        return static_cast<BaseBinaryBuilder<int32_t>*>(b)->Append(s);
      case TypeId::kLargeBinary:
      case TypeId::kLargeString:
        return static_cast<BaseBinaryBuilder<int64_t>*>(b)->Append(s);
      default:
        return static_cast<BinaryViewBuilder*>(b)->Append(s);
    }
  }

  Status AppendLongDecimal(const DataType& type, ArrayBuilder* b, const Region& v) {
    // decimal128/256 slots hold 16/32 bytes: any 1..16-byte value fits.
    (void)type;
    if (v.size < 1 || v.size > 16) {
      return Fail(v, 0, "a long decimal takes 1 to 16 bytes, not ", v.size);
    }
    // Big-endian two's complement -> little-endian, sign-extended to width.
    uint8_t le[32];
    const uint8_t ext = (v.data[0] & 0x80) != 0 ? 0xff : 0x00;
    std::memset(le, ext, sizeof(le));
    for (int64_t k = 0; k < v.size; ++k) le[k] = v.data[v.size - 1 - k];
    return static_cast<FixedWidthBuilder*>(b)->AppendRaw(le);
  }

  Result<ArrayLayout> ParseArray(const Region& a, int64_t width) {
    if (a.size < 8 || a.size % 8 != 0) {
      return Fail(a, 0, "an array needs a multiple of 8 bytes, at least 8, not ", a.size);
    }
    int64_t count;
    std::memcpy(&count, a.data, 8);
    // Every element takes at least its null bit: bounds count before any
    // arithmetic on it.
    if (count < 0 || count > (a.size - 8) * 8) {
      return Fail(a, 0, "array element count ", count, " does not fit its ", a.size, " bytes");
    }
    ArrayLayout layout{count, 8 + NullBitsetBytes(count), 0};
    layout.end = layout.elements + RoundUp8(count * width);
    if (layout.end > a.size) {
      return Fail(a, 0, "array of ", count, " elements needs ", layout.end,
                  " bytes of header and elements but has ", a.size);
    }
    return layout;
  }

  Status DecodeElements(const Region& a, const ArrayLayout& layout, const Field& elem,
                        ArrayBuilder* eb, std::string_view step_name) {
    const RowKind kind = RowKindOf(*elem.type());
    const int64_t width = ArrayElementWidth(kind);
    const bool variable = IsVariableKind(kind);
    for (int64_t k = 0; k < layout.count; ++k) {
      path_.push_back({step_name, k});
      if (bit_util::GetBit(a.data + 8, k)) {
        if (!elem.nullable())
          return Fail(a, 8 + (k >> 3), "null in a non-nullable ",
                      step_name.empty() ? "element" : step_name);
        ALKAID_RETURN_NOT_OK(eb->AppendNull());
      } else {
        const int64_t at = layout.elements + (variable ? 8 : width) * k;
        ALKAID_RETURN_NOT_OK(DecodeValue(elem, eb, a, at, layout.end, true));
      }
      path_.pop_back();
    }
    return Status::OK();
  }

  Status DecodeList(const DataType& type, ArrayBuilder* b, const Region& a) {
    const Field& elem = *ListValueField(type);
    ALKAID_ASSIGN_OR_RAISE(ArrayLayout layout,
                           ParseArray(a, ArrayElementWidth(RowKindOf(*elem.type()))));
    ArrayBuilder* eb = nullptr;
    switch (type.id()) {
      case TypeId::kList: {
        auto* lb = static_cast<BaseListBuilder<int32_t>*>(b);
        ALKAID_RETURN_NOT_OK(lb->Append(true));
        eb = lb->value_builder();
        break;
      }
      case TypeId::kLargeList: {
        auto* lb = static_cast<BaseListBuilder<int64_t>*>(b);
        ALKAID_RETURN_NOT_OK(lb->Append(true));
        eb = lb->value_builder();
        break;
      }
      default: {
        auto* fb = static_cast<FixedSizeListBuilder*>(b);
        if (layout.count != fb->list_size()) {
          return Fail(a, 0, "array of ", layout.count, " elements for ", type.ToString());
        }
        ALKAID_RETURN_NOT_OK(fb->Append(true));
        eb = fb->value_builder();
      }
    }
    return DecodeElements(a, layout, elem, eb, {});
  }

  Status DecodeMap(const MapType& type, ArrayBuilder* b, const Region& m) {
    if (m.size < 8 || m.size % 8 != 0) {
      return Fail(m, 0, "a map needs a multiple of 8 bytes, at least 8, not ", m.size);
    }
    int64_t key_size;
    std::memcpy(&key_size, m.data, 8);
    if (key_size < 0 || key_size > m.size - 8 || key_size % 8 != 0) {
      return Fail(m, 0, "map key array size ", key_size, " does not fit the ", m.size, "-byte map");
    }
    const Region keys{m.data + 8, key_size, m.at + 8};
    const Region values{m.data + 8 + key_size, m.size - 8 - key_size, m.at + 8 + key_size};
    const Field& key_field = *type.key_field();
    const Field& item_field = *type.item_field();
    ALKAID_ASSIGN_OR_RAISE(ArrayLayout kl,
                           ParseArray(keys, ArrayElementWidth(RowKindOf(*key_field.type()))));
    ALKAID_ASSIGN_OR_RAISE(ArrayLayout vl,
                           ParseArray(values, ArrayElementWidth(RowKindOf(*item_field.type()))));
    if (kl.count != vl.count) {
      return Fail(values, 0, "map has ", kl.count, " keys but ", vl.count, " values");
    }
    auto* mb = static_cast<MapBuilder*>(b);
    ALKAID_RETURN_NOT_OK(mb->Append(true));
    ALKAID_RETURN_NOT_OK(DecodeElements(keys, kl, key_field, mb->key_builder(), "key"));
    return DecodeElements(values, vl, item_field, mb->item_builder(), "value");
  }

  MemoryPool* pool_;
  SchemaPtr schema_;
  std::vector<std::unique_ptr<ArrayBuilder>> builders_;
  int64_t row_ = 0;
  std::vector<PathStep> path_;
};

}  // namespace
}  // namespace internal

Result<std::vector<std::string_view>> SplitRowBatch(std::string_view batch) {
  std::vector<std::string_view> rows;
  const auto* p = reinterpret_cast<const uint8_t*>(batch.data());
  const int64_t n = static_cast<int64_t>(batch.size());
  int64_t at = 0;
  while (at < n) {
    const int64_t row = static_cast<int64_t>(rows.size());
    if (n - at < 4) {
      return Status::Invalid("row ", row, ", byte ", at, ": the 4-byte row size is cut off (",
                             n - at, " bytes left)");
    }
    const uint32_t u = (uint32_t{p[at]} << 24) | (uint32_t{p[at + 1]} << 16) |
                       (uint32_t{p[at + 2]} << 8) | uint32_t{p[at + 3]};
    const auto size = static_cast<int64_t>(static_cast<int32_t>(u));
    if (size < 0 || size % 8 != 0) {
      return Status::Invalid("row ", row, ", byte ", at, ": row size ", size,
                             " is not a non-negative multiple of 8");
    }
    if (size > n - at - 4) {
      return Status::Invalid("row ", row, ", byte ", at, ": row of ", size, " bytes runs past the ",
                             n, "-byte batch");
    }
    rows.emplace_back(batch.data() + at + 4, static_cast<size_t>(size));
    at += 4 + size;
  }
  return rows;
}

Result<RecordBatchPtr> DecodeRows(const std::vector<std::string_view>& rows,
                                  const SchemaPtr& schema, MemoryPool* pool,
                                  const std::vector<int64_t>* row_base_offsets) {
  ALKAID_CHECK_INPUT(schema != nullptr, "DecodeRows needs a schema");
  ALKAID_CHECK_INPUT(row_base_offsets == nullptr || row_base_offsets->size() == rows.size(),
                     "DecodeRows: ", row_base_offsets == nullptr ? 0 : row_base_offsets->size(),
                     " base offsets for ", rows.size(), " rows");
  ALKAID_ASSIGN_OR_RAISE(SchemaPtr out_schema, RowOutputSchema(*schema));
  internal::RowDecoder decoder(pool);
  ALKAID_RETURN_NOT_OK(decoder.Init(out_schema));
  for (size_t r = 0; r < rows.size(); ++r) {
    const int64_t base = row_base_offsets == nullptr ? 0 : (*row_base_offsets)[r];
    ALKAID_RETURN_NOT_OK(decoder.DecodeRow(rows[r], static_cast<int64_t>(r), base));
  }
  return decoder.Finish(static_cast<int64_t>(rows.size()));
}

Result<RecordBatchPtr> DecodeRowBatch(std::string_view batch, const SchemaPtr& schema,
                                      MemoryPool* pool) {
  ALKAID_ASSIGN_OR_RAISE(auto rows, SplitRowBatch(batch));
  std::vector<int64_t> bases;
  bases.reserve(rows.size());
  for (const auto& row : rows) bases.push_back(row.data() - batch.data());
  return DecodeRows(rows, schema, pool, &bases);
}

Result<RecordBatchPtr> DecodeRowBatch(const Buffer& batch, const SchemaPtr& schema,
                                      MemoryPool* pool) {
  return DecodeRowBatch(batch.view(), schema, pool);
}

}  // namespace alkaid::format
