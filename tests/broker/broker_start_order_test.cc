// Whoever starts first: consumers that subscribe before their topic exists
// receive every batch from the first one (ConsumerOptions::wait_for_topic,
// `alkaid subscribe`, the example consumer), consumers joining a live
// producer with --from-oldest get what its channel holds, and `alkaid publish -`
// publishes each batch as soon as it is read from stdin. Real processes
// against a real alkaid-broker; every wait is for a condition, with a bound
// only as a failure guard.

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <future>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "alkaid/client/broker_client.h"
#include "alkaid/client/consumer.h"
#include "alkaid/client/producer.h"
#include "alkaid/client/row_consumer.h"
#include "alkaid/format/array.h"
#include "alkaid/format/builder_binary.h"
#include "alkaid/format/builder_primitive.h"
#include "alkaid/format/compare.h"
#include "alkaid/format/ipc/io.h"
#include "alkaid/format/ipc/reader.h"
#include "alkaid/format/ipc/writer.h"
#include "broker_process.h"
#include "broker_test_util.h"
#include "test_util.h"

namespace alkaid::broker {
namespace {

using client::BrokerClient;
using client::Consumer;
using client::Producer;
using testing::AwaitingConsumers;
using testing::BrokerProcess;
using testing::ReadFile;
using testing::WaitUntil;
using namespace std::chrono_literals;

// Failure guard of every wait below: reaching it fails the test.
constexpr auto kGuard = 30s;

format::SchemaPtr DataSchema() {
  return format::schema({format::field("id", format::int64(), false),
                         format::field("name", format::utf8()),
                         format::field("score", format::float64())});
}

// Batch `b` of the test stream: 5 + 3b rows of distinct values, with nulls.
Result<format::RecordBatchPtr> DataBatch(int b) {
  const int64_t rows = 5 + 3 * int64_t{b};
  format::Int64Builder ids;
  format::StringBuilder names;
  format::DoubleBuilder scores;
  for (int64_t i = 0; i < rows; ++i) {
    const int64_t id = int64_t{b} * 1000 + i;
    ALKAID_RETURN_NOT_OK(ids.Append(id));
    if (i % 4 == 3) {
      ALKAID_RETURN_NOT_OK(names.AppendNull());
    } else {
      ALKAID_RETURN_NOT_OK(names.Append("name-" + std::to_string(id)));
    }
    if (i % 5 == 4) {
      ALKAID_RETURN_NOT_OK(scores.AppendNull());
    } else {
      ALKAID_RETURN_NOT_OK(scores.Append(static_cast<double>(id) / 8));
    }
  }
  ALKAID_ASSIGN_OR_RAISE(auto a, ids.Finish());
  ALKAID_ASSIGN_OR_RAISE(auto n, names.Finish());
  ALKAID_ASSIGN_OR_RAISE(auto s, scores.Finish());
  return format::RecordBatch::Make(DataSchema(), rows, {a, n, s});
}

int64_t FirstId(const format::RecordBatch& batch) {
  return std::static_pointer_cast<format::Int64Array>(batch.column(0))->Value(0);
}

// An IPC stream of `count` test batches, and where each message ends:
// ends[0] after the schema, ends[i] after batch i - 1, the last one after
// the end-of-stream marker.
struct EncodedStream {
  std::vector<format::RecordBatchPtr> batches;
  std::shared_ptr<format::Buffer> bytes;
  std::vector<int64_t> ends;
};

Result<EncodedStream> EncodeStream(int count) {
  EncodedStream out;
  ALKAID_ASSIGN_OR_RAISE(auto sink, format::ipc::BufferOutputStream::Create());
  ALKAID_ASSIGN_OR_RAISE(auto writer, format::ipc::MakeStreamWriter(sink.get(), DataSchema()));
  ALKAID_ASSIGN_OR_RAISE(int64_t at, sink->Tell());
  if (at == 0) return Status::Invalid("the stream writer wrote no schema at creation");
  out.ends.push_back(at);
  for (int b = 0; b < count; ++b) {
    ALKAID_ASSIGN_OR_RAISE(auto batch, DataBatch(b));
    ALKAID_RETURN_NOT_OK(writer->WriteRecordBatch(*batch));
    ALKAID_ASSIGN_OR_RAISE(at, sink->Tell());
    out.ends.push_back(at);
    out.batches.push_back(std::move(batch));
  }
  ALKAID_RETURN_NOT_OK(writer->Close());
  ALKAID_ASSIGN_OR_RAISE(at, sink->Tell());
  out.ends.push_back(at);
  ALKAID_ASSIGN_OR_RAISE(out.bytes, sink->Finish());
  return out;
}

bool WriteAll(int fd, const uint8_t* data, int64_t size) {
  while (size > 0) {
    const ssize_t n = ::write(fd, data, static_cast<size_t>(size));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data += n;
    size -= n;
  }
  return true;
}

// Writes bytes [from, to) of the stream to `fd`.
bool WriteRange(int fd, const EncodedStream& stream, int64_t from, int64_t to) {
  return WriteAll(fd, stream.bytes->data() + from, to - from);
}

// Runs `args` with stdin from `stdin_fd` (-1: inherited) and stdout and
// stderr to files ("": inherited); `socket` as ALKAID_BROKER_SOCKET.
pid_t SpawnWith(const std::vector<std::string>& args, int stdin_fd, const std::string& out,
                const std::string& err, const std::string& socket = "") {
  const pid_t pid = testing::ForkTestChild();
  if (pid == 0) {
    if (stdin_fd >= 0) ::dup2(stdin_fd, 0);
    for (const auto& [path, fd] : {std::pair{out, 1}, std::pair{err, 2}}) {
      if (path.empty()) continue;
      const int f = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
      if (f >= 0) ::dup2(f, fd);
    }
    if (!socket.empty()) ::setenv("ALKAID_BROKER_SOCKET", socket.c_str(), 1);
    testing::ExecOrExit(args);
  }
  return pid;
}

// `topic`'s status, if the broker has it.
std::optional<client::TopicStatus> Topic(const std::string& socket, const std::string& topic) {
  auto client = BrokerClient::Connect(socket);
  if (!client.ok()) return std::nullopt;
  auto topics = (*client)->ListTopics();
  if (!topics.ok()) return std::nullopt;
  for (const auto& t : *topics) {
    if (t.name == topic) return t;
  }
  return std::nullopt;
}

// The batches of the IPC stream file at `path` (fails on a bad stream).
Result<std::vector<format::RecordBatchPtr>> ReadStreamFile(const std::string& path,
                                                           format::SchemaPtr* schema) {
  ALKAID_ASSIGN_OR_RAISE(auto input, format::ipc::FileInputStream::Open(path));
  ALKAID_ASSIGN_OR_RAISE(auto reader, format::ipc::RecordBatchStreamReader::Open(input));
  *schema = reader->schema();
  return reader->ReadAll();
}

// Complete batches at the start of a stream file that is still being
// written (a StreamDecoder over what is there).
int64_t BatchesSoFar(const std::string& path) {
  auto bytes = format::ipc::ReadWholeFile(path);
  if (!bytes.ok()) return 0;
  auto collect = std::make_shared<format::ipc::CollectListener>();
  format::ipc::StreamDecoder decoder(collect);
  if (!decoder.Consume(*bytes).ok()) return 0;
  return static_cast<int64_t>(collect->batches().size());
}

// Every file's stream holds exactly the schema and batches of `expected`,
// value by value.
void ExpectStreams(const std::vector<std::string>& paths, const EncodedStream& expected) {
  for (const auto& path : paths) {
    SCOPED_TRACE(path);
    format::SchemaPtr schema;
    ASSERT_OK_AND_ASSIGN(auto batches, ReadStreamFile(path, &schema));
    EXPECT_TRUE(schema->Equals(*DataSchema()));
    ASSERT_EQ(batches.size(), expected.batches.size());
    for (std::size_t i = 0; i < batches.size(); ++i) {
      ASSERT_OK(format::CheckRecordBatchEquals(*expected.batches[i], *batches[i]));
    }
  }
}

class StartOrderTest : public testing::BrokerWithDirTest {
 protected:
  client::ConsumerOptions Waiting() const {
    client::ConsumerOptions options;
    options.socket_path = broker_.socket();
    options.wait_for_topic = kGuard;
    return options;
  }
};

// The examples as in docs/BROKER.md's three terminals: the consumer
// started first waits for the topic, the producer creates it and publishes
// at once; the consumer counts exactly what the producer published.
TEST_F(StartOrderTest, ExampleConsumerStartedFirstCountsEveryBatch) {
#if !defined(ALKAID_EXAMPLE_CONSUMER)
  GTEST_SKIP() << "examples not built (ALKAID_BUILD_EXAMPLES=OFF)";
#else
  const std::string consumer_out = dir_ + "/consumer.out";
  const std::string producer_out = dir_ + "/producer.out";
  const pid_t consumer =
      SpawnWith({ALKAID_EXAMPLE_CONSUMER, "readings"}, -1, consumer_out, "", broker_.socket());
  ASSERT_TRUE(WaitUntil([&] { return AwaitingConsumers(broker_.socket(), "readings") == 1; }))
      << "the example consumer does not wait for the topic with the broker";
  const pid_t producer = SpawnWith({ALKAID_EXAMPLE_PRODUCER, "readings", "12"}, -1, producer_out,
                                   "", broker_.socket());
  ASSERT_EQ(testing::Wait(producer), 0);
  ASSERT_EQ(testing::Wait(consumer), 0);

  std::istringstream published(ReadFile(producer_out));
  int lines = 0;
  for (std::string line; std::getline(published, line);) {
    if (line.rfind("published batch ", 0) == 0) ++lines;
  }
  EXPECT_EQ(lines, 12);
  const std::string received = ReadFile(consumer_out);
  EXPECT_NE(received.find("\n" + std::to_string(lines) + " batches, " +
                          std::to_string(lines * 1000) + " rows\n"),
            std::string::npos)
      << received;
  EXPECT_NE(received.find("batch 1: 1000 rows"), std::string::npos) << received;
#endif
}

// Four `alkaid subscribe` started before the topic exists (with each
// verification: the default, --validate structure and full, --private-copy),
// then `alkaid publish FILE` of a multi-batch stream: each writes every
// batch.
TEST_F(StartOrderTest, SubscribersStartedBeforeTheTopicGetEveryBatch) {
  ASSERT_OK_AND_ASSIGN(auto stream, EncodeStream(8));
  const std::string input = dir_ + "/in.stream";
  {
    ASSERT_OK_AND_ASSIGN(auto file, format::ipc::FileOutputStream::Open(input));
    ASSERT_OK(file->Write(*stream.bytes));
    ASSERT_OK(file->Close());
  }
  std::vector<std::string> outs;
  std::vector<pid_t> subscribers;
  for (int i = 0; i < 4; ++i) {
    outs.push_back(dir_ + "/out" + std::to_string(i) + ".stream");
    std::vector<std::string> args = {ALKAID_TOOL_BIN, "subscribe", "T",  "--out",
                                     outs[i],         "--timeout", "20", "--socket",
                                     broker_.socket()};
    if (i == 1) args.insert(args.end(), {"--validate", "structure"});
    if (i == 2) args.insert(args.end(), {"--validate", "full"});
    if (i == 3) args.emplace_back("--private-copy");
    subscribers.push_back(testing::Spawn(args));
  }
  ASSERT_TRUE(WaitUntil([&] { return AwaitingConsumers(broker_.socket(), "T") == 4; }));
  // `alkaid topics` shows them waiting.
  const std::string listing = dir_ + "/topics.out";
  ASSERT_EQ(testing::Wait(
                testing::Spawn({ALKAID_TOOL_BIN, "topics", "--socket", broker_.socket()}, listing)),
            0);
  std::istringstream lines(ReadFile(listing));
  bool listed = false;
  for (std::string line; std::getline(lines, line);) {
    std::istringstream fields(line);
    std::string name;
    uint32_t producers = 9, consumers = 0;
    fields >> name >> producers >> consumers;
    if (name == "T") {
      listed =
          producers == 0 && consumers == 4 && line.find("(not created yet)") != std::string::npos;
    }
  }
  EXPECT_TRUE(listed) << ReadFile(listing);

  const pid_t publish =
      testing::Spawn({ALKAID_TOOL_BIN, "publish", "T", input, "--socket", broker_.socket()});
  ASSERT_EQ(testing::Wait(publish), 0);
  for (pid_t pid : subscribers) EXPECT_EQ(testing::Wait(pid), 0);
  ExpectStreams(outs, stream);
  auto status = Topic(broker_.socket(), "T");
  ASSERT_TRUE(status.has_value());
  EXPECT_EQ(status->published, 8u);
}

// The producer first: `alkaid publish -` has published every batch and
// still runs (stdin open); four `alkaid subscribe --from-oldest` started
// then get every batch from the producer's channel, then end of stream.
TEST_F(StartOrderTest, SubscribersFromOldestJoiningAProducerGetEveryBatch) {
  ASSERT_OK_AND_ASSIGN(auto stream, EncodeStream(8));
  int pipe_fds[2];
  ASSERT_EQ(::pipe2(pipe_fds, O_CLOEXEC), 0);
  const pid_t publish = SpawnWith(
      {ALKAID_TOOL_BIN, "publish", "T", "-", "--socket", broker_.socket()}, pipe_fds[0], "", "");
  ::close(pipe_fds[0]);
  // Everything but the end-of-stream marker: the producer stays.
  const int64_t before_eos = stream.ends[stream.ends.size() - 2];
  ASSERT_TRUE(WriteRange(pipe_fds[1], stream, 0, before_eos));
  ASSERT_TRUE(WaitUntil([&] {
    auto t = Topic(broker_.socket(), "T");
    return t.has_value() && t->published == 8;
  })) << "alkaid publish did not publish the batches it has read";

  std::vector<std::string> outs;
  std::vector<pid_t> subscribers;
  for (int i = 0; i < 4; ++i) {
    outs.push_back(dir_ + "/out" + std::to_string(i) + ".stream");
    subscribers.push_back(
        testing::Spawn({ALKAID_TOOL_BIN, "subscribe", "T", "--out", outs[i], "--from-oldest",
                        "--timeout", "20", "--socket", broker_.socket()}));
  }
  for (const auto& out : outs) {
    ASSERT_TRUE(WaitUntil([&] { return BatchesSoFar(out) == 8; })) << out;
  }
  // End of stream: the subscribers end too.
  ASSERT_TRUE(WriteRange(pipe_fds[1], stream, before_eos, stream.bytes->size()));
  ::close(pipe_fds[1]);
  ASSERT_EQ(testing::Wait(publish), 0);
  for (pid_t pid : subscribers) EXPECT_EQ(testing::Wait(pid), 0);
  ExpectStreams(outs, stream);
}

// `alkaid publish T -` fed by a pipe: the topic exists once the schema is
// written, and a consumer (waiting since before) reads the first batch
// while stdin is still open; then the rest, then end of stream.
TEST_F(StartOrderTest, PipedPublishPublishesEachBatchBeforeStdinEnds) {
  ASSERT_OK_AND_ASSIGN(auto stream, EncodeStream(5));
  int pipe_fds[2];
  ASSERT_EQ(::pipe2(pipe_fds, O_CLOEXEC), 0);
  const pid_t publish = SpawnWith(
      {ALKAID_TOOL_BIN, "publish", "T", "-", "--socket", broker_.socket()}, pipe_fds[0], "", "");
  ::close(pipe_fds[0]);

  std::promise<int64_t> first;
  std::vector<format::RecordBatchPtr> received;
  Status ended;
  std::thread reader([&] {
    auto consumer = Consumer::Open("T", Waiting());
    if (!consumer.ok()) {
      first.set_value(-1);
      ended = consumer.status();
      return;
    }
    while (true) {
      auto batch = (*consumer)->Next(kGuard);
      if (!batch.ok()) {
        if (received.empty()) first.set_value(-1);
        ended = batch.status();
        return;
      }
      received.push_back(*batch);
      if (received.size() == 1) first.set_value(FirstId(**batch));
    }
  });
  ASSERT_TRUE(WaitUntil([&] { return AwaitingConsumers(broker_.socket(), "T") == 1; }));
  // The schema and the first batch; stdin stays open.
  ASSERT_TRUE(WriteRange(pipe_fds[1], stream, 0, stream.ends[1]));
  auto got_first = first.get_future();
  const bool in_time = got_first.wait_for(kGuard) == std::future_status::ready;
  // The rest, then end of input (also after a failure: the reader ends).
  EXPECT_TRUE(WriteRange(pipe_fds[1], stream, stream.ends[1], stream.bytes->size()));
  ::close(pipe_fds[1]);
  reader.join();
  ASSERT_TRUE(in_time) << "no batch arrived while stdin was open";
  EXPECT_EQ(got_first.get(), 0);
  EXPECT_EQ(testing::Wait(publish), 0);
  EXPECT_EQ(ended.code(), StatusCode::kEndOfStream) << ended.ToString();
  ASSERT_EQ(received.size(), stream.batches.size());
  for (std::size_t i = 0; i < received.size(); ++i) {
    ASSERT_OK(format::CheckRecordBatchEquals(*stream.batches[i], *received[i]));
  }
}

// A stream cut inside its third batch: the two complete batches are
// published, the topic's stream ends, and `alkaid publish` fails saying so.
TEST_F(StartOrderTest, TruncatedStdinEndsTheTopicAfterTheCompleteBatches) {
  ASSERT_OK_AND_ASSIGN(auto stream, EncodeStream(4));
  int pipe_fds[2];
  ASSERT_EQ(::pipe2(pipe_fds, O_CLOEXEC), 0);
  const std::string err = dir_ + "/publish.err";
  const pid_t publish = SpawnWith(
      {ALKAID_TOOL_BIN, "publish", "T", "-", "--socket", broker_.socket()}, pipe_fds[0], "", err);
  ::close(pipe_fds[0]);
  std::vector<format::RecordBatchPtr> received;
  Status ended;
  std::thread reader([&] {
    auto consumer = Consumer::Open("T", Waiting());
    if (!consumer.ok()) {
      ended = consumer.status();
      return;
    }
    while (true) {
      auto batch = (*consumer)->Next(kGuard);
      if (!batch.ok()) {
        ended = batch.status();
        return;
      }
      received.push_back(*batch);
    }
  });
  const bool waiting = WaitUntil([&] { return AwaitingConsumers(broker_.socket(), "T") == 1; });
  const int64_t cut = (stream.ends[2] + stream.ends[3]) / 2;
  EXPECT_TRUE(WriteRange(pipe_fds[1], stream, 0, cut));
  ::close(pipe_fds[1]);
  reader.join();
  ASSERT_TRUE(waiting);
  EXPECT_EQ(testing::Wait(publish), 1);
  const std::string message = ReadFile(err);
  EXPECT_NE(message.find("stream truncated"), std::string::npos) << message;
  EXPECT_NE(message.find("the 2 complete batches before it were published to 'T'"),
            std::string::npos)
      << message;
  EXPECT_EQ(ended.code(), StatusCode::kEndOfStream) << ended.ToString();
  ASSERT_EQ(received.size(), 2u);
  for (std::size_t i = 0; i < received.size(); ++i) {
    ASSERT_OK(format::CheckRecordBatchEquals(*stream.batches[i], *received[i]));
  }
}

// Open gives up after wait_for_topic, naming the topic, and the broker
// forgets the waiting consumer; a consumer expecting another topic kind
// is refused once the topic is created.
TEST_F(StartOrderTest, WaitingEndsWithTimedOutOrATopicKindMismatch) {
  client::ConsumerOptions brief = Waiting();
  brief.wait_for_topic = 50ms;
  ASSERT_RAISES_WITH_MESSAGE(kTimedOut, "topic 'never' was not created within 50 ms",
                             Consumer::Open("never", brief));
  ASSERT_TRUE(WaitUntil([&] {
    auto client = BrokerClient::Connect(broker_.socket());
    auto awaited = client.ok() ? (*client)->ListAwaitedTopics()
                               : Result<std::vector<client::AwaitedTopic>>(client.status());
    return awaited.ok() && awaited->empty();
  }));

  Status refused;
  std::thread rows([&] { refused = client::RowConsumer::Open("batches", Waiting()).status(); });
  ASSERT_TRUE(WaitUntil([&] { return AwaitingConsumers(broker_.socket(), "batches") == 1; }));
  client::ProducerOptions po;
  po.socket_path = broker_.socket();
  po.topic.arena_bytes = 1 << 20;
  ASSERT_OK_AND_ASSIGN(auto producer, Producer::Open("batches", DataSchema(), po));
  rows.join();
  ASSERT_EQ(refused.code(), StatusCode::kInvalid) << refused.ToString();
  EXPECT_NE(refused.message().find(
                "topic 'batches' carries record-batch payloads; this consumer expects unsafe-row"),
            std::string::npos)
      << refused.ToString();
  ASSERT_OK(producer->Close());
}

// The producer's wait for the consumers it was announced to ends when each
// has registered or left, not at wait_for_consumers (an hour here): one
// waiting consumer fails its Open (an unknown column), another closes
// without reading.
TEST_F(StartOrderTest, ProducerStopsWaitingForConsumersThatLeave) {
  std::vector<pid_t> consumers;
  for (const bool bad_column : {true, false}) {
    const pid_t pid = testing::ForkTestChild();
    if (pid == 0) {
      client::ConsumerOptions options = Waiting();
      if (bad_column) options.columns = {"nope"};
      auto consumer = Consumer::Open("T", options);
      if (bad_column)
        ::_exit(!consumer.ok() && consumer.status().code() == StatusCode::kKeyError ? 0 : 1);
      if (!consumer.ok()) ::_exit(2);
      ::_exit((*consumer)->Close().ok() ? 0 : 3);
    }
    consumers.push_back(pid);
  }
  ASSERT_TRUE(WaitUntil([&] { return AwaitingConsumers(broker_.socket(), "T") == 2; }));
  // Failure guard: Producer::Open below must return long before this.
  std::mutex mutex;
  std::condition_variable cv;
  bool opened = false;
  std::thread guard([&] {
    std::unique_lock<std::mutex> lock(mutex);
    if (!cv.wait_for(lock, kGuard, [&] { return opened; })) {
      std::fprintf(stderr, "FAILED: Producer::Open still waits for consumers that left\n");
      std::_Exit(1);
    }
  });
  client::ProducerOptions po;
  po.socket_path = broker_.socket();
  po.topic.arena_bytes = 1 << 20;
  po.wait_for_consumers = std::chrono::hours(1);
  auto producer = Producer::Open("T", DataSchema(), po);
  {
    std::lock_guard<std::mutex> lock(mutex);
    opened = true;
  }
  cv.notify_all();
  guard.join();
  ASSERT_OK(producer.status());
  for (pid_t pid : consumers) EXPECT_EQ(testing::Wait(pid), 0);
  ASSERT_OK((*producer)->Close());
}

// A consumer waiting for a topic while the broker restarts registers
// again with the new broker, and still gets every batch from the first.
TEST_F(StartOrderTest, WaitingSurvivesABrokerRestart) {
  std::vector<int64_t> firsts;
  Status ended;
  std::thread reader([&] {
    auto consumer = Consumer::Open("T", Waiting());
    if (!consumer.ok()) {
      ended = consumer.status();
      return;
    }
    while (true) {
      auto batch = (*consumer)->Next(kGuard);
      if (!batch.ok()) {
        ended = batch.status();
        return;
      }
      firsts.push_back(FirstId(**batch));
    }
  });
  const bool waited = WaitUntil([&] { return AwaitingConsumers(broker_.socket(), "T") == 1; });
  broker_.Kill();
  const bool restarted = broker_.Start();
  const bool waits_again = WaitUntil([&] { return AwaitingConsumers(broker_.socket(), "T") == 1; });
  client::ProducerOptions po;
  po.socket_path = broker_.socket();
  po.topic.arena_bytes = 1 << 20;
  auto producer = Producer::Open("T", DataSchema(), po);
  for (int b = 0; producer.ok() && b < 3; ++b) {
    auto batch = DataBatch(b);
    EXPECT_OK(batch.ok() ? (*producer)->PublishCopy(**batch) : batch.status());
  }
  if (producer.ok()) EXPECT_OK((*producer)->Close());
  reader.join();
  ASSERT_TRUE(waited);
  ASSERT_TRUE(restarted);
  ASSERT_TRUE(waits_again);
  ASSERT_OK(producer.status());
  EXPECT_EQ(ended.code(), StatusCode::kEndOfStream) << ended.ToString();
  EXPECT_EQ(firsts, (std::vector<int64_t>{0, 1000, 2000}));
}

// `alkaid publish T -` fed a stream whose Schema says Endianness::Big
// (tests/data/legacy/big-endian.stream): exit 1 with the reason, before
// any topic is created; the broker goes on serving.
TEST_F(StartOrderTest, PublishFromStdinRefusesABigEndianStream) {
  const int in = ::open(ALKAID_LEGACY_DIR "/big-endian.stream", O_RDONLY | O_CLOEXEC);
  ASSERT_GE(in, 0);
  const std::string err = dir_ + "/publish.err";
  const pid_t publish =
      SpawnWith({ALKAID_TOOL_BIN, "publish", "T", "-", "--socket", broker_.socket()}, in, "", err);
  ::close(in);
  EXPECT_EQ(testing::Wait(publish), 1);
  EXPECT_NE(testing::ReadFile(err).find("big-endian data is not supported"), std::string::npos)
      << testing::ReadFile(err);
  ASSERT_OK_AND_ASSIGN(auto admin, BrokerClient::Connect(broker_.socket()));
  ASSERT_OK_AND_ASSIGN(auto topics, admin->ListTopics());
  EXPECT_TRUE(topics.empty());
}

}  // namespace
}  // namespace alkaid::broker
