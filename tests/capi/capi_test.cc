// The C ABI (capi/include/alkaid/alkaid.h) against a real broker: round
// trips of ArrowArrays and of loans written in place, bad input to every
// call, batches outliving their consumer and producer, cancellation, the
// stream, column subsets, lost-before counts, the topic list. Arrays are
// made with Alkaid's builders and handed over through the C Data Interface
// (format::ExportRecordBatch), as a foreign producer would.

#include <gtest/gtest.h>
#include <sys/epoll.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "alkaid/alkaid.h"
#include "alkaid/client/broker_client.h"
#include "alkaid/client/consumer.h"
#include "alkaid/format/array.h"
#include "alkaid/format/builder_binary.h"
#include "alkaid/format/builder_primitive.h"
#include "alkaid/format/c_data.h"
#include "alkaid/format/compare.h"
#include "alkaid/format/record_batch.h"
#include "alkaid/format/type.h"
#include "broker_process.h"
#include "broker_test_util.h"
#include "test_util.h"

namespace alkaid {
namespace {

using broker::testing::BrokerProcess;
using broker::testing::MappingOf;
using broker::testing::WaitUntil;

#define ASSERT_C_OK(expr) ASSERT_EQ((expr), ALKAID_OK) << #expr << ": " << alkaid_last_error()

format::SchemaPtr TestSchema() {
  return format::schema({format::field("id", format::int64(), false),
                         format::field("name", format::utf8(), true),
                         format::field("score", format::float64(), true)});
}

// A batch of `rows` rows: id = base + r, name "n<r>" (null every 5th row),
// score r / 2 (null every 7th row).
format::RecordBatchPtr TestBatch(int64_t base, int64_t rows) {
  format::Int64Builder id;
  format::StringBuilder name;
  format::DoubleBuilder score;
  for (int64_t r = 0; r < rows; ++r) {
    EXPECT_OK(id.Append(base + r));
    EXPECT_OK(r % 5 == 4 ? name.AppendNull() : name.Append("n" + std::to_string(r)));
    EXPECT_OK(r % 7 == 6 ? score.AppendNull() : score.Append(static_cast<double>(r) / 2));
  }
  auto a = id.Finish();
  auto b = name.Finish();
  auto c = score.Finish();
  EXPECT_TRUE(a.ok() && b.ok() && c.ok());
  auto batch = format::RecordBatch::Make(TestSchema(), rows, {*a, *b, *c});
  EXPECT_TRUE(batch.ok());
  return *batch;
}

ArrowSchema ExportedSchema(const format::Schema& schema) {
  ArrowSchema out{};
  EXPECT_OK(format::ExportSchema(schema, &out));
  return out;
}

ArrowArray ExportedBatch(const format::RecordBatch& batch) {
  ArrowArray out{};
  EXPECT_OK(format::ExportRecordBatch(batch, &out));
  return out;
}

// Counts the releases of a struct it wraps: the contract says every struct
// passed in is released exactly once, on success and error alike.
struct ReleaseCount {
  int schemas = 0;
  int arrays = 0;
};

struct CountedSchema {
  ArrowSchema inner;
  ReleaseCount* count;
};

// A schema whose release is counted (`format` overridden, for a malformed
// one, if not null).
ArrowSchema CountedExport(const format::Schema& schema, ReleaseCount* count,
                          const char* bad_format = nullptr) {
  auto* wrapped = new CountedSchema{ExportedSchema(schema), count};
  ArrowSchema out = wrapped->inner;
  if (bad_format != nullptr) out.format = bad_format;
  out.private_data = wrapped;
  out.release = [](ArrowSchema* s) {
    auto* w = static_cast<CountedSchema*>(s->private_data);
    ++w->count->schemas;
    w->inner.release(&w->inner);
    delete w;
    s->release = nullptr;
  };
  return out;
}

class CapiTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(broker_.Start()); }
  void TearDown() override {
    broker_.Stop();
    EXPECT_TRUE(broker::testing::ShmNames(broker_.name() + ".").empty());
  }

  alkaid_producer_options ProducerOptions() {
    alkaid_producer_options o;
    alkaid_producer_options_init(&o);
    o.socket_path = broker_.socket().c_str();
    o.arena_bytes = 4 << 20;
    o.wait_for_consumers_ms = 5000;
    return o;
  }
  alkaid_consumer_options ConsumerOptions() {
    alkaid_consumer_options o;
    alkaid_consumer_options_init(&o);
    o.socket_path = broker_.socket().c_str();
    return o;
  }

  // A producer of TestSchema on `topic`.
  alkaid_producer* OpenProducer(const std::string& topic, alkaid_producer_options o) {
    ArrowSchema schema = ExportedSchema(*TestSchema());
    alkaid_producer* p = nullptr;
    EXPECT_EQ(alkaid_producer_open(topic.c_str(), &schema, &o, &p), ALKAID_OK)
        << alkaid_last_error();
    EXPECT_EQ(schema.release, nullptr);
    return p;
  }
  alkaid_producer* OpenProducer(const std::string& topic) {
    return OpenProducer(topic, ProducerOptions());
  }
  alkaid_consumer* OpenConsumer(const std::string& topic, alkaid_consumer_options o) {
    alkaid_consumer* c = nullptr;
    EXPECT_EQ(alkaid_consumer_open(topic.c_str(), &o, &c), ALKAID_OK) << alkaid_last_error();
    return c;
  }
  alkaid_consumer* OpenConsumer(const std::string& topic) {
    return OpenConsumer(topic, ConsumerOptions());
  }

  BrokerProcess broker_;
};

// The next batch of `c` (waiting up to 10 s), imported.
Result<format::RecordBatchPtr> NextBatch(alkaid_consumer* c, alkaid_batch_info* info = nullptr) {
  ArrowArray array{};
  ArrowSchema schema{};
  const alkaid_status st = alkaid_consumer_next(c, 10000, &array, &schema, info);
  if (st != ALKAID_OK) {
    return Status::FromArgs(static_cast<StatusCode>(st), alkaid_last_error());
  }
  return format::ImportRecordBatch(&array, &schema);
}

TEST(CapiVersionTest, VersionAndStatusNames) {
  EXPECT_EQ(alkaid_version(), ALKAID_C_API_VERSION);
  EXPECT_STRNE(alkaid_version_string(), "");
  EXPECT_STREQ(alkaid_status_name(ALKAID_OK), "OK");
  EXPECT_STREQ(alkaid_status_name(ALKAID_END_OF_STREAM), "EndOfStream");
  EXPECT_STREQ(alkaid_status_name(static_cast<alkaid_status>(99)), "Unknown");
  // The message is per thread.
  EXPECT_EQ(alkaid_producer_cancel(nullptr), ALKAID_INVALID);
  EXPECT_NE(std::string(alkaid_last_error()).find("NULL"), std::string::npos);
  std::thread([] { EXPECT_STREQ(alkaid_last_error(), ""); }).join();
}

TEST_F(CapiTest, PublishedArrowArraysArriveZeroCopyInSharedMemory) {
  alkaid_producer* p = OpenProducer("t");
  alkaid_consumer* c = OpenConsumer("t");
  ASSERT_NE(p, nullptr);
  ASSERT_NE(c, nullptr);
  // The consumer registers at its first next.
  ArrowArray none{};
  ASSERT_EQ(alkaid_consumer_next(c, 0, &none, nullptr, nullptr), ALKAID_TIMED_OUT);
  for (int i = 0; i < 3; ++i) {
    ArrowArray array = ExportedBatch(*TestBatch(100 * i, 50 + i));
    ASSERT_C_OK(alkaid_producer_publish(p, &array, nullptr));
    EXPECT_EQ(array.release, nullptr);
  }
  for (int i = 0; i < 3; ++i) {
    alkaid_batch_info info{};
    ArrowArray array{};
    ArrowSchema schema{};
    ASSERT_C_OK(alkaid_consumer_next(c, 10000, &array, &schema, &info));
    EXPECT_EQ(info.producer_pid, static_cast<uint32_t>(::getpid()));
    EXPECT_EQ(info.lost_before, 0u);
    // The values buffer of column 0 lies in the producer's segment.
    ASSERT_EQ(array.n_children, 3);
    EXPECT_NE(MappingOf(array.children[0]->buffers[1]).find("/dev/shm/" + broker_.name()),
              std::string::npos);
    ASSERT_OK_AND_ASSIGN(auto got, format::ImportRecordBatch(&array, &schema));
    ASSERT_OK(format::CheckRecordBatchEquals(*TestBatch(100 * i, 50 + i), *got));
  }
  alkaid_producer_stats ps{};
  ASSERT_C_OK(alkaid_producer_stats_get(p, &ps));
  EXPECT_EQ(ps.published, 3u);
  EXPECT_GT(ps.copied_bytes, 0u);  // one copy each
  ASSERT_C_OK(alkaid_producer_close(p));
  ArrowArray end{};
  EXPECT_EQ(alkaid_consumer_next(c, 10000, &end, nullptr, nullptr), ALKAID_END_OF_STREAM);
  EXPECT_EQ(end.release, nullptr);
  ASSERT_C_OK(alkaid_consumer_close(c));
}

// Writes TestBatch(base, rows)'s values into `loan` through its buffers.
void FillLoan(alkaid_loan* loan, int64_t base, int64_t rows) {
  void* data = nullptr;
  int64_t size = 0;
  ASSERT_C_OK(alkaid_loan_buffer(loan, 0, 0, &data, &size));  // not nullable
  EXPECT_EQ(data, nullptr);
  ASSERT_C_OK(alkaid_loan_buffer(loan, 0, 1, &data, &size));
  ASSERT_EQ(size, rows * 8);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(data) % 64, 0u);
  auto* ids = static_cast<int64_t*>(data);
  void* name_valid = nullptr;
  void* name_offsets = nullptr;
  void* name_bytes = nullptr;
  int64_t bytes_size = 0;
  ASSERT_C_OK(alkaid_loan_buffer(loan, 1, 0, &name_valid, &size));
  ASSERT_C_OK(alkaid_loan_buffer(loan, 1, 1, &name_offsets, &size));
  ASSERT_EQ(size, (rows + 1) * 4);
  ASSERT_C_OK(alkaid_loan_buffer(loan, 1, 2, &name_bytes, &bytes_size));
  void* score_valid = nullptr;
  void* scores = nullptr;
  ASSERT_C_OK(alkaid_loan_buffer(loan, 2, 0, &score_valid, &size));
  ASSERT_C_OK(alkaid_loan_buffer(loan, 2, 1, &scores, &size));
  auto* offsets = static_cast<int32_t*>(name_offsets);
  auto* chars = static_cast<char*>(name_bytes);
  int32_t at = 0;
  for (int64_t r = 0; r < rows; ++r) {
    ids[r] = base + r;
    if (r % 5 == 4) {
      static_cast<uint8_t*>(name_valid)[r / 8] &= static_cast<uint8_t>(~(1u << (r % 8)));
    } else {
      const std::string s = "n" + std::to_string(r);
      ASSERT_LE(at + static_cast<int64_t>(s.size()), bytes_size);
      std::memcpy(chars + at, s.data(), s.size());
      at += static_cast<int32_t>(s.size());
    }
    offsets[r + 1] = at;
    if (r % 7 == 6) {
      static_cast<uint8_t*>(score_valid)[r / 8] &= static_cast<uint8_t>(~(1u << (r % 8)));
    } else {
      static_cast<double*>(scores)[r] = static_cast<double>(r) / 2;
    }
  }
}

