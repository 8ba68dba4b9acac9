#pragma once

// A scripted stream of batches with a dictionary-encoded column, shared by
// the client and broker tests: batch b has 20 rows whose words come from a
// vocabulary replaced every 10 batches (generation b / 10) and grown by one
// word every other batch, so the dictionary messages are a whole
// dictionary, deltas, nothing, and replacements. IsBatch checks a received
// batch row by row through its dictionary.

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string>

#include "alkaid/common/result.h"
#include "alkaid/format/array.h"
#include "alkaid/format/builder_dict.h"
#include "alkaid/format/builder_primitive.h"
#include "alkaid/format/record_batch.h"

namespace alkaid::testing {

using format::RecordBatchPtr;

inline format::TypePtr WordType() { return format::dictionary(format::int16(), format::utf8()); }

inline format::SchemaPtr WordSchema() {
  return format::schema(
      {format::field("batch", format::int64()), format::field("word", WordType())});
}

inline constexpr int64_t kRows = 20;
inline int64_t Generation(int64_t b) { return b / 10; }
inline int64_t Vocabulary(int64_t b) { return 3 + (b % 10) / 2; }
inline bool IsNull(int64_t i) { return i % 5 == 4; }
inline std::string Word(int64_t b, int64_t i) {
  return "g" + std::to_string(Generation(b)) + "-w" + std::to_string((i + b) % Vocabulary(b));
}
/// True if batch b changes the dictionary the batch before used.
inline bool ChangesDictionary(int64_t b) {
  return b % 10 == 0 || Vocabulary(b) != Vocabulary(b - 1);
}

/// Builds batches of the script; the dictionary builder persists within a
/// generation, so each batch's dictionary extends the previous one.
class Script {
 public:
  explicit Script(format::MemoryPool* pool = format::default_memory_pool()) : pool_(pool) {}

  Result<RecordBatchPtr> Build(int64_t b) { return Build(b, pool_, nullptr); }

  /// Builds batch b in `pool`, continuing `previous` (the dictionary of
  /// batch b - 1) within a generation.
  static Result<RecordBatchPtr> BuildIn(int64_t b, format::MemoryPool* pool,
                                        const format::ArrayPtr& previous) {
    Script s(pool);
    return s.Build(b, pool, previous);
  }

 private:
  Result<RecordBatchPtr> Build(int64_t b, format::MemoryPool* pool,
                               const format::ArrayPtr& previous) {
    if (words_ == nullptr || b % 10 == 0 || pool != pool_) {
      words_ = std::make_unique<format::DictionaryBuilder>(WordType(), pool);
      pool_ = pool;
      if (previous != nullptr && b % 10 != 0) {
        ALKAID_RETURN_NOT_OK(words_->InsertMemoValues(*previous));
      }
    }
    format::Int64Builder ids(pool);
    for (int64_t i = 0; i < kRows; ++i) {
      ALKAID_RETURN_NOT_OK(ids.Append(b));
      if (IsNull(i)) {
        ALKAID_RETURN_NOT_OK(words_->AppendNull());
      } else {
        ALKAID_RETURN_NOT_OK(words_->Append(Word(b, i)));
      }
    }
    ALKAID_ASSIGN_OR_RAISE(auto id_array, ids.Finish());
    ALKAID_ASSIGN_OR_RAISE(auto word_array, words_->Finish());
    return format::RecordBatch::Make(WordSchema(), kRows, {id_array, word_array});
  }

  format::MemoryPool* pool_;
  std::unique_ptr<format::DictionaryBuilder> words_;
};

/// Checks that `batch` is batch b of the script, row by row, through its
/// dictionary.
inline ::testing::AssertionResult IsBatch(const format::RecordBatch& batch, int64_t b) {
  if (batch.num_rows() != kRows) {
    return ::testing::AssertionFailure() << batch.num_rows() << " rows";
  }
  auto ids = std::static_pointer_cast<format::Int64Array>(batch.column(0));
  auto words = std::static_pointer_cast<format::DictionaryArray>(batch.column(1));
  if (words->dictionary() == nullptr) return ::testing::AssertionFailure() << "no dictionary";
  auto dict = std::static_pointer_cast<format::StringArray>(words->dictionary());
  for (int64_t i = 0; i < kRows; ++i) {
    if (ids->Value(i) != b) {
      return ::testing::AssertionFailure()
             << "row " << i << " is of batch " << ids->Value(i) << ", expected " << b;
    }
    if (words->IsNull(i) != IsNull(i)) {
      return ::testing::AssertionFailure() << "batch " << b << " row " << i << " nullness";
    }
    if (IsNull(i)) continue;
    const int64_t index = words->GetIndex(i);
    if (index < 0 || index >= dict->length()) {
      return ::testing::AssertionFailure() << "batch " << b << " row " << i << ": index " << index
                                           << " outside a dictionary of " << dict->length();
    }
    if (dict->GetView(index) != Word(b, i)) {
      return ::testing::AssertionFailure()
             << "batch " << b << " row " << i << ": '" << dict->GetView(index) << "', expected '"
             << Word(b, i) << "'";
    }
  }
  return ::testing::AssertionSuccess();
}

/// The batch number a script batch carries.
inline int64_t BatchId(const format::RecordBatch& batch) {
  return std::static_pointer_cast<format::Int64Array>(batch.column(0))->Value(0);
}

}  // namespace alkaid::testing
