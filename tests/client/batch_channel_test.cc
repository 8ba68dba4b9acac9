// BatchPublisher / BatchSubscriber: batches built in place in shared memory,
// consumed zero-copy in this process and in a forked one; heap batches
// copied once; every gold file's batches through the channel; Message + region
// as an ordinary IPC stream.

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "alkaid/client/batch_publisher.h"
#include "alkaid/client/batch_subscriber.h"
#include "alkaid/format/array.h"
#include "alkaid/format/builder.h"
#include "alkaid/format/builder_binary.h"
#include "alkaid/format/builder_primitive.h"
#include "alkaid/format/compare.h"
#include "alkaid/format/ipc/dictionary.h"
#include "alkaid/format/ipc/io.h"
#include "alkaid/format/ipc/reader.h"
#include "alkaid/format/ipc/writer.h"
#include "alkaid/format/validate.h"
#include "batch_layout_internal.h"
#include "client_test_util.h"

namespace alkaid::client {
namespace {

using namespace std::chrono_literals;
using format::RecordBatchPtr;
using testing::Channel;

format::SchemaPtr TestSchema() {
  return format::schema(
      {format::field("id", format::int64()), format::field("name", format::utf8())});
}

std::string NameOf(int64_t row, int64_t batch) {
  return "row-" + std::to_string(row) + "-of-" + std::to_string(batch);
}

// Builds batch `b` (rows = 100 + b) in place in `pool`.
Result<RecordBatchPtr> BuildInPlace(ShmBatchPool* pool, int64_t b) {
  const int64_t rows = 100 + b;
  format::Int64Builder ids(pool);
  format::StringBuilder names(pool);
  ALKAID_RETURN_NOT_OK(ids.Reserve(rows));
  for (int64_t i = 0; i < rows; ++i) {
    ALKAID_RETURN_NOT_OK(ids.Append(b * 1000000 + i));
    if (i % 7 == 3) {
      ALKAID_RETURN_NOT_OK(names.AppendNull());
    } else {
      ALKAID_RETURN_NOT_OK(names.Append(NameOf(i, b)));
    }
  }
  ALKAID_ASSIGN_OR_RAISE(auto id_array, ids.Finish());
  ALKAID_ASSIGN_OR_RAISE(auto name_array, names.Finish());
  return format::RecordBatch::Make(TestSchema(), rows, {id_array, name_array});
}

// Checks every value of batch `b` as BuildInPlace made it.
::testing::AssertionResult VerifyBatch(const format::RecordBatch& batch, int64_t b) {
  const int64_t rows = 100 + b;
  if (batch.num_rows() != rows) {
    return ::testing::AssertionFailure()
           << "batch " << b << " has " << batch.num_rows() << " rows, expected " << rows;
  }
  auto ids = std::static_pointer_cast<format::Int64Array>(batch.column(0));
  auto names = std::static_pointer_cast<format::StringArray>(batch.column(1));
  for (int64_t i = 0; i < rows; ++i) {
    if (ids->Value(i) != b * 1000000 + i) {
      return ::testing::AssertionFailure() << "batch " << b << " row " << i << " id";
    }
    const bool null = i % 7 == 3;
    if (names->IsNull(i) != null || (!null && names->GetView(i) != NameOf(i, b))) {
      return ::testing::AssertionFailure() << "batch " << b << " row " << i << " name";
    }
  }
  return ::testing::AssertionSuccess();
}

// True if every buffer of `data` (recursively) lies inside `body`.
bool AllBuffersIn(const format::ArrayData& data, const format::Buffer& body) {
  for (const auto& buffer : data.buffers) {
    if (buffer != nullptr && buffer->size() > 0 && !body.Contains(buffer->data(), buffer->size())) {
      return false;
    }
  }
  for (const auto& child : data.child_data) {
    if (!AllBuffersIn(*child, body)) return false;
  }
  return true;
}

bool AllBuffersIn(const format::RecordBatch& batch, const format::Buffer& body) {
  for (const auto& column : batch.columns()) {
    if (!AllBuffersIn(*column, body)) return false;
  }
  return true;
}

TEST(BatchChannelTest, BuiltInPlaceAndReceivedZeroCopy) {
  Channel ch;
  ASSERT_OK(ch.Create(4 << 20));
  ASSERT_OK_AND_ASSIGN(auto publisher, BatchPublisher::Create(ch.producer.get(), TestSchema()));
  ASSERT_OK_AND_ASSIGN(auto subscriber, BatchSubscriber::Open(ch.name, TestSchema()));
  for (int64_t b = 0; b < 5; ++b) {
    ASSERT_OK_AND_ASSIGN(auto pool, publisher->NewPool(64 << 10));
    ASSERT_OK_AND_ASSIGN(auto batch, BuildInPlace(pool.get(), b));
    ASSERT_TRUE(AllBuffersIn(
        *batch, format::Buffer(pool->region_data(), static_cast<int64_t>(pool->region_size()))));
    ASSERT_OK(publisher->Publish(*batch, pool.get()));
    EXPECT_TRUE(pool->sealed());
    ASSERT_RAISES(kInvalid, pool->Allocate(64));
    uint8_t* none = nullptr;
    std::shared_ptr<format::MemoryPool> no_owner;
    ASSERT_RAISES(kInvalid, pool->AllocateWithOwner(64, 64, &none, &no_owner));
    EXPECT_EQ(no_owner, nullptr);
    ASSERT_RAISES(kInvalid, publisher->Publish(*batch, pool.get()));

    ASSERT_OK_AND_ASSIGN(ReceivedBatch got, subscriber->Receive(1s));
    ASSERT_NE(got.batch, nullptr);
    EXPECT_EQ(got.sequence, static_cast<uint64_t>(b));
    EXPECT_TRUE(VerifyBatch(*got.batch, b));
    // Zero-copy: the consumer's buffers lie in the shared block, which
    // holds the bytes the producer built (its own mapping of them).
    EXPECT_TRUE(AllBuffersIn(*got.batch, *got.body));
    EXPECT_EQ(
        std::memcmp(got.body->data(), pool->region_data(), static_cast<size_t>(got.body->size())),
        0);
    batch.reset();
  }
  EXPECT_EQ(publisher->stats().batches, 5u);
  EXPECT_EQ(publisher->stats().copied_batches, 0u);
}

TEST(BatchChannelTest, ReceivedBatchKeepsItsBlockUntilDropped) {
  Channel ch;
  ASSERT_OK(ch.Create(1 << 20));
  ASSERT_OK_AND_ASSIGN(auto publisher, BatchPublisher::Create(ch.producer.get(), TestSchema()));
  ASSERT_OK_AND_ASSIGN(auto subscriber, BatchSubscriber::Open(ch.name, TestSchema()));
  std::vector<ReceivedBatch> held;
  for (int64_t b = 0; b < 6; ++b) {
    ASSERT_OK_AND_ASSIGN(auto pool, publisher->NewPool(16 << 10));
    ASSERT_OK_AND_ASSIGN(auto batch, BuildInPlace(pool.get(), b));
    ASSERT_OK(publisher->Publish(*batch, pool.get()));
    batch.reset();
    pool.reset();  // the producer is done with it
    ASSERT_OK_AND_ASSIGN(ReceivedBatch got, subscriber->Receive(1s));
    held.push_back(std::move(got));
  }
  // Release out of order; every other batch stays intact while the
  // producer goes on publishing far more than the arena holds (freed
  // blocks are reused).
  for (int64_t b : {3, 0, 5}) held[static_cast<size_t>(b)] = ReceivedBatch{};
  for (int64_t b = 10; b < 200; ++b) {
    ASSERT_OK_AND_ASSIGN(auto pool, publisher->NewPool(64 << 10));
    ASSERT_OK_AND_ASSIGN(auto batch, BuildInPlace(pool.get(), b));
    ASSERT_OK(publisher->Publish(*batch, pool.get()));
    ASSERT_OK_AND_ASSIGN(ReceivedBatch got, subscriber->Receive(1s));
    EXPECT_TRUE(VerifyBatch(*got.batch, b));
  }
  for (int64_t b : {1, 2, 4}) EXPECT_TRUE(VerifyBatch(*held[static_cast<size_t>(b)].batch, b));
  // A column kept alone still keeps the block.
  auto column = held[1].batch->column_data(1);
  const format::Buffer* values = column->buffers[2].get();
  const std::string before(reinterpret_cast<const char*>(values->data()),
                           static_cast<size_t>(values->size()));
  held.clear();
  for (int64_t b = 200; b < 300; ++b) {
    ASSERT_OK_AND_ASSIGN(auto pool, publisher->NewPool(64 << 10));
    ASSERT_OK_AND_ASSIGN(auto batch, BuildInPlace(pool.get(), b));
    ASSERT_OK(publisher->Publish(*batch, pool.get()));
    ASSERT_OK(subscriber->Receive(1s).status());
  }
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(values->data()),
                        static_cast<size_t>(values->size())),
            before);
  // What the consumer holds, as the producer counts it: the column's block.
  ch.producer->Poll();
  ASSERT_EQ(ch.producer->consumers().size(), 1u);
  EXPECT_EQ(ch.producer->consumers()[0].held_blocks, 1u);
  column.reset();
  ch.producer->Poll();
  EXPECT_EQ(ch.producer->consumers()[0].held_blocks, 0u);
}

