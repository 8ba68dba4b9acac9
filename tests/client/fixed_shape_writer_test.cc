// FixedShapeWriter: batches of a prototype's shape published without
// building them, received as ordinary batches.

#include <gtest/gtest.h>

#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "alkaid/client/batch_publisher.h"
#include "alkaid/client/batch_subscriber.h"
#include "alkaid/format/array.h"
#include "alkaid/format/builder_binary.h"
#include "alkaid/format/builder_primitive.h"
#include "alkaid/format/validate.h"
#include "client_test_util.h"

namespace alkaid::client {
namespace {

using namespace std::chrono_literals;
using testing::Channel;

// Two columns: nullable int64 (every 3rd row null) and non-null double.
format::SchemaPtr TwoColumns() {
  return format::schema(
      {format::field("i", format::int64(), true), format::field("d", format::float64(), false)});
}

Result<format::RecordBatchPtr> BuildPrototype(ShmBatchPool* pool, const format::SchemaPtr& schema,
                                              int64_t rows) {
  format::Int64Builder ib(pool);
  format::DoubleBuilder db(pool);
  for (int64_t r = 0; r < rows; ++r) {
    if (r % 3 == 1) {
      ALKAID_RETURN_NOT_OK(ib.AppendNull());
    } else {
      ALKAID_RETURN_NOT_OK(ib.Append(-1));
    }
    ALKAID_RETURN_NOT_OK(db.Append(-1.0));
  }
  ALKAID_ASSIGN_OR_RAISE(auto i, ib.Finish());
  ALKAID_ASSIGN_OR_RAISE(auto d, db.Finish());
  return format::RecordBatch::Make(schema, rows, {i, d});
}

// Where the prototype's Message travels: as a shape id (the table has
// room), or, with the table full, inline or in the region.
enum class Where { kShape, kInline, kRegion };

// With Fill::kNone the caller writes the validity bitmap too.
// A writer that keeps no prototype (FixedShapeWriterOptions::keep_prototype
// false) refuses Fill::kPrototype and still carries the metadata.
void RunWriter(uint32_t inline_capacity, Where where,
               FixedShapeWriter::Fill fill = FixedShapeWriter::Fill::kPrototype,
               bool keep_prototype = true) {
  Channel ch;
  shm::ChannelOptions ro;
  ro.inline_capacity = inline_capacity;
  ro.slot_count = 8;
  ro.shape_count = 1;
  ASSERT_OK(ch.Create(1 << 20, ro));
  if (where != Where::kShape) {
    const std::vector<std::byte> other(16, std::byte{1});
    ASSERT_OK(ch.producer->AddShape(other).status());  // the table is full
  }
  auto schema = TwoColumns();
  ASSERT_OK_AND_ASSIGN(auto pub, BatchPublisher::Create(ch.producer.get(), schema));
  ASSERT_OK_AND_ASSIGN(auto sub, BatchSubscriber::Open(ch.name, schema));
  constexpr int64_t kRows = 10;
  std::unique_ptr<FixedShapeWriter> writer;
  {
    ASSERT_OK_AND_ASSIGN(auto pool, pub->NewPool(4096));
    ASSERT_OK_AND_ASSIGN(auto prototype, BuildPrototype(pool.get(), schema, kRows));
    FixedShapeWriterOptions options;
    options.keep_prototype = keep_prototype;
    ASSERT_OK_AND_ASSIGN(writer, pub->NewFixedShapeWriter(*prototype, *pool, options));
  }  // the prototype and its pool are gone: the writer kept copies
  if (!keep_prototype) {
    ASSERT_RAISES_WITH_MESSAGE(kInvalid, "keeps no prototype",
                               writer->Begin(FixedShapeWriter::Fill::kPrototype));
  }
  // int64: validity, values; double: validity (absent), values.
  ASSERT_EQ(writer->num_buffers(), 4u);
  EXPECT_TRUE(writer->buffer(1).empty());  // no region before Begin
  ASSERT_RAISES(kInvalid, writer->Publish());
  for (int64_t n = 0; n < 50; ++n) {  // more batches than slots: blocks are reused
    ASSERT_OK(writer->Begin(fill));
    ASSERT_RAISES_WITH_MESSAGE(kInvalid, "not published", writer->Begin(fill));
    ASSERT_EQ(writer->buffer(1).size(), kRows * sizeof(int64_t));
    ASSERT_EQ(writer->buffer(3).size(), kRows * sizeof(double));
    EXPECT_TRUE(writer->buffer(2).empty());
    EXPECT_TRUE(writer->buffer(4).empty());  // out of range
    auto* iv = reinterpret_cast<int64_t*>(writer->buffer(1).data());
    auto* dv = reinterpret_cast<double*>(writer->buffer(3).data());
    if (fill == FixedShapeWriter::Fill::kNone) {
      const std::span<uint8_t> bitmap = writer->buffer(0);
      ASSERT_GE(bitmap.size(), 2u);
      std::memset(bitmap.data(), 0, bitmap.size());
      for (int64_t r = 0; r < kRows; ++r) {
        if (r % 3 != 1) bitmap[static_cast<size_t>(r / 8)] |= static_cast<uint8_t>(1u << (r % 8));
      }
    }
    for (int64_t r = 0; r < kRows; ++r) {
      iv[r] = n * 100 + r;
      dv[r] = static_cast<double>(n) + 0.5 * static_cast<double>(r);
    }
    ASSERT_OK(writer->Publish());
    ASSERT_OK_AND_ASSIGN(auto got, sub->Receive(1s));
    ASSERT_OK(format::ValidateFull(*got.batch));
    ASSERT_EQ(got.batch->num_rows(), kRows);
    auto i = std::static_pointer_cast<format::Int64Array>(got.batch->column(0));
    auto d = std::static_pointer_cast<format::DoubleArray>(got.batch->column(1));
    EXPECT_EQ(i->null_count(), 3);
    for (int64_t r = 0; r < kRows; ++r) {
      ASSERT_EQ(i->IsNull(r), r % 3 == 1) << "batch " << n << " row " << r;
      if (r % 3 != 1) {
        ASSERT_EQ(i->Value(r), n * 100 + r);
      }
      ASSERT_EQ(d->Value(r), static_cast<double>(n) + 0.5 * static_cast<double>(r));
    }
  }
  EXPECT_EQ(pub->stats().batches, 50u);
  EXPECT_EQ(pub->stats().metadata_in_region, where == Where::kRegion ? 50u : 0u);
  // The same metadata every time: all but the first decode are hits; by
  // its bytes, all but the first two (metadata without a shape id is cached
  // when it comes again).
  EXPECT_EQ(sub->decode_cache_hits(), where == Where::kShape ? 49u : 48u);
  // Nothing accumulates: what the consumer returned went back; only the
  // blocks of messages still in the 8 slots are held.
  ch.producer->Poll();
  EXPECT_LE(ch.producer->stats().blocks_live, 8u);
}

TEST(BatchFixedShapeWriterTest, PublishesBatchesOfThePrototypesShapeAsAShapeId) {
  RunWriter(64, Where::kShape);
}

TEST(BatchFixedShapeWriterTest, PublishesBatchesOfThePrototypesShapeWithMetadataInTheSlot) {
  RunWriter(512, Where::kInline);
}

TEST(BatchFixedShapeWriterTest, PublishesBatchesOfThePrototypesShapeWithMetadataInTheRegion) {
  RunWriter(64, Where::kRegion);
}

// Fill::kNone copies nothing of the prototype's body, but still the
// metadata a region carries (kRegion: without it no batch decodes).
TEST(BatchFixedShapeWriterTest, WithoutFillTheCallerWritesEveryBuffer) {
  RunWriter(64, Where::kShape, FixedShapeWriter::Fill::kNone);
  RunWriter(512, Where::kInline, FixedShapeWriter::Fill::kNone);
  RunWriter(64, Where::kRegion, FixedShapeWriter::Fill::kNone);
}

// Without the prototype's body the writer keeps the metadata alone: every
// place of the Message still works, and Begin(kPrototype) is refused.
TEST(BatchFixedShapeWriterTest, AWriterWithoutItsPrototypeCarriesTheMetadata) {
  RunWriter(64, Where::kShape, FixedShapeWriter::Fill::kNone, /*keep_prototype=*/false);
  RunWriter(512, Where::kInline, FixedShapeWriter::Fill::kNone, /*keep_prototype=*/false);
  RunWriter(64, Where::kRegion, FixedShapeWriter::Fill::kNone, /*keep_prototype=*/false);
}

// On a channel with fixed blocks the writer's regions are fixed blocks,
// and the batch-only receive (TryReceive(&batch), Receive(&batch, ...))
// hands out the same batches: a batch kept while many more are published
// keeps its block (its values stay), and it comes back when dropped.
TEST(BatchFixedShapeWriterTest, RegionsInFixedBlocksAndTheBatchOnlyReceive) {
  Channel ch;
  shm::ChannelOptions ro;
  ro.slot_count = 8;
  ro.fixed_block_bytes = 512;
  ro.fixed_block_count = 16;
  ASSERT_OK(ch.Create(1 << 20, ro));
  auto schema = TwoColumns();
  ASSERT_OK_AND_ASSIGN(auto pub, BatchPublisher::Create(ch.producer.get(), schema));
  ASSERT_OK_AND_ASSIGN(auto sub, BatchSubscriber::Open(ch.name, schema));
  constexpr int64_t kRows = 10;
  std::unique_ptr<FixedShapeWriter> writer;
  {
    ASSERT_OK_AND_ASSIGN(auto pool, pub->NewPool(4096));
    ASSERT_OK_AND_ASSIGN(auto prototype, BuildPrototype(pool.get(), schema, kRows));
    ASSERT_OK_AND_ASSIGN(writer, pub->NewFixedShapeWriter(*prototype, *pool));
  }
  auto publish = [&](int64_t n) {
    ASSERT_OK(writer->Begin());
    auto* iv = reinterpret_cast<int64_t*>(writer->buffer(1).data());
    for (int64_t r = 0; r < kRows; ++r) iv[r] = n * 100 + r;
    ASSERT_OK(writer->Publish());
  };
  auto check = [&](const format::RecordBatch& batch, int64_t n) {
    auto i = std::static_pointer_cast<format::Int64Array>(batch.column(0));
    for (int64_t r = 0; r < kRows; ++r) {
      if (r % 3 != 1) {
        ASSERT_EQ(i->Value(r), n * 100 + r) << "batch " << n << " row " << r;
      }
    }
  };
  std::vector<format::RecordBatchPtr> kept;
  format::RecordBatchPtr batch;
  for (int64_t n = 0; n < 100; ++n) {
    ASSERT_NO_FATAL_FAILURE(publish(n));
    if (n % 2 == 0) {
      ASSERT_OK(sub->TryReceive(&batch));
    } else {
      ASSERT_OK(sub->Receive(&batch, 1s));
    }
    ASSERT_NE(batch, nullptr);
    EXPECT_EQ(sub->last_sequence(), static_cast<uint64_t>(n));
    EXPECT_EQ(sub->last_lost_before(), 0u);
    ASSERT_OK(format::ValidateFull(*batch));
    ASSERT_NO_FATAL_FAILURE(check(*batch, n));
    if (n < 4) kept.push_back(batch);  // and a column of one of them
  }
  auto column = kept[1]->column(0);
  kept[1].reset();
  for (int64_t n = 0; n < 4; ++n) {
    if (kept[n] != nullptr) {
      ASSERT_NO_FATAL_FAILURE(check(*kept[n], n));
    }
  }
  EXPECT_EQ(std::static_pointer_cast<format::Int64Array>(column)->Value(9), 109);
  ASSERT_OK(sub->TryReceive(&batch));
  EXPECT_EQ(batch, nullptr);  // nothing more: the pointer is emptied
  // The kept batches (and the column) hold their blocks; nothing else does.
  ASSERT_EQ(ch.producer->consumers().size(), 1u);
  EXPECT_EQ(ch.producer->consumers()[0].held_blocks, 4u);
  kept.clear();
  column.reset();  // the block goes with the column, its batch's last pointer
  EXPECT_EQ(ch.producer->consumers()[0].held_blocks, 0u);
  EXPECT_EQ(ch.producer->stats().returns, 0u);  // fixed blocks need none
}

TEST(BatchFixedShapeWriterTest, AnUnpublishedRegionIsReleasedWithTheWriter) {
  Channel ch;
  ASSERT_OK(ch.Create(1 << 20));
  auto schema = TwoColumns();
  ASSERT_OK_AND_ASSIGN(auto pub, BatchPublisher::Create(ch.producer.get(), schema));
  ASSERT_OK_AND_ASSIGN(auto pool, pub->NewPool(4096));
  ASSERT_OK_AND_ASSIGN(auto prototype, BuildPrototype(pool.get(), schema, 4));
  ASSERT_OK_AND_ASSIGN(auto writer, pub->NewFixedShapeWriter(*prototype, *pool));
  prototype.reset();
  pool.reset();
  ASSERT_OK(writer->Begin());
  ch.producer->Poll();
  EXPECT_EQ(ch.producer->stats().blocks_live, 1u);
  writer.reset();
  ch.producer->Poll();  // takes back loans dropped (on any thread)
  EXPECT_EQ(ch.producer->stats().blocks_live, 0u);
}

TEST(BatchFixedShapeWriterTest, RefusesPrototypesItCannotRepeat) {
  Channel ch;
  ASSERT_OK(ch.Create(1 << 20));
  Channel other;
  ASSERT_OK(other.Create(1 << 20));
  // Variable-width column: its metadata depends on the offsets.
  auto strings = format::schema({format::field("s", format::utf8())});
  ASSERT_OK_AND_ASSIGN(auto spub, BatchPublisher::Create(ch.producer.get(), strings));
  ASSERT_OK_AND_ASSIGN(auto spool, spub->NewPool(4096));
  format::StringBuilder sb(spool.get());
  ASSERT_OK(sb.Append("x"));
  ASSERT_OK_AND_ASSIGN(auto sa, sb.Finish());
  ASSERT_OK_AND_ASSIGN(auto sbatch, format::RecordBatch::Make(strings, 1, {sa}));
  ASSERT_RAISES_WITH_MESSAGE(kNotImplemented, "column 0 ('s'",
                             spub->NewFixedShapeWriter(*sbatch, *spool));

  auto schema = TwoColumns();
  ASSERT_OK_AND_ASSIGN(auto pub, BatchPublisher::Create(ch.producer.get(), schema));
  ASSERT_OK_AND_ASSIGN(auto other_pub, BatchPublisher::Create(other.producer.get(), schema));
  ASSERT_OK_AND_ASSIGN(auto pool, pub->NewPool(4096));
  ASSERT_OK_AND_ASSIGN(auto prototype, BuildPrototype(pool.get(), schema, 4));
  // A pool of another channel.
  ASSERT_RAISES_WITH_MESSAGE(kInvalid, "belongs to channel",
                             other_pub->NewFixedShapeWriter(*prototype, *pool));
  // A different schema.
  auto narrower = format::schema({format::field("i", format::int64(), true)});
  ASSERT_OK_AND_ASSIGN(auto narrow_batch,
                       format::RecordBatch::Make(narrower, 4, {prototype->column_data(0)}));
  ASSERT_RAISES(kInvalid, pub->NewFixedShapeWriter(*narrow_batch, *pool));
  // A published pool.
  ASSERT_OK(pub->Publish(*prototype, pool.get()));
  ASSERT_RAISES_WITH_MESSAGE(kInvalid, "already published",
                             pub->NewFixedShapeWriter(*prototype, *pool));
}

}  // namespace
}  // namespace alkaid::client
