// Loans of a fixed shape go through fixed-shape writers (capi/src/alkaid_c.cc,
// "Loans through a fixed-shape writer"): once a writer of a row count is
// made, a loan of those rows is the writer's next region and its publish the
// writer's, so that loaning, writing and publishing allocate no heap memory
// in steady state, two loans out at once as the ping-pong has them. Global
// operator new is replaced in this test executable to count allocations
// (tests/support/counting_new.h; not in sanitizer builds), and the test
// counts those of its own thread inside the producer's calls (the clients'
// broker sessions allocate on their own schedule, and so does a consumer's
// look at its broker connection). A nullable column takes the pool path,
// which allocates per loan: the counter sees the library's allocations.

#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "alkaid/alkaid.h"
#include "alkaid/format/c_data.h"
#include "alkaid/format/type.h"
#include "broker_process.h"
#include "broker_test_util.h"
#include "counting_new.h"

namespace alkaid {
namespace {

using broker::testing::BrokerProcess;

#define ASSERT_C_OK(expr) ASSERT_EQ((expr), ALKAID_OK) << #expr << ": " << alkaid_last_error()

constexpr int64_t kRows = 64;

class CapiLoanAllocTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(broker_.Start()); }
  void TearDown() override {
    broker_.Stop();
    EXPECT_TRUE(broker::testing::ShmNames(broker_.name() + ".").empty());
  }

  // A producer of one int64 column and a consumer of it. A 256 KiB arena:
  // the warm-up laps it, so that loans take blocks freed before as well as
  // fresh space (a split of a free range, which allocates nothing either).
  void Open(bool nullable) {
    auto schema = format::schema({format::field("v", format::int64(), nullable)});
    ArrowSchema c_schema{};
    ASSERT_TRUE(format::ExportSchema(*schema, &c_schema).ok());
    alkaid_producer_options po;
    alkaid_producer_options_init(&po);
    po.socket_path = broker_.socket().c_str();
    po.arena_bytes = 256 << 10;
    po.wait_for_consumers_ms = 0;
    ASSERT_C_OK(alkaid_producer_open("t", &c_schema, &po, &producer_));
    alkaid_consumer_options co;
    alkaid_consumer_options_init(&co);
    co.socket_path = broker_.socket().c_str();
    co.wait_mode = ALKAID_WAIT_BUSY_POLL;
    ASSERT_C_OK(alkaid_consumer_open("t", &co, &consumer_));
  }

  void Close() {
    ASSERT_C_OK(alkaid_producer_close(producer_));
    ASSERT_C_OK(alkaid_consumer_close(consumer_));
  }

  // A loan of `rows` values first, first + 1, ... (its allocations
  // counted).
  void Loan(int64_t first, alkaid_loan** loan, int64_t rows = kRows) {
    const uint64_t before = counting_new::t_allocations;
    const alkaid_status loaned = alkaid_producer_loan(producer_, rows, nullptr, 0, loan);
    void* data = nullptr;
    int64_t size = 0;
    const alkaid_status buffer =
        loaned == ALKAID_OK ? alkaid_loan_buffer(*loan, 0, 1, &data, &size) : loaned;
    producer_allocations_ += counting_new::t_allocations - before;
    ASSERT_C_OK(loaned);
    ASSERT_C_OK(buffer);
    ASSERT_EQ(size, rows * 8);
    for (int64_t r = 0; r < rows; ++r) static_cast<int64_t*>(data)[r] = first + r;
  }

  // Publishes `loan` (its allocations counted).
  void Publish(alkaid_loan* loan) {
    const uint64_t before = counting_new::t_allocations;
    const alkaid_status st = alkaid_producer_publish_loan(producer_, loan);
    producer_allocations_ += counting_new::t_allocations - before;
    ASSERT_C_OK(st);
  }

  // Receives a batch and checks its first and last value (read from the
  // ArrowArray itself: an import would allocate).
  void Receive(int64_t first, int64_t rows = kRows) {
    ArrowArray a{};
    ASSERT_C_OK(alkaid_consumer_next(consumer_, 10000, &a, nullptr, nullptr));
    ASSERT_EQ(a.n_children, 1);
    const ArrowArray& v = *a.children[0];
    ASSERT_EQ(v.length, rows);
    const auto* values = static_cast<const int64_t*>(v.buffers[1]);
    EXPECT_EQ(values[0], first);
    EXPECT_EQ(values[rows - 1], first + rows - 1);
    a.release(&a);
  }

  // The allocations of one loan of `rows` rows and its publish.
  uint64_t LoanOnce(int64_t rows) {
    producer_allocations_ = 0;
    alkaid_loan* loan = nullptr;
    Loan(rows, &loan, rows);
    if (::testing::Test::HasFatalFailure()) return ~uint64_t{0};
    Publish(loan);
    Receive(rows, rows);
    return producer_allocations_;
  }