TEST(BatchChannelTest, ForkedConsumerVerifiesEveryValueZeroCopy) {
  Channel ch;
  shm::ChannelOptions ro;
  ro.slot_count = 8;  // smaller than the run: exercises backpressure
  ro.publish_timeout = 20s;
  ASSERT_OK(ch.Create(1 << 20, ro));
  ASSERT_OK_AND_ASSIGN(auto publisher, BatchPublisher::Create(ch.producer.get(), TestSchema()));
  constexpr int64_t kBatches = 200;
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::close(ready[0]);
    int code = 0;
    auto sub = BatchSubscriber::Open(ch.name, TestSchema());
    char byte = sub.ok() ? 1 : 0;
    if (::write(ready[1], &byte, 1) != 1 || !sub.ok()) ::_exit(10);
    for (int64_t b = 0; b < kBatches && code == 0; ++b) {
      auto got = (*sub)->Receive(20s);
      if (!got.ok())
        code = 11;
      else if (!VerifyBatch(*got->batch, b))
        code = 12;
      else if (!AllBuffersIn(*got->batch, *got->body))
        code = 13;
      else if (got->sequence != static_cast<uint64_t>(b))
        code = 14;
    }
    if (code == 0 && !(*sub)->Receive(20s).status().IsEndOfStream()) code = 15;
    ::_exit(code);
  }
  ::close(ready[1]);
  char byte = 0;
  ASSERT_EQ(::read(ready[0], &byte, 1), 1);
  ::close(ready[0]);
  ASSERT_EQ(byte, 1);
  for (int64_t b = 0; b < kBatches; ++b) {
    ASSERT_OK_AND_ASSIGN(auto pool, publisher->NewPool(16 << 10));
    ASSERT_OK_AND_ASSIGN(auto batch, BuildInPlace(pool.get(), b));
    ASSERT_OK(publisher->Publish(*batch, pool.get()));
  }
  ch.producer->Close();
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

