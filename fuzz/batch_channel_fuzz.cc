// libFuzzer target for what a BatchSubscriber reads from a hostile producer:
// every field a producer controls in a channel message beyond the slot
// itself (channel_fuzz covers that) — the user word (body length, kind,
// flags, dictionary generation), the inline payload (a Message flatbuffer
// or a region record), the shape id and the shape table's bytes, and the
// body bytes — for a schema with a dictionary-encoded column, so that
// dictionary messages, replays and batches all meet the decoder.
//
// Input: records of [u8 shape-or-0][u64 user][u16 inline length][inline
// bytes][u16 body length][body bytes]; a record whose first byte is 0xFF
// adds the rest of its inline bytes to the shape table instead. After the
// hostile messages, one honest batch is published: the subscriber must
// still receive it. Every batch the subscriber returns is fully validated
// and read. Bodies of at most 512 bytes lie in the channel's fixed blocks;
// every other receive is the batch-only TryReceive(&batch).

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "alkaid/client/batch_publisher.h"
#include "alkaid/client/batch_subscriber.h"
#include "alkaid/format/builder_dict.h"
#include "alkaid/format/builder_primitive.h"
#include "alkaid/format/pretty_print.h"
#include "alkaid/format/validate.h"
#include "alkaid/shm/channel.h"

namespace client = alkaid::client;
namespace format = alkaid::format;
namespace shm = alkaid::shm;
using namespace std::chrono_literals;

namespace {

format::SchemaPtr Schema() {
  return format::schema({format::field("x", format::int64()),
                         format::field("d", format::dictionary(format::int32(), format::utf8()))});
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
  std::span<const std::byte> Bytes(size_t n) {
    n = std::min(n, size - pos);
    auto span = std::as_bytes(std::span(data + pos, n));
    pos += n;
    return span;
  }
};

// Reads every value of `batch` (after full validation), so that an
// out-of-bounds access anywhere shows up under ASan.
void Touch(const format::RecordBatch& batch) {
  if (!format::ValidateFull(batch).ok()) return;
  for (int c = 0; c < batch.num_columns(); ++c) {
    auto column = batch.column(c);
    for (int64_t r = 0; r < batch.num_rows(); ++r) (void)format::FormatValue(*column, r);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static int run = 0;
  const std::string name =
      "alkaid_fuzz_bc" + std::to_string(::getpid()) + "_" + std::to_string(run++);
  (void)shm::RemoveChannel(name);
  shm::ChannelOptions o;
  o.slot_count = 64;
  o.inline_capacity = 256;
  o.arena_bytes = 1 << 20;
  o.shape_count = 8;
  o.accept_on_publish = false;
  o.publish_timeout = 10ms;
  o.space_timeout = 10ms;
  // Bodies of at most 512 bytes take fixed blocks (held by a count in the
  // consumer's segment), larger ones blocks of the arena.
  o.fixed_block_bytes = 512;
  auto producer = shm::ChannelProducer::Create(name, o);
  if (!producer.ok()) return 0;
  auto publisher = client::BatchPublisher::Create(producer->get(), Schema());
  client::SubscriberOptions so;
  so.consumer.wait_mode = shm::WaitMode::kBusyPoll;
  auto subscriber = client::BatchSubscriber::Open(name, Schema(), so);
  if (!publisher.ok() || !subscriber.ok()) {
    producer->reset();
    (void)shm::RemoveChannel(name);
    return 0;
  }
  (void)(*producer)->AcceptConsumers();

  Reader in{data, size};
  int messages = 0;
  while (in.pos < in.size && messages < 48) {
    uint8_t shape = 0;
    uint64_t user = 0;
    uint16_t inline_length = 0;
    uint16_t body_length = 0;
    if (!in.Take(&shape, 1) || !in.Take(&user, 8) || !in.Take(&inline_length, 2)) break;
    auto inline_bytes = in.Bytes(std::min<size_t>(inline_length, o.inline_capacity));
    if (shape == 0xFF) {
      (void)(*producer)->AddShape(inline_bytes);
      continue;
    }
    if (!in.Take(&body_length, 2)) break;
    auto body_bytes = in.Bytes(body_length);
    auto loan = (*producer)->Loan(std::max<size_t>(body_bytes.size(), 1));
    if (!loan.ok()) break;
    if (!body_bytes.empty()) std::memcpy(loan->data().data(), body_bytes.data(), body_bytes.size());
    if (!(*producer)->Publish(inline_bytes, std::move(*loan), user, shape).ok()) break;
    ++messages;
  }
  // One honest batch after the hostile ones.
  format::Int64Builder xs;
  format::DictionaryBuilder ds(format::dictionary(format::int32(), format::utf8()));
  for (int i = 0; i < 4; ++i) {
    (void)xs.Append(i);
    (void)ds.Append(std::string_view(i % 2 == 0 ? "even" : "odd"));
  }
  auto x = xs.Finish();
  auto d = ds.Finish();
  if (x.ok() && d.ok()) {
    auto batch = format::RecordBatch::Make(Schema(), 4, {*x, *d});
    if (batch.ok()) (void)(*publisher)->PublishCopy(**batch);
  }
  (*producer)->Close();
  // Receive everything: errors for bad messages, batches validated and read.
  // Every other receive by the batch-only call.
  for (int i = 0; i < 4 * messages + 16; ++i) {
    format::RecordBatchPtr batch;
    alkaid::Status st;
    if (i % 2 == 0) {
      auto got = (*subscriber)->TryReceive();
      if (got.ok()) batch = std::move(got->batch);
      st = got.status();
    } else {
      st = (*subscriber)->TryReceive(&batch);
    }
    if (!st.ok()) {
      if (st.IsEndOfStream()) break;
      continue;
    }
    if (batch == nullptr) break;
    Touch(*batch);
  }
  subscriber->reset();
  publisher->reset();
  producer->reset();
  (void)shm::RemoveChannel(name);
  return 0;
}