TEST_F(CapiTest, LoansArePublishedWithoutACopy) {
  alkaid_producer* p = OpenProducer("t");
  alkaid_consumer* c = OpenConsumer("t");
  ArrowArray none{};
  ASSERT_EQ(alkaid_consumer_next(c, 0, &none, nullptr, nullptr), ALKAID_TIMED_OUT);
  for (int i = 0; i < 3; ++i) {
    const int64_t rows = 1000 + i;
    const int64_t var[] = {0, rows * 4, 0};
    alkaid_loan* loan = nullptr;
    ASSERT_C_OK(alkaid_producer_loan(p, rows, var, 3, &loan));
    FillLoan(loan, 10 * i, rows);
    if (i == 1) {
      ASSERT_C_OK(alkaid_loan_set_null_count(loan, 1, rows / 5));
    }
    ASSERT_C_OK(alkaid_producer_publish_loan(p, loan));
  }
  alkaid_producer_stats ps{};
  ASSERT_C_OK(alkaid_producer_stats_get(p, &ps));
  EXPECT_EQ(ps.published, 3u);
  EXPECT_EQ(ps.copied_bytes, 0u);
  for (int i = 0; i < 3; ++i) {
    ASSERT_OK_AND_ASSIGN(auto got, NextBatch(c));
    ASSERT_OK(format::CheckRecordBatchEquals(*TestBatch(10 * i, 1000 + i), *got));
    EXPECT_EQ(got->column_data(1)->null_count, (1000 + i) / 5);
  }
  // A loan of 0 rows is a batch of 0 rows.
  alkaid_loan* empty = nullptr;
  ASSERT_C_OK(alkaid_producer_loan(p, 0, nullptr, 0, &empty));
  ASSERT_C_OK(alkaid_producer_publish_loan(p, empty));
  ASSERT_OK_AND_ASSIGN(auto got, NextBatch(c));
  EXPECT_EQ(got->num_rows(), 0);
  ASSERT_C_OK(alkaid_producer_close(p));
  ASSERT_C_OK(alkaid_consumer_close(c));
}

// Loans that overlap (the next one taken while the current one is
// written, published in either order) arrive whole and in publish order;
// the published ones are freed by the producer's next loan and by close,
// several at a time, leaving nothing behind (TearDown: no segment left).
TEST_F(CapiTest, OverlappingLoansArriveAndAreFreedByTheNextLoanOrClose) {
  alkaid_producer* p = OpenProducer("t");
  alkaid_consumer* c = OpenConsumer("t");
  for (int round = 0; round < 3; ++round) {
    std::vector<alkaid_loan*> loans(3, nullptr);
    for (int k = 0; k < 3; ++k) {
      const int64_t rows = 10 + k;
      const int64_t var[] = {0, rows * 4, 0};
      ASSERT_C_OK(alkaid_producer_loan(p, rows, var, 3, &loans[static_cast<size_t>(k)]));
      FillLoan(loans[static_cast<size_t>(k)], 100 * round + 10 * k, rows);
    }
    // Newest first: each publish finds the ones before it spent.
    for (int k = 2; k >= 0; --k) {
      ASSERT_C_OK(alkaid_producer_publish_loan(p, loans[static_cast<size_t>(k)]));
    }
    for (int k = 2; k >= 0; --k) {
      ASSERT_OK_AND_ASSIGN(auto got, NextBatch(c));
      ASSERT_OK(format::CheckRecordBatchEquals(*TestBatch(100 * round + 10 * k, 10 + k), *got));
    }
  }
  alkaid_producer_stats ps{};
  ASSERT_C_OK(alkaid_producer_stats_get(p, &ps));
  EXPECT_EQ(ps.published, 9u);
  ASSERT_C_OK(alkaid_producer_close(p));  // frees the last three
  ASSERT_C_OK(alkaid_consumer_close(c));
}

// A loan's values are not initialised (the caller writes them), but its
// validity starts all valid, its offsets all 0 and its padding 0, also in
// arena space an earlier loan filled with other bytes: an untouched column
// is a valid one, and publishing it needs no write. Loans of two sizes
// take turns, so that one's values lie where the other's padding does.
TEST_F(CapiTest, ALoansValidityOffsetsAndPaddingStartSetOverReusedSpace) {
  alkaid_producer* p = OpenProducer("t");  // a 4 MiB arena: about 2 loans
  alkaid_consumer* c = OpenConsumer("t");
  std::set<const void*> seen;
  int reused = 0;
  for (int round = 0; round < 8; ++round) {
    const int64_t rows = round % 2 == 0 ? 100001 : 100007;
    const int64_t var[] = {0, 3 * rows, 0};
    alkaid_loan* loan = nullptr;
    ASSERT_C_OK(alkaid_producer_loan(p, rows, var, 3, &loan));
    for (int32_t col = 0; col < 3; ++col) {
      for (int32_t b = 0; b < (col == 1 ? 3 : 2); ++b) {
        void* data = nullptr;
        int64_t size = 0;
        ASSERT_C_OK(alkaid_loan_buffer(loan, col, b, &data, &size));
        if (data == nullptr) continue;
        if (col == 0 && b == 1 && !seen.insert(data).second) ++reused;
        const auto* bytes = static_cast<const uint8_t*>(data);
        const bool validity = b == 0;
        const bool offsets = col == 1 && b == 1;
        if (validity || offsets) {
          const uint8_t want = validity ? 0xff : 0;
          for (int64_t i = 0; i < size; ++i) {
            ASSERT_EQ(bytes[i], want)
                << "column " << col << " buffer " << b << " byte " << i << " of loan " << round;
          }
        }
        for (int64_t i = size; i < (size + 63) / 64 * 64; ++i) {
          ASSERT_EQ(bytes[i], 0) << "padding byte " << i << " of column " << col << " buffer " << b
                                 << " of loan " << round;
        }
        // Other bytes for the next loans to find (offsets ascending, so
        // that the batch publishes).
        if (offsets) {
          auto* off = static_cast<int32_t*>(data);
          for (int64_t r = 0; r <= rows; ++r) off[r] = static_cast<int32_t>(3 * r);
        } else {
          // Value bytes stay UTF-8 ('q'); the rest is any byte but 0.
          const int fill = validity ? 0x5a : (col == 1 ? 'q' : 0xa5);
          std::memset(data, fill, static_cast<size_t>(size));
        }
      }
    }
    ASSERT_C_OK(alkaid_producer_publish_loan(p, loan));
    ASSERT_OK_AND_ASSIGN(auto got, NextBatch(c));
    EXPECT_EQ(got->num_rows(), rows);
  }
  // The test is about reused space: some loans lay where earlier ones did.
  EXPECT_GT(reused, 0);
  ASSERT_C_OK(alkaid_producer_close(p));
  ASSERT_C_OK(alkaid_consumer_close(c));
}

// A schema of fixed-width columns none of which is nullable: its loans go
// through fixed-shape writers (capi/src/alkaid_c.cc, "Loans through a
// fixed-shape writer").
format::SchemaPtr FixedSchema() {
  return format::schema({format::field("id", format::int64(), false),
                         format::field("x", format::float64(), false),
                         format::field("flag", format::boolean(), false),
                         format::field("small", format::int16(), false)});
}

// Writes row r of a FixedSchema loan as id base + r, x r / 4, flag r % 3
// == 0, small -r; checks every buffer's size, alignment and zeroed padding.
void FillFixedLoan(alkaid_loan* loan, int64_t base, int64_t rows) {
  const int64_t widths[] = {8, 8, 0, 2};
  void* data[4] = {};
  for (int32_t col = 0; col < 4; ++col) {
    void* validity = nullptr;
    int64_t size = -1;
    ASSERT_C_OK(alkaid_loan_buffer(loan, col, 0, &validity, &size));
    EXPECT_EQ(validity, nullptr) << "column " << col << " is not nullable";
    EXPECT_EQ(size, 0);
    ASSERT_C_OK(alkaid_loan_buffer(loan, col, 1, &data[col], &size));
    ASSERT_EQ(size, col == 2 ? (rows + 7) / 8 : rows * widths[col]) << "column " << col;
    ASSERT_EQ(reinterpret_cast<uintptr_t>(data[col]) % 64, 0u) << "column " << col;
    const auto* bytes = static_cast<const uint8_t*>(data[col]);
    for (int64_t i = size; i < (size + 63) / 64 * 64; ++i) {
      ASSERT_EQ(bytes[i], 0) << "padding byte " << i << " of column " << col;
    }
  }
  auto* flags = static_cast<uint8_t*>(data[2]);
  std::memset(flags, 0, static_cast<size_t>((rows + 7) / 8));
  for (int64_t r = 0; r < rows; ++r) {
    static_cast<int64_t*>(data[0])[r] = base + r;
    static_cast<double*>(data[1])[r] = static_cast<double>(r) / 4;
    if (r % 3 == 0) flags[r / 8] = static_cast<uint8_t>(flags[r / 8] | (1u << (r % 8)));
    static_cast<int16_t*>(data[3])[r] = static_cast<int16_t>(-r);
  }
}

// What FillFixedLoan wrote.
format::RecordBatchPtr FixedBatch(int64_t base, int64_t rows) {
  format::Int64Builder id;
  format::DoubleBuilder x;
  format::BooleanBuilder flag;
  format::Int16Builder small;
  for (int64_t r = 0; r < rows; ++r) {
    EXPECT_OK(id.Append(base + r));
    EXPECT_OK(x.Append(static_cast<double>(r) / 4));
    EXPECT_OK(flag.Append(r % 3 == 0));
    EXPECT_OK(small.Append(static_cast<int16_t>(-r)));
  }
  auto a = id.Finish();
  auto b = x.Finish();
  auto c = flag.Finish();
  auto d = small.Finish();
  EXPECT_TRUE(a.ok() && b.ok() && c.ok() && d.ok());
  auto batch = format::RecordBatch::Make(FixedSchema(), rows, {*a, *b, *c, *d});
  EXPECT_TRUE(batch.ok());
  return *batch;
}