TEST(BatchChannelTest, HeapBatchIsCopiedOnce) {
  Channel ch;
  shm::ChannelOptions ro;
  ro.inline_capacity = 64;  // forces the metadata into the region
  ASSERT_OK(ch.Create(1 << 20, ro));
  ASSERT_OK_AND_ASSIGN(auto publisher, BatchPublisher::Create(ch.producer.get(), TestSchema()));
  ASSERT_OK_AND_ASSIGN(auto subscriber, BatchSubscriber::Open(ch.name, TestSchema()));
  format::SystemMemoryPool heap;
  ASSERT_OK_AND_ASSIGN(auto pool, publisher->NewPool(64 << 10));
  ASSERT_OK_AND_ASSIGN(auto in_shm, BuildInPlace(pool.get(), 3));
  // A heap copy of batch 3, and a slice of it (needs re-basing).
  ASSERT_OK_AND_ASSIGN(auto payload, format::ipc::GetRecordBatchPayload(*in_shm));
  ASSERT_OK(publisher->PublishCopy(*in_shm));
  auto slice = in_shm->Slice(5, 50);
  ASSERT_OK(publisher->PublishCopy(*slice));
  ASSERT_RAISES(kInvalid, publisher->Publish(*slice, pool.get()));

  ASSERT_OK_AND_ASSIGN(ReceivedBatch whole, subscriber->Receive(1s));
  EXPECT_TRUE(VerifyBatch(*whole.batch, 3));
  EXPECT_NE(whole.body->data(), pool->region_data());
  EXPECT_TRUE(AllBuffersIn(*whole.batch, *whole.body));
  ASSERT_OK_AND_ASSIGN(ReceivedBatch part, subscriber->Receive(1s));
  ASSERT_OK(format::CheckRecordBatchEquals(*slice, *part.batch));
  EXPECT_EQ(publisher->stats().copied_batches, 2u);
  EXPECT_EQ(publisher->stats().metadata_in_region, 2u);
  EXPECT_GT(publisher->stats().copied_bytes, 0u);
  (void)payload;
}

