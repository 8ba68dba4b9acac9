// ArrayBuilder base, the growable buffers, MakeBuilder and the helpers the
// dictionary and run-end encoded builders share.

#include "alkaid/format/builder.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <string>
#include <utility>

#include "builder_internal.h"
#include "pool_object_internal.h"

namespace alkaid::format {

// ---------------------------------------------------------------------------
// BufferBuilder / BitmapBuilder

namespace internal {

namespace {

// Grow's refusals, out of its frame (their formatting would otherwise be
// set up on every call).
[[gnu::noinline, gnu::cold]] Status NegativeReserve(int64_t additional) {
  return Status::Invalid("cannot reserve a negative byte count ", additional);
}
[[gnu::noinline, gnu::cold]] Status ReserveTooLarge(int64_t size, int64_t additional) {
  return Status::CapacityError("buffer of ", size, " bytes cannot grow by ", additional);
}

}  // namespace

Status BufferBuilder::Grow(int64_t additional) {
  // The most bytes PaddedLength rounds up without overflowing.
  constexpr int64_t kMaxBytes = std::numeric_limits<int64_t>::max() - (kBufferAlignment - 1);
  if (bytes_ == nullptr && additional >= 0 && additional <= kMaxBytes) {
    // The first bytes (after construction, Finish, Reset or ResetTo): what
    // is asked, padded to 64, and the pool's shared owner, in one call
    // (owner_ is empty: no bytes).
    // Straight into the members (a failure leaves bytes_ null), and the
    // status returned as it comes: no local of this frame's is needed.
    const int64_t target = PaddedLength(additional);
    Status allocated = pool_->AllocateWithOwner(target, kBufferAlignment, &bytes_, &owner_);
    if (allocated.ok()) {
      end_ = bytes_;
      limit_ = bytes_ + target;
    }
    return allocated;
  }
  if (additional < 0) return NegativeReserve(additional);
  const int64_t size = length();
  if (additional > kMaxBytes - size) return ReserveTooLarge(size, additional);
  // Here there are bytes already (the first ones took the way above).
  const int64_t needed = size + additional;
  const int64_t capacity = this->capacity();
  if (needed <= capacity) return Status::OK();
  // Grow geometrically so appending stays amortised O(1); capacity is
  // always a multiple of 64.
  const int64_t target =
      PaddedLength(std::max(PaddedLength(needed), std::min<int64_t>(capacity * 2, INT64_MAX / 2)));
  ALKAID_ASSIGN_OR_RAISE(uint8_t * fresh,
                         allocator()->Reallocate(bytes_, capacity, target, kBufferAlignment));
  // Nothing is zeroed here: the values overwrite what they cover, and
  // Finish zeroes the rest of what it hands out (the padding). Bytes a
  // writer put past length() within the old capacity survive growth.
  bytes_ = fresh;
  end_ = fresh + size;
  limit_ = fresh + target;
  return Status::OK();
}

void BufferBuilder::FreeBytes() {
  allocator()->Free(bytes_, capacity(), kBufferAlignment);
  owner_.reset();
  bytes_ = nullptr;
  end_ = nullptr;
  limit_ = nullptr;
}

BufferBuilder::Bytes BufferBuilder::TakeBytesPadded(bool shrink_to_fit) {
  Bytes out;
  out.size = length();
  out.capacity = this->capacity();
  out.data = bytes_;
  const int64_t padded = PaddedLength(out.size);
  if (shrink_to_fit && padded < out.capacity) {
    // Shrinking keeps every byte up to `size`. If it fails (a pool that
    // reallocates by copying ran out), the buffer goes out at full
    // capacity instead; its size is still exact.
    Result<uint8_t*> shrunk =
        allocator()->Reallocate(bytes_, out.capacity, padded, kBufferAlignment);
    if (shrunk.ok()) {
      out.data = *shrunk;
      out.capacity = padded;
    }
  }
  // The padding: zero, whatever the memory held before (a recycled region).
  if (out.capacity > out.size) {
    std::memset(out.data + out.size, 0, static_cast<size_t>(out.capacity - out.size));
  }
  out.owner = std::move(owner_);
  owner_.reset();
  bytes_ = nullptr;
  end_ = nullptr;
  limit_ = nullptr;
  return out;
}

Result<std::shared_ptr<Buffer>> BufferBuilder::Finish(bool shrink_to_fit) {
  if (bytes_ == nullptr) {
    ALKAID_ASSIGN_OR_RAISE(auto empty, AllocateBuffer(0, pool_));
    return std::shared_ptr<Buffer>(std::move(empty));
  }
  Bytes b = TakeBytes(shrink_to_fit);
  // The buffer object, made once: it owns the bytes from here on.
  return AdoptBuiltBytes(pool_, std::move(b.owner), b.data, b.size, b.capacity);
}

Status BitmapBuilder::Reserve(int64_t additional_bits) {
  if (additional_bits < 0) {
    return Status::Invalid("cannot reserve a negative bit count ", additional_bits);
  }
  const int64_t bytes = bit_util::BytesForBits(length_ + additional_bits) - bytes_.length();
  return bytes > 0 ? bytes_.Reserve(bytes) : Status::OK();
}

void BitmapBuilder::UnsafeAppend(int64_t n, bool bit) {
  if (n <= 0) return;
  if (!bit) false_count_ += n;
  auto append_one = [&] {
    if ((length_ & 7) == 0) bytes_.UnsafeAppendZeros(1);
    if (bit) bit_util::SetBit(bytes_.mutable_data(), length_);
    ++length_;
  };
  int64_t remaining = n;
  while (remaining > 0 && (length_ & 7) != 0) {
    append_one();
    --remaining;
  }
  const int64_t whole = remaining >> 3;
  bytes_.UnsafeAppendFill(bit ? 0xFF : 0x00, whole);
  length_ += whole * 8;
  remaining -= whole * 8;
  while (remaining > 0) {
    append_one();
    --remaining;
  }
}

Result<std::shared_ptr<Buffer>> BitmapBuilder::Finish() {
  ALKAID_ASSIGN_OR_RAISE(auto out, bytes_.Finish());
  length_ = 0;
  false_count_ = 0;
  return out;
}

}  // namespace internal

// ---------------------------------------------------------------------------
// ArrayBuilder

ArrayBuilder::ArrayBuilder(TypePtr type, MemoryPool* pool)
    : type_(std::move(type)), pool_(pool), validity_(pool) {}

ArrayBuilder::~ArrayBuilder() = default;

Status ArrayBuilder::Reserve(int64_t additional) {
  ALKAID_RETURN_NOT_OK(CheckCount(additional, "reserved slot"));
  return ReserveValidity(additional, false);
}

Result<ArrayDataPtr> ArrayBuilder::FinishData() {
  Result<ArrayDataPtr> result = FinishInternal();
  Reset();
  return result;
}

Result<ArrayPtr> ArrayBuilder::FinishGeneral() {
  ALKAID_ASSIGN_OR_RAISE(ArrayDataPtr data, FinishData());
  return internal::MakeArrayIn(std::move(data), pool_);
}

void ArrayBuilder::Reset() {
  length_ = 0;
  null_count_ = 0;
  validity_.Reset();
  has_bitmap_ = false;
  for (auto& c : children_) c->Reset();
}

Status ArrayBuilder::ResetToGeneral(MemoryPool* pool) {
  Reset();
  ALKAID_RETURN_NOT_OK(ResetBuffersTo(pool));
  pool_ = pool;
  validity_.ResetTo(pool);
  return Status::OK();
}

Status ArrayBuilder::ResetBuffersTo(MemoryPool* /*pool*/) {
  return Status::NotImplemented(Where(), ": this builder cannot be pointed at another pool");
}

Status ArrayBuilder::ReserveValidity(int64_t additional, bool any_null) {
  if (has_bitmap_) {
    // The slots UnsafeAppendValid added have their bits reserved already.
    SyncValidity();
    return validity_.Reserve(additional);
  }
  if (!any_null) return Status::OK();
  // First null: materialise the bitmap with every earlier slot valid.
  ALKAID_RETURN_NOT_OK(validity_.Reserve(length_ + additional));
  validity_.UnsafeAppend(length_, true);
  has_bitmap_ = true;
  return Status::OK();
}

void ArrayBuilder::UnsafeAppendValidityBytes(const uint8_t* valid_bytes, int64_t n) {
  if (valid_bytes == nullptr) {
    UnsafeAppendValidity(n, true);
    return;
  }
  for (int64_t i = 0; i < n; ++i) UnsafeAppendValidity(valid_bytes[i] != 0);
}

bool ArrayBuilder::AnyNull(const uint8_t* valid_bytes, int64_t n) {
  if (valid_bytes == nullptr) return false;
  for (int64_t i = 0; i < n; ++i) {
    if (valid_bytes[i] == 0) return true;
  }
  return false;
}

Result<std::shared_ptr<Buffer>> ArrayBuilder::FinishValidity() {
  if (null_count_ == 0 || !has_bitmap_) {
    validity_.Reset();
    has_bitmap_ = false;
    return std::shared_ptr<Buffer>();
  }
  SyncValidity();
  return validity_.Finish();
}

Status ArrayBuilder::CheckCount(int64_t n, const char* what) {
  if (n < 0) return Status::Invalid("negative ", what, " count ", n);
  return Status::OK();
}

std::string ArrayBuilder::Where() const { return type_->ToString() + " builder"; }

// ---------------------------------------------------------------------------
// Shared helpers

namespace internal {

bool SupportsRawValues(const DataType& type) {
  const TypeId id = type.id();
  return (IsFixedWidth(id) && id != TypeId::kNull) || IsBinaryLike(id) || IsLargeBinaryLike(id) ||
         IsBinaryView(id);
}

Status AppendRawValue(ArrayBuilder* builder, std::string_view bytes) {
  const DataType& type = *builder->type();
  const TypeId id = type.id();
  if (id == TypeId::kBool) {
    auto* b = dynamic_cast<BooleanBuilder*>(builder);
    if (b == nullptr) return Status::TypeError("bool values need a BooleanBuilder");
    if (bytes.size() != 1) {
      return Status::Invalid("a bool value is 1 byte, got ", bytes.size());
    }
    return b->Append(bytes[0] != 0);
  }
  if (IsBinaryLike(id)) {
    auto* b = dynamic_cast<BaseBinaryBuilder<int32_t>*>(builder);
    if (b == nullptr) return Status::TypeError(type.ToString(), " values need a BinaryBuilder");
    return b->Append(bytes);
  }
  if (IsLargeBinaryLike(id)) {
    auto* b = dynamic_cast<BaseBinaryBuilder<int64_t>*>(builder);
    if (b == nullptr) {
      return Status::TypeError(type.ToString(), " values need a LargeBinaryBuilder");
    }
    return b->Append(bytes);
  }
  if (IsBinaryView(id)) {
    auto* b = dynamic_cast<BinaryViewBuilder*>(builder);
    if (b == nullptr) {
      return Status::TypeError(type.ToString(), " values need a BinaryViewBuilder");
    }
    return b->Append(bytes);
  }
  if (IsFixedWidth(id)) {
    auto* b = dynamic_cast<FixedWidthBuilder*>(builder);
    if (b == nullptr) {
      return Status::TypeError(type.ToString(), " values need a fixed-width builder");
    }
    if (static_cast<int64_t>(bytes.size()) != b->byte_width()) {
      return Status::Invalid("a ", type.ToString(), " value is ", b->byte_width(), " bytes, got ",
                             bytes.size());
    }
    return b->AppendRaw(reinterpret_cast<const uint8_t*>(bytes.data()));
  }
  return Status::TypeError("values of type ", type.ToString(), " cannot be appended from bytes");
}

std::string EmptyRawValue(const DataType& type) {
  if (type.id() == TypeId::kBool) return std::string(1, '\0');
  if (IsFixedWidth(type.id())) return std::string(static_cast<size_t>(BitWidth(type) / 8), '\0');
  return {};
}

Status CheckChildType(const ArrayData& actual, const DataType& expected, const char* role,
                      const DataType& parent) {
  if (actual.type == nullptr || !actual.type->Equals(expected)) {
    return Status::TypeError(role, " builder produced ",
                             actual.type ? actual.type->ToString() : "no type", " but ",
                             parent.ToString(), " declares ", expected.ToString());
  }
  return Status::OK();
}

}  // namespace internal

// ---------------------------------------------------------------------------
// MakeBuilder

namespace {

template <typename T>
std::unique_ptr<ArrayBuilder> Numeric(const TypePtr& type, MemoryPool* pool) {
  return std::make_unique<NumericBuilder<T>>(type, pool);
}

Result<std::vector<std::unique_ptr<ArrayBuilder>>> MakeChildren(const DataType& type,
                                                                MemoryPool* pool) {
  std::vector<std::unique_ptr<ArrayBuilder>> out;
  for (int i = 0; i < type.num_fields(); ++i) {
    const FieldPtr& f = type.field(i);
    if (f == nullptr || f->type() == nullptr) {
      return Status::Invalid(type.ToString(), ": child ", i, " has no type");
    }
    ALKAID_ASSIGN_OR_RAISE(auto child, MakeBuilder(f->type(), pool));
    out.push_back(std::move(child));
  }
  return out;
}

Result<std::unique_ptr<ArrayBuilder>> MakeOneChild(const DataType& type, MemoryPool* pool) {
  if (type.num_fields() != 1) {
    return Status::Invalid(type.ToString(), " must have exactly one child, has ",
                           type.num_fields());
  }
  ALKAID_ASSIGN_OR_RAISE(auto children, MakeChildren(type, pool));
  return std::move(children[0]);
}

}  // namespace

Result<std::unique_ptr<ArrayBuilder>> MakeBuilder(const TypePtr& type, MemoryPool* pool) {
  if (type == nullptr) return Status::Invalid("MakeBuilder: type is null");
  if (pool == nullptr) return Status::Invalid("MakeBuilder: memory pool is null");
  switch (type->id()) {
    case TypeId::kNull:
      return std::make_unique<NullBuilder>(type, pool);
    case TypeId::kBool:
      return std::make_unique<BooleanBuilder>(type, pool);
    case TypeId::kInt8:
      return Numeric<int8_t>(type, pool);
    case TypeId::kUInt8:
      return Numeric<uint8_t>(type, pool);
    case TypeId::kInt16:
      return Numeric<int16_t>(type, pool);
    case TypeId::kUInt16:
    case TypeId::kHalfFloat:
      return Numeric<uint16_t>(type, pool);
    case TypeId::kInt32:
    case TypeId::kDate32:
    case TypeId::kTime32:
    case TypeId::kIntervalMonths:
      return Numeric<int32_t>(type, pool);
    case TypeId::kUInt32:
      return Numeric<uint32_t>(type, pool);
    case TypeId::kInt64:
    case TypeId::kDate64:
    case TypeId::kTime64:
    case TypeId::kTimestamp:
    case TypeId::kDuration:
      return Numeric<int64_t>(type, pool);
    case TypeId::kUInt64:
      return Numeric<uint64_t>(type, pool);
    case TypeId::kFloat:
      return Numeric<float>(type, pool);
    case TypeId::kDouble:
      return Numeric<double>(type, pool);
    case TypeId::kIntervalDayTime:
      return Numeric<DayTimeInterval>(type, pool);
    case TypeId::kIntervalMonthDayNano:
      return Numeric<MonthDayNanoInterval>(type, pool);
    case TypeId::kDecimal32:
    case TypeId::kDecimal64:
    case TypeId::kDecimal128:
    case TypeId::kDecimal256:
      return std::make_unique<DecimalBuilder>(type, pool);
    case TypeId::kFixedSizeBinary: {
      if (static_cast<const FixedSizeBinaryType&>(*type).byte_width() < 0) {
        return Status::Invalid(type->ToString(), ": negative byte width");
      }
      return std::make_unique<FixedSizeBinaryBuilder>(type, pool);
    }
    case TypeId::kBinary:
      return std::make_unique<BinaryBuilder>(type, pool);
    case TypeId::kString:
      return std::make_unique<StringBuilder>(type, pool);
    case TypeId::kLargeBinary:
      return std::make_unique<LargeBinaryBuilder>(type, pool);
    case TypeId::kLargeString:
      return std::make_unique<LargeStringBuilder>(type, pool);
    case TypeId::kBinaryView:
      return std::make_unique<BinaryViewBuilder>(type, pool);
    case TypeId::kStringView:
      return std::make_unique<StringViewBuilder>(type, pool);
    case TypeId::kList: {
      ALKAID_ASSIGN_OR_RAISE(auto child, MakeOneChild(*type, pool));
      return std::make_unique<ListBuilder>(type, std::move(child), pool);
    }
    case TypeId::kLargeList: {
      ALKAID_ASSIGN_OR_RAISE(auto child, MakeOneChild(*type, pool));
      return std::make_unique<LargeListBuilder>(type, std::move(child), pool);
    }
    case TypeId::kListView: {
      ALKAID_ASSIGN_OR_RAISE(auto child, MakeOneChild(*type, pool));
      return std::make_unique<ListViewBuilder>(type, std::move(child), pool);
    }
    case TypeId::kLargeListView: {
      ALKAID_ASSIGN_OR_RAISE(auto child, MakeOneChild(*type, pool));
      return std::make_unique<LargeListViewBuilder>(type, std::move(child), pool);
    }
    case TypeId::kFixedSizeList: {
      if (static_cast<const FixedSizeListType&>(*type).list_size() < 0) {
        return Status::Invalid(type->ToString(), ": negative list size");
      }
      ALKAID_ASSIGN_OR_RAISE(auto child, MakeOneChild(*type, pool));
      return std::make_unique<FixedSizeListBuilder>(type, std::move(child), pool);
    }
    case TypeId::kMap: {
      const auto& map_type = static_cast<const MapType&>(*type);
      if (map_type.num_fields() != 1 || map_type.entries_field() == nullptr ||
          map_type.entries_field()->type() == nullptr ||
          map_type.entries_field()->type()->num_fields() != 2) {
        return Status::Invalid(type->ToString(), ": entries must be a struct of key and item");
      }
      ALKAID_ASSIGN_OR_RAISE(auto children, MakeChildren(*map_type.entries_field()->type(), pool));
      return std::make_unique<MapBuilder>(type, std::move(children[0]), std::move(children[1]),
                                          pool);
    }
    case TypeId::kStruct: {
      ALKAID_ASSIGN_OR_RAISE(auto children, MakeChildren(*type, pool));
      return std::make_unique<StructBuilder>(type, std::move(children), pool);
    }
    case TypeId::kSparseUnion:
    case TypeId::kDenseUnion: {
      const auto& u = static_cast<const UnionType&>(*type);
      if (u.type_codes().size() != static_cast<size_t>(u.num_fields())) {
        return Status::Invalid(type->ToString(), ": ", u.num_fields(), " children but ",
                               u.type_codes().size(), " type codes");
      }
      ALKAID_ASSIGN_OR_RAISE(auto children, MakeChildren(*type, pool));
      if (type->id() == TypeId::kSparseUnion) {
        return std::make_unique<SparseUnionBuilder>(type, std::move(children), pool);
      }
      return std::make_unique<DenseUnionBuilder>(type, std::move(children), pool);
    }
    case TypeId::kDictionary: {
      const auto& d = static_cast<const DictionaryType&>(*type);
      if (d.index_type() == nullptr || !IsInteger(d.index_type()->id())) {
        return Status::TypeError(type->ToString(), ": index type must be an integer type");
      }
      if (d.value_type() == nullptr || d.value_type()->id() == TypeId::kBool ||
          !internal::SupportsRawValues(*d.value_type())) {
        return Status::TypeError("DictionaryBuilder does not support dictionary values of type ",
                                 d.value_type() ? d.value_type()->ToString() : "null");
      }
      return std::make_unique<DictionaryBuilder>(type, pool);
    }
    case TypeId::kRunEndEncoded: {
      if (type->num_fields() != 2 || type->field(0) == nullptr || type->field(1) == nullptr) {
        return Status::Invalid(type->ToString(), ": needs run_ends and values children");
      }
      const TypeId re = type->field(0)->type()->id();
      if (re != TypeId::kInt16 && re != TypeId::kInt32 && re != TypeId::kInt64) {
        return Status::TypeError(type->ToString(), ": run ends must be int16, int32 or int64");
      }
      ALKAID_ASSIGN_OR_RAISE(auto values, MakeBuilder(type->field(1)->type(), pool));
      return std::make_unique<RunEndEncodedBuilder>(type, std::move(values), pool);
    }
    case TypeId::kExtension: {
      const auto& ext = static_cast<const ExtensionType&>(*type);
      ALKAID_ASSIGN_OR_RAISE(auto storage, MakeBuilder(ext.storage_type(), pool));
      return std::make_unique<ExtensionBuilder>(type, std::move(storage), pool);
    }
  }
  return Status::NotImplemented("MakeBuilder: no builder for type ", type->ToString());
}

}  // namespace alkaid::format
