// libFuzzer target for a BatchSubscriber's plans of varying numbers
// (format::ipc::MessagePlan, kVarying): after two honest batches of a
// string topic have made the plan, every message is the schema's Message
// template filled with numbers from the fuzz bytes (row count, each node's
// length and null count, each buffer's offset and length, the body length),
// over a body of fuzz bytes. Each such Message matches the plan, so the
// numbers meet its checks, and the batch made from those that pass meets
// validation. Three subscribers read them, one per verification mode; every
// batch returned is fully validated and read (ASan finds what reads out of
// bounds). An honest batch follows when a record asks, and at the end.
//
// Input: records of [u8 flags][i64 rows][2 x (i64 length, i64 null count)]
// [5 x (i64 offset, i64 length)][i64 body length in the Message]
// [u16 body bytes][body bytes]. Flags: bit 0, an honest batch after this
// one; bit 1, the slot's body length is the Message's (else the block's).

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "alkaid/client/batch_publisher.h"
#include "alkaid/client/batch_subscriber.h"
#include "alkaid/format/builder_binary.h"
#include "alkaid/format/builder_primitive.h"
#include "alkaid/format/ipc/message_template.h"
#include "alkaid/format/pretty_print.h"
#include "alkaid/format/validate.h"
#include "alkaid/shm/channel.h"

namespace client = alkaid::client;
namespace format = alkaid::format;
namespace shm = alkaid::shm;
using format::ipc::RecordBatchMessageTemplate;
using namespace std::chrono_literals;

namespace {

format::SchemaPtr Schema() {
  return format::schema({format::field("v", format::int64()), format::field("s", format::utf8())});
}

// An honest batch of `rows` rows built in the channel and published with
// Publish (its Message is the filled template).
void PublishHonest(client::BatchPublisher* publisher, int64_t rows) {
  auto pool = publisher->NewPool(4096);
  if (!pool.ok()) return;
  format::Int64Builder v(pool->get());
  format::StringBuilder s(pool->get());
  for (int64_t r = 0; r < rows; ++r) {
    (void)v.Append(r);
    (void)s.Append(std::string_view("honest").substr(0, static_cast<size_t>(r % 7)));
  }
  auto a = v.Finish();
  auto b = s.Finish();
  if (!a.ok() || !b.ok()) return;
  auto batch = format::RecordBatch::Make(Schema(), rows, {*a, *b});
  if (batch.ok()) (void)publisher->Publish(**batch, pool->get());
}

// Reads every value of `batch` (after full validation).
void Touch(const format::RecordBatch& batch) {
  if (!format::ValidateFull(batch).ok()) return;
  for (int c = 0; c < batch.num_columns(); ++c) {
    auto column = batch.column(c);
    for (int64_t r = 0; r < batch.num_rows(); ++r) (void)format::FormatValue(*column, r);
  }
}

struct Reader {
  const uint8_t* data;
  size_t size;
  size_t pos = 0;
  bool Take(void* out, size_t n) {
    if (size - pos < n) return false;
    std::memcpy(out, data + pos, n);
    pos += n;
    return true;
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static int run = 0;
  const std::string name =
      "alkaid_fuzz_vp" + std::to_string(::getpid()) + "_" + std::to_string(run++);
  (void)shm::RemoveChannel(name);
  shm::ChannelOptions o;
  o.slot_count = 64;
  o.inline_capacity = 448;
  o.arena_bytes = 1 << 20;
  o.publish_timeout = 10ms;
  o.space_timeout = 10ms;
  auto producer = shm::ChannelProducer::Create(name, o);
  if (!producer.ok()) return 0;
  auto publisher = client::BatchPublisher::Create(producer->get(), Schema());
  std::vector<std::unique_ptr<client::BatchSubscriber>> subscribers;
  for (auto mode : {client::Verification::kStructure, client::Verification::kFull,
                    client::Verification::kPrivateCopy}) {
    client::SubscriberOptions so;
    so.consumer.wait_mode = shm::WaitMode::kBusyPoll;
    so.verification = mode;
    auto s = client::BatchSubscriber::Open(name, Schema(), so);
    if (s.ok()) subscribers.push_back(std::move(*s));
  }
  auto tmpl = RecordBatchMessageTemplate::Make(2, 5);
  if (!publisher.ok() || subscribers.size() != 3 || !tmpl.ok()) {
    subscribers.clear();
    producer->reset();
    (void)shm::RemoveChannel(name);
    return 0;
  }
  (void)(*producer)->AcceptConsumers();
  // Two honest batches of one structure: the plan.
  PublishHonest(publisher->get(), 5);
  PublishHonest(publisher->get(), 9);

  Reader in{data, size};
  int messages = 2;
  std::vector<uint8_t> md(tmpl->size());
  while (in.pos < in.size && messages < 48) {
    uint8_t flags = 0;
    int64_t rows = 0;
    int64_t body_length = 0;
    uint16_t body_bytes = 0;
    RecordBatchMessageTemplate::Node nodes[2];
    RecordBatchMessageTemplate::Range ranges[5];
    if (!in.Take(&flags, 1) || !in.Take(&rows, 8) || !in.Take(nodes, sizeof nodes) ||
        !in.Take(ranges, sizeof ranges) || !in.Take(&body_length, 8) || !in.Take(&body_bytes, 2)) {
      break;
    }
    const size_t n = std::min<size_t>(body_bytes, in.size - in.pos);
    tmpl->Fill(rows, body_length, nodes, ranges, md.data());
    auto loan = (*producer)->Loan(std::max<size_t>(n, 1));
    if (!loan.ok()) break;
    if (n > 0) std::memcpy(loan->data().data(), data + in.pos, n);
    in.pos += n;
    // The user word: a record batch, the body length the slot says.
    const uint64_t slot_body =
        (flags & 2) != 0 ? static_cast<uint64_t>(body_length) & ((uint64_t{1} << 40) - 1) : n;
    if (!(*producer)->Publish(std::as_bytes(std::span(md)), std::move(*loan), slot_body, 0).ok()) {
      break;
    }
    ++messages;
    if ((flags & 1) != 0) {
      PublishHonest(publisher->get(), 1 + (messages % 11));
      ++messages;
    }
  }
  PublishHonest(publisher->get(), 3);
  (*producer)->Close();
  for (auto& subscriber : subscribers) {
    for (int i = 0; i < 4 * messages + 16; ++i) {
      auto got = subscriber->TryReceive();
      if (!got.ok()) {
        if (got.status().IsEndOfStream()) break;
        continue;
      }
      if (got->batch == nullptr) break;
      Touch(*got->batch);
    }
  }
  subscribers.clear();
  publisher->reset();
  producer->reset();
  (void)shm::RemoveChannel(name);
  return 0;
}
