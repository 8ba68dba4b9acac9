#pragma once

// Pieces of the flatness bench (shm_flatness_bench.cc) that alkaid/measure/
// does not have: the segments of a batch ping-pong: record batches from the parent to the child
// through a channel, one int64 word back through a second channel (no body).

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <span>
#include <string>

#include "alkaid/client/batch_publisher.h"
#include "alkaid/client/batch_subscriber.h"
#include "alkaid/client/shm_batch_pool.h"
#include "alkaid/format/array.h"
#include "alkaid/format/record_batch.h"
#include "alkaid/shm/channel.h"
#include "alkaid/shm/segment.h"
#include "bench_util.h"

namespace alkaid::bench {

/// A batch of one int64 column of `rows` values in `pool`'s region, of
/// which only the first (`first`) and the last (`first + rows - 1`) are
/// written: a region loaned from the segment and partly updated. Used for
/// warm-up batches of the same shape as a measured one (the same metadata
/// cache entry and decode plan) that leave the caches as they are.
inline format::RecordBatchPtr LoanedInt64Batch(client::ShmBatchPool* pool,
                                               const format::SchemaPtr& schema, uint64_t rows,
                                               int64_t first) {
  const auto bytes = static_cast<int64_t>(rows * 8);
  auto data = pool->Allocate(bytes, 64);
  if (!data.ok()) Die(data.status(), "loaned batch");
  auto* values = reinterpret_cast<int64_t*>(*data);
  values[0] = first;
  values[rows - 1] = first + static_cast<int64_t>(rows) - 1;
  auto array = format::MakeArray(
      format::ArrayData::Make(format::int64(), static_cast<int64_t>(rows),
                              {nullptr, std::make_shared<format::Buffer>(*data, bytes)}, 0));
  auto batch = format::RecordBatch::Make(schema, static_cast<int64_t>(rows), {array});
  if (!batch.ok()) Die(batch.status(), "loaned batch");
  return std::move(batch).ValueOrDie();
}

/// The segments of one batch ping-pong, created by the parent before the
/// fork: the ping channel (batches) and the pong channel (answers); removed
/// when the parent drops them. `tag` makes the names unique per run.
class BatchPingPongSegments {
 public:
  BatchPingPongSegments(const std::string& tag, uint64_t arena_bytes,
                        const shm::SegmentOptions& segment, uint32_t slots)
      : ping_name_("alkaid_lat_p" + tag), pong_name_("alkaid_lat_q" + tag) {
    using namespace std::chrono_literals;
    shm::ChannelOptions co;
    co.slot_count = slots;
    co.inline_capacity = 448;
    co.arena_bytes = arena_bytes;
    co.publish_timeout = 30s;
    co.space_timeout = 30s;
    co.segment = segment;  // prefault: no page fault on the timed path
    ping_ = Check(shm::ChannelProducer::Create(ping_name_, co), "ping channel");
    shm::ChannelOptions po;
    po.slot_count = slots;
    po.inline_capacity = sizeof(int64_t);
    po.max_consumers = 1;
    po.arena_bytes = 4096;  // answers carry no body
    po.publish_timeout = 30s;
    pong_channel_ = Check(shm::ChannelProducer::Create(pong_name_, po), "pong channel");
    shm::ChannelConsumerOptions busy;
    busy.wait_mode = shm::WaitMode::kBusyPoll;
    // Registered before the fork: the child's first answer accepts it.
    pong_ = Check(shm::ChannelConsumer::Open(pong_name_, busy), "pong consumer");
  }
  ~BatchPingPongSegments() {
    pong_.reset();
    pong_channel_.reset();
    ping_.reset();
    (void)shm::RemoveChannel(ping_name_);
    (void)shm::RemoveChannel(pong_name_);
  }
  BatchPingPongSegments(const BatchPingPongSegments&) = delete;
  BatchPingPongSegments& operator=(const BatchPingPongSegments&) = delete;

  shm::ChannelProducer* ping() const { return ping_.get(); }

  /// In the child: maps the ping channel itself (read-only) with a
  /// busy-polling subscriber, and says it is ready on the pong channel,
  /// whose only producer it is from then on (the parent's copy of the
  /// producer is not used again until it is dropped after the child ended).
  std::unique_ptr<client::BatchSubscriber> OpenInChild(const format::SchemaPtr& schema) const {
    client::SubscriberOptions so;
    so.consumer.wait_mode = shm::WaitMode::kBusyPoll;
    auto sub = Check(client::BatchSubscriber::Open(ping_name_, schema, so), "child subscriber");
    Answer(-1);
    return sub;
  }

  /// Child: publishes `value` on the pong channel.
  void Answer(int64_t value) const {
    CHECK_OK(pong_channel_->Publish(
        std::span<const std::byte>(reinterpret_cast<const std::byte*>(&value), sizeof(value))));
  }

  /// Parent: an untimed round trip with a batch of the shape of the next
  /// ping (`rows` int64 values in a region of `region_bytes`) of which only
  /// the first (`first`) and the last value are written: it brings the
  /// publish and receive paths and their per-shape state back into the
  /// caches, and makes sure the child is running.
  void WarmUp(client::BatchPublisher* publisher, const format::SchemaPtr& schema, uint64_t rows,
              uint64_t region_bytes, int64_t first) {
    auto pool = publisher->NewPool(region_bytes);
    if (!pool.ok()) Die(pool.status(), "warm-up pool");
    auto batch = LoanedInt64Batch(pool->get(), schema, rows, first);
    CHECK_OK(publisher->Publish(*batch, pool->get()));
    AwaitAnswer();
  }

  /// Parent: waits for the child's next answer.
  void AwaitAnswer() {
    using namespace std::chrono_literals;
    CHECK_OK(pong_->Receive(&answer_, 60s));
  }

 private:
  template <typename T>
  static T Check(Result<T> result, const char* what) {
    if (!result.ok()) Die(result.status(), what);
    return std::move(result).ValueOrDie();
  }

  std::string ping_name_, pong_name_;
  std::unique_ptr<shm::ChannelProducer> ping_;
  std::unique_ptr<shm::ChannelProducer> pong_channel_;
  std::unique_ptr<shm::ChannelConsumer> pong_;
  shm::ChannelMessage answer_;  // reused: receiving allocates nothing
};

}  // namespace alkaid::bench
