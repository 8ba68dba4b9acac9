#include "alkaid/format/pretty_print.h"

#include <sstream>

#include "alkaid/format/record_batch.h"

namespace alkaid::format {

namespace {

template <typename T>
std::string Num(const Array& a, int64_t i) {
  return std::to_string(static_cast<const NumericArray<T>&>(a).Value(i));
}

}  // namespace

// Interim implementation covering the common types.
std::string FormatValue(const Array& array, int64_t i) {
  if (array.IsNull(i)) return "null";
  switch (array.type_id()) {
    case TypeId::kBool: return static_cast<const BooleanArray&>(array).Value(i) ? "true" : "false";
    case TypeId::kInt8: return Num<int8_t>(array, i);
    case TypeId::kUInt8: return Num<uint8_t>(array, i);
    case TypeId::kInt16: return Num<int16_t>(array, i);
    case TypeId::kUInt16: return Num<uint16_t>(array, i);
    case TypeId::kInt32: return Num<int32_t>(array, i);
    case TypeId::kUInt32: return Num<uint32_t>(array, i);
    case TypeId::kInt64: return Num<int64_t>(array, i);
    case TypeId::kUInt64: return Num<uint64_t>(array, i);
    case TypeId::kFloat: return Num<float>(array, i);
    case TypeId::kDouble: return Num<double>(array, i);
    case TypeId::kString:
    case TypeId::kBinary:
      return "\"" + static_cast<const BinaryArray&>(array).GetString(i) + "\"";
    case TypeId::kList: {
      auto slice = static_cast<const ListArray&>(array).value_slice(i);
      std::string out = "[";
      for (int64_t j = 0; j < slice->length(); ++j) {
        if (j > 0) out += ", ";
        out += FormatValue(*slice, j);
      }
      return out + "]";
    }
    default: return "<" + array.type()->ToString() + ">";
  }
}

std::string PrettyPrint(const Array& array, const PrettyPrintOptions& options) {
  const std::string pad(static_cast<size_t>(options.indent), ' ');
  std::string out = pad + "[\n";
  for (int64_t i = 0; i < array.length(); ++i) {
    out += pad + "  " + FormatValue(array, i) + (i + 1 < array.length() ? ",\n" : "\n");
  }
  return out + pad + "]";
}

std::string PrettyPrint(const RecordBatch& batch, const PrettyPrintOptions& options) {
  std::string out = std::to_string(batch.num_rows()) + " rows\n";
  for (int i = 0; i < batch.num_columns(); ++i) {
    out += batch.schema()->field(i)->name() + ": " + PrettyPrint(*batch.column(i), options) + "\n";
  }
  return out;
}

}  // namespace alkaid::format
