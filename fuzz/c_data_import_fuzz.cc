// Fuzzes the Arrow C Data Interface import (format/c_data.h) with hostile
// structs: the fuzz bytes choose a tree of ArrowSchema and ArrowArray nodes
// (formats, names, metadata, flags, lengths, offsets, null counts, buffer
// and child counts, null pointers, released nodes, children and
// dictionaries pointing anywhere in the tree, cycles included) and which
// import to run. Checks that each import gives a value or an error, never a
// crash, and calls the producer's release exactly once.
//
// What the interface cannot describe is kept honest, as any producer must:
// buffers are NULL or point into a zeroed 1 MiB area (no buffer size travels
// through the interface, so data implying more bytes than the producer has
// is not detectable by any consumer); lengths and offsets are negative, at
// most 1024, or overflowing when added; null counts anything; counts at most the size of
// the tables they describe; metadata comes from a table (hostile entries
// included) because its lengths are not bounded by the interface either.
// Seeds: fuzz/corpus/c_data_import_fuzz.

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "alkaid/format/c_data.h"
#include "fuzz_util.h"

namespace fmt = alkaid::format;

namespace {

alignas(64) const uint8_t kZeros[1 << 20] = {};

constexpr const char* kFormats[] = {
    "n",
    "b",
    "c",
    "C",
    "s",
    "S",
    "i",
    "I",
    "l",
    "L",
    "e",
    "f",
    "g",
    "z",
    "Z",
    "u",
    "U",
    "vz",
    "vu",
    "w:4",
    "w:0",
    "d:5,2",
    "d:38,10",
    "d:9,2,32",
    "d:18,3,64",
    "d:40,2,256",
    "tdD",
    "tdm",
    "tts",
    "ttm",
    "ttu",
    "ttn",
    "tss:",
    "tsu:UTC",
    "tDs",
    "tiM",
    "tiD",
    "tin",
    "+l",
    "+L",
    "+vl",
    "+vL",
    "+w:2",
    "+w:0",
    "+s",
    "+m",
    "+us:0,1",
    "+ud:0,1",
    "+ud:5",
    "+r",
    // Malformed ones.
    "",
    "w:",
    "w:-1",
    "d:",
    "d:1,2,3,4",
    "+w:",
    "+us:x",
    "+ud:1,1",
    "tsu",
    "q",
    "+",
    "t",
};

// Metadata as the interface encodes it (int32 count, then int32-length
// prefixed keys and values), native byte order.
std::string Metadata(std::initializer_list<int32_t> words, const char* tail = "") {
  std::string out(reinterpret_cast<const char*>(std::data(words)), words.size() * 4);
  return out + tail;
}
const std::string kMetadata[] = {
    Metadata({1, 1}) + "k" + Metadata({1}) + "v",
    Metadata({-1}),
    Metadata({1, -5}),
    Metadata({2, 1}) + "k" + Metadata({-3}),
    Metadata({1, 20}) + "ARROW:extension:name" + Metadata({9}) + "arrow.xyz",
};

constexpr int kMaxNodes = 12;
constexpr int kMaxBuffers = 8;
constexpr int kMaxChildren = 4;

struct Bytes {
  const uint8_t* p;
  size_t n;
  uint8_t U8() {
    if (n == 0) return 0;
    --n;
    return *p++;
  }
  int64_t I64() {
    int64_t v = 0;
    for (int i = 0; i < 8; ++i) v = (v << 8) | U8();
    return v;
  }
  // Mostly small, sometimes negative. (A large positive length or offset
  // implies buffers larger than any producer here has: undetectable.)
  int64_t Length() {
    const uint8_t kind = U8();
    if (kind % 8 == 0) return -static_cast<int64_t>(U8()) - 1;
    return static_cast<int64_t>(U8()) * 4 % 1025;
  }
  int64_t Count(int64_t table) {
    const uint8_t v = U8();
    if (v >= 250) return -static_cast<int64_t>(v - 249);
    return static_cast<int64_t>(v) % (table + 1);
  }
};

int g_schema_releases = 0;
int g_array_releases = 0;
void ReleaseSchema(ArrowSchema* s) {
  ++g_schema_releases;
  s->release = nullptr;
}
void ReleaseArray(ArrowArray* a) {
  ++g_array_releases;
  a->release = nullptr;
}

struct Tree {
  ArrowSchema schemas[kMaxNodes];
  ArrowArray arrays[kMaxNodes];
  ArrowSchema* schema_children[kMaxNodes][kMaxChildren];
  ArrowArray* array_children[kMaxNodes][kMaxChildren];
  const void* buffers[kMaxNodes][kMaxBuffers];
  std::string names[kMaxNodes];
  std::string raw_formats[kMaxNodes];