// Loans of a fixed shape (writers): two out at once and published in either
// order, of row counts that come back and of more counts than the idle
// writers kept (so that writers are evicted and made again), one discarded
// now and then, every batch whole and in publish order, counted as
// published and copied never. (That they go through writers at all is
// capi_loan_alloc_test's: a writer loan allocates nothing.)
TEST_F(CapiTest, FixedShapeLoansThroughWritersArriveWholeAndInOrder) {
  ArrowSchema schema = ExportedSchema(*FixedSchema());
  alkaid_producer_options po = ProducerOptions();
  alkaid_producer* p = nullptr;
  ASSERT_C_OK(alkaid_producer_open("f", &schema, &po, &p));
  alkaid_consumer* c = OpenConsumer("f");
  const int64_t sizes[] = {1, 100, 8, 1000, 64, 3, 100, 1};
  int64_t published = 0;
  int64_t discarded = 0;
  for (int64_t round = 0; round < 24; ++round) {
    const int64_t rows = sizes[round % 8];
    alkaid_loan* a = nullptr;
    alkaid_loan* b = nullptr;
    ASSERT_C_OK(alkaid_producer_loan(p, rows, nullptr, 0, &a));
    ASSERT_C_OK(alkaid_producer_loan(p, rows, nullptr, 0, &b));
    ASSERT_NE(a, b);
    ASSERT_NO_FATAL_FAILURE(FillFixedLoan(a, 1000 * round, rows));
    ASSERT_NO_FATAL_FAILURE(FillFixedLoan(b, 1000 * round + 500, rows));
    if (round % 5 == 4) {
      alkaid_loan_discard(b);
      ++discarded;
      ASSERT_C_OK(alkaid_producer_publish_loan(p, a));
      ++published;
      ASSERT_OK_AND_ASSIGN(auto got, NextBatch(c));
      ASSERT_OK(format::CheckRecordBatchEquals(*FixedBatch(1000 * round, rows), *got));
      continue;
    }
    // Newest first.
    ASSERT_C_OK(alkaid_producer_publish_loan(p, b));
    ASSERT_C_OK(alkaid_producer_publish_loan(p, a));
    published += 2;
    ASSERT_OK_AND_ASSIGN(auto first, NextBatch(c));
    ASSERT_OK(format::CheckRecordBatchEquals(*FixedBatch(1000 * round + 500, rows), *first));
    ASSERT_OK_AND_ASSIGN(auto second, NextBatch(c));
    ASSERT_OK(format::CheckRecordBatchEquals(*FixedBatch(1000 * round, rows), *second));
  }
  alkaid_producer_stats ps{};
  ASSERT_C_OK(alkaid_producer_stats_get(p, &ps));
  EXPECT_EQ(ps.published, static_cast<uint64_t>(published));
  EXPECT_EQ(ps.copied_bytes, 0u);
  EXPECT_GT(discarded, 0);
  ASSERT_C_OK(alkaid_producer_close(p));
  ASSERT_C_OK(alkaid_consumer_close(c));
}

// A writer loan's padding starts 0 over reused arena space too (its values
// are not initialised, and it has no validity or offsets): loans of two
// row counts take turns in a 4 MiB arena, each filling its buffers with
// other bytes, so that one's values lie where the other's padding does.
TEST_F(CapiTest, AWriterLoansPaddingStartsZeroOverReusedSpace) {
  ArrowSchema schema = ExportedSchema(*FixedSchema());
  alkaid_producer_options po = ProducerOptions();  // 4 MiB: about two loans
  alkaid_producer* p = nullptr;
  ASSERT_C_OK(alkaid_producer_open("f", &schema, &po, &p));
  alkaid_consumer* c = OpenConsumer("f");
  std::set<const void*> seen;
  int reused = 0;
  for (int64_t round = 0; round < 8; ++round) {
    const int64_t rows = round % 2 == 0 ? 100001 : 100007;
    alkaid_loan* loan = nullptr;
    ASSERT_C_OK(alkaid_producer_loan(p, rows, nullptr, 0, &loan));
    ASSERT_NO_FATAL_FAILURE(FillFixedLoan(loan, round, rows));  // checks the padding
    for (int32_t col = 0; col < 4; ++col) {
      void* data = nullptr;
      int64_t size = 0;
      ASSERT_C_OK(alkaid_loan_buffer(loan, col, 1, &data, &size));
      if (col == 0 && !seen.insert(data).second) ++reused;
      if (col != 2) std::memset(data, 0xa5, static_cast<size_t>(size));  // other bytes
    }
    ASSERT_C_OK(alkaid_producer_publish_loan(p, loan));
    ASSERT_OK_AND_ASSIGN(auto got, NextBatch(c));
    EXPECT_EQ(got->num_rows(), rows);
  }
  EXPECT_GT(reused, 0) << "the test is about reused space";
  ASSERT_C_OK(alkaid_producer_close(p));
  ASSERT_C_OK(alkaid_consumer_close(c));
}

TEST_F(CapiTest, BadLoansAreRefusedAndStayUsable) {
  alkaid_producer* p = OpenProducer("t");
  alkaid_consumer* c = OpenConsumer("t");
  ArrowArray none{};
  ASSERT_EQ(alkaid_consumer_next(c, 0, &none, nullptr, nullptr), ALKAID_TIMED_OUT);
  alkaid_loan* loan = nullptr;
  const int64_t var[] = {0, 40, 0};
  EXPECT_EQ(alkaid_producer_loan(p, -1, var, 3, &loan), ALKAID_INVALID);
  EXPECT_EQ(alkaid_producer_loan(p, 10, var, 2, &loan), ALKAID_INVALID);
  EXPECT_NE(std::string(alkaid_last_error()).find("3 columns"), std::string::npos);
  EXPECT_EQ(alkaid_producer_loan(p, 10, nullptr, 0, &loan), ALKAID_OK);  // no value bytes
  alkaid_loan_discard(loan);
  const int64_t negative[] = {0, -5, 0};
  EXPECT_EQ(alkaid_producer_loan(p, 10, negative, 3, &loan), ALKAID_INVALID);
  EXPECT_EQ(alkaid_producer_loan(p, int64_t{1} << 62, var, 3, &loan), ALKAID_CAPACITY_ERROR);
  EXPECT_EQ(alkaid_producer_loan(nullptr, 10, var, 3, &loan), ALKAID_INVALID);
  EXPECT_EQ(alkaid_producer_loan(p, 10, var, 3, nullptr), ALKAID_INVALID);

  ASSERT_C_OK(alkaid_producer_loan(p, 10, var, 3, &loan));
  void* data = nullptr;
  int64_t size = 0;
  EXPECT_EQ(alkaid_loan_buffer(loan, 3, 0, &data, &size), ALKAID_INDEX_ERROR);
  EXPECT_EQ(alkaid_loan_buffer(loan, 0, 2, &data, &size), ALKAID_INDEX_ERROR);
  EXPECT_EQ(alkaid_loan_buffer(loan, -1, 0, &data, &size), ALKAID_INDEX_ERROR);
  EXPECT_EQ(alkaid_loan_buffer(loan, 0, 1, nullptr, &size), ALKAID_INVALID);
  EXPECT_EQ(alkaid_loan_buffer(nullptr, 0, 1, &data, &size), ALKAID_INVALID);
  EXPECT_EQ(alkaid_loan_set_null_count(loan, 0, 1), ALKAID_INVALID);  // not nullable
  EXPECT_EQ(alkaid_loan_set_null_count(loan, 1, 11), ALKAID_INVALID);
  EXPECT_EQ(alkaid_loan_set_null_count(loan, 9, 0), ALKAID_INDEX_ERROR);
  // Offsets that go back, then past the value bytes, then right.
  ASSERT_C_OK(alkaid_loan_buffer(loan, 1, 1, &data, &size));
  auto* offsets = static_cast<int32_t*>(data);
  for (int r = 0; r <= 10; ++r) offsets[r] = r * 4;
  offsets[5] = 2;
  EXPECT_EQ(alkaid_producer_publish_loan(p, loan), ALKAID_INVALID);
  EXPECT_NE(std::string(alkaid_last_error()).find("offset 5 is 2, below offset 4"),
            std::string::npos)
      << alkaid_last_error();
  offsets[5] = 20;
  offsets[10] = 41;
  EXPECT_EQ(alkaid_producer_publish_loan(p, loan), ALKAID_INVALID);
  EXPECT_NE(std::string(alkaid_last_error()).find("past the 40 value bytes"), std::string::npos)
      << alkaid_last_error();
  offsets[10] = 40;
  // A null count the bitmap does not have.
  ASSERT_C_OK(alkaid_loan_set_null_count(loan, 2, 3));
  EXPECT_EQ(alkaid_producer_publish_loan(p, loan), ALKAID_INVALID);
  ASSERT_C_OK(alkaid_loan_set_null_count(loan, 2, 0));
  // Another producer's loan.
  alkaid_producer* other = OpenProducer("u");
  EXPECT_EQ(alkaid_producer_publish_loan(other, loan), ALKAID_INVALID);
  EXPECT_EQ(alkaid_producer_publish_loan(nullptr, loan), ALKAID_INVALID);
  EXPECT_EQ(alkaid_producer_publish_loan(p, nullptr), ALKAID_INVALID);
  ASSERT_C_OK(alkaid_producer_publish_loan(p, loan));
  ASSERT_OK_AND_ASSIGN(auto got, NextBatch(c));
  EXPECT_EQ(got->num_rows(), 10);
  EXPECT_EQ(std::static_pointer_cast<format::StringArray>(got->column(1))->GetView(9).size(), 4u);
  ASSERT_C_OK(alkaid_producer_close(other));

  // A column a loan cannot lay out.
  const auto lists = format::schema({format::field("l", format::list(format::int32()))});
  ArrowSchema ls = ExportedSchema(*lists);
  alkaid_producer_options o = ProducerOptions();
  o.wait_for_consumers_ms = 0;
  alkaid_producer* lp = nullptr;
  ASSERT_C_OK(alkaid_producer_open("lists", &ls, &o, &lp));
  EXPECT_EQ(alkaid_producer_loan(lp, 4, nullptr, 0, &loan), ALKAID_NOT_IMPLEMENTED);
  EXPECT_NE(std::string(alkaid_last_error()).find("list<"), std::string::npos);
  ASSERT_C_OK(alkaid_producer_close(lp));
  // A loan discarded after its producer closed gives its block back safely.
  ASSERT_C_OK(alkaid_producer_loan(p, 10, var, 3, &loan));
  ASSERT_C_OK(alkaid_producer_close(p));
  alkaid_loan_discard(loan);
  alkaid_loan_discard(nullptr);
  ASSERT_C_OK(alkaid_consumer_close(c));
}

