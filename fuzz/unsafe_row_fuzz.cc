// Fuzzes the UnsafeRow batch decoder against a fixed schema that has every
// kind of row value (seeds: fuzz/corpus/unsafe_row_fuzz, written by
// tests/format/unsafe_row_test.cc with ALKAID_UNSAFE_ROW_CORPUS set).

#include "alkaid/format/type.h"
#include "alkaid/format/unsafe_row.h"
#include "fuzz_util.h"

namespace fmt = alkaid::format;

namespace {

fmt::SchemaPtr RichSchema() {
  using fmt::field;
  // The schema of the corpus seeds (RichBatch in unsafe_row_test.cc) ...
  return fmt::schema({
      field("i", fmt::int32()),
      field("s", fmt::utf8()),
      field("l", fmt::list(fmt::utf8())),
      field("m", fmt::map(fmt::int64(), fmt::list(fmt::decimal128(30, 2)))),
      field("st", fmt::struct_({field("d", fmt::float64()), field("b", fmt::binary()),
                                field("n", fmt::struct_({field("x", fmt::int16())}))})),
      field("dec", fmt::decimal128(38, 0)),
  });
}

fmt::SchemaPtr NarrowSchema() {
  using fmt::field;
  // ... and one with the narrow, unknown and non-nullable cases.
  return fmt::schema({
      field("b", fmt::boolean()),
      field("t", fmt::int8(), false),
      field("u", fmt::null()),
      field("a", fmt::list(fmt::list(fmt::int16()))),
      field("f", fmt::fixed_size_list(fmt::float32(), 2)),
      field("k", fmt::map(fmt::utf8(), fmt::null())),
      field("d", fmt::decimal64(18, 3)),
      field("ts", fmt::timestamp(fmt::TimeUnit::kMicro)),
      field("v", fmt::large_binary()),
  });
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const fmt::SchemaPtr kSchemas[] = {RichSchema(), NarrowSchema()};
  auto buffer = alkaid::fuzz::ToBuffer(data, size);
  if (buffer == nullptr) return 0;
  for (const auto& schema : kSchemas) {
    auto batch = fmt::DecodeRowBatch(*buffer, schema);
    if (batch.ok()) {
      alkaid::fuzz::Exercise(**batch);
      // What decoded encodes again (the round trip of valid data).
      auto again = fmt::EncodeRowBatch(**batch);
      if (!again.ok()) __builtin_trap();
    }
  }
  return 0;
}
