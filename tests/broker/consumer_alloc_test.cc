// The zero-allocation paths of the client facades, through a real
// alkaid-broker: a FixedShapeWriter's publish through a Producer,
// Consumer::Next in steady state, and Consumer::ExportBatch with the
// foreign side's release. Global operator new is replaced in this test
// executable to count allocations (tests/support/counting_new.h; not in
// sanitizer builds). The counts are the test thread's own, inside the
// calls: each facade's broker session has a thread of its own that
// allocates on its own schedule (stats, the event pump).
//
// The window is long enough for the consumer's maintenance to run many
// times (every kMaintainEvery messages under load): its look at the broker
// connection, a poll that finds nothing, must allocate nothing either. It
// also lasts longer than two of the sessions' stats rounds (500 ms each):
// the producer thread answers the session's ask for figures at a publish,
// which must allocate nothing.

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <memory>

#include "alkaid/client/batch_publisher.h"
#include "alkaid/client/consumer.h"
#include "alkaid/client/producer.h"
#include "alkaid/format/builder_primitive.h"
#include "alkaid/format/c_data.h"
#include "broker_process.h"
#include "broker_test_util.h"
#include "counting_new.h"
#include "test_util.h"

namespace alkaid::broker {
namespace {

using client::Consumer;
using client::FixedShapeWriter;
using client::Producer;
using testing::BrokerProcess;
using namespace std::chrono_literals;

constexpr int64_t kRows = 64;
constexpr int64_t kWarmUp = 3000;
constexpr int64_t kCounted = 20000;   // at least: about twenty maintenance rounds
constexpr auto kCountedFor = 1200ms;  // at least: two stats rounds or more

// The parameter: whether the producer has fixed blocks of the writer's
// size (ProducerOptions::fixed_block_bytes), which its regions then are.
class ConsumerAllocTest : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    ASSERT_TRUE(broker_.Start());
    const auto schema = format::schema({format::field("v", format::int64(), false)});
    auto po = testing::ProducerOn(broker_);
    po.wait_for_consumers = 0ms;
    if (GetParam()) po.fixed_block_bytes = kRows * 8;
    ASSERT_OK_AND_ASSIGN(producer_, Producer::Open("t", schema, po));
    auto co = testing::ConsumerOn(broker_);
    co.wait_mode = shm::WaitMode::kBusyPoll;
    ASSERT_OK_AND_ASSIGN(consumer_, Consumer::Open("t", co));
    ASSERT_OK_AND_ASSIGN(auto pool, producer_->NewBatchPool(kRows * 8));
    format::Int64Builder builder(pool.get());
    ASSERT_OK(builder.Reserve(kRows));
    for (int64_t r = 0; r < kRows; ++r) builder.UnsafeAppend(r);
    ASSERT_OK_AND_ASSIGN(auto values, builder.Finish());
    ASSERT_OK_AND_ASSIGN(auto prototype, format::RecordBatch::Make(schema, kRows, {values}));
    ASSERT_OK_AND_ASSIGN(writer_, producer_->NewFixedShapeWriter(*prototype, *pool));
    ASSERT_EQ(producer_->fixed_block_bytes(), GetParam() ? uint64_t{kRows * 8} : 0u);
  }

  void TearDown() override {
    writer_.reset();
    if (producer_ != nullptr) EXPECT_OK(producer_->Close());
    if (consumer_ != nullptr) EXPECT_OK(consumer_->Close());
    broker_.Stop();
    EXPECT_TRUE(testing::ShmNames(broker_.name() + ".").empty());
  }

  // Publishes values first, first + 1, ... (the publish's allocations
  // counted).
  void Publish(int64_t first) {
    const uint64_t before = counting_new::t_allocations;
    Status st = writer_->Begin(FixedShapeWriter::Fill::kNone);
    if (st.ok()) {
      auto* v = reinterpret_cast<int64_t*>(writer_->buffer(1).data());
      for (int64_t r = 0; r < kRows; ++r) v[r] = first + r;
      st = writer_->Publish();
    }
    publish_allocations_ += counting_new::t_allocations - before;
    ASSERT_OK(st);
  }

  // Receives the next batch and checks its first and last value; with
  // `export_it`, hands it over as an ArrowArray and releases that (the
  // allocations of Next, the export, the release and the drop counted).
  void Receive(int64_t first, bool export_it) {
    const uint64_t before = counting_new::t_allocations;
    auto got = consumer_->Next(10s);
    int64_t first_seen = -1;
    int64_t last_seen = -1;
    Status exported;
    if (got.ok()) {
      const format::ArrayData& column = *(*got)->column_data(0);
      first_seen = column.GetValues<int64_t>(1)[0];
      last_seen = column.GetValues<int64_t>(1)[column.length - 1];
      if (export_it) {
        ArrowArray array{};
        exported = consumer_->ExportBatch(*got, &array);
        if (exported.ok()) array.release(&array);
      }
      got->reset();
    }
    receive_allocations_ += counting_new::t_allocations - before;
    ASSERT_OK(got.status());
    ASSERT_OK(exported);
    EXPECT_EQ(first_seen, first);
    EXPECT_EQ(last_seen, first + kRows - 1);
  }

  void Run(bool export_it) {
    int64_t i = 0;
    for (; i < kWarmUp; ++i) {
      ASSERT_NO_FATAL_FAILURE(Publish(i));
      ASSERT_NO_FATAL_FAILURE(Receive(i, export_it));
    }
    publish_allocations_ = receive_allocations_ = 0;
    const auto until = std::chrono::steady_clock::now() + kCountedFor;
    for (; i < kWarmUp + kCounted || std::chrono::steady_clock::now() < until; ++i) {
      ASSERT_NO_FATAL_FAILURE(Publish(i));
      ASSERT_NO_FATAL_FAILURE(Receive(i, export_it));
    }
    counted_ = i - kWarmUp;
  }

  BrokerProcess broker_;
  std::unique_ptr<Producer> producer_;
  std::unique_ptr<Consumer> consumer_;
  std::unique_ptr<FixedShapeWriter> writer_;
  uint64_t publish_allocations_ = 0;
  uint64_t receive_allocations_ = 0;
  int64_t counted_ = 0;  // batches in the counted window
};

TEST_P(ConsumerAllocTest, FixedPublishAndNextAllocateNothingInSteadyState) {
  ASSERT_NO_FATAL_FAILURE(Run(/*export_it=*/false));
  EXPECT_EQ(publish_allocations_, 0u) << "in " << counted_ << " FixedShapeWriter publishes";
  EXPECT_EQ(receive_allocations_, 0u) << "in " << counted_ << " Consumer::Next calls";
}

TEST_P(ConsumerAllocTest, ExportingEachReceivedBatchAllocatesNothing) {
  ASSERT_NO_FATAL_FAILURE(Run(/*export_it=*/true));
  EXPECT_EQ(publish_allocations_, 0u) << "in " << counted_ << " FixedShapeWriter publishes";
  EXPECT_EQ(receive_allocations_, 0u)
      << "in " << counted_ << " Consumer::Next, ExportBatch and release calls";
}

INSTANTIATE_TEST_SUITE_P(Blocks, ConsumerAllocTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& param) {
                           return param.param ? "FixedBlocks" : "ArenaBlocks";
                         });

}  // namespace
}  // namespace alkaid::broker