TEST_F(CapiTest, BadInputGivesAStatusAndAMessage) {
  ReleaseCount count;
  alkaid_producer* p = nullptr;
  // NULL arguments; the schema passed is taken all the same.
  ArrowSchema s1 = CountedExport(*TestSchema(), &count);
  EXPECT_EQ(alkaid_producer_open(nullptr, &s1, nullptr, &p), ALKAID_INVALID);
  EXPECT_EQ(s1.release, nullptr);
  ArrowSchema s2 = CountedExport(*TestSchema(), &count);
  EXPECT_EQ(alkaid_producer_open("t", &s2, nullptr, nullptr), ALKAID_INVALID);
  EXPECT_EQ(alkaid_producer_open("t", nullptr, nullptr, &p), ALKAID_INVALID);
  // A malformed schema, a non-struct schema, a released one.
  ArrowSchema s3 = CountedExport(*TestSchema(), &count, "+zz");
  EXPECT_EQ(alkaid_producer_open("t", &s3, nullptr, &p), ALKAID_INVALID);
  EXPECT_NE(std::string(alkaid_last_error()).find("schema"), std::string::npos);
  ArrowSchema s4{};
  ASSERT_OK(format::ExportType(*format::int64(), &s4));
  EXPECT_NE(alkaid_producer_open("t", &s4, nullptr, &p), ALKAID_OK);
  EXPECT_EQ(s4.release, nullptr);
  EXPECT_NE(alkaid_producer_open("t", &s4, nullptr, &p), ALKAID_OK);  // released
  // Options not made by _init, or out of range.
  alkaid_producer_options bad = ProducerOptions();
  bad.struct_size = 3;
  ArrowSchema s5 = CountedExport(*TestSchema(), &count);
  EXPECT_EQ(alkaid_producer_open("t", &s5, &bad, &p), ALKAID_INVALID);
  EXPECT_NE(std::string(alkaid_last_error()).find("struct_size"), std::string::npos);
  bad = ProducerOptions();
  bad.policy = static_cast<alkaid_policy>(7);
  ArrowSchema s6 = CountedExport(*TestSchema(), &count);
  EXPECT_EQ(alkaid_producer_open("t", &s6, &bad, &p), ALKAID_INVALID);
  bad = ProducerOptions();
  bad.slot_count = 3;  // not a power of two
  ArrowSchema s7 = CountedExport(*TestSchema(), &count);
  EXPECT_NE(alkaid_producer_open("t", &s7, &bad, &p), ALKAID_OK);
  EXPECT_EQ(count.schemas, 6);
  // No broker there.
  alkaid_producer_options nowhere = ProducerOptions();
  nowhere.socket_path = "/tmp/alkaid-no-such-broker.sock";
  ArrowSchema s8 = ExportedSchema(*TestSchema());
  EXPECT_EQ(alkaid_producer_open("t", &s8, &nowhere, &p), ALKAID_IO_ERROR);
  EXPECT_EQ(p, nullptr);

  p = OpenProducer("t");
  ASSERT_NE(p, nullptr);
  // Publishing: NULL producer or array, a released array, malformed arrays,
  // the wrong schema.
  ArrowArray a1 = ExportedBatch(*TestBatch(0, 3));
  EXPECT_EQ(alkaid_producer_publish(nullptr, &a1, nullptr), ALKAID_INVALID);
  EXPECT_EQ(a1.release, nullptr);
  EXPECT_EQ(alkaid_producer_publish(p, nullptr, nullptr), ALKAID_INVALID);
  EXPECT_EQ(alkaid_producer_publish(p, &a1, nullptr), ALKAID_INVALID);  // released
  ArrowArray a2 = ExportedBatch(*TestBatch(0, 3));
  a2.children[0]->n_buffers = 5;
  EXPECT_EQ(alkaid_producer_publish(p, &a2, nullptr), ALKAID_INVALID);
  EXPECT_EQ(a2.release, nullptr);
  ArrowArray a3 = ExportedBatch(*TestBatch(0, 3));
  a3.children[1]->buffers[1] = nullptr;  // the offsets
  EXPECT_EQ(alkaid_producer_publish(p, &a3, nullptr), ALKAID_INVALID);
  ArrowArray a4 = ExportedBatch(*TestBatch(0, 3));
  a4.length = 4;  // longer than its columns (changing n_children would leak: release reads it)
  EXPECT_EQ(alkaid_producer_publish(p, &a4, nullptr), ALKAID_INVALID);
  // Offsets out of order: full validation finds them.
  auto batch = TestBatch(0, 3);
  std::vector<int32_t> bad_offsets = {0, 2, 1, 4};
  auto names = format::ArrayData::Make(
      format::utf8(), 3,
      {nullptr,
       std::make_shared<format::Buffer>(reinterpret_cast<const uint8_t*>(bad_offsets.data()), 16),
       format::Buffer::FromString("n0n1")},
      0);
  ASSERT_OK_AND_ASSIGN(auto hostile,
                       format::RecordBatch::Make(
                           TestSchema(), 3, {batch->column_data(0), names, batch->column_data(2)}));
  ArrowArray a5 = ExportedBatch(*hostile);
  EXPECT_EQ(alkaid_producer_publish(p, &a5, nullptr), ALKAID_INVALID);
  EXPECT_NE(std::string(alkaid_last_error()).find("offset"), std::string::npos)
      << alkaid_last_error();
  // A batch of another schema.
  const auto other = format::schema({format::field("id", format::int32(), false)});
  format::Int32Builder ib;
  ASSERT_OK(ib.Append(1));
  ASSERT_OK_AND_ASSIGN(auto ia, ib.Finish());
  ASSERT_OK_AND_ASSIGN(auto ob, format::RecordBatch::Make(other, 1, {ia}));
  ArrowArray a6 = ExportedBatch(*ob);
  ArrowSchema s9 = ExportedSchema(*other);
  EXPECT_EQ(alkaid_producer_publish(p, &a6, &s9), ALKAID_INVALID);
  EXPECT_EQ(s9.release, nullptr);
  ArrowArray a7 = ExportedBatch(*ob);
  EXPECT_NE(alkaid_producer_publish(p, &a7, nullptr), ALKAID_OK);  // read as the topic's
  EXPECT_EQ(a7.release, nullptr);
  // A second producer with another schema on the topic.
  alkaid_producer* p2 = nullptr;
  alkaid_producer_options o = ProducerOptions();
  ArrowSchema s11 = ExportedSchema(*other);
  EXPECT_EQ(alkaid_producer_open("t", &s11, &o, &p2), ALKAID_INVALID);
  EXPECT_EQ(p2, nullptr);
  alkaid_producer_stats ps{};
  ASSERT_C_OK(alkaid_producer_stats_get(p, &ps));
  EXPECT_EQ(ps.published, 0u);  // nothing bad got through

  // Other producer calls with NULLs.
  EXPECT_EQ(alkaid_producer_schema(nullptr, nullptr), ALKAID_INVALID);
  EXPECT_EQ(alkaid_producer_schema(p, nullptr), ALKAID_INVALID);
  EXPECT_EQ(alkaid_producer_stats_get(nullptr, &ps), ALKAID_INVALID);
  EXPECT_EQ(alkaid_producer_stats_get(p, nullptr), ALKAID_INVALID);
  EXPECT_EQ(alkaid_producer_close(nullptr), ALKAID_OK);
  ArrowSchema back{};
  ASSERT_C_OK(alkaid_producer_schema(p, &back));
  ASSERT_OK_AND_ASSIGN(auto back_schema, format::ImportSchema(&back));
  EXPECT_TRUE(back_schema->Equals(*TestSchema()));

  // Consumers.
  alkaid_consumer* c = nullptr;
  alkaid_consumer_options co = ConsumerOptions();
  EXPECT_EQ(alkaid_consumer_open(nullptr, &co, &c), ALKAID_INVALID);
  EXPECT_EQ(alkaid_consumer_open("t", &co, nullptr), ALKAID_INVALID);
  EXPECT_EQ(alkaid_consumer_open("nope", &co, &c), ALKAID_KEY_ERROR);
  EXPECT_NE(std::string(alkaid_last_error()).find("nope"), std::string::npos);
  const char* unknown[] = {"id", "height"};
  co.columns = unknown;
  co.n_columns = 2;
  EXPECT_EQ(alkaid_consumer_open("t", &co, &c), ALKAID_KEY_ERROR);
  EXPECT_NE(std::string(alkaid_last_error()).find("height"), std::string::npos);
  co = ConsumerOptions();
  co.n_columns = 1;  // columns NULL
  EXPECT_EQ(alkaid_consumer_open("t", &co, &c), ALKAID_INVALID);
  co = ConsumerOptions();
  co.wait_mode = static_cast<alkaid_wait_mode>(9);
  EXPECT_EQ(alkaid_consumer_open("t", &co, &c), ALKAID_INVALID);
  co = ConsumerOptions();
  co.verification = static_cast<alkaid_verification>(9);
  EXPECT_EQ(alkaid_consumer_open("t", &co, &c), ALKAID_INVALID);
  co = ConsumerOptions();
  co.struct_size = 0;
  EXPECT_EQ(alkaid_consumer_open("t", &co, &c), ALKAID_INVALID);
  co = ConsumerOptions();
  co.wait_for_topic_ms = -7;
  EXPECT_EQ(alkaid_consumer_open("t", &co, &c), ALKAID_INVALID);
  EXPECT_EQ(c, nullptr);
  c = OpenConsumer("t");
  ASSERT_NE(c, nullptr);
  ArrowArray out{};
  alkaid_consumer_stats cs{};
  ArrowArrayStream stream{};
  EXPECT_EQ(alkaid_consumer_next(nullptr, 0, &out, nullptr, nullptr), ALKAID_INVALID);
  EXPECT_EQ(alkaid_consumer_next(c, 0, nullptr, nullptr, nullptr), ALKAID_INVALID);
  EXPECT_EQ(alkaid_consumer_next(c, -5, &out, nullptr, nullptr), ALKAID_INVALID);
  EXPECT_EQ(alkaid_consumer_schema(nullptr, &back), ALKAID_INVALID);
  EXPECT_EQ(alkaid_consumer_schema(c, nullptr), ALKAID_INVALID);
  EXPECT_EQ(alkaid_consumer_stream(nullptr, 0, &stream), ALKAID_INVALID);
  EXPECT_EQ(alkaid_consumer_stream(c, 0, nullptr), ALKAID_INVALID);
  EXPECT_EQ(alkaid_consumer_stream(c, -3, &stream), ALKAID_INVALID);
  EXPECT_EQ(alkaid_consumer_stats_get(nullptr, &cs), ALKAID_INVALID);
  EXPECT_EQ(alkaid_consumer_stats_get(c, nullptr), ALKAID_INVALID);
  EXPECT_EQ(alkaid_consumer_cancel(nullptr), ALKAID_INVALID);
  EXPECT_EQ(alkaid_consumer_close(nullptr), ALKAID_OK);
  EXPECT_EQ(out.release, nullptr);

  // Broker management.
  alkaid_broker* b = nullptr;
  alkaid_topic_list* list = nullptr;
  EXPECT_EQ(alkaid_broker_connect(broker_.socket().c_str(), nullptr), ALKAID_INVALID);
  EXPECT_EQ(alkaid_broker_connect("/tmp/alkaid-no-such-broker.sock", &b), ALKAID_IO_ERROR);
  EXPECT_NE(std::string(alkaid_last_error()).find("alkaid-no-such-broker"), std::string::npos);
  EXPECT_EQ(alkaid_broker_list_topics(nullptr, &list), ALKAID_INVALID);
  EXPECT_EQ(alkaid_topic_list_size(nullptr), 0u);
  EXPECT_EQ(alkaid_topic_list_get(nullptr, 0), nullptr);
  EXPECT_EQ(alkaid_topic_list_schema(nullptr, 0, &back), ALKAID_INVALID);
  alkaid_broker_close(nullptr);
  alkaid_topic_list_free(nullptr);

  ASSERT_C_OK(alkaid_consumer_close(c));
  ASSERT_C_OK(alkaid_producer_close(p));
}

