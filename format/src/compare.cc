#include "alkaid/format/compare.h"

#include <cmath>
#include <cstring>
#include <string>
#include <utility>

#include "alkaid/format/pretty_print.h"
#include "alkaid/format/record_batch.h"
#include "pretty_print_internal.h"

// Equality is decided slot by slot: "the value at logical slot i of A equals
// the value at logical slot j of B", recursing into children with the child
// index each layout prescribes (list offsets, struct offset + i, union type
// codes and offsets, dictionary indices, run ends). Comparing logical values
// rather than buffers is what makes slices, absent bitmaps, garbage in null
// slots, shared or reordered child ranges and re-split runs irrelevant.
//
// When a difference report is wanted, the innermost mismatch records the two
// values and each enclosing level prepends its path segment on the way out.

namespace alkaid::format {

namespace {

struct Difference {
  /// Path below the top-level slot, e.g. ".item[1]" or ".a.entries[0].value".
  std::string path;
  std::string expected;
  std::string actual;
};

/// True if a value of `type` may contain a float (where NaN != NaN makes an
/// array unequal to itself).
bool ContainsFloating(const DataType& type) {
  if (IsFloating(type.id())) return true;
  if (type.id() == TypeId::kDictionary) {
    return ContainsFloating(*static_cast<const DictionaryType&>(type).value_type());
  }
  if (type.id() == TypeId::kExtension) {
    return ContainsFloating(*static_cast<const ExtensionType&>(type).storage_type());
  }
  for (const auto& f : type.fields()) {
    if (ContainsFloating(*f->type())) return true;
  }
  return false;
}

/// Fixed-width types without special value semantics, compared bytewise.
bool IsBytewiseFixedWidth(TypeId id) {
  switch (id) {
    case TypeId::kInt8:
    case TypeId::kUInt8:
    case TypeId::kInt16:
    case TypeId::kUInt16:
    case TypeId::kInt32:
    case TypeId::kUInt32:
    case TypeId::kInt64:
    case TypeId::kUInt64:
    case TypeId::kDate32:
    case TypeId::kDate64:
    case TypeId::kTime32:
    case TypeId::kTime64:
    case TypeId::kTimestamp:
    case TypeId::kDuration:
    case TypeId::kIntervalMonths:
    case TypeId::kIntervalDayTime:
    case TypeId::kIntervalMonthDayNano:
    case TypeId::kDecimal32:
    case TypeId::kDecimal64:
    case TypeId::kDecimal128:
    case TypeId::kDecimal256:
    case TypeId::kFixedSizeBinary:
      return true;
    default:
      return false;
  }
}

/// Bytes per slot of a bytewise fixed-width type.
int64_t ByteWidth(const DataType& type) {
  if (type.id() == TypeId::kFixedSizeBinary) {
    return static_cast<const FixedSizeBinaryType&>(type).byte_width();
  }
  return BitWidth(type) / 8;
}

/// Start of slot i (logical) of a fixed-width array's value buffer.
const uint8_t* FixedWidthSlot(const Array& array, int64_t width, int64_t i) {
  return array.data()->buffers[1]->data() + (array.offset() + i) * width;
}

class SlotComparer {
 public:
  /// `diff` may be null when only a yes/no answer is wanted.
  SlotComparer(const EqualOptions& options, Difference* diff) : options_(options), diff_(diff) {}