TEST(BatchChannelTest, MessageAndRegionFormAnIpcStream) {
  Channel ch;
  ASSERT_OK(ch.Create(1 << 20));
  ASSERT_OK_AND_ASSIGN(auto publisher, BatchPublisher::Create(ch.producer.get(), TestSchema()));
  ASSERT_OK_AND_ASSIGN(auto subscriber, BatchSubscriber::Open(ch.name, TestSchema()));
  std::vector<ReceivedBatch> got;
  for (int64_t b = 0; b < 3; ++b) {
    ASSERT_OK_AND_ASSIGN(auto pool, publisher->NewPool(16 << 10));
    ASSERT_OK_AND_ASSIGN(auto batch, BuildInPlace(pool.get(), b));
    ASSERT_OK(publisher->Publish(*batch, pool.get()));
    ASSERT_OK_AND_ASSIGN(ReceivedBatch r, subscriber->Receive(1s));
    got.push_back(std::move(r));
  }
  // Schema message, then each (metadata, region) framed as is, then EOS:
  // written to a file, no re-encoding.
  const std::string path =
      ::testing::TempDir() + "/alkaid_client_stream_" + std::to_string(::getpid()) + ".stream";
  {
    ASSERT_OK_AND_ASSIGN(auto sink, format::ipc::FileOutputStream::Open(path));
    format::ipc::IpcWriteOptions options;
    format::ipc::DictionaryMemo ids;
    ASSERT_OK_AND_ASSIGN(auto schema_payload, format::ipc::GetSchemaPayload(*TestSchema(), ids));
    ASSERT_OK(format::ipc::WriteIpcPayload(schema_payload, options, sink.get()).status());
    for (const auto& r : got) {
      format::ipc::IpcPayload p;
      p.type = format::ipc::MessageType::kRecordBatch;
      p.metadata = r.metadata;
      p.body_buffers = {r.body};
      p.body_length = r.body->size();
      ASSERT_OK(format::ipc::WriteIpcPayload(p, options, sink.get()).status());
    }
    ASSERT_OK(format::ipc::WriteEndOfStream(options, sink.get()));
    ASSERT_OK(sink->Close());
  }
  ASSERT_OK_AND_ASSIGN(auto input, format::ipc::FileInputStream::Open(path));
  ASSERT_OK_AND_ASSIGN(auto reader, format::ipc::RecordBatchStreamReader::Open(input));
  ASSERT_OK_AND_ASSIGN(auto batches, reader->ReadAll());
  ASSERT_EQ(batches.size(), 3u);
  for (int64_t b = 0; b < 3; ++b) EXPECT_TRUE(VerifyBatch(*batches[static_cast<size_t>(b)], b));
  std::filesystem::remove(path);
}