// publish_timestamps (version 2 of alkaid_producer_options) reaches the
// topic: a C++ consumer reads the publish time of a batch published through
// the C ABI. A version 1 struct (72 bytes, made by version 1's init) leaves
// it off whatever lies past its end.
TEST_F(CapiTest, PublishTimestampsReachTheTopicAndAVersion1StructLeavesThemOff) {
  for (const bool v1 : {false, true}) {
    SCOPED_TRACE(v1 ? "version 1 struct" : "version 2 struct");
    const std::string topic = v1 ? "old" : "stamped";
    alkaid_producer_options o = ProducerOptions();
    if (v1) {
      std::memset(&o, 0xab, sizeof o);
      (alkaid_producer_options_init)(&o);  // version 1's function
      ASSERT_EQ(o.struct_size, ALKAID_PRODUCER_OPTIONS_SIZE_V1);
      o.socket_path = broker_.socket().c_str();
      o.arena_bytes = 4 << 20;
      EXPECT_NE(o.publish_timestamps, 0);  // past its end: never read
    } else {
      o.publish_timestamps = 1;
    }
    o.wait_for_consumers_ms = 0;
    alkaid_producer* p = OpenProducer(topic, o);
    ASSERT_NE(p, nullptr);
    client::ConsumerOptions co;
    co.socket_path = broker_.socket();
    ASSERT_OK_AND_ASSIGN(auto consumer, client::Consumer::Open(topic, co));
    EXPECT_EQ(consumer->publish_timestamps(), !v1);
    const int64_t var[] = {0, 4, 0};
    alkaid_loan* loan = nullptr;
    ASSERT_C_OK(alkaid_producer_loan(p, 1, var, 3, &loan));
    FillLoan(loan, 0, 1);
    ASSERT_C_OK(alkaid_producer_publish_loan(p, loan));
    client::BatchOrigin origin;
    ASSERT_OK_AND_ASSIGN(auto got, consumer->Next(std::chrono::seconds(10), &origin));
    EXPECT_EQ(got->num_rows(), 1);
    if (v1) {
      EXPECT_EQ(origin.publish_ns, 0u);
    } else {
      EXPECT_GT(origin.publish_ns, 0u);
    }
    got.reset();
    ASSERT_OK(consumer->Close());
    ASSERT_C_OK(alkaid_producer_close(p));
  }
}

// fixed_block_bytes and fixed_block_count (version 4 of
// alkaid_producer_options) reach the broker, which lists the producer's
// fixed blocks as it granted them (bytes rounded up to 64); loans go
// through; a version 2-3 struct (80 bytes) has none whatever lies past its
// end; a count without bytes is refused before the broker is asked.
TEST_F(CapiTest, FixedBlocksReachTheBrokerAndAVersion2StructHasNone) {
  ASSERT_OK_AND_ASSIGN(auto admin, client::BrokerClient::Connect(broker_.socket()));
  const auto granted = [&](const std::string& topic) -> std::pair<uint64_t, uint32_t> {
    auto topics = admin->ListTopics();
    EXPECT_TRUE(topics.ok()) << topics.status().ToString();
    if (!topics.ok()) return {0, 0};
    for (const auto& t : *topics) {
      if (t.name == topic && t.producer_list.size() == 1) {
        return {t.producer_list[0].fixed_block_bytes, t.producer_list[0].fixed_block_count};
      }
    }
    ADD_FAILURE() << "no topic '" << topic << "' with one producer";
    return {0, 0};
  };
  for (const bool v2 : {false, true}) {
    SCOPED_TRACE(v2 ? "version 2 struct" : "version 4 struct");
    const std::string topic = v2 ? "old" : "fixed";
    alkaid_producer_options o = ProducerOptions();
    if (v2) {
      std::memset(&o, 0xab, sizeof o);
      alkaid_producer_options_init_sized(&o, ALKAID_PRODUCER_OPTIONS_SIZE_V2);
      ASSERT_EQ(o.struct_size, ALKAID_PRODUCER_OPTIONS_SIZE_V2);
      o.socket_path = broker_.socket().c_str();
      o.arena_bytes = 4 << 20;
      EXPECT_NE(o.fixed_block_bytes, 0u);  // past its end: never read
    } else {
      o.fixed_block_bytes = 1000;
      o.fixed_block_count = 24;
    }
    o.wait_for_consumers_ms = 0;
    alkaid_producer* p = OpenProducer(topic, o);
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(granted(topic), v2 ? std::make_pair(uint64_t{0}, uint32_t{0})
                                 : std::make_pair(uint64_t{1024}, uint32_t{24}));
    alkaid_consumer* c = OpenConsumer(topic);
    ASSERT_NE(c, nullptr);
    const int64_t var[] = {0, 4, 0};
    for (int i = 0; i < 30; ++i) {
      alkaid_loan* loan = nullptr;
      ASSERT_C_OK(alkaid_producer_loan(p, 1, var, 3, &loan));
      FillLoan(loan, i, 1);
      ASSERT_C_OK(alkaid_producer_publish_loan(p, loan));
      ASSERT_OK_AND_ASSIGN(auto got, NextBatch(c));
      EXPECT_EQ(got->num_rows(), 1);
    }
    ASSERT_C_OK(alkaid_consumer_close(c));
    ASSERT_C_OK(alkaid_producer_close(p));
  }
  alkaid_producer_options bad = ProducerOptions();
  bad.fixed_block_count = 8;
  ArrowSchema schema = ExportedSchema(*TestSchema());
  alkaid_producer* p = nullptr;
  EXPECT_EQ(alkaid_producer_open("bad", &schema, &bad, &p), ALKAID_INVALID);
  EXPECT_EQ(p, nullptr);
  EXPECT_NE(std::string(alkaid_last_error()).find("fixed_block_count 8 without fixed_block_bytes"),
            std::string::npos)
      << alkaid_last_error();
}

// alkaid_batch_info::publish_ns (version 3): alkaid_consumer_next_sized
// writes the producer's CLOCK_REALTIME stamp, between the test's clock
// reads around the publish, or 0 on a topic without stamps; it writes
// exactly the size it is given (zeros past the fields it knows), and
// version 1's alkaid_consumer_next writes nothing past version 1's struct.
// A size of no version is refused without taking the batch.
TEST_F(CapiTest, BatchInfoCarriesThePublishTimeAndNoCallWritesPastItsStruct) {
  const auto realtime_ns = [] {
    timespec ts{};
    clock_gettime(CLOCK_REALTIME, &ts);
    return static_cast<uint64_t>(ts.tv_sec) * 1000000000u + static_cast<uint64_t>(ts.tv_nsec);
  };
  for (const bool stamped : {true, false}) {
    SCOPED_TRACE(stamped ? "stamped topic" : "topic without stamps");
    const std::string topic = stamped ? "stamped" : "plain";
    alkaid_producer_options o = ProducerOptions();
    o.publish_timestamps = stamped ? 1 : 0;
    alkaid_producer* p = OpenProducer(topic, o);
    alkaid_consumer* c = OpenConsumer(topic);
    ASSERT_NE(p, nullptr);
    ASSERT_NE(c, nullptr);
    const int64_t var[] = {0, 40, 0};
    std::vector<std::pair<uint64_t, uint64_t>> bounds;
    for (int i = 0; i < 5; ++i) {
      alkaid_loan* loan = nullptr;
      ASSERT_C_OK(alkaid_producer_loan(p, 4, var, 3, &loan));
      FillLoan(loan, 10 * i, 4);
      const uint64_t before = realtime_ns();
      ASSERT_C_OK(alkaid_producer_publish_loan(p, loan));
      bounds.emplace_back(before, realtime_ns());
    }
    // 48 bytes: a newer alkaid.h's struct; everything past ours is zeroed.
    struct Bigger {
      alkaid_batch_info info;
      uint64_t newer;
    };
    static_assert(sizeof(Bigger) == 48);
    ArrowArray array{};
    Bigger big;
    std::memset(&big, 0xab, sizeof big);
    // A size of no version: refused, and the batch is still there.
    EXPECT_EQ(alkaid_consumer_next_sized(c, 10000, &array, nullptr, &big.info, 36), ALKAID_INVALID);
    EXPECT_NE(std::string(alkaid_last_error()).find("info_size is 36"), std::string::npos)
        << alkaid_last_error();
    EXPECT_EQ(array.release, nullptr);
    for (size_t size : {sizeof(alkaid_batch_info), sizeof(Bigger)}) {
      std::memset(&big, 0xab, sizeof big);
      ASSERT_C_OK(alkaid_consumer_next_sized(c, 10000, &array, nullptr, &big.info, size));
      const auto [before, after] = bounds[big.info.sequence];
      if (stamped) {
        EXPECT_GE(big.info.publish_ns, before);
        EXPECT_LE(big.info.publish_ns, after);
      } else {
        EXPECT_EQ(big.info.publish_ns, 0u);
      }
      EXPECT_EQ(big.newer, size == sizeof(Bigger) ? 0u : 0xababababababababu);
      array.release(&array);
    }
    // Version 1's size and version 1's function: publish_ns is not theirs.
    std::memset(&big, 0xab, sizeof big);
    ASSERT_C_OK(alkaid_consumer_next_sized(c, 10000, &array, nullptr, &big.info,
                                           ALKAID_BATCH_INFO_SIZE_V1));
    EXPECT_EQ(big.info.sequence, 2u);
    EXPECT_EQ(big.info.publish_ns, 0xababababababababu);
    array.release(&array);
    std::memset(&big, 0xab, sizeof big);
    ASSERT_C_OK(alkaid_consumer_next(c, 10000, &array, nullptr, &big.info));
    EXPECT_EQ(big.info.sequence, 3u);
    EXPECT_EQ(big.info.publish_ns, 0xababababababababu);
    array.release(&array);
    // NULL info: no size checked.
    ASSERT_C_OK(alkaid_consumer_next_sized(c, 10000, &array, nullptr, nullptr, 7));
    array.release(&array);
    ASSERT_C_OK(alkaid_consumer_close(c));
    ASSERT_C_OK(alkaid_producer_close(p));
  }
}