  /// Slot i of `a` against slot j of `b`; the types are known to be equal.
  bool Equal(const Array& a, int64_t i, const Array& b, int64_t j) {
    switch (a.type_id()) {
      case TypeId::kNull:
        return true;
      case TypeId::kSparseUnion:
      case TypeId::kDenseUnion:
        return UnionEqual(a, i, b, j);
      case TypeId::kDictionary:
        return DictionaryEqual(a, i, b, j);
      case TypeId::kRunEndEncoded:
        return RunEndEncodedEqual(a, i, b, j);
      case TypeId::kExtension:
        return Equal(*static_cast<const ExtensionArray&>(a).storage(), i,
                     *static_cast<const ExtensionArray&>(b).storage(), j);
      default:
        break;
    }
    const bool a_null = a.data()->IsNull(i);
    const bool b_null = b.data()->IsNull(j);
    if (a_null || b_null) return (a_null && b_null) || Fail(a, i, b, j);

    const DataType& type = *a.type();
    const TypeId id = type.id();
    if (IsBytewiseFixedWidth(id)) {
      const int64_t w = ByteWidth(type);
      return std::memcmp(FixedWidthSlot(a, w, i), FixedWidthSlot(b, w, j),
                         static_cast<size_t>(w)) == 0 ||
             Fail(a, i, b, j);
    }
    switch (id) {
      case TypeId::kBool:
        return static_cast<const BooleanArray&>(a).Value(i) ==
                   static_cast<const BooleanArray&>(b).Value(j) ||
               Fail(a, i, b, j);
      case TypeId::kHalfFloat:
        return FloatEqual(internal::HalfToFloat(static_cast<const HalfFloatArray&>(a).Value(i)),
                          internal::HalfToFloat(static_cast<const HalfFloatArray&>(b).Value(j))) ||
               Fail(a, i, b, j);
      case TypeId::kFloat:
        return FloatEqual(static_cast<const FloatArray&>(a).Value(i),
                          static_cast<const FloatArray&>(b).Value(j)) ||
               Fail(a, i, b, j);
      case TypeId::kDouble:
        return FloatEqual(static_cast<const DoubleArray&>(a).Value(i),
                          static_cast<const DoubleArray&>(b).Value(j)) ||
               Fail(a, i, b, j);
      case TypeId::kBinary:
      case TypeId::kString:
        return static_cast<const BinaryArray&>(a).GetView(i) ==
                   static_cast<const BinaryArray&>(b).GetView(j) ||
               Fail(a, i, b, j);
      case TypeId::kLargeBinary:
      case TypeId::kLargeString:
        return static_cast<const LargeBinaryArray&>(a).GetView(i) ==
                   static_cast<const LargeBinaryArray&>(b).GetView(j) ||
               Fail(a, i, b, j);
      case TypeId::kBinaryView:
      case TypeId::kStringView:
        return static_cast<const BinaryViewArray&>(a).GetView(i) ==
                   static_cast<const BinaryViewArray&>(b).GetView(j) ||
               Fail(a, i, b, j);
      case TypeId::kList:
      case TypeId::kMap:
        return ListEqual<ListArray>(a, i, b, j);
      case TypeId::kLargeList:
        return ListEqual<LargeListArray>(a, i, b, j);
      case TypeId::kListView:
        return ListEqual<ListViewArray>(a, i, b, j);
      case TypeId::kLargeListView:
        return ListEqual<LargeListViewArray>(a, i, b, j);
      case TypeId::kFixedSizeList:
        return ListEqual<FixedSizeListArray>(a, i, b, j);
      case TypeId::kStruct:
        return StructEqual(a, i, b, j);
      default:
        return Fail(a, i, b, j);
    }
  }

 private:
  template <typename T>
  bool FloatEqual(T x, T y) const {
    return x == y || (options_.nans_equal && std::isnan(x) && std::isnan(y));
  }

  /// Records a mismatch of the two slots (their values as text).
  bool Fail(const Array& a, int64_t i, const Array& b, int64_t j) {
    if (diff_ != nullptr) {
      diff_->expected = FormatValue(a, i);
      diff_->actual = FormatValue(b, j);
    }
    return false;
  }

  bool FailWith(std::string expected, std::string actual) {
    if (diff_ != nullptr) {
      diff_->expected = std::move(expected);
      diff_->actual = std::move(actual);
    }
    return false;
  }

  /// After a mismatch inside a child: prefixes the path with the child's
  /// segment and returns false. Only called on the failure path, so the
  /// segment text costs nothing while values compare equal.
  template <typename... Segment>
  bool Prefix(const Segment&... segment) {
    if (diff_ != nullptr) {
      std::string prefix;
      ((prefix += segment), ...);
      diff_->path.insert(0, prefix);
    }
    return false;
  }

  template <typename ListT>
  bool ListEqual(const Array& a, int64_t i, const Array& b, int64_t j) {
    const auto& la = static_cast<const ListT&>(a);
    const auto& lb = static_cast<const ListT&>(b);
    const int64_t length = la.value_length(i);
    if (length != static_cast<int64_t>(lb.value_length(j))) return Fail(a, i, b, j);
    const int64_t a_begin = la.value_offset(i);
    const int64_t b_begin = lb.value_offset(j);
    const std::string& name = a.type()->field(0)->name();
    for (int64_t k = 0; k < length; ++k) {
      if (!Equal(*la.values(), a_begin + k, *lb.values(), b_begin + k)) {
        return Prefix(".", name, "[", std::to_string(k), "]");
      }
    }
    return true;
  }

