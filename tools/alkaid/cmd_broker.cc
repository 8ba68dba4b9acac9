// alkaid topics / publish / subscribe: the broker from the command line.
// Row topics: `publish --unsafe-row` encodes each batch as UnsafeRows
// (RowProducer); `subscribe` converts received rows to record batches
// (Consumer::Next).

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <iostream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "alkaid/client/broker_client.h"
#include "alkaid/client/consumer.h"
#include "alkaid/client/producer.h"
#include "alkaid/client/row_producer.h"
#include "alkaid/format/ipc/io.h"
#include "alkaid/format/ipc/writer.h"
#include "batch_source.h"
#include "commands.h"
#include "output.h"

namespace alkaid::tools {

namespace ipc = format::ipc;

namespace {

// "64 MiB", "11.7 GiB", "512 KiB", "100 bytes": whole units without
// decimals, one decimal (rounded down) otherwise; as the broker logs them.
std::string HumanBytes(uint64_t bytes) {
  static constexpr const char* kUnits[] = {"KiB", "MiB", "GiB", "TiB"};
  if (bytes < 1024) return std::to_string(bytes) + (bytes == 1 ? " byte" : " bytes");
  uint64_t unit = 1024;
  std::size_t u = 0;
  while (u + 1 < std::size(kUnits) && bytes / unit >= 1024) {
    unit <<= 10;
    ++u;
  }
  std::string text = std::to_string(bytes / unit);
  if (bytes % unit != 0) text += "." + std::to_string(bytes % unit * 10 / unit);
  return text + " " + kUnits[u];
}

const char* PolicyName(shm::SlowConsumerPolicy policy) {
  return policy == shm::SlowConsumerPolicy::kDropOldest ? "drop-oldest" : "block-producer";
}

// "shm limit 32 MiB (half of /dev/shm's 64 MiB), 0 bytes in use by
// producers; /dev/shm: 64 MiB free of 64 MiB".
std::string ShmLine(const client::BrokerStatus& s) {
  std::string line =
      s.shm_limit == 0 ? std::string("no shm limit") : "shm limit " + HumanBytes(s.shm_limit);
  if (!s.shm_limit_origin.empty()) line += " (" + s.shm_limit_origin + ")";
  line += ", " + HumanBytes(s.reserved_bytes) + " in use by producers";
  if (s.shm_total != 0) {
    line += "; /dev/shm: " + HumanBytes(s.shm_free) + " free of " + HumanBytes(s.shm_total);
  }
  return line;
}

int PrintTopicsJson(const client::BrokerStatus& stats,
                    const std::vector<client::TopicStatus>& topics,
                    const std::vector<client::AwaitedTopic>& awaited) {
  nlohmann::ordered_json doc;
  doc["broker"] = {{"name", stats.name},
                   {"pid", stats.pid},
                   {"shm_limit_bytes", stats.shm_limit},
                   {"shm_limit_origin", stats.shm_limit_origin},
                   {"shm_in_use_bytes", stats.reserved_bytes},
                   {"shm_total_bytes", stats.shm_total},
                   {"shm_free_bytes", stats.shm_free}};
  nlohmann::ordered_json list = nlohmann::ordered_json::array();
  for (const auto& t : topics) {
    list.push_back({{"name", t.name},
                    {"producers", t.producers},
                    {"consumers", t.consumers},
                    {"published", t.published},
                    {"depth", t.depth},
                    {"drops", t.drops},
                    {"held", t.held},
                    {"slot_count", t.slot_count},
                    {"arena_bytes", t.arena_bytes},
                    {"max_arena_bytes", t.max_arena_bytes},
                    {"shm_bytes", t.shm_bytes},
                    {"policy", PolicyName(t.policy)},
                    {"kind", client::TopicKindName(t.kind)},
                    {"publish_timestamps", t.publish_timestamps},
                    {"published_bytes", t.published_bytes},
                    // The previous release's keys, deprecated (deprecated_keys).
                    {"ring_slots", t.slot_count},
                    {"segment_bytes", t.arena_bytes},
                    {"max_segment_bytes", t.max_arena_bytes}});
  }
  doc["topics"] = std::move(list);
  // Old key -> new key, for one release (docs/BROKER.md).
  doc["deprecated_keys"] = {{"ring_slots", "slot_count"},
                            {"segment_bytes", "arena_bytes"},
                            {"max_segment_bytes", "max_arena_bytes"}};
  nlohmann::ordered_json waiting = nlohmann::ordered_json::array();
  for (const auto& a : awaited) waiting.push_back({{"name", a.name}, {"consumers", a.consumers}});
  doc["awaited"] = std::move(waiting);
  // Names are [A-Za-z0-9._-] and the origin is the broker's ASCII; should
  // anything else arrive, it is replaced rather than thrown on.
  std::cout << doc.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) << "\n";
  return kExitOk;
}

}  // namespace