// next's own export of flat batches (capi/src/batch_export.cc): many held
// at once (its set of trees grows, then is scanned in full), released out
// of order and on another thread, counted by the stats as they go, each
// tree reused with the right buffers.
TEST_F(CapiTest, ExportsHeldManyAtOnceAreCountedAndReused) {
  alkaid_producer_options o = ProducerOptions();
  o.slot_count = 256;
  alkaid_producer* p = OpenProducer("t", o);
  alkaid_consumer* c = OpenConsumer("t");
  const int64_t var[] = {0, 40, 0};
  const auto publish = [&](int64_t base) {
    alkaid_loan* loan = nullptr;
    ASSERT_C_OK(alkaid_producer_loan(p, 4, var, 3, &loan));
    FillLoan(loan, base, 4);
    ASSERT_C_OK(alkaid_producer_publish_loan(p, loan));
  };
  constexpr int kHeld = 100;
  std::vector<ArrowArray> held(kHeld);
  for (int i = 0; i < kHeld; ++i) {
    publish(10 * i);
    ASSERT_C_OK(alkaid_consumer_next(c, 10000, &held[static_cast<size_t>(i)], nullptr, nullptr));
  }
  alkaid_consumer_stats cs{};
  ASSERT_C_OK(alkaid_consumer_stats_get(c, &cs));
  EXPECT_EQ(cs.held, 100u);
  EXPECT_EQ(cs.handed_out, 100u);
  // Every third one released on another thread; the others are still right.
  std::thread([&held] {
    for (size_t i = 0; i < held.size(); i += 3) held[i].release(&held[i]);
  }).join();
  ASSERT_C_OK(alkaid_consumer_stats_get(c, &cs));
  EXPECT_EQ(cs.held, 66u);
  for (size_t i = 1; i < held.size(); i += 3) {
    ArrowSchema schema = ExportedSchema(*TestSchema());
    ASSERT_OK_AND_ASSIGN(auto got, format::ImportRecordBatch(&held[i], &schema));
    ASSERT_OK(format::CheckRecordBatchEquals(*TestBatch(10 * static_cast<int64_t>(i), 4), *got));
  }
  // Reused trees (the released ones) carry the new batches' buffers.
  for (int i = 0; i < 40; ++i) {
    publish(1000 + 10 * i);
    ASSERT_OK_AND_ASSIGN(auto got, NextBatch(c));
    ASSERT_OK(format::CheckRecordBatchEquals(*TestBatch(1000 + 10 * i, 4), *got));
  }
  ASSERT_C_OK(alkaid_consumer_stats_get(c, &cs));
  EXPECT_EQ(cs.handed_out, 140u);
  for (size_t i = 2; i < held.size(); i += 3) held[i].release(&held[i]);
  ASSERT_C_OK(alkaid_consumer_stats_get(c, &cs));
  EXPECT_EQ(cs.held, 0u);
  ASSERT_C_OK(alkaid_consumer_close(c));
  ASSERT_C_OK(alkaid_producer_close(p));
}

// A released batch gives its block back at once, not when its export's
// tree is next reused, and a child moved out of it keeps the block until
// the child is released too: with 50 batches received, a loan of most of
// a fixed 256 KiB arena does not fit while a child of each is held, and
// fits once they are released.
TEST_F(CapiTest, ReleasedBatchesGiveTheirBlocksBackAtOnceAndMovedChildrenKeepThem) {
  alkaid_producer_options o = ProducerOptions();
  o.slot_count = 256;
  o.arena_bytes = 256 << 10;
  o.max_arena_bytes = 256 << 10;
  o.publish_timeout_ms = 200;
  alkaid_producer* p = OpenProducer("t", o);
  alkaid_consumer* c = OpenConsumer("t");
  const int64_t var[] = {0, 40, 0};
  std::vector<ArrowArray> held(50);
  for (size_t i = 0; i < held.size(); ++i) {
    alkaid_loan* loan = nullptr;
    ASSERT_C_OK(alkaid_producer_loan(p, 4, var, 3, &loan));
    FillLoan(loan, 0, 4);
    ASSERT_C_OK(alkaid_producer_publish_loan(p, loan));
    ASSERT_C_OK(alkaid_consumer_next(c, 10000, &held[i], nullptr, nullptr));
  }
  // Column 0 of each moved out (the interface allows it), then the batch
  // released.
  std::vector<ArrowArray> children(held.size());
  for (size_t i = 0; i < held.size(); ++i) {
    children[i] = *held[i].children[0];
    held[i].children[0]->release = nullptr;
    held[i].release(&held[i]);
  }
  // 9,000 rows: about 180 KiB of buffers, where the 50 blocks take about
  // 100 KiB.
  const int64_t no_bytes[] = {0, 0, 0};
  alkaid_loan* big = nullptr;
  ASSERT_EQ(alkaid_producer_loan(p, 9000, no_bytes, 3, &big), ALKAID_TIMED_OUT)
      << "the moved-out children let their blocks go";
  for (size_t i = 0; i < children.size(); ++i) {
    EXPECT_EQ(static_cast<const int64_t*>(children[i].buffers[1])[3], 3);
    children[i].release(&children[i]);
  }
  ASSERT_C_OK(alkaid_producer_loan(p, 9000, no_bytes, 3, &big));
  alkaid_loan_discard(big);
  ASSERT_C_OK(alkaid_consumer_close(c));
  ASSERT_C_OK(alkaid_producer_close(p));
}

TEST_F(CapiTest, BatchesOutliveTheirConsumerAndProducer) {
  alkaid_producer* p = OpenProducer("t");
  alkaid_consumer* c = OpenConsumer("t");
  ArrowArray none{};
  ASSERT_EQ(alkaid_consumer_next(c, 0, &none, nullptr, nullptr), ALKAID_TIMED_OUT);
  const int64_t var[] = {0, 4000, 0};
  for (int i = 0; i < 2; ++i) {
    alkaid_loan* loan = nullptr;
    ASSERT_C_OK(alkaid_producer_loan(p, 500, var, 3, &loan));
    FillLoan(loan, 7 * i, 500);
    ASSERT_C_OK(alkaid_producer_publish_loan(p, loan));
  }
  ArrowArray kept[2] = {};
  ArrowSchema kept_schema{};
  ASSERT_C_OK(alkaid_consumer_next(c, 10000, &kept[0], &kept_schema, nullptr));
  ASSERT_C_OK(alkaid_consumer_next(c, 10000, &kept[1], nullptr, nullptr));
  alkaid_consumer_stats cs{};
  ASSERT_C_OK(alkaid_consumer_stats_get(c, &cs));
  EXPECT_EQ(cs.held, 2u);
  EXPECT_EQ(cs.handed_out, 2u);
  ASSERT_C_OK(alkaid_consumer_close(c));
  // The producer cannot drain what the consumer holds; it closes all the
  // same once the consumer is gone.
  ASSERT_C_OK(alkaid_producer_close(p));
  // Move a child out of one batch and release the parent first.
  ArrowArray child = *kept[1].children[0];
  kept[1].children[0]->release = nullptr;
  kept[1].release(&kept[1]);
  EXPECT_EQ(static_cast<const int64_t*>(child.buffers[1])[499], 7 + 499);
  child.release(&child);
  ASSERT_OK_AND_ASSIGN(auto got, format::ImportRecordBatch(&kept[0], &kept_schema));
  ASSERT_OK(format::CheckRecordBatchEquals(*TestBatch(0, 500), *got));
}

TEST_F(CapiTest, CancelEndsAWaitingNextFromAnotherThread) {
  alkaid_producer* p = OpenProducer("t");
  alkaid_consumer* c = OpenConsumer("t");
  auto waiting = std::async(std::launch::async, [c] {
    ArrowArray out{};
    const alkaid_status st = alkaid_consumer_next(c, ALKAID_FOREVER, &out, nullptr, nullptr);
    return std::make_pair(st, std::string(alkaid_last_error()));
  });
  // The wait is for ever: only the cancel can end it (the guard below is
  // for a hang, not a verdict on time).
  ASSERT_C_OK(alkaid_consumer_cancel(c));
  ASSERT_EQ(waiting.wait_for(std::chrono::seconds(30)), std::future_status::ready);
  const auto [st, message] = waiting.get();
  EXPECT_EQ(st, ALKAID_CANCELLED);
  EXPECT_NE(message.find("cancelled"), std::string::npos);
  ArrowArray out{};
  EXPECT_EQ(alkaid_consumer_next(c, 0, &out, nullptr, nullptr), ALKAID_CANCELLED);
  ASSERT_C_OK(alkaid_consumer_close(c));
  ASSERT_C_OK(alkaid_producer_close(p));
}

// The stream follows the consumer's cancel: a get_next waiting for ever
// ends with ECANCELED, and so does every later one; a get_next with a
// batch timeout and nothing to read ends with ETIMEDOUT, as documented
// (it gave EIO before).
TEST_F(CapiTest, CancelEndsAWaitingStreamGetNextAndATimeoutIsEtimedout) {
  alkaid_producer* p = OpenProducer("t");
  alkaid_consumer* c = OpenConsumer("t");
  ArrowArrayStream timed{};
  ASSERT_C_OK(alkaid_consumer_stream(c, 20, &timed));
  ArrowArray out{};
  EXPECT_EQ(timed.get_next(&timed, &out), ETIMEDOUT);
  EXPECT_EQ(out.release, nullptr);
  timed.release(&timed);
  ArrowArrayStream stream{};
  ASSERT_C_OK(alkaid_consumer_stream(c, ALKAID_FOREVER, &stream));
  auto waiting = std::async(std::launch::async, [&stream] {
    ArrowArray got{};
    const int rc = stream.get_next(&stream, &got);
    return std::make_pair(rc, std::string(stream.get_last_error(&stream)));
  });
  // Only the cancel can end that wait (the guard is for a hang).
  ASSERT_C_OK(alkaid_consumer_cancel(c));
  ASSERT_EQ(waiting.wait_for(std::chrono::seconds(30)), std::future_status::ready);
  const auto [rc, message] = waiting.get();
  EXPECT_EQ(rc, ECANCELED);
  EXPECT_NE(message.find("cancelled"), std::string::npos) << message;
  EXPECT_EQ(stream.get_next(&stream, &out), ECANCELED);
  stream.release(&stream);
  alkaid_consumer_stats stats{};
  ASSERT_C_OK(alkaid_consumer_stats_get(c, &stats));
  EXPECT_EQ(stats.held, 0u);  // the refused get_nexts hold no place
  ASSERT_C_OK(alkaid_consumer_close(c));
  ASSERT_C_OK(alkaid_producer_close(p));
}