  bool StructEqual(const Array& a, int64_t i, const Array& b, int64_t j) {
    const auto& sa = static_cast<const StructArray&>(a);
    const auto& sb = static_cast<const StructArray&>(b);
    for (int c = 0; c < sa.num_fields(); ++c) {
      if (!Equal(*sa.field(c), sa.offset() + i, *sb.field(c), sb.offset() + j)) {
        return Prefix(".", a.type()->field(c)->name());
      }
    }
    return true;
  }

  bool UnionEqual(const Array& a, int64_t i, const Array& b, int64_t j) {
    const auto& ua = static_cast<const UnionArray&>(a);
    const auto& ub = static_cast<const UnionArray&>(b);
    const int8_t a_code = ua.type_code(i);
    const int8_t b_code = ub.type_code(j);
    if (a_code != b_code) {
      return FailWith(FormatValue(a, i) + " (type code " + std::to_string(a_code) + ")",
                      FormatValue(b, j) + " (type code " + std::to_string(b_code) + ")");
    }
    const int child = ua.child_id(i);
    if (child < 0 || child >= ua.num_fields() || child >= ub.num_fields()) {
      return FailWith("a valid type code", "undefined type code " + std::to_string(a_code));
    }
    const Array& a_child = *ua.field(child);
    const Array& b_child = *ub.field(child);
    const int64_t a_index = ua.value_offset(i);
    const int64_t b_index = ub.value_offset(j);
    if (a_index < 0 || a_index >= a_child.length() || b_index < 0 || b_index >= b_child.length()) {
      return FailWith("a union offset inside the child", "an offset out of range");
    }
    return Equal(a_child, a_index, b_child, b_index) || Prefix(".", a.type()->field(child)->name());
  }

  /// Resolves dictionary slot i to an index into the dictionary, or -1 for
  /// a null slot. False if the slot cannot be resolved (no dictionary, index
  /// out of range).
  static bool ResolveDictionary(const DictionaryArray& d, int64_t i, int64_t* index) {
    if (d.data()->IsNull(i)) {
      *index = -1;
      return true;
    }
    *index = d.GetIndex(i);
    if (d.dictionary() == nullptr || *index < 0 || *index >= d.dictionary()->length()) {
      return false;
    }
    if (d.dictionary()->IsNull(*index)) *index = -1;
    return true;
  }

  bool DictionaryEqual(const Array& a, int64_t i, const Array& b, int64_t j) {
    const auto& da = static_cast<const DictionaryArray&>(a);
    const auto& db = static_cast<const DictionaryArray&>(b);
    int64_t a_index;
    int64_t b_index;
    const bool a_ok = ResolveDictionary(da, i, &a_index);
    const bool b_ok = ResolveDictionary(db, j, &b_index);
    if (!a_ok || !b_ok) {
      // Without usable dictionaries only the raw indices can be compared.
      if (!a_ok && !b_ok && da.GetIndex(i) == db.GetIndex(j)) return true;
      return Fail(a, i, b, j);
    }
    if (a_index < 0 || b_index < 0) return (a_index < 0 && b_index < 0) || Fail(a, i, b, j);
    return Equal(*da.dictionary(), a_index, *db.dictionary(), b_index);
  }

  bool RunEndEncodedEqual(const Array& a, int64_t i, const Array& b, int64_t j) {
    const auto& ra = static_cast<const RunEndEncodedArray&>(a);
    const auto& rb = static_cast<const RunEndEncodedArray&>(b);
    const int64_t a_run = ra.FindPhysicalIndex(i);
    const int64_t b_run = rb.FindPhysicalIndex(j);
    if (a_run >= ra.values()->length() || b_run >= rb.values()->length()) {
      return FailWith("a slot covered by a run", "a slot past the last run");
    }
    return Equal(*ra.values(), a_run, *rb.values(), b_run);
  }

