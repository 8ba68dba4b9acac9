// Builders for the null, boolean and fixed-width layouts, decimals included.

#include <array>
#include <limits>
#include <string>

#include "alkaid/format/builder.h"
#include "builder_internal.h"
#include "pool_object_internal.h"

namespace alkaid::format {

// ---------------------------------------------------------------------------
// NullBuilder

NullBuilder::NullBuilder(MemoryPool* pool) : ArrayBuilder(null(), pool) {}
NullBuilder::NullBuilder(TypePtr type, MemoryPool* pool) : ArrayBuilder(std::move(type), pool) {}

Status NullBuilder::AppendNulls(int64_t n) {
  ALKAID_RETURN_NOT_OK(CheckCount(n, "null"));
  length_ += n;
  null_count_ += n;
  return Status::OK();
}

Result<ArrayDataPtr> NullBuilder::FinishInternal() {
  if (type_->id() != TypeId::kNull) {
    return Status::TypeError("NullBuilder cannot build ", type_->ToString());
  }
  return ArrayData::Make(type_, length_, {nullptr}, length_);
}

// ---------------------------------------------------------------------------
// BooleanBuilder

BooleanBuilder::BooleanBuilder(MemoryPool* pool) : BooleanBuilder(boolean(), pool) {}
BooleanBuilder::BooleanBuilder(TypePtr type, MemoryPool* pool)
    : ArrayBuilder(std::move(type), pool), data_(pool) {}

Status BooleanBuilder::Reserve(int64_t additional) {
  ALKAID_RETURN_NOT_OK(ArrayBuilder::Reserve(additional));
  return data_.Reserve(additional);
}

Status BooleanBuilder::Append(bool value) {
  ALKAID_RETURN_NOT_OK(Reserve(1));
  data_.UnsafeAppend(value);
  UnsafeAppendValidity(true);
  return Status::OK();
}

Status BooleanBuilder::AppendValues(const uint8_t* values, int64_t n, const uint8_t* valid_bytes) {
  ALKAID_RETURN_NOT_OK(CheckCount(n, "value"));
  ALKAID_RETURN_NOT_OK(ReserveValidity(n, AnyNull(valid_bytes, n)));
  ALKAID_RETURN_NOT_OK(data_.Reserve(n));
  for (int64_t i = 0; i < n; ++i) data_.UnsafeAppend(values[i] != 0);
  UnsafeAppendValidityBytes(valid_bytes, n);
  return Status::OK();
}

Status BooleanBuilder::AppendValues(const std::vector<bool>& values) {
  const auto n = static_cast<int64_t>(values.size());
  ALKAID_RETURN_NOT_OK(Reserve(n));
  for (bool v : values) data_.UnsafeAppend(v);
  UnsafeAppendValidity(n, true);
  return Status::OK();
}

Status BooleanBuilder::AppendNulls(int64_t n) {
  ALKAID_RETURN_NOT_OK(CheckCount(n, "null"));
  ALKAID_RETURN_NOT_OK(ReserveValidity(n, n > 0));
  ALKAID_RETURN_NOT_OK(data_.Reserve(n));
  data_.UnsafeAppend(n, false);
  UnsafeAppendValidity(n, false);
  return Status::OK();
}

Status BooleanBuilder::AppendEmptyValues(int64_t n) {
  ALKAID_RETURN_NOT_OK(CheckCount(n, "value"));
  ALKAID_RETURN_NOT_OK(Reserve(n));
  data_.UnsafeAppend(n, false);
  UnsafeAppendValidity(n, true);
  return Status::OK();
}

void BooleanBuilder::Reset() {
  ArrayBuilder::Reset();
  data_.Reset();
}

Result<ArrayDataPtr> BooleanBuilder::FinishInternal() {
  if (StorageType(*type_).id() != TypeId::kBool) {
    return Status::TypeError("BooleanBuilder cannot build ", type_->ToString());
  }
  ALKAID_ASSIGN_OR_RAISE(auto validity, FinishValidity());
  ALKAID_ASSIGN_OR_RAISE(auto values, data_.Finish());
  return internal::MakeArrayData(pool_, type_, length_, {std::move(validity), std::move(values)},
                                 null_count_);
}

// ---------------------------------------------------------------------------
// FixedWidthBuilder

namespace {
// AppendEmptyValues' inline reservation: counts up to this many slots (of
// at most 2^31 bytes each: the byte count cannot overflow).
constexpr uint64_t kInlineSlots = (uint64_t{1} << 31) - 1;

bool IsFixedWidthNonBool(const DataType& type) {
  const TypeId id = StorageType(type).id();
  return IsFixedWidth(id) && id != TypeId::kBool;
}
}  // namespace

FixedWidthBuilder::FixedWidthBuilder(TypePtr type, MemoryPool* pool)
    : ArrayBuilder(std::move(type), pool),
      data_(pool),
      byte_width_(0),
      fixed_width_(IsFixedWidthNonBool(*type_)) {
  if (fixed_width_) byte_width_ = BitWidth(StorageType(*type_)) / 8;
  // Reset and ResetBuffersTo reset data_ and point it at a pool, nothing
  // else: ResetTo's inline way serves.
  flat_values_ = &data_;
}

Status FixedWidthBuilder::Reserve(int64_t additional) {
  // Without a bitmap, ArrayBuilder::Reserve only checks the count: skipped
  // for a count that passes.
  if (additional < 0 || has_bitmap()) ALKAID_RETURN_NOT_OK(ArrayBuilder::Reserve(additional));
  ALKAID_RETURN_NOT_OK(
      internal::CheckReserveBytes(additional, byte_width_, [this] { return Where(); }));
  return data_.Reserve(additional * byte_width_);
}

Status FixedWidthBuilder::AppendRaw(const uint8_t* value) {
  ALKAID_RETURN_NOT_OK(Reserve(1));
  data_.UnsafeAppend(value, byte_width_);
  UnsafeAppendValidity(true);
  return Status::OK();
}

Status FixedWidthBuilder::AppendRawValues(const uint8_t* values, int64_t n,
                                          const uint8_t* valid_bytes) {
  ALKAID_RETURN_NOT_OK(CheckCount(n, "value"));
  ALKAID_RETURN_NOT_OK(internal::CheckReserveBytes(n, byte_width_, [this] { return Where(); }));
  ALKAID_RETURN_NOT_OK(ReserveValidity(n, AnyNull(valid_bytes, n)));
  ALKAID_RETURN_NOT_OK(data_.Reserve(n * byte_width_));
  data_.UnsafeAppend(values, n * byte_width_);
  UnsafeAppendValidityBytes(valid_bytes, n);
  return Status::OK();
}

Status FixedWidthBuilder::AppendNulls(int64_t n) {
  ALKAID_RETURN_NOT_OK(CheckCount(n, "null"));
  ALKAID_RETURN_NOT_OK(internal::CheckReserveBytes(n, byte_width_, [this] { return Where(); }));
  ALKAID_RETURN_NOT_OK(ReserveValidity(n, n > 0));
  ALKAID_RETURN_NOT_OK(data_.Reserve(n * byte_width_));
  data_.UnsafeAppendZeros(n * byte_width_);
  UnsafeAppendValidity(n, false);
  return Status::OK();
}

Status FixedWidthBuilder::AppendEmptyValues(int64_t n) {
  // The common case (no bitmap, a count from 0 to 2^31 - 1: neither the
  // count nor the product can be refused) reserves the values' bytes
  // directly, without CheckCount's call and the virtual Reserve, whose
  // checks it cannot fail; anything else takes Reserve's way, which says
  // what is wrong.
  if (has_bitmap() || static_cast<uint64_t>(n) > kInlineSlots) {
    ALKAID_RETURN_NOT_OK(CheckCount(n, "value"));
    ALKAID_RETURN_NOT_OK(Reserve(n));
  } else {
    ALKAID_RETURN_NOT_OK(data_.Reserve(n * byte_width_));
  }
  data_.UnsafeAppendZeros(n * byte_width_);
  UnsafeAppendValidity(n, true);
  return Status::OK();
}

void FixedWidthBuilder::Reset() {
  ArrayBuilder::Reset();
  data_.Reset();
}

Result<ArrayDataPtr> FixedWidthBuilder::FinishInternal() {
  if (!fixed_width_) {
    return Status::TypeError("a fixed-width builder cannot build ", type_->ToString());
  }
  ALKAID_ASSIGN_OR_RAISE(auto validity, FinishValidity());
  ALKAID_ASSIGN_OR_RAISE(auto values, data_.Finish());
  return internal::MakeArrayData(pool_, type_, length_, {std::move(validity), std::move(values)},
                                 null_count_);
}

ArrayPtr FixedWidthBuilder::FinishLinked() {
  // No nulls (no bitmap), a type this builder can finish, bytes of the
  // pool's shared owner: the array's buffer object, array data and array
  // may be the ones the block's last batch left linked (FinishFlat checks).
  if (has_bitmap() || !fixed_width_ || (value_size_ != 0 && value_size_ != byte_width_) ||
      !data_.has_owner()) {
    return nullptr;
  }
  ObjectMemory* m = pool_->object_memory();
  if (m == nullptr) return nullptr;
  ArrayPtr a = internal::ObjectMemoryAccess::FinishFlat(m, type_, length_, &data_);
  if (a != nullptr) {
    length_ = 0;
    null_count_ = 0;
  }
  return a;
}

// ---------------------------------------------------------------------------
// FixedSizeBinaryBuilder

FixedSizeBinaryBuilder::FixedSizeBinaryBuilder(TypePtr type, MemoryPool* pool)
    : FixedWidthBuilder(std::move(type), pool) {}

Status FixedSizeBinaryBuilder::Append(std::string_view value) {
  if (static_cast<int64_t>(value.size()) != byte_width_) {
    return Status::Invalid(type_->ToString(), ": value for slot ", length_, " has ", value.size(),
                           " bytes, expected ", byte_width_);
  }
  return AppendRaw(reinterpret_cast<const uint8_t*>(value.data()));
}

// ---------------------------------------------------------------------------
// DecimalBuilder

namespace {

const DecimalType* AsDecimal(const DataType& type) {
  const DataType& st = StorageType(type);
  return IsDecimal(st.id()) ? static_cast<const DecimalType*>(&st) : nullptr;
}

// 256-bit unsigned integer as eight little-endian 32-bit limbs (portable
// without 128-bit integer extensions).
using Word256 = std::array<uint32_t, 8>;

void MulAdd(Word256& w, uint32_t mul, uint32_t add) {
  uint64_t carry = add;
  for (auto& limb : w) {
    const uint64_t t = uint64_t{limb} * mul + carry;
    limb = static_cast<uint32_t>(t);
    carry = t >> 32;
  }
}

void Negate(Word256& w) {
  uint64_t carry = 1;
  for (auto& limb : w) {
    const uint64_t t = uint64_t{static_cast<uint32_t>(~limb)} + carry;
    limb = static_cast<uint32_t>(t);
    carry = t >> 32;
  }
}

void StoreLittleEndian(const Word256& w, uint8_t* out, int32_t bytes) {
  for (int32_t j = 0; j < bytes; ++j) {
    out[j] = static_cast<uint8_t>(w[static_cast<size_t>(j / 4)] >> (8 * (j % 4)));
  }
}

}  // namespace

DecimalBuilder::DecimalBuilder(TypePtr type, MemoryPool* pool)
    : FixedSizeBinaryBuilder(std::move(type), pool) {
  const DecimalType* d = AsDecimal(*type_);
  precision_ = d != nullptr ? d->precision() : 0;
  scale_ = d != nullptr ? d->scale() : 0;
}

Status DecimalBuilder::AppendUnscaled(int64_t unscaled) {
  if (AsDecimal(*type_) == nullptr) {
    return Status::TypeError("DecimalBuilder cannot build ", type_->ToString());
  }
  if (precision_ < 19) {
    int64_t limit = 1;
    for (int32_t i = 0; i < precision_; ++i) limit *= 10;
    if (unscaled >= limit || unscaled <= -limit) {
      return Status::Invalid(type_->ToString(), ": unscaled value ", unscaled, " for slot ",
                             length_, " has more than ", precision_, " digits");
    }
  }
  Word256 w{};
  const bool negative = unscaled < 0;
  // Magnitude without overflowing on INT64_MIN.
  const uint64_t magnitude =
      negative ? ~static_cast<uint64_t>(unscaled) + 1 : static_cast<uint64_t>(unscaled);
  w[0] = static_cast<uint32_t>(magnitude);
  w[1] = static_cast<uint32_t>(magnitude >> 32);
  if (negative) Negate(w);
  uint8_t bytes[32];
  StoreLittleEndian(w, bytes, byte_width_);
  return AppendRaw(bytes);
}

Status DecimalBuilder::AppendDecimal(std::string_view text) {
  if (AsDecimal(*type_) == nullptr) {
    return Status::TypeError("DecimalBuilder cannot build ", type_->ToString());
  }
  auto bad = [&](const auto&... why) {
    return Status::Invalid(type_->ToString(), ": '", text, "' (slot ", length_, ") ", why...);
  };
  size_t i = 0;
  const size_t n = text.size();
  bool negative = false;
  if (i < n && (text[i] == '+' || text[i] == '-')) {
    negative = text[i] == '-';
    ++i;
  }
  std::string digits;
  int64_t fraction_digits = 0;
  bool seen_point = false;
  bool any_digit = false;
  for (; i < n; ++i) {
    const char c = text[i];
    if (c >= '0' && c <= '9') {
      any_digit = true;
      if (!digits.empty() || c != '0') digits.push_back(c);
      if (seen_point) ++fraction_digits;
    } else if (c == '.' && !seen_point) {
      seen_point = true;
    } else {
      break;
    }
  }
  if (!any_digit) return bad("is not a decimal number");
  int64_t exponent = 0;
  if (i < n && (text[i] == 'e' || text[i] == 'E')) {
    ++i;
    bool exp_negative = false;
    if (i < n && (text[i] == '+' || text[i] == '-')) {
      exp_negative = text[i] == '-';
      ++i;
    }
    bool any_exp_digit = false;
    for (; i < n && text[i] >= '0' && text[i] <= '9'; ++i) {
      any_exp_digit = true;
      exponent = exponent * 10 + (text[i] - '0');
      if (exponent > 100000) return bad("has an exponent out of range");
    }
    if (!any_exp_digit) return bad("has an exponent without digits");
    if (exp_negative) exponent = -exponent;
  }
  if (i != n) return bad("has an unexpected character at position ", i);

  // unscaled = digits * 10^(scale + exponent - fraction_digits)
  const int64_t shift = int64_t{scale_} + exponent - fraction_digits;
  if (!digits.empty()) {
    if (shift < 0) {
      const auto drop = static_cast<size_t>(-shift);
      const size_t keep = drop >= digits.size() ? 0 : digits.size() - drop;
      if (digits.find_first_not_of('0', keep) != std::string::npos) {
        return bad("cannot be represented exactly at scale ", scale_);
      }
      digits.resize(keep);
    } else {
      if (static_cast<int64_t>(digits.size()) + shift > precision_) {
        return bad("needs ", static_cast<int64_t>(digits.size()) + shift, " digits at scale ",
                   scale_, ", more than the precision ", precision_);
      }
      digits.append(static_cast<size_t>(shift), '0');
    }
  }
  if (static_cast<int64_t>(digits.size()) > precision_) {
    return bad("needs ", digits.size(), " digits at scale ", scale_, ", more than the precision ",
               precision_);
  }
  // At most 76 digits: fits a signed 256-bit integer.
  Word256 w{};
  for (char c : digits) MulAdd(w, 10, static_cast<uint32_t>(c - '0'));
  if (negative) Negate(w);
  uint8_t bytes[32];
  StoreLittleEndian(w, bytes, byte_width_);
  return AppendRaw(bytes);
}

}  // namespace alkaid::format