TEST_F(CapiTest, CancelEndsAProducersDrain) {
  alkaid_producer_options o = ProducerOptions();
  o.drain_timeout_ms = 60000;
  alkaid_producer* p = OpenProducer("t", o);
  alkaid_consumer* c = OpenConsumer("t");
  ArrowArray none{};
  ASSERT_EQ(alkaid_consumer_next(c, 0, &none, nullptr, nullptr), ALKAID_TIMED_OUT);
  ArrowArray a = ExportedBatch(*TestBatch(0, 5));
  ASSERT_C_OK(alkaid_producer_publish(p, &a, nullptr));
  // Nobody reads: close's drain would wait 60 s; the cancel ends it.
  std::thread canceller([p] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    EXPECT_EQ(alkaid_producer_cancel(p), ALKAID_OK);
  });
  EXPECT_EQ(alkaid_producer_close(p), ALKAID_CANCELLED);
  canceller.join();
  // The consumer reads what was published, then the end.
  ASSERT_OK_AND_ASSIGN(auto got, NextBatch(c));
  EXPECT_EQ(got->num_rows(), 5);
  ArrowArray out{};
  EXPECT_EQ(alkaid_consumer_next(c, 10000, &out, nullptr, nullptr), ALKAID_END_OF_STREAM);
  ASSERT_C_OK(alkaid_consumer_close(c));
}

// ALKAID_FOREVER as a publish timeout waits for room for ever: only the
// cancel ends the wait (it once overflowed into a timeout of -1 ms, which
// failed the first publish that had to wait at once).
TEST_F(CapiTest, APublishTimeoutOfForeverWaitsUntilCancelled) {
  alkaid_producer_options o = ProducerOptions();
  o.slot_count = 4;
  o.publish_timeout_ms = ALKAID_FOREVER;
  alkaid_producer* p = OpenProducer("t", o);
  alkaid_consumer* c = OpenConsumer("t");
  ArrowArray none{};
  ASSERT_EQ(alkaid_consumer_next(c, 0, &none, nullptr, nullptr), ALKAID_TIMED_OUT);
  for (int i = 0; i < 4; ++i) {
    ArrowArray a = ExportedBatch(*TestBatch(i, 1));
    ASSERT_C_OK(alkaid_producer_publish(p, &a, nullptr));
  }
  // Every slot holds a batch the consumer has not read: the next publish
  // waits for room.
  std::thread canceller([p] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    EXPECT_EQ(alkaid_producer_cancel(p), ALKAID_OK);
  });
  ArrowArray a = ExportedBatch(*TestBatch(4, 1));
  EXPECT_EQ(alkaid_producer_publish(p, &a, nullptr), ALKAID_CANCELLED) << alkaid_last_error();
  canceller.join();
  if (a.release != nullptr) a.release(&a);
  ASSERT_C_OK(alkaid_consumer_close(c));
  ASSERT_C_OK(alkaid_producer_close(p));  // no consumer left: nothing to drain
}

TEST_F(CapiTest, ColumnSubsetThroughTheStream) {
  alkaid_producer* p = OpenProducer("t");
  alkaid_consumer_options co = ConsumerOptions();
  const char* columns[] = {"score", "id"};
  co.columns = columns;
  co.n_columns = 2;
  alkaid_consumer* c = OpenConsumer("t", co);
  ArrowSchema cs{};
  ASSERT_C_OK(alkaid_consumer_schema(c, &cs));
  ASSERT_OK_AND_ASSIGN(auto narrow, format::ImportSchema(&cs));
  ASSERT_EQ(narrow->num_fields(), 2);
  EXPECT_EQ(narrow->field(0)->name(), "score");
  ArrowArray none{};
  ASSERT_EQ(alkaid_consumer_next(c, 0, &none, nullptr, nullptr), ALKAID_TIMED_OUT);
  for (int i = 0; i < 4; ++i) {
    ArrowArray a = ExportedBatch(*TestBatch(i, 20));
    ASSERT_C_OK(alkaid_producer_publish(p, &a, nullptr));
  }
  // Close drains: it returns once the stream below read everything.
  auto closing = std::async(std::launch::async, [p] { return alkaid_producer_close(p); });
  ArrowArrayStream stream{};
  ASSERT_C_OK(alkaid_consumer_stream(c, 10000, &stream));
  ASSERT_OK_AND_ASSIGN(auto reader, format::CStreamReader::Import(&stream));
  ASSERT_OK_AND_ASSIGN(auto batches, reader->ReadAll());
  ASSERT_EQ(batches.size(), 4u);
  for (int i = 0; i < 4; ++i) {
    const auto& b = *batches[static_cast<size_t>(i)];
    ASSERT_EQ(b.num_columns(), 2);
    EXPECT_EQ(std::static_pointer_cast<format::Int64Array>(b.column(1))->Value(3), i + 3);
  }
  reader.reset();
  EXPECT_EQ(closing.get(), ALKAID_OK);
  ASSERT_C_OK(alkaid_consumer_close(c));
}

TEST_F(CapiTest, LostBeforeCountsOverwrittenBatches) {
  alkaid_producer_options o = ProducerOptions();
  o.policy = ALKAID_POLICY_DROP_OLDEST;
  o.slot_count = 4;
  alkaid_producer* p = OpenProducer("t", o);
  alkaid_consumer* c = OpenConsumer("t");
  ArrowArray none{};
  ASSERT_EQ(alkaid_consumer_next(c, 0, &none, nullptr, nullptr), ALKAID_TIMED_OUT);
  for (int i = 0; i < 12; ++i) {
    ArrowArray a = ExportedBatch(*TestBatch(i, 1));
    ASSERT_C_OK(alkaid_producer_publish(p, &a, nullptr));
  }
  auto closing = std::async(std::launch::async, [p] { return alkaid_producer_close(p); });
  uint64_t received = 0;
  uint64_t lost = 0;
  for (;;) {
    alkaid_batch_info info{};
    ArrowArray out{};
    const alkaid_status st = alkaid_consumer_next(c, 10000, &out, nullptr, &info);
    if (st == ALKAID_END_OF_STREAM) break;
    ASSERT_C_OK(st);
    out.release(&out);
    ++received;
    lost += info.lost_before;
  }
  EXPECT_GT(lost, 0u);
  EXPECT_EQ(received + lost, 12u);
  EXPECT_EQ(closing.get(), ALKAID_OK);
  alkaid_consumer_stats cs{};
  ASSERT_C_OK(alkaid_consumer_stats_get(c, &cs));
  EXPECT_EQ(cs.lost, lost);
  ASSERT_C_OK(alkaid_consumer_close(c));
}

TEST_F(CapiTest, MaxHeldBatchesRefusesBeforeTakingABatch) {
  alkaid_producer* p = OpenProducer("t");
  alkaid_consumer_options co = ConsumerOptions();
  co.max_held_batches = 1;
  alkaid_consumer* c = OpenConsumer("t", co);
  ArrowArray none{};
  ASSERT_EQ(alkaid_consumer_next(c, 0, &none, nullptr, nullptr), ALKAID_TIMED_OUT);
  for (int i = 0; i < 2; ++i) {
    ArrowArray a = ExportedBatch(*TestBatch(i, 1));
    ASSERT_C_OK(alkaid_producer_publish(p, &a, nullptr));
  }
  ArrowArray first{};
  alkaid_batch_info info{};
  ASSERT_C_OK(alkaid_consumer_next(c, 10000, &first, nullptr, &info));
  const uint64_t sequence = info.sequence;
  ArrowArray second{};
  EXPECT_EQ(alkaid_consumer_next(c, 10000, &second, nullptr, &info), ALKAID_CAPACITY_ERROR);
  EXPECT_EQ(second.release, nullptr);
  alkaid_consumer_stats stats{};
  ASSERT_C_OK(alkaid_consumer_stats_get(c, &stats));
  EXPECT_EQ(stats.refused, 1u);
  EXPECT_EQ(stats.held, 1u);
  first.release(&first);
  ASSERT_C_OK(alkaid_consumer_next(c, 10000, &second, nullptr, &info));
  EXPECT_EQ(info.sequence, sequence + 1);  // nothing was lost
  EXPECT_EQ(info.lost_before, 0u);
  second.release(&second);
  ASSERT_C_OK(alkaid_consumer_close(c));
  ASSERT_C_OK(alkaid_producer_close(p));
}

TEST_F(CapiTest, TopicListShowsSettingsAndCounters) {
  alkaid_producer_options o = ProducerOptions();
  o.slot_count = 64;
  o.arena_bytes = 2 << 20;
  alkaid_producer* p = OpenProducer("listed", o);
  alkaid_consumer* c = OpenConsumer("listed");
  ArrowArray none{};
  ASSERT_EQ(alkaid_consumer_next(c, 0, &none, nullptr, nullptr), ALKAID_TIMED_OUT);
  ArrowArray a = ExportedBatch(*TestBatch(0, 2));
  ASSERT_C_OK(alkaid_producer_publish(p, &a, nullptr));
  alkaid_broker* b = nullptr;
  ASSERT_C_OK(alkaid_broker_connect(broker_.socket().c_str(), &b));
  alkaid_topic_info found{};
  std::string name;
  // The producer reports its counters from its session thread: wait for
  // the publish to show.
  ASSERT_TRUE(WaitUntil([&] {
    alkaid_topic_list* list = nullptr;
    if (alkaid_broker_list_topics(b, &list) != ALKAID_OK) return false;
    bool seen = false;
    for (size_t i = 0; i < alkaid_topic_list_size(list); ++i) {
      const alkaid_topic_info* t = alkaid_topic_list_get(list, i);
      if (std::string(t->name) == "listed" && t->published == 1) {
        found = *t;
        name = t->name;
        ArrowSchema s{};
        EXPECT_EQ(alkaid_topic_list_schema(list, i, &s), ALKAID_OK);
        auto schema = format::ImportSchema(&s);
        EXPECT_TRUE(schema.ok() && (*schema)->Equals(*TestSchema()));
        seen = true;
      }
    }
    EXPECT_EQ(alkaid_topic_list_get(list, alkaid_topic_list_size(list)), nullptr);
    ArrowSchema s{};
    EXPECT_EQ(alkaid_topic_list_schema(list, alkaid_topic_list_size(list), &s), ALKAID_INDEX_ERROR);
    alkaid_topic_list_free(list);
    return seen;
  }));
  EXPECT_EQ(name, "listed");
  EXPECT_EQ(found.slot_count, 64u);
  EXPECT_EQ(found.arena_bytes, uint64_t{2} << 20);
  EXPECT_EQ(found.policy, ALKAID_POLICY_BLOCK_PRODUCER);
  EXPECT_EQ(found.row_topic, 0);
  EXPECT_EQ(found.producers, 1u);
  EXPECT_EQ(found.consumers, 1u);
  EXPECT_GT(found.shm_bytes, 0u);
  alkaid_broker_close(b);
  ASSERT_C_OK(alkaid_consumer_close(c));
  ASSERT_C_OK(alkaid_producer_close(p));
}

