// alkaid-measure --layer inproc: the client's data path alone, in one
// thread, for profilers. A BatchPublisher and a BatchSubscriber on one
// channel (no broker, no second process): each iteration publishes a batch
// of one int64 column x 64 rows (512 B), receives it (TryReceive(&batch): the
// RecordBatch made by the shape's decode plan), checks its first and last
// value (every value during the warm-up) and drops it, as a consumer that
// keeps up does. Under callgrind the count at N = 30,000 minus the count at
// N = 10,000, over 20,000, is the instructions per batch (start-up cancels);
// see docs/PERFORMANCE.md.

#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <memory>
#include <string>

#include "alkaid/client/batch_publisher.h"
#include "alkaid/client/batch_subscriber.h"
#include "alkaid/format/array.h"
#include "alkaid/format/builder_binary.h"
#include "alkaid/format/builder_primitive.h"
#include "alkaid/shm/channel.h"
#include "latency_inproc_values.h"
#include "latency_internal.h"

namespace alkaid::tools::latency {

namespace {

using namespace std::chrono_literals;

constexpr int64_t kRows = kInprocRows;

// Builds batch `i` (every value i) in a fresh region and publishes it. The
// loop's helpers keep the shape of the loop's first home, shm_stream_bench
// (the values taken out of their Results, the helpers inlined), so that the
// count is the same: the figure is the data path's, not the harness's. A
// Result in error here would be a broken invariant of a loop with nothing to
// wait for (ValueOrDie aborts with its status). The builder is kept from
// batch to batch and pointed at each batch's pool (ArrayBuilder::ResetTo), as
// a producer that builds every batch alike does.
[[gnu::always_inline]] inline Status PublishOne(client::BatchPublisher* publisher,
                                                format::Int64Builder* builder,
                                                const format::SchemaPtr& schema, int64_t i) {
  auto pool = publisher->NewPool(kRows * 8).ValueOrDie();
  ALKAID_RETURN_NOT_OK(builder->ResetTo(pool.get()));
  ALKAID_RETURN_NOT_OK(builder->Reserve(kRows));
  // Unrolled: g++ -O2 keeps the plain loop one value per six instructions
  // (the store, the builder's end and length, the loop's count, compare and
  // branch); eight a round store at fixed offsets of one end pointer.
#pragma GCC unroll 8
  for (int64_t r = 0; r < kRows; ++r) builder->UnsafeAppend(i);
  auto array = builder->Finish().ValueOrDie();
  auto batch = format::RecordBatch::Make(schema, kRows, {array}).ValueOrDie();
  return publisher->Publish(*batch, pool.get());
}

// The same batch through a FixedShapeWriter: values written in place (all
// of them, so the region needs no copy of the prototype first). Each holds
// i (FillBatchValues), as the stream's bodies hold their sequence number.
[[gnu::always_inline]] inline Status PublishOneFixed(client::FixedShapeWriter* writer, int64_t i) {
  ALKAID_RETURN_NOT_OK(writer->Begin(client::FixedShapeWriter::Fill::kNone));
  FillBatchValues(reinterpret_cast<int64_t*>(writer->buffer(1).data()), i);
  return writer->Publish();
}

// A writer for batches of kRows int64 values, from a prototype built once.
Result<std::unique_ptr<client::FixedShapeWriter>> NewWriter(client::BatchPublisher* publisher,
                                                            const format::SchemaPtr& schema) {
  ALKAID_ASSIGN_OR_RAISE(auto pool, publisher->NewPool(kRows * 8));
  format::Int64Builder builder(pool.get());
  ALKAID_RETURN_NOT_OK(builder.Reserve(kRows));
  for (int64_t r = 0; r < kRows; ++r) builder.UnsafeAppend(r);
  ALKAID_ASSIGN_OR_RAISE(auto array, builder.Finish());
  ALKAID_ASSIGN_OR_RAISE(auto batch, format::RecordBatch::Make(schema, kRows, {array}));
  return publisher->NewFixedShapeWriter(*batch, *pool);
}

// Receives batch `i` by the batch-only call Consumer::Next uses (no
// ReceivedBatch, whose metadata and body pointers a caller that wants the
// batch does not need) and checks its values (CheckBatchValues: its first
// and last, or with `every` all of them).
template <bool every>
[[gnu::always_inline]] inline Status ReceiveBatch(client::BatchSubscriber* sub, int64_t i) {
  format::RecordBatchPtr batch;
  ALKAID_RETURN_NOT_OK(sub->TryReceive(&batch));
  if (batch == nullptr) return Status::Invalid("batch ", i, " was published, not received");
  const format::ArrayData& column = *batch->column_data(0);
  return CheckBatchValues<every>(column.GetValues<int64_t>(1), column.length, i);
}

// --writer strings: batches of the int64 column and a utf8 one whose
// values change with the batch: row 0 holds i mod 61 letters, the others 1
// to 5. The data's length repeats only every 305 batches, so no two of the
// last four Messages are equal (the byte-keyed decode cache never serves
// them): every batch has Message numbers of its own, what the publisher's
// Message template and the subscriber's plans of varying numbers are for.
format::SchemaPtr StringSchema() {
  return format::schema(
      {format::field("v", format::int64(), false), format::field("s", format::utf8(), false)});
}

constexpr std::string_view kWords[] = {"a", "bc", "def", "ghij", "klmno"};
constexpr std::string_view kLetters =
    "abcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyzabcdefghi";
static_assert(kLetters.size() == 61);

// Row r of batch i's utf8 column.
std::string_view WordOf(int64_t i, int64_t r) {
  return r == 0 ? kLetters.substr(0, static_cast<size_t>(i % 61)) : kWords[(i + r) % 5];
}

// Publishes batch `i` one way or the other, and receives it.
struct Source {
  client::BatchPublisher* publisher;
  client::BatchSubscriber* sub;
  client::FixedShapeWriter* writer;  // null: build each batch
  format::SchemaPtr schema;
  format::Int64Builder* builder;  // the builder of each built batch
  [[gnu::always_inline]] Status Publish(int64_t i) const {
    return writer != nullptr ? PublishOneFixed(writer, i)
                             : PublishOne(publisher, builder, schema, i);
  }
  template <bool every>
  [[gnu::always_inline]] Status Receive(int64_t i) const {
    return ReceiveBatch<every>(sub, i);
  }
};

struct StringSource {
  client::BatchPublisher* publisher;
  client::BatchSubscriber* sub;
  format::SchemaPtr schema;
  // The first and last rows (values and words) whatever `every` says.
  template <bool every>
  [[gnu::always_inline]] Status Receive(int64_t i) const {
    return ReceiveStrings(i);
  }
  Status ReceiveStrings(int64_t i) const;
  [[gnu::always_inline]] Status Publish(int64_t i) const {
    auto pool = publisher->NewPool(4096).ValueOrDie();
    format::Int64Builder values(pool.get());
    ALKAID_RETURN_NOT_OK(values.Reserve(kRows));
    for (int64_t r = 0; r < kRows; ++r) values.UnsafeAppend(i + r);
    format::StringBuilder words(pool.get());
    ALKAID_RETURN_NOT_OK(words.Reserve(kRows));
    ALKAID_RETURN_NOT_OK(words.ReserveData(kRows * 5 + 61));
    for (int64_t r = 0; r < kRows; ++r) ALKAID_RETURN_NOT_OK(words.Append(WordOf(i, r)));
    auto batch = format::RecordBatch::Make(
                     schema, kRows, {values.Finish().ValueOrDie(), words.Finish().ValueOrDie()})
                     .ValueOrDie();
    return publisher->Publish(*batch, pool.get());
  }
};

// The first and last value (i and i + kRows - 1), and the first and last
// rows' words.
inline Status StringSource::ReceiveStrings(int64_t i) const {
  const auto got = sub->TryReceive();
  if (!got.ok()) return got.status();
  if (got->batch == nullptr) return Status::Invalid("batch ", i, " was published, not received");
  const int64_t* v = got->batch->column_data(0)->GetValues<int64_t>(1);
  const format::ArrayPtr column = got->batch->column(1);  // held: the reference below is into it
  const auto& words = static_cast<const format::StringArray&>(*column);
  if (v[0] != i || v[kRows - 1] != i + kRows - 1 || words.GetView(0) != WordOf(i, 0) ||
      words.GetView(kRows - 1) != WordOf(i, kRows - 1)) {
    return Status::Invalid("batch ", i, " has values ", v[0], "..", v[kRows - 1], " and words '",
                           words.GetView(0), "'..'", words.GetView(kRows - 1), "'");
  }
  return Status::OK();
}

// The warm-up (every value of each batch checked), then the timed loop:
// `count` batches (their first and last values checked), each dropped
// before the next publish, as a consumer that keeps up drops it. Returns
// the elapsed nanoseconds of the timed part.
template <typename S>
Result<int64_t> Run(int64_t count, const S& source) {
  for (int64_t i = 0; i < 1000; ++i) {
    ALKAID_RETURN_NOT_OK(source.Publish(i));
    ALKAID_RETURN_NOT_OK(source.template Receive<true>(i));
  }
  const int64_t t0 = NowNs();
  for (int64_t i = 0; i < count; ++i) {
    ALKAID_RETURN_NOT_OK(source.Publish(i));
    ALKAID_RETURN_NOT_OK(source.template Receive<false>(i));
  }
  return NowNs() - t0;
}

Status Loop(const RunSpec& spec, const std::string& name, Measurement* out) {
  const bool strings = spec.writer == "strings";
  const auto schema = strings ? StringSchema() : BatchSchema();
  shm::ChannelOptions o;
  o.stamp_publish_time = spec.timestamps;
  o.slot_count = 1024;
  o.inline_capacity = 448;
  o.arena_bytes = 16 << 20;
  o.max_blocks = 16384;
  o.publish_timeout = 60s;
  o.space_timeout = 60s;
  // The writer loans one size: its regions are the channel's fixed blocks
  // (ChannelOptions::fixed_block_bytes; no block table, no return queue).
  // ALKAID_MEASURE_FIXED_BLOCKS=0 leaves them out, for the figure without
  // them from the same build (docs/PERFORMANCE.md). The built loop's pools
  // loan one size too (kRows * 8 bytes), but it goes without them unless
  // ALKAID_MEASURE_FIXED_BLOCKS=1: its figure stays that of a channel
  // without them, as before.
  // NOLINTNEXTLINE(concurrency-mt-unsafe): read before the loop's threads (none) start
  const char* fixed_env = std::getenv("ALKAID_MEASURE_FIXED_BLOCKS");
  const std::string fixed_blocks = fixed_env == nullptr ? "" : fixed_env;
  if ((spec.writer == "fixed" && fixed_blocks != "0") ||
      (spec.writer == "build" && fixed_blocks == "1")) {
    o.fixed_block_bytes = kRows * 8;
  }
  ALKAID_ASSIGN_OR_RAISE(auto channel, shm::ChannelProducer::Create(name, o));
  client::SubscriberOptions so;
  so.consumer.wait_mode = shm::WaitMode::kBusyPoll;
  ALKAID_ASSIGN_OR_RAISE(auto sub, client::BatchSubscriber::Open(name, schema, so));
  ALKAID_ASSIGN_OR_RAISE(auto publisher, client::BatchPublisher::Create(channel.get(), schema));
  std::unique_ptr<client::FixedShapeWriter> writer;
  if (spec.writer == "fixed") {
    ALKAID_ASSIGN_OR_RAISE(writer, NewWriter(publisher.get(), schema));
  }
  int64_t elapsed = 0;
  if (strings) {
    ALKAID_ASSIGN_OR_RAISE(elapsed,
                           Run(spec.count, StringSource{publisher.get(), sub.get(), schema}));
  } else {
    format::Int64Builder builder;
    ALKAID_ASSIGN_OR_RAISE(elapsed, Run(spec.count, Source{publisher.get(), sub.get(), writer.get(),
                                                           schema, &builder}));
  }
  // The last batch carries a publish time exactly when the channel stamps.
  if ((sub->last_publish_ns() != 0) != spec.timestamps) {
    return Status::Invalid("the last batch's publish time is ", sub->last_publish_ns(),
                           spec.timestamps ? " with --timestamps" : " without --timestamps");
  }
  out->summary.samples = static_cast<uint64_t>(spec.count);
  out->summary.mean_ns = static_cast<double>(elapsed) / static_cast<double>(spec.count);
  out->msgs_per_s = elapsed > 0 ? static_cast<double>(spec.count) * 1e9 / elapsed : 0;
  // Users before what they map.
  sub.reset();
  writer.reset();
  publisher.reset();
  channel.reset();
  return Status::OK();
}

}  // namespace

Status MeasureInProcess(const RunSpec& spec, Measurement* out) {
  out->transport = "alkaid";
  out->layer = "inproc";
  out->mode = "spin";
  out->pattern = "stream";
  out->writer = spec.writer;
  out->timestamps = spec.timestamps;
  out->payload_bytes = spec.payload_bytes;
  const std::string name = spec.topic_prefix + ".inproc";
  Status st = Loop(spec, name, out);
  (void)shm::RemoveChannel(name);
  return st;
}

}  // namespace alkaid::tools::latency