int RunTopics(const BrokerToolOptions& options) {
  auto client = client::BrokerClient::Connect(options.socket);
  if (!client.ok()) return ReportError("topics", client.status());
  auto topics = (*client)->ListTopics();
  if (!topics.ok()) return ReportError("topics", topics.status());
  // Topics not created yet, with consumers waiting for them.
  auto awaited = (*client)->ListAwaitedTopics();
  if (!awaited.ok()) return ReportError("topics", awaited.status());
  auto stats = (*client)->Stats();
  if (!stats.ok()) return ReportError("topics", stats.status());
  if (options.json) return PrintTopicsJson(*stats, *topics, *awaited);
  std::cout << std::left << std::setw(24) << "TOPIC" << std::right << std::setw(10) << "PRODUCERS"
            << std::setw(10) << "CONSUMERS" << std::setw(12) << "PUBLISHED" << std::setw(8)
            << "DEPTH" << std::setw(8) << "DROPS" << std::setw(8) << "HELD" << std::setw(8)
            << "SLOTS"
            << "  " << std::left << std::setw(15) << "POLICY"
            << "PAYLOAD\n";
  for (const auto& t : *topics) {
    std::cout << std::left << std::setw(24) << t.name << std::right << std::setw(10) << t.producers
              << std::setw(10) << t.consumers << std::setw(12) << t.published << std::setw(8)
              << t.depth << std::setw(8) << t.drops << std::setw(8) << t.held << std::setw(8)
              << t.slot_count << "  " << std::left << std::setw(15) << PolicyName(t.policy)
              << client::TopicKindName(t.kind) << "\n";
  }
  for (const auto& a : *awaited) {
    std::cout << std::left << std::setw(24) << a.name << std::right << std::setw(10) << 0
              << std::setw(10) << a.consumers << std::setw(12) << "-" << std::setw(8) << "-"
              << std::setw(8) << "-" << std::setw(8) << "-" << std::setw(8) << "-"
              << "  " << std::left << std::setw(15) << "-"
              << "(not created yet)\n";
  }
  // After the table and a blank line, so that scripts reading the rows
  // up to the first empty line see only topics.
  std::cout << "\n" << ShmLine(*stats) << "\n";
  return kExitOk;
}

int RunTopicsRemove(const BrokerToolOptions& options, const std::string& topic) {
  auto client = client::BrokerClient::Connect(options.socket);
  if (!client.ok()) return ReportError("topics rm", client.status());
  const Status removed = (*client)->RemoveTopic(topic);
  if (!removed.ok()) return ReportError("topics rm", removed);
  std::cout << "removed topic '" << topic << "'\n";
  return kExitOk;
}

// Publishes every batch of `input` through `producer` (a Producer or a
// RowProducer) with `publish`, then ends the stream.
template <typename ProducerType, typename PublishFn>
int PublishAll(BatchSource& input, ProducerType& producer, const std::string& topic,
               PublishFn publish) {
  // While stdin is idle, consumers that register are still accepted (and
  // with --from-oldest get what the channel holds).
  input.set_idle([&producer] { producer.Poll(); });
  while (true) {
    auto batch = input.Next();
    if (!batch.ok()) {
      const Status closed =
          producer.Close();  // subscribers get what was complete, then end of stream
      return ReportError(
          "publish",
          Status(batch.status().code(), batch.status().message() + "; the " +
                                            std::to_string(input.batches_read()) +
                                            " complete batches before it were published to '" +
                                            topic + "', then its stream was ended" +
                                            (closed.ok() ? "" : " (" + closed.ToString() + ")")));
    }
    if (*batch == nullptr) break;
    const Status st = publish(producer, **batch);
    if (!st.ok()) {
      return ReportError("publish",
                         st.WithContext("batch " + std::to_string(input.batches_read() - 1)));
    }
  }
  const Status st = producer.Close();
  if (!st.ok()) return ReportError("publish", st);
  return kExitOk;
}