// Three topics waited on from one thread with epoll over each consumer's
// descriptor. The producers publish from another thread, pausing between
// batches so that the consumers are asleep when most batches come: every
// batch must arrive through a readable descriptor. The epoll waits have a
// guard of 30 s, a hang check only: without the producers' doorbell
// nothing but a broker event would end a wait.
TEST_F(CapiTest, EpollWaitsOnSeveralTopicsFromOneThread) {
  constexpr int kTopics = 3;
  constexpr int kRounds = 40;
  std::vector<alkaid_producer*> producers;
  std::vector<alkaid_consumer*> consumers;
  const int ep = ::epoll_create1(EPOLL_CLOEXEC);
  ASSERT_GE(ep, 0);
  std::map<int, int> topic_of_fd;
  for (int t = 0; t < kTopics; ++t) {
    const std::string topic = "topic" + std::to_string(t);
    producers.push_back(OpenProducer(topic));
    consumers.push_back(OpenConsumer(topic));
    int fd = -1;
    ASSERT_C_OK(alkaid_consumer_wait_fd(consumers.back(), &fd));
    int again = -1;
    ASSERT_C_OK(alkaid_consumer_wait_fd(consumers.back(), &again));
    EXPECT_EQ(fd, again);
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = fd;
    ASSERT_EQ(::epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev), 0);
    topic_of_fd[fd] = t;
    ArrowArray none{};
    ASSERT_EQ(alkaid_consumer_next(consumers.back(), 0, &none, nullptr, nullptr),
              ALKAID_TIMED_OUT);  // registers and arms
  }
  EXPECT_EQ(alkaid_consumer_wait_fd(nullptr, nullptr), ALKAID_INVALID);
  EXPECT_EQ(alkaid_consumer_wait_fd(consumers[0], nullptr), ALKAID_INVALID);
  std::thread publisher([&] {
    for (int r = 0; r < kRounds; ++r) {
      for (int t = 0; t < kTopics; ++t) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
        ArrowArray a = ExportedBatch(*TestBatch(1000 * t + r, 1));
        EXPECT_EQ(alkaid_producer_publish(producers[static_cast<size_t>(t)], &a, nullptr),
                  ALKAID_OK)
            << alkaid_last_error();
      }
    }
  });
  std::vector<int64_t> next_id(kTopics);
  for (int t = 0; t < kTopics; ++t) next_id[static_cast<size_t>(t)] = 1000 * t;
  int received = 0;
  int wakes = 0;
  while (received < kTopics * kRounds) {
    epoll_event events[kTopics];
    const int n = ::epoll_wait(ep, events, kTopics, 30000);
    ASSERT_GT(n, 0) << "no descriptor turned readable with " << received << " batches received";
    ++wakes;
    for (int e = 0; e < n; ++e) {
      const int t = topic_of_fd.at(events[e].data.fd);
      alkaid_consumer* c = consumers[static_cast<size_t>(t)];
      for (;;) {
        ArrowArray out{};
        const alkaid_status st = alkaid_consumer_next(c, 0, &out, nullptr, nullptr);
        if (st == ALKAID_TIMED_OUT) break;  // drained, and armed again
        ASSERT_C_OK(st);
        const auto* ids = static_cast<const int64_t*>(out.children[0]->buffers[1]);
        EXPECT_EQ(ids[0], next_id[static_cast<size_t>(t)]++);
        out.release(&out);
        ++received;
      }
    }
  }
  publisher.join();
  EXPECT_EQ(received, kTopics * kRounds);
  EXPECT_GT(wakes, 1);
  // The end comes through the descriptors too (the producers sound them
  // when they close).
  for (alkaid_producer* p : producers) ASSERT_C_OK(alkaid_producer_close(p));
  int ended = 0;
  std::vector<bool> done(kTopics, false);
  while (ended < kTopics) {
    epoll_event events[kTopics];
    const int n = ::epoll_wait(ep, events, kTopics, 30000);
    ASSERT_GT(n, 0) << ended << " topics ended";
    for (int e = 0; e < n; ++e) {
      const int t = topic_of_fd.at(events[e].data.fd);
      if (done[static_cast<size_t>(t)]) continue;
      ArrowArray out{};
      const alkaid_status st =
          alkaid_consumer_next(consumers[static_cast<size_t>(t)], 0, &out, nullptr, nullptr);
      if (st == ALKAID_END_OF_STREAM) {
        done[static_cast<size_t>(t)] = true;
        ++ended;
        ASSERT_EQ(::epoll_ctl(ep, EPOLL_CTL_DEL, events[e].data.fd, nullptr), 0);
      } else {
        ASSERT_EQ(st, ALKAID_TIMED_OUT) << alkaid_last_error();
      }
    }
  }
  ::close(ep);
  for (alkaid_consumer* c : consumers) ASSERT_C_OK(alkaid_consumer_close(c));
}

// A foreign producer's hand-made record batch of TestSchema (id, name,
// score), every buffer a heap block exactly as long as the struct's lengths
// imply: under AddressSanitizer a read past what the struct claims is a
// report. Counts its releases (the parent's; children are the parent's).
struct ExactBatch {
  std::vector<std::unique_ptr<uint8_t[]>> blocks;
  std::vector<std::vector<const void*>> buffers;
  ArrowArray columns[3] = {};
  ArrowArray* column_ptrs[3] = {&columns[0], &columns[1], &columns[2]};
  const void* top_buffers[1] = {nullptr};
  int releases = 0;

  const void* Copy(const void* data, size_t size) {
    blocks.push_back(std::make_unique<uint8_t[]>(size));
    if (size > 0) std::memcpy(blocks.back().get(), data, size);
    return blocks.back().get();
  }
  // Two rows: ids 1 and 2, names as `offsets` and `chars` say, scores.
  ArrowArray Make(std::vector<int32_t> offsets, const std::string& chars) {
    const int64_t ids[2] = {1, 2};
    const double scores[2] = {0.5, 1.5};
    buffers.reserve(3);
    buffers.push_back({nullptr, Copy(ids, sizeof(ids))});
    buffers.push_back({nullptr, Copy(offsets.data(), offsets.size() * sizeof(int32_t)),
                       Copy(chars.data(), chars.size())});
    buffers.push_back({nullptr, Copy(scores, sizeof(scores))});
    for (int i = 0; i < 3; ++i) {
      columns[i].length = 2;
      columns[i].n_buffers = static_cast<int64_t>(buffers[i].size());
      columns[i].buffers = buffers[i].data();
      columns[i].release = [](ArrowArray* a) { a->release = nullptr; };
    }
    ArrowArray top{};
    top.length = 2;
    top.n_buffers = 1;
    top.buffers = top_buffers;
    top.n_children = 3;
    top.children = column_ptrs;
    top.private_data = this;
    top.release = [](ArrowArray* a) {
      ++static_cast<ExactBatch*>(a->private_data)->releases;
      a->release = nullptr;
    };
    return top;
  }
};

TEST_F(CapiTest, HostileArrowArraysGiveAClearErrorAndNoReadPastTheirBuffers) {
  alkaid_producer* p = OpenProducer("t");
  ASSERT_NE(p, nullptr);
  int expected_releases = 0;
  // Publishes the mutated batch: refused with `message`, released once.
  auto refused = [&](const std::function<void(ExactBatch&, ArrowArray&)>& mutate,
                     const std::string& message, std::vector<int32_t> offsets = {0, 2, 5}) {
    SCOPED_TRACE(message);
    ExactBatch x;
    ArrowArray a = x.Make(std::move(offsets), "hello");
    mutate(x, a);
    const bool had_release = a.release != nullptr;
    EXPECT_EQ(alkaid_producer_publish(p, &a, nullptr), ALKAID_INVALID);
    EXPECT_NE(std::string(alkaid_last_error()).find(message), std::string::npos)
        << alkaid_last_error();
    EXPECT_EQ(a.release, nullptr);
    EXPECT_EQ(x.releases, had_release ? 1 : 0);
    expected_releases += had_release ? 1 : 0;
  };
  // The reported case: offsets that claim 8 bytes of a 5-byte data buffer
  // (the last offset says 5).
  refused([](ExactBatch&, ArrowArray&) {}, "end offset 8 is past the end of the 5-byte data buffer",
          {0, 8, 5});
  refused([](ExactBatch&, ArrowArray&) {}, "offsets must not decrease", {3, 2, 5});
  refused([](ExactBatch& x, ArrowArray&) { x.buffers[1][2] = nullptr; },
          "buffer 2 is null but must hold 5 bytes");
  refused([](ExactBatch& x, ArrowArray&) { x.buffers[0][1] = nullptr; },
          "buffer 1 is null but must hold 16 bytes");
  refused([](ExactBatch&, ArrowArray& a) { a.length = -1; }, "length -1 is negative");
  refused([](ExactBatch& x, ArrowArray&) { x.columns[2].offset = -4; }, "offset -4 is negative");
  refused([](ExactBatch& x, ArrowArray&) { x.columns[1].n_buffers = 2; },
          "has 2 buffers, expected 3");
  refused([](ExactBatch& x, ArrowArray&) { x.columns[0].n_buffers = 7; },
          "has 7 buffers, expected 2");
  refused([](ExactBatch&, ArrowArray& a) { a.n_children = 2; }, "has 2 children, expected 3");
  refused([](ExactBatch&, ArrowArray& a) { a.n_children = 4; }, "has 4 children, expected 3");
  refused([](ExactBatch& x, ArrowArray&) { x.columns[1].release = nullptr; }, "is released");
  refused([](ExactBatch&, ArrowArray& a) { a.release = nullptr; }, "already released");
  refused([](ExactBatch& x, ArrowArray&) { x.columns[0].length = 1; }, "the batch needs 2");
  // The same struct, honest, is published.
  ExactBatch ok;
  ArrowArray a = ok.Make({0, 2, 5}, "hello");
  ASSERT_C_OK(alkaid_producer_publish(p, &a, nullptr));
  EXPECT_EQ(ok.releases, 1);
  alkaid_producer_stats ps{};
  ASSERT_C_OK(alkaid_producer_stats_get(p, &ps));
  EXPECT_EQ(ps.published, 1u);  // nothing hostile got through
  EXPECT_EQ(expected_releases, 12);
  ASSERT_C_OK(alkaid_producer_close(p));
}

}  // namespace
}  // namespace alkaid
