// What the C ABI frees, checked by LeakSanitizer in the middle of the test
// (__lsan_do_recoverable_leak_check): this program is built with
// -fsanitize=leak in a build without sanitizers (with address in an ASan
// build, whose runtime has the same check), so the release build catches a
// leak as well. A leak check sees memory no pointer reaches any more: a
// handle freed without what it owned (alkaid_producer_close without the
// loans published since the last loan, say) shows up as soon as the handle
// is gone.

#include <gtest/gtest.h>
#include <sanitizer/lsan_interface.h>

#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "alkaid/alkaid.h"
#include "alkaid/format/c_data.h"
#include "alkaid/format/type.h"
#include "broker_process.h"
#include "broker_test_util.h"

namespace alkaid {
namespace {

using broker::testing::BrokerProcess;

#define ASSERT_C_OK(expr) ASSERT_EQ((expr), ALKAID_OK) << #expr << ": " << alkaid_last_error()

class CapiLeakTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(broker_.Start()); }
  void TearDown() override {
    broker_.Stop();
    EXPECT_TRUE(broker::testing::ShmNames(broker_.name() + ".").empty());
  }

  alkaid_producer* OpenProducer(const std::string& topic) {
    auto schema = format::schema({format::field("v", format::int64(), false)});
    ArrowSchema c_schema{};
    EXPECT_TRUE(format::ExportSchema(*schema, &c_schema).ok());
    alkaid_producer_options o;
    alkaid_producer_options_init(&o);
    o.socket_path = broker_.socket().c_str();
    o.arena_bytes = 1 << 20;
    o.wait_for_consumers_ms = 0;
    o.drain_timeout_ms = 0;
    alkaid_producer* p = nullptr;
    EXPECT_EQ(alkaid_producer_open(topic.c_str(), &c_schema, &o, &p), ALKAID_OK)
        << alkaid_last_error();
    return p;
  }

  // Loans `n` batches, publishes them all (so that close finds every one
  // spent, none freed by a later loan).
  static void PublishLoans(alkaid_producer* p, int n) {
    std::vector<alkaid_loan*> loans(static_cast<size_t>(n), nullptr);
    for (alkaid_loan*& loan : loans) {
      ASSERT_C_OK(alkaid_producer_loan(p, 8, nullptr, 0, &loan));
      void* data = nullptr;
      int64_t size = 0;
      ASSERT_C_OK(alkaid_loan_buffer(loan, 0, 1, &data, &size));
      for (int64_t i = 0; i < size / 8; ++i) static_cast<int64_t*>(data)[i] = i;
    }
    for (alkaid_loan* loan : loans) ASSERT_C_OK(alkaid_producer_publish_loan(p, loan));
  }

  BrokerProcess broker_;
};

// alkaid_producer_close frees the loans published since the producer's last
// loan: without it each of them (the loan, its pool, its batch) is lost.
TEST_F(CapiLeakTest, CloseFreesThePublishedLoans) {
  ASSERT_EQ(__lsan_do_recoverable_leak_check(), 0) << "a leak before the test's own";
  alkaid_producer* p = OpenProducer("t");
  ASSERT_NE(p, nullptr);
  PublishLoans(p, 3);
  ASSERT_C_OK(alkaid_producer_close(p));
  EXPECT_EQ(__lsan_do_recoverable_leak_check(), 0)
      << "alkaid_producer_close left memory no pointer reaches (above)";
}

// The producer's schema (one int64, not nullable) loans through fixed-shape
// writers, kept once published for the next loan of their rows: writers of
// more row counts than are kept idle (the oldest freed), a writer loan
// discarded unpublished, and the idle ones left at close leave nothing.
TEST_F(CapiLeakTest, WriterLoansEvictedDiscardedOrLeftAtCloseLeaveNothing) {
  ASSERT_EQ(__lsan_do_recoverable_leak_check(), 0) << "a leak before the test's own";
  alkaid_producer* p = OpenProducer("t");
  ASSERT_NE(p, nullptr);
  for (int64_t rows = 1; rows <= 6; ++rows) {  // more than the 4 kept idle
    for (int twice = 0; twice < 2; ++twice) {  // a writer is made at the second
      alkaid_loan* loan = nullptr;
      ASSERT_C_OK(alkaid_producer_loan(p, rows, nullptr, 0, &loan));
      ASSERT_C_OK(alkaid_producer_publish_loan(p, loan));
    }
  }
  alkaid_loan* discarded = nullptr;
  ASSERT_C_OK(alkaid_producer_loan(p, 6, nullptr, 0, &discarded));  // an idle writer's
  alkaid_loan_discard(discarded);
  // Count 2's writer was evicted: a new one, made from a pool loan.
  ASSERT_C_OK(alkaid_producer_loan(p, 2, nullptr, 0, &discarded));
  alkaid_loan_discard(discarded);
  EXPECT_EQ(__lsan_do_recoverable_leak_check(), 0)
      << "evicted or discarded writer loans left memory no pointer reaches (above)";
  ASSERT_C_OK(alkaid_producer_close(p));
  EXPECT_EQ(__lsan_do_recoverable_leak_check(), 0)
      << "alkaid_producer_close left memory no pointer reaches (above)";
}

// The same for a consumer that closes while batches it handed out are still
// held, released afterwards on another thread: each one's export is freed
// by its release.
TEST_F(CapiLeakTest, BatchesReleasedAfterTheirConsumerLeaveNothing) {
  ASSERT_EQ(__lsan_do_recoverable_leak_check(), 0) << "a leak before the test's own";
  alkaid_producer* p = OpenProducer("t");
  ASSERT_NE(p, nullptr);
  alkaid_consumer_options co;
  alkaid_consumer_options_init(&co);
  co.socket_path = broker_.socket().c_str();
  alkaid_consumer* c = nullptr;
  ASSERT_C_OK(alkaid_consumer_open("t", &co, &c));
  PublishLoans(p, 4);
  std::vector<ArrowArray> held(4);
  for (ArrowArray& a : held) ASSERT_C_OK(alkaid_consumer_next(c, 10000, &a, nullptr, nullptr));
  held[1].release(&held[1]);  // one back before the consumer goes
  ASSERT_C_OK(alkaid_consumer_close(c));
  ASSERT_C_OK(alkaid_producer_close(p));
  std::thread([&held] {
    for (ArrowArray& a : held) {
      if (a.release != nullptr) a.release(&a);
    }
  }).join();
  EXPECT_EQ(__lsan_do_recoverable_leak_check(), 0)
      << "the exports released after their consumer left memory no pointer reaches (above)";
}

}  // namespace
}  // namespace alkaid