  // Two loans out at once (the second taken while the first is written),
  // published newest first, as the ping-pong's ping and warm-up.
  void Round(int64_t i) {
    alkaid_loan* ping = nullptr;
    alkaid_loan* warm = nullptr;
    ASSERT_NO_FATAL_FAILURE(Loan(2 * i * kRows, &ping));
    ASSERT_NO_FATAL_FAILURE(Loan((2 * i + 1) * kRows, &warm));
    ASSERT_NO_FATAL_FAILURE(Publish(warm));
    ASSERT_NO_FATAL_FAILURE(Receive((2 * i + 1) * kRows));
    ASSERT_NO_FATAL_FAILURE(Publish(ping));
    ASSERT_NO_FATAL_FAILURE(Receive(2 * i * kRows));
  }

  // Heap allocations of the producer's calls in `rounds` rounds, after a
  // warm-up that laps the arena.
  uint64_t Allocations(int64_t rounds) {
    for (int64_t i = 0; i < 2000; ++i) {
      Round(i);
      if (::testing::Test::HasFatalFailure()) return ~uint64_t{0};
    }
    producer_allocations_ = 0;
    for (int64_t i = 2000; i < 2000 + rounds; ++i) {
      Round(i);
      if (::testing::Test::HasFatalFailure()) return ~uint64_t{0};
    }
    return producer_allocations_;
  }

  BrokerProcess broker_;
  alkaid_producer* producer_ = nullptr;
  alkaid_consumer* consumer_ = nullptr;
  uint64_t producer_allocations_ = 0;
};

TEST_F(CapiLoanAllocTest, FixedShapeLoansAllocateNothing) {
  ASSERT_NO_FATAL_FAILURE(Open(false));
  EXPECT_EQ(Allocations(1000), 0u);
  ASSERT_NO_FATAL_FAILURE(Close());
}

// A writer is made for a row count that comes back (seen among the last
// eight pool loans), not for one loaned once: it costs more to make than a
// pool loan and keeps one of the channel's 16 shape lines for good; and at
// most eight are made. Seen from the allocations: a count's first loan is a
// pool loan, its second makes the writer (more than a pool loan), its third
// is the writer's (less: no loan object, pool, buffers, arrays or batch),
// up to the ninth count, whose loans all stay pool loans.
TEST_F(CapiLoanAllocTest, WritersAreMadeForRowCountsThatComeBackAndAtMostEight) {
  ASSERT_NO_FATAL_FAILURE(Open(false));
  std::vector<std::array<uint64_t, 3>> counts;
  for (int64_t i = 0; i < 9; ++i) {
    const int64_t rows = 100 + i;
    counts.push_back({LoanOnce(rows), LoanOnce(rows), LoanOnce(rows)});
    ASSERT_FALSE(::testing::Test::HasFatalFailure());
  }
  // The ninth count's loans after its first (whose publish sends a new
  // shape) are pool loans: what a pool loan allocates.
  const uint64_t pool = counts[8][2];
  EXPECT_GE(pool, 5u);  // a loan object, its pool, buffers, arrays and batch
  EXPECT_EQ(counts[8][1], pool);
  for (size_t i = 0; i < 8; ++i) {
    SCOPED_TRACE("rows " + std::to_string(100 + i) + ": " + std::to_string(counts[i][0]) + ", " +
                 std::to_string(counts[i][1]) + ", " + std::to_string(counts[i][2]) +
                 " allocations; a pool loan " + std::to_string(pool));
    EXPECT_GT(counts[i][1], pool) << "the second loan makes the writer";
    EXPECT_LT(counts[i][2], pool) << "the third is the writer's";
  }
  ASSERT_NO_FATAL_FAILURE(Close());
}

// One loan at a time, as a ping-pong has it: each loan carves fresh space
// from the arena's one free range and its block, returned, merges back into
// it. Neither the split nor the merge allocates (libshm's free ranges re-key
// their nodes in place).
TEST_F(CapiLoanAllocTest, OneLoanAtATimeSplitsAndMergesWithoutAllocating) {
  ASSERT_NO_FATAL_FAILURE(Open(false));
  for (int i = 0; i < 100; ++i) ASSERT_NE(LoanOnce(kRows), ~uint64_t{0});
  uint64_t all = 0;
  for (int i = 0; i < 1000; ++i) all += LoanOnce(kRows);
  ASSERT_FALSE(::testing::Test::HasFatalFailure());
  EXPECT_EQ(all, 0u) << "heap allocations in 1000 loans, one at a time";
  ASSERT_NO_FATAL_FAILURE(Close());
}

TEST_F(CapiLoanAllocTest, ANullableColumnTakesThePoolPathWhichAllocates) {
  ASSERT_NO_FATAL_FAILURE(Open(true));
  // The pool path: a loan object, its pool, buffers, arrays and batch.
  EXPECT_GE(Allocations(100), 200u * 5);
  ASSERT_NO_FATAL_FAILURE(Close());
}

}  // namespace
}  // namespace alkaid
