#pragma once

// Builds test arrays straight from raw buffers (no builders), so that tests
// can choose every physical detail: slice offsets, bitmaps present or not,
// garbage in null slots, offsets that do not start at 0, view placement.

#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "alkaid/format/array.h"
#include "alkaid/format/array_data.h"
#include "alkaid/format/buffer.h"
#include "alkaid/format/type.h"

namespace alkaid::format::testing {

/// A buffer holding a copy of `values`, padded to a multiple of 64 bytes.
template <typename T>
std::shared_ptr<Buffer> Buf(const std::vector<T>& values) {
  std::string bytes(values.size() * sizeof(T), '\0');
  if (!values.empty()) std::memcpy(bytes.data(), values.data(), bytes.size());
  const size_t logical = bytes.size();
  bytes.resize((logical + 63) / 64 * 64 + 64, '\0');
  auto padded = Buffer::FromString(std::move(bytes));
  return std::make_shared<Buffer>(padded, 0, static_cast<int64_t>(logical));
}

/// A validity bitmap with one bit per entry of `valid`.
inline std::shared_ptr<Buffer> Bitmap(const std::vector<bool>& valid) {
  std::vector<uint8_t> bytes((valid.size() + 7) / 8, 0);
  for (size_t i = 0; i < valid.size(); ++i) {
    if (valid[i]) bytes[i / 8] = static_cast<uint8_t>(bytes[i / 8] | (1u << (i % 8)));
  }
  return Buf(bytes);
}

inline int64_t CountNulls(const std::vector<bool>& valid) {
  int64_t n = 0;
  for (bool v : valid) n += v ? 0 : 1;
  return n;
}

/// Validity for `values`; null (no bitmap) when all are valid unless
/// `force_bitmap`.
template <typename T>
std::shared_ptr<Buffer> ValidityOf(const std::vector<std::optional<T>>& values, bool force_bitmap,
                                   int64_t* null_count) {
  std::vector<bool> valid;
  for (const auto& v : values) valid.push_back(v.has_value());
  *null_count = CountNulls(valid);
  if (*null_count == 0 && !force_bitmap) return nullptr;
  return Bitmap(valid);
}

/// A fixed-width array of C values; null slots hold `garbage`.
template <typename T>
ArrayPtr Fixed(TypePtr type, const std::vector<std::optional<T>>& values, T garbage = T{},
               bool force_bitmap = false) {
  int64_t nulls;
  auto validity = ValidityOf(values, force_bitmap, &nulls);
  std::vector<T> raw;
  for (const auto& v : values) raw.push_back(v.has_value() ? *v : garbage);
  return MakeArray(ArrayData::Make(std::move(type), static_cast<int64_t>(values.size()),
                                   {validity, Buf(raw)}, nulls));
}

inline ArrayPtr Int32s(const std::vector<std::optional<int32_t>>& values, int32_t garbage = 0,
                       bool force_bitmap = false) {
  return Fixed<int32_t>(int32(), values, garbage, force_bitmap);
}

inline ArrayPtr Bools(const std::vector<std::optional<bool>>& values) {
  int64_t nulls;
  auto validity = ValidityOf(values, false, &nulls);
  std::vector<bool> bits;
  for (const auto& v : values) bits.push_back(v.value_or(false));
  return MakeArray(ArrayData::Make(boolean(), static_cast<int64_t>(values.size()),
                                   {validity, Bitmap(bits)}, nulls));
}

/// binary/string (OffsetT = int32_t) or large_* (int64_t); the data buffer
/// starts with `lead` junk bytes so offsets do not start at 0.
template <typename OffsetT = int32_t>
ArrayPtr Binaries(TypePtr type, const std::vector<std::optional<std::string>>& values,
                  const std::string& lead = "") {
  int64_t nulls;
  auto validity = ValidityOf(values, false, &nulls);
  std::string data = lead;
  std::vector<OffsetT> offsets{static_cast<OffsetT>(data.size())};
  for (const auto& v : values) {
    if (v.has_value()) data += *v;
    offsets.push_back(static_cast<OffsetT>(data.size()));
  }
  std::vector<char> bytes(data.begin(), data.end());
  return MakeArray(ArrayData::Make(std::move(type), static_cast<int64_t>(values.size()),
                                   {validity, Buf(offsets), Buf(bytes)}, nulls));
}

inline ArrayPtr Strings(const std::vector<std::optional<std::string>>& values,
                        const std::string& lead = "") {
  return Binaries<int32_t>(utf8(), values, lead);
}

/// binary_view/utf8_view. Values longer than 12 bytes go to data buffer
/// `k % num_buffers` (k counting long values), after `lead` junk bytes.
inline ArrayPtr Views(TypePtr type, const std::vector<std::optional<std::string>>& values,
                      int num_buffers = 1, const std::string& lead = "") {
  int64_t nulls;
  auto validity = ValidityOf(values, false, &nulls);
  std::vector<std::string> data(static_cast<size_t>(num_buffers), lead);
  std::vector<BinaryViewHeader> views;
  int k = 0;
  for (const auto& v : values) {
    BinaryViewHeader h;
    std::memset(&h, 0, sizeof(h));
    if (v.has_value()) {
      h.inlined.size = static_cast<int32_t>(v->size());
      if (h.is_inline()) {
        std::memcpy(h.inlined.data, v->data(), v->size());
      } else {
        std::string& d = data[static_cast<size_t>(k % num_buffers)];
        std::memcpy(h.ref.prefix, v->data(), 4);
        h.ref.buffer_index = k % num_buffers;
        h.ref.offset = static_cast<int32_t>(d.size());
        d += *v;
        ++k;
      }
    }
    views.push_back(h);
  }
  std::vector<std::shared_ptr<Buffer>> buffers{validity, Buf(views)};
  for (const auto& d : data) buffers.push_back(Buf(std::vector<char>(d.begin(), d.end())));
  return MakeArray(ArrayData::Make(std::move(type), static_cast<int64_t>(values.size()),
                                   std::move(buffers), nulls));
}

/// A list-like array (list, large_list, map) over `child`.
template <typename OffsetT = int32_t>
ArrayPtr ListOf(TypePtr type, const std::vector<OffsetT>& offsets, const std::vector<bool>& valid,
                const ArrayPtr& child) {
  const int64_t n = static_cast<int64_t>(offsets.size()) - 1;
  const int64_t nulls = CountNulls(valid);
  return MakeArray(ArrayData::Make(std::move(type), n,
                                   {nulls == 0 ? nullptr : Bitmap(valid), Buf(offsets)},
                                   {child->data()}, nulls));
}

template <typename OffsetT = int32_t>
ArrayPtr ListViewOf(TypePtr type, const std::vector<OffsetT>& offsets,
                    const std::vector<OffsetT>& sizes, const std::vector<bool>& valid,
                    const ArrayPtr& child) {
  const int64_t nulls = CountNulls(valid);
  return MakeArray(ArrayData::Make(std::move(type), static_cast<int64_t>(offsets.size()),
                                   {nulls == 0 ? nullptr : Bitmap(valid), Buf(offsets), Buf(sizes)},
                                   {child->data()}, nulls));
}

/// Struct or fixed-size list: a validity bitmap plus children.
inline ArrayPtr Nested(TypePtr type, const std::vector<bool>& valid,
                       const std::vector<ArrayPtr>& children) {
  const int64_t nulls = CountNulls(valid);
  std::vector<ArrayDataPtr> child_data;
  for (const auto& c : children) child_data.push_back(c->data());
  return MakeArray(ArrayData::Make(std::move(type), static_cast<int64_t>(valid.size()),
                                   {nulls == 0 ? nullptr : Bitmap(valid)}, std::move(child_data),
                                   nulls));
}

inline ArrayPtr SparseUnion(TypePtr type, const std::vector<int8_t>& codes,
                            const std::vector<ArrayPtr>& children) {
  std::vector<ArrayDataPtr> child_data;
  for (const auto& c : children) child_data.push_back(c->data());
  return MakeArray(ArrayData::Make(std::move(type), static_cast<int64_t>(codes.size()),
                                   {Buf(codes)}, std::move(child_data), 0));
}

inline ArrayPtr DenseUnion(TypePtr type, const std::vector<int8_t>& codes,
                           const std::vector<int32_t>& offsets,
                           const std::vector<ArrayPtr>& children) {
  std::vector<ArrayDataPtr> child_data;
  for (const auto& c : children) child_data.push_back(c->data());
  return MakeArray(ArrayData::Make(std::move(type), static_cast<int64_t>(codes.size()),
                                   {Buf(codes), Buf(offsets)}, std::move(child_data), 0));
}

/// Dictionary array with int8 indices (null index slots hold garbage 99).
inline ArrayPtr Dict(const ArrayPtr& dictionary,
                     const std::vector<std::optional<int8_t>>& indices) {
  auto idx = Fixed<int8_t>(int8(), indices, 99);
  auto data = std::make_shared<ArrayData>(*idx->data());
  data->type = format::dictionary(int8(), dictionary->type());
  data->dictionary = dictionary->data();
  return MakeArray(std::move(data));
}

/// Run-end encoded array with int32 run ends.
inline ArrayPtr Ree(const std::vector<int32_t>& run_ends, const ArrayPtr& values) {
  auto ends = Fixed<int32_t>(int32(),
                             std::vector<std::optional<int32_t>>(run_ends.begin(), run_ends.end()));
  const int64_t length = run_ends.empty() ? 0 : run_ends.back();
  return MakeArray(ArrayData::Make(run_end_encoded(int32(), values->type()), length, {},
                                   {ends->data(), values->data()}, 0));
}

/// The same data under another (e.g. extension) type.
inline ArrayPtr Retype(const ArrayPtr& array, TypePtr type) {
  auto data = std::make_shared<ArrayData>(*array->data());
  data->type = std::move(type);
  return MakeArray(std::move(data));
}

}  // namespace alkaid::format::testing