TEST(BatchChannelTest, RejectsMismatchesAndCorruptDescriptors) {
  Channel ch;
  ASSERT_OK(ch.Create(1 << 20));
  ASSERT_OK_AND_ASSIGN(auto publisher, BatchPublisher::Create(ch.producer.get(), TestSchema()));
  ASSERT_OK_AND_ASSIGN(auto subscriber, BatchSubscriber::Open(ch.name, TestSchema()));
  // Wrong schema.
  format::Int64Builder ints;
  ASSERT_OK(ints.Append(1));
  ASSERT_OK_AND_ASSIGN(auto one, ints.Finish());
  ASSERT_OK_AND_ASSIGN(
      auto other,
      format::RecordBatch::Make(format::schema({format::field("x", format::int64())}), 1, {one}));
  ASSERT_RAISES(kInvalid, publisher->PublishCopy(*other));
  // A heap batch handed to Publish: its buffers are outside the region.
  ASSERT_OK_AND_ASSIGN(auto pool, publisher->NewPool(4096));
  format::Int64Builder heap_ids;
  format::StringBuilder heap_names;
  ASSERT_OK(heap_ids.Append(1));
  ASSERT_OK(heap_names.Append("a"));
  ASSERT_OK_AND_ASSIGN(auto a, heap_ids.Finish());
  ASSERT_OK_AND_ASSIGN(auto n, heap_names.Finish());
  ASSERT_OK_AND_ASSIGN(auto heap, format::RecordBatch::Make(TestSchema(), 1, {a, n}));
  ASSERT_RAISES(kInvalid, publisher->Publish(*heap, pool.get()));
  // Garbage straight through the channel: each message is reported, then
  // skipped.
  auto user = [](uint8_t kind, uint64_t body_length, bool in_region) {
    internal::UserWord u;
    u.kind = kind;
    u.body_length = body_length;
    u.metadata_in_region = in_region;
    return u.Pack();
  };
  std::vector<std::byte> junk(40, std::byte{0x5a});
  {
    ASSERT_OK_AND_ASSIGN(auto loan, ch.producer->Loan(128));
    ASSERT_OK(ch.producer->Publish(junk, std::move(loan), user(0, 64, false)));
  }
  ASSERT_RAISES(kInvalid, subscriber->Receive(1s));  // junk metadata
  ASSERT_OK(ch.producer->Publish(junk, user(0, 0, false)));
  ASSERT_RAISES_WITH_MESSAGE(kInvalid, "no body block", subscriber->Receive(1s));
  {
    ASSERT_OK_AND_ASSIGN(auto loan, ch.producer->Loan(128));
    ASSERT_OK(ch.producer->Publish({}, std::move(loan), user(9, 64, false)));
  }
  ASSERT_RAISES_WITH_MESSAGE(kInvalid, "unknown message kind", subscriber->Receive(1s));
  {
    ASSERT_OK_AND_ASSIGN(auto loan, ch.producer->Loan(128));
    ASSERT_OK(ch.producer->Publish({}, std::move(loan), user(0, 4096, false)));
  }
  ASSERT_RAISES_WITH_MESSAGE(kInvalid, "exceeds its", subscriber->Receive(1s));
  {
    // Metadata "in the region", but placed outside the block.
    internal::RegionMetadata where{64, 1 << 20};
    std::vector<std::byte> record(sizeof(where));
    std::memcpy(record.data(), &where, sizeof(where));
    ASSERT_OK_AND_ASSIGN(auto loan, ch.producer->Loan(128));
    ASSERT_OK(ch.producer->Publish(record, std::move(loan), user(0, 64, true)));
  }
  ASSERT_RAISES_WITH_MESSAGE(kInvalid, "is not inside", subscriber->Receive(1s));
  {
    // A shape id never added.
    ASSERT_OK_AND_ASSIGN(uint32_t shape, ch.producer->AddShape(junk));
    ASSERT_OK_AND_ASSIGN(auto loan, ch.producer->Loan(128));
    ASSERT_OK(ch.producer->Publish({}, std::move(loan), user(0, 64, false), shape));
  }
  ASSERT_RAISES(kInvalid, subscriber->Receive(1s));  // the shape's bytes are junk
  // Nothing left: TryReceive gives an empty result.
  ASSERT_OK_AND_ASSIGN(ReceivedBatch none, subscriber->TryReceive());
  EXPECT_EQ(none.batch, nullptr);
  // A dictionary message on a topic whose schema has no dictionary.
  {
    ASSERT_OK_AND_ASSIGN(auto loan, ch.producer->Loan(64));
    ASSERT_OK(ch.producer->Publish(
        junk, std::move(loan),
        user(static_cast<uint8_t>(internal::MessageKind::kDictionary), 0, false)));
  }
  ASSERT_RAISES_WITH_MESSAGE(kInvalid, "no dictionary-encoded field", subscriber->Receive(1s));
  // And after all that, a good batch still arrives.
  ASSERT_OK_AND_ASSIGN(auto good_pool, publisher->NewPool(16 << 10));
  ASSERT_OK_AND_ASSIGN(auto good, BuildInPlace(good_pool.get(), 4));
  ASSERT_OK(publisher->Publish(*good, good_pool.get()));
  ASSERT_OK_AND_ASSIGN(ReceivedBatch fine, subscriber->Receive(1s));
  EXPECT_TRUE(VerifyBatch(*fine.batch, 4));
}