  const EqualOptions& options_;
  Difference* diff_;
};

/// Whole-array shortcut: true if the arrays are known equal without looking
/// at each slot.
bool KnownEqual(const Array& a, const Array& b, const EqualOptions& options) {
  if (a.data() == b.data() && (options.nans_equal || !ContainsFloating(*a.type()))) return true;
  const TypeId id = a.type_id();
  if (id == TypeId::kNull) return true;
  if (IsBytewiseFixedWidth(id) && a.null_count() == 0 && b.null_count() == 0) {
    const int64_t w = ByteWidth(*a.type());
    return a.length() == 0 || std::memcmp(FixedWidthSlot(a, w, 0), FixedWidthSlot(b, w, 0),
                                          static_cast<size_t>(w * a.length())) == 0;
  }
  return false;
}

/// Compares two arrays of equal types and lengths; on a difference fills
/// `message` (if not null) with "slot N<path>: expected X, got Y".
bool CompareSlots(const Array& a, const Array& b, const EqualOptions& options,
                  std::string* message) {
  if (KnownEqual(a, b, options)) return true;
  Difference diff;
  SlotComparer comparer(options, message != nullptr ? &diff : nullptr);
  for (int64_t i = 0; i < a.length(); ++i) {
    if (!comparer.Equal(a, i, b, i)) {
      if (message != nullptr) {
        *message = "slot " + std::to_string(i) + diff.path + ": expected " + diff.expected +
                   ", got " + diff.actual;
      }
      return false;
    }
  }
  return true;
}

/// Type and length check shared by ArrayEquals and CheckArrayEquals.
bool CompareArrays(const Array& expected, const Array& actual, const EqualOptions& options,
                   std::string* message) {
  if (!expected.type()->Equals(*actual.type(), options.check_metadata)) {
    if (message != nullptr) {
      *message =
          "type: expected " + expected.type()->ToString() + ", got " + actual.type()->ToString();
      if (expected.type()->Equals(*actual.type(), false)) *message += " (field metadata differs)";
    }
    return false;
  }
  if (expected.length() != actual.length()) {
    if (message != nullptr) {
      *message = "length: expected " + std::to_string(expected.length()) + ", got " +
                 std::to_string(actual.length());
    }
    return false;
  }
  return CompareSlots(expected, actual, options, message);
}

std::string MetadataText(const MetadataPtr& metadata) {
  return metadata == nullptr || metadata->empty() ? std::string("none") : metadata->ToString();
}

}  // namespace

bool ArrayEquals(const Array& a, const Array& b, const EqualOptions& options) {
  return CompareArrays(a, b, options, nullptr);
}

Status CheckArrayEquals(const Array& expected, const Array& actual, const EqualOptions& options) {
  std::string message;
  if (CompareArrays(expected, actual, options, &message)) return Status::OK();
  return Status::Invalid(message);
}

Status CheckRecordBatchEquals(const RecordBatch& expected, const RecordBatch& actual,
                              const EqualOptions& options) {
  if (expected.num_rows() != actual.num_rows()) {
    return Status::Invalid("num_rows: expected ", expected.num_rows(), ", got ", actual.num_rows());
  }
  const Schema& es = *expected.schema();
  const Schema& as = *actual.schema();
  if (es.num_fields() != as.num_fields()) {
    return Status::Invalid("schema: expected ", es.num_fields(), " fields, got ", as.num_fields());
  }
  for (int c = 0; c < es.num_fields(); ++c) {
    const Field& ef = *es.field(c);
    const Field& af = *as.field(c);
    if (!ef.Equals(af, options.check_metadata)) {
      std::string detail = ef.Equals(af, false) ? std::string(" (metadata: expected ") +
                                                      MetadataText(ef.metadata()) + ", got " +
                                                      MetadataText(af.metadata()) + ")"
                                                : std::string();
      return Status::Invalid("schema field ", c, ": expected ", ef.ToString(), ", got ",
                             af.ToString(), detail);
    }
  }
  if (options.check_metadata) {
    const bool e_empty = es.metadata() == nullptr || es.metadata()->empty();
    const bool a_empty = as.metadata() == nullptr || as.metadata()->empty();
    if (e_empty != a_empty || (!e_empty && !es.metadata()->Equals(*as.metadata()))) {
      return Status::Invalid("schema metadata: expected ", MetadataText(es.metadata()), ", got ",
                             MetadataText(as.metadata()));
    }
  }
  for (int c = 0; c < es.num_fields(); ++c) {
    std::string message;
    if (!CompareArrays(*expected.column(c), *actual.column(c), options, &message)) {
      return Status::Invalid("column '", es.field(c)->name(), "' (", c, "): ", message);
    }
  }
  return Status::OK();
}

}  // namespace alkaid::format