  void Build(Bytes* in) {
    const int n = 1 + in->U8() % kMaxNodes;
    for (int i = 0; i < kMaxNodes; ++i) {
      ArrowSchema& s = schemas[i];
      ArrowArray& a = arrays[i];
      std::memset(&s, 0, sizeof(s));
      std::memset(&a, 0, sizeof(a));
      if (i >= n) continue;
      // Schema node.
      const uint8_t f = in->U8();
      if (f == 255) {
        // A raw short format: parsed, never more (the numbers in it stay
        // small, so no buffer it implies outgrows the zeroed area).
        const int len = in->U8() % 5;
        for (int k = 0; k < len; ++k) raw_formats[i].push_back(static_cast<char>(in->U8() & 0x7f));
        s.format = raw_formats[i].c_str();
      } else if (f != 254) {
        s.format = kFormats[f % std::size(kFormats)];
      }  // 254: a null format
      names[i] = "f" + std::to_string(i);
      s.name = (in->U8() & 1) != 0 ? names[i].c_str() : nullptr;
      const uint8_t m = in->U8();
      s.metadata = m < std::size(kMetadata) ? kMetadata[m].c_str() : nullptr;
      s.flags = in->U8() & 7;
      s.n_children = in->Count(kMaxChildren);
      for (auto& c : schema_children[i]) {
        const uint8_t j = in->U8();
        c = j < 2 * kMaxNodes ? (j < kMaxNodes ? &schemas[j % n] : nullptr) : &schemas[j % n];
      }
      s.children = (in->U8() & 7) != 0 ? schema_children[i] : nullptr;
      const uint8_t d = in->U8();
      s.dictionary = d < 16 ? &schemas[d % n] : nullptr;
      s.release = (in->U8() & 15) != 0 ? ReleaseSchema : nullptr;
      // Array node.
      a.length = in->Length();
      const uint8_t o = in->U8();
      if ((o & 15) == 1) {
        // offset + length overflows int64: must be refused before use.
        a.offset = INT64_MAX - (o >> 6);
        if (a.length >= 0) a.length += 8;
      } else {
        a.offset = (o & 3) == 0 ? in->Length() : 0;
      }
      a.null_count = (in->U8() & 3) == 0 ? in->I64() : 0;
      a.n_buffers = in->Count(kMaxBuffers);
      for (auto& b : buffers[i]) b = (in->U8() & 7) != 0 ? kZeros : nullptr;
      a.buffers = (in->U8() & 7) != 0 ? buffers[i] : nullptr;
      a.n_children = in->Count(kMaxChildren);
      for (auto& c : array_children[i]) {
        const uint8_t j = in->U8();
        c = j < 2 * kMaxNodes ? (j < kMaxNodes ? &arrays[j % n] : nullptr) : &arrays[j % n];
      }
      a.children = (in->U8() & 7) != 0 ? array_children[i] : nullptr;
      const uint8_t ad = in->U8();
      a.dictionary = ad < 16 ? &arrays[ad % n] : nullptr;
      a.release = (in->U8() & 15) != 0 ? ReleaseArray : nullptr;
    }
  }
};

// The importer must have called the root's release exactly once (if it was
// live), and nothing else: children belong to their root.
void CheckReleased(int calls, bool was_live) {
  if (calls != (was_live ? 1 : 0)) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Bytes in{data, size};
  const uint8_t mode = in.U8();
  fmt::CImportOptions options;
  options.validate_full = (mode & 0x80) == 0;
  auto tree = std::make_unique<Tree>();
  tree->Build(&in);
  g_schema_releases = 0;
  g_array_releases = 0;
  const bool schema_live = tree->schemas[0].release != nullptr;
  const bool array_live = tree->arrays[0].release != nullptr;
  switch (mode % 5) {
    case 0: {
      auto r = fmt::ImportSchema(&tree->schemas[0]);
      if (r.ok()) (void)(*r)->ToString();
      CheckReleased(g_schema_releases, schema_live);
      break;
    }
    case 1: {
      auto r = fmt::ImportField(&tree->schemas[0]);
      if (r.ok()) (void)(*r)->ToString();
      CheckReleased(g_schema_releases, schema_live);
      break;
    }
    case 2: {
      {
        auto r = fmt::ImportRecordBatch(&tree->arrays[0], &tree->schemas[0], options);
        if (r.ok()) alkaid::fuzz::Exercise(**r);
      }
      CheckReleased(g_schema_releases, schema_live);
      CheckReleased(g_array_releases, array_live);
      break;
    }
    case 3: {
      {
        auto r = fmt::ImportArray(&tree->arrays[0], &tree->schemas[0], options);
        if (r.ok()) (void)(*r)->ToString();
      }
      CheckReleased(g_schema_releases, schema_live);
      CheckReleased(g_array_releases, array_live);
      break;
    }
    default: {
      // The array against a fixed, valid type.
      static const fmt::SchemaPtr kSchema =
          fmt::schema({fmt::field("a", fmt::int32()), fmt::field("b", fmt::utf8()),
                       fmt::field("c", fmt::list(fmt::int64()))});
      {
        auto r = fmt::ImportRecordBatch(&tree->arrays[0], kSchema, options);
        if (r.ok()) alkaid::fuzz::Exercise(**r);
      }
      CheckReleased(g_array_releases, array_live);
      break;
    }
  }
  return 0;
}