// The schema creates the topic at once; each batch (with the dictionaries
// it needs) is published as soon as it is read, so a live feed on stdin is
// published as it arrives; end of stream when the input ends. An input
// that ends inside a message: what was complete is published, the stream
// is ended, and the error is reported.
int RunPublish(const PublishOptions& options) {
#ifdef ALKAID_HAVE_FLIGHT
  if (IsFlightTarget(options.topic)) return RunFlightPublish(options);
#endif
  auto source = BatchSource::Open(options.input);
  if (!source.ok()) return ReportError("publish", source.status());
  BatchSource& input = **source;
  client::ProducerOptions producer_options;
  producer_options.socket_path = options.socket;
  producer_options.topic.arena_bytes = options.arena_bytes;
  producer_options.topic.slot_count = options.slot_count;
  producer_options.topic.publish_timestamps = options.timestamps;
  if (options.policy == "drop-oldest") {
    producer_options.topic.policy = shm::SlowConsumerPolicy::kDropOldest;
  }
  if (options.unsafe_row) {
    auto producer = client::RowProducer::Open(options.topic, input.schema(), producer_options);
    if (!producer.ok()) return ReportError("publish", producer.status());
    return PublishAll(input, **producer, options.topic,
                      [](client::RowProducer& rows, const format::RecordBatch& batch) {
                        return rows.PublishRows(batch);
                      });
  }
  auto producer = client::Producer::Open(options.topic, input.schema(), producer_options);
  if (!producer.ok()) return ReportError("publish", producer.status());
  return PublishAll(input, **producer, options.topic,
                    [](client::Producer& batches, const format::RecordBatch& batch) {
                      return batches.PublishCopy(batch);
                    });
}

int RunSubscribe(const SubscribeOptions& options) {
#ifdef ALKAID_HAVE_FLIGHT
  if (IsFlightTarget(options.topic)) return RunFlightSubscribe(options);
#endif
  // Without --timeout, wait as long as it takes (in long slices).
  const auto timeout = options.timeout_seconds > 0
                           ? std::chrono::nanoseconds(
                                 static_cast<int64_t>(std::llround(options.timeout_seconds * 1e9)))
                           : std::chrono::nanoseconds(std::chrono::hours(1));
  client::ConsumerOptions consumer_options;
  consumer_options.socket_path = options.socket;
  consumer_options.from_oldest = options.from_oldest;
  consumer_options.verification = options.private_copy         ? client::Verification::kPrivateCopy
                                  : options.validate == "full" ? client::Verification::kFull
                                                               : client::Verification::kStructure;
  consumer_options.columns = options.columns;
  // Whatever the topic carries: rows arrive as record batches too.
  consumer_options.kind = std::nullopt;
  // Waiting with the broker for a topic that does not exist yet: every
  // batch from the first one arrives, whoever starts first.
  consumer_options.wait_for_topic =
      options.timeout_seconds > 0
          ? std::max(std::chrono::milliseconds(1),
                     std::chrono::duration_cast<std::chrono::milliseconds>(timeout))
          : std::chrono::milliseconds::max();
  auto consumer = client::Consumer::Open(options.topic, consumer_options);
  if (!consumer.ok()) return ReportError("subscribe", consumer.status());

  std::shared_ptr<ipc::FileOutputStream> sink;
  auto opened = options.out == "-" ? ipc::FileOutputStream::FromDescriptor(1)
                                   : ipc::FileOutputStream::Open(options.out);
  if (!opened.ok()) return ReportError("subscribe", opened.status());
  sink = *opened;
  auto writer = ipc::MakeStreamWriter(sink.get(), (*consumer)->schema());
  if (!writer.ok()) return ReportError("subscribe", writer.status());

  int64_t received = 0;
  while (options.count < 0 || received < options.count) {
    auto batch = (*consumer)->Next(timeout);
    if (!batch.ok()) {
      const StatusCode code = batch.status().code();
      if (code == StatusCode::kEndOfStream) break;
      if (code == StatusCode::kTimedOut && options.timeout_seconds > 0) break;
      if (code == StatusCode::kTimedOut) continue;
      return ReportError("subscribe", batch.status());
    }
    const Status st = (*writer)->WriteRecordBatch(**batch);
    if (!st.ok()) return ReportError("subscribe", st);
    ++received;
  }
  Status st = (*writer)->Close();
  if (st.ok()) st = sink->Close();
  if (!st.ok()) return ReportError("subscribe", st);
  (void)(*consumer)->Close();
  return kExitOk;
}

}  // namespace alkaid::tools