// Every batch of every gold file through the channel, compared with the
// original; dictionary-encoded files (nested and shared dictionaries
// included) with their dictionary messages.
TEST(BatchChannelTest, GoldFilesRoundTripThroughTheChannel) {
  int files = 0, batches = 0, with_dictionaries = 0;
  for (const auto& entry : std::filesystem::directory_iterator(ALKAID_GOLD_DIR)) {
    const std::string path = entry.path().string();
    if (entry.path().extension() != ".arrow_file") continue;
    SCOPED_TRACE(path);
    ASSERT_OK_AND_ASSIGN(auto file, format::ipc::MemoryMappedFile::Open(path));
    ASSERT_OK_AND_ASSIGN(auto reader, format::ipc::RecordBatchFileReader::Open(file));
    if (reader->dictionary_memo().num_fields() > 0) ++with_dictionaries;
    Channel ch;
    shm::ChannelOptions ro;
    ro.inline_capacity = 256;      // larger metadata goes into the region
    ro.accept_on_publish = false;  // the publisher accepts (dictionary replays)
    ASSERT_OK(ch.Create(8 << 20, ro));
    ASSERT_OK_AND_ASSIGN(auto publisher,
                         BatchPublisher::Create(ch.producer.get(), reader->schema()));
    ASSERT_OK_AND_ASSIGN(auto subscriber, BatchSubscriber::Open(ch.name, reader->schema()));
    for (int i = 0; i < reader->num_record_batches(); ++i) {
      ASSERT_OK_AND_ASSIGN(auto original, reader->ReadRecordBatch(i));
      // Three times: the first inline, the second by shape id (a repeated
      // Message), the third copied by PublishCopy's plan where the layout
      // has one (no encoding), each the same batch again.
      for (int copy = 0; copy < 3; ++copy) {
        SCOPED_TRACE("batch " + std::to_string(i) + ", copy " + std::to_string(copy));
        ASSERT_OK(publisher->PublishCopy(*original));
        ASSERT_OK_AND_ASSIGN(ReceivedBatch got, subscriber->Receive(1s));
        ASSERT_NE(got.batch, nullptr);
        ASSERT_OK(format::CheckRecordBatchEquals(*original, *got.batch));
        ASSERT_OK(format::ValidateFull(*got.batch));
        // (Empty arrays may get a synthesized offsets buffer.)
        if (got.batch->num_rows() > 0) {
          EXPECT_TRUE(AllBuffersIn(*got.batch, *got.body));
        }
      }
      ++batches;
    }
    ++files;
  }
  EXPECT_GE(files, 20);
  EXPECT_GT(batches, 50);
  EXPECT_GE(with_dictionaries, 3);
  std::cout << "[ gold     ] " << files << " files, " << batches << " batches through the channel, "
            << with_dictionaries << " of them with dictionaries\n";
}

}  // namespace
}  // namespace alkaid::client
