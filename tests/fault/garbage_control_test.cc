// Fault injection on the control socket: a real alkaid-broker process is
// sent random bytes, an oversized or zero length prefix, truncated frames
// and well-framed messages that are hostile flatbuffers. The replies are
// decoded: a bad frame gets an Invalid reply and a closed connection
// (docs/BROKER.md, "Untrusted input"); a frame cut short by end-of-stream
// gets at most that; a mutated real request may decode as a request and get
// any reply, which must decode. The broker must keep serving other clients
// afterwards (it is checked after every case).

#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "alkaid/client/broker_client.h"
#include "alkaid/format/ipc/io.h"
#include "alkaid/format/ipc/writer.h"
#include "broker_process.h"
#include "protocol/control.h"
#include "protocol/frame.h"
#include "test_util.h"

namespace alkaid::broker {
namespace {

using testing::BrokerProcess;

// A connected Unix stream socket, closed on destruction.
class RawConnection {
 public:
  explicit RawConnection(const std::string& path) {
    fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
    if (fd_ >= 0 && ::connect(fd_, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0) {
      ::close(fd_);
      fd_ = -1;
    }
  }
  ~RawConnection() {
    if (fd_ >= 0) ::close(fd_);
  }
  RawConnection(const RawConnection&) = delete;
  RawConnection& operator=(const RawConnection&) = delete;

  bool ok() const { return fd_ >= 0; }

  // Sends everything it can; a broker that already closed the connection
  // makes send fail with EPIPE, which is an accepted outcome.
  void Send(const std::vector<uint8_t>& bytes) {
    std::size_t pos = 0;
    while (pos < bytes.size()) {
      const ssize_t n = ::send(fd_, bytes.data() + pos, bytes.size() - pos, MSG_NOSIGNAL);
      if (n <= 0) return;
      pos += static_cast<std::size_t>(n);
    }
  }

  // Half-closes the write side, so that a truncated frame is followed by
  // end-of-stream.
  void ShutdownWrite() { ::shutdown(fd_, SHUT_WR); }

  // What the broker sent within `timeout`, and whether it closed the
  // connection after it.
  struct Outcome {
    std::vector<uint8_t> bytes;
    bool closed = false;
  };
  Outcome Read(std::chrono::milliseconds timeout) {
    Outcome out;
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (true) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return out;
      pollfd p{fd_, POLLIN, 0};
      const int r = ::poll(&p, 1, static_cast<int>(left.count()));
      if (r <= 0) return out;
      uint8_t buffer[4096];
      const ssize_t n = ::recv(fd_, buffer, sizeof(buffer), 0);
      if (n <= 0) {
        out.closed = true;
        return out;
      }
      out.bytes.insert(out.bytes.end(), buffer, buffer + n);
    }
  }

 private:
  int fd_ = -1;
};

std::vector<uint8_t> LengthPrefix(uint32_t length) {
  return {static_cast<uint8_t>(length), static_cast<uint8_t>(length >> 8),
          static_cast<uint8_t>(length >> 16), static_cast<uint8_t>(length >> 24)};
}

std::vector<uint8_t> Framed(const std::vector<uint8_t>& payload) {
  auto out = LengthPrefix(static_cast<uint32_t>(payload.size()));
  out.insert(out.end(), payload.begin(), payload.end());
  return out;
}

void PutU32(std::vector<uint8_t>* bytes, std::size_t at, uint32_t value) {
  if (bytes->size() < at + 4) bytes->resize(at + 4);
  std::memcpy(bytes->data() + at, &value, 4);
}

class GarbageControlTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(broker_.Start()) << "alkaid-broker did not start"; }

  // The broker still answers a well-behaved client, and is still running.
  void ExpectStillServing(const std::string& what) {
    auto client = client::BrokerClient::Connect(broker_.socket());
    ASSERT_TRUE(client.ok()) << "after " << what << ": " << client.status().ToString();
    auto topics = (*client)->ListTopics();
    ASSERT_TRUE(topics.ok()) << "after " << what << ": " << topics.status().ToString();
    ASSERT_EQ(::kill(broker_.pid(), 0), 0) << "broker gone after " << what;
  }

  // What a case may get back.
  enum class Want {
    kInvalidThenClosed,        // a complete bad frame
    kClosedMaybeInvalidFirst,  // cut short by end-of-stream: closed, any reply Invalid
    kDecodableReplyOrClosed,   // a mutated real request: it may be valid
  };

  // Sends `bytes` on a fresh connection (then ends the stream if
  // `shutdown_write`), decodes what comes back, checks it against `want`,
  // then that the broker keeps serving.
  void Inject(const std::string& what, const std::vector<uint8_t>& bytes, bool shutdown_write,
              Want want = Want::kInvalidThenClosed) {
    SCOPED_TRACE(what);
    RawConnection conn(broker_.socket());
    ASSERT_TRUE(conn.ok()) << "cannot connect";
    conn.Send(bytes);
    if (shutdown_write) conn.ShutdownWrite();
    const RawConnection::Outcome got = conn.Read(std::chrono::milliseconds(10000));
    // Every frame that came back decodes as a reply (not an event).
    std::vector<protocol::Reply> replies;
    std::size_t pos = 0;
    while (pos + 4 <= got.bytes.size()) {
      uint32_t length = 0;
      std::memcpy(&length, got.bytes.data() + pos, 4);
      ASSERT_LE(pos + 4 + length, got.bytes.size()) << "a reply frame cut short";
      auto decoded = protocol::DecodeServerMessage(
          std::span<const uint8_t>(got.bytes.data() + pos + 4, length));
      ASSERT_TRUE(decoded.ok()) << "undecodable reply: " << decoded.status().ToString();
      ASSERT_FALSE(decoded->is_event);
      replies.push_back(decoded->reply);
      pos += 4 + length;
    }
    ASSERT_EQ(pos, got.bytes.size()) << "trailing bytes after the replies";
    last_replies_ = replies;
    switch (want) {
      case Want::kInvalidThenClosed:
        ASSERT_EQ(replies.size(), 1u) << "expected one Invalid reply";
        EXPECT_EQ(replies[0].status.code(), StatusCode::kInvalid) << replies[0].status.ToString();
        EXPECT_FALSE(replies[0].status.message().empty());
        EXPECT_TRUE(got.closed) << "connection left open after a bad frame";
        break;
      case Want::kClosedMaybeInvalidFirst:
        EXPECT_LE(replies.size(), 1u);
        for (const auto& r : replies) {
          EXPECT_EQ(r.status.code(), StatusCode::kInvalid) << r.status.ToString();
        }
        EXPECT_TRUE(got.closed) << "connection left open after end-of-stream";
        break;
      case Want::kDecodableReplyOrClosed:
        EXPECT_TRUE(got.closed || !replies.empty()) << "neither replied nor closed";
        for (const auto& r : replies) {
          // A refusal is Invalid (or, for a request that decoded but names
          // nothing, KeyError); it is never a crash or an IOError.
          if (!r.status.ok()) {
            EXPECT_TRUE(r.status.code() == StatusCode::kInvalid ||
                        r.status.code() == StatusCode::kKeyError ||
                        r.status.code() == StatusCode::kAlreadyExists)
                << r.status.ToString();
          }
        }
        break;
    }
    ExpectStillServing(what);
  }

  BrokerProcess broker_;
  std::vector<protocol::Reply> last_replies_;  // what the last Inject got back
};

TEST_F(GarbageControlTest, RandomBytes) {
  std::mt19937 rng(20261121);
  for (int round = 0; round < 20; ++round) {
    std::vector<uint8_t> bytes(1 + rng() % 300);
    for (auto& b : bytes) b = static_cast<uint8_t>(rng());
    // The stream ends after them, so that an incomplete frame is followed
    // by end-of-stream and must be dropped.
    // A random length prefix is most often over the maximum (Invalid, closed);
    // otherwise the frame is cut short by end-of-stream.
    Inject("random bytes, round " + std::to_string(round), bytes, true,
           Want::kClosedMaybeInvalidFirst);
  }
}

TEST_F(GarbageControlTest, OversizedLengthPrefix) {
  for (uint32_t length : {0xFFFFFFFFu, 0x80000000u, (1u << 20) + (64u << 10) + 1u}) {
    auto bytes = LengthPrefix(length);
    bytes.resize(bytes.size() + 64, 0xAB);
    Inject("length prefix " + std::to_string(length), bytes, false);
  }
}

// A well-formed CreateTopic whose schema is one byte over kMaxSchemaBytes
// (the frame itself is within the frame maximum, so the decoder sees it),
// and one whose frame is over the frame maximum: each gets one Invalid
// reply naming its limit, then a close; the broker serves the next client.
// The client library refuses such schemas before sending
// (BrokerSchemaSizeTest); these requests are built by hand to reach the
// broker.
TEST_F(GarbageControlTest, OversizedSchemaIsRefusedNamingTheLimit) {
  struct Case {
    std::size_t schema_bytes;
    std::string limit;  // named in the reply
  };
  for (const Case& c : {Case{protocol::kMaxSchemaBytes + 1, "maximum of 1048576"},
                        Case{std::size_t{protocol::kMaxFrameSize} + 1,
                             "maximum of " + std::to_string(protocol::kMaxFrameSize)}}) {
    protocol::Request request;
    request.type = protocol::RequestType::kCreateTopic;
    request.id = 7;
    request.config.name = "wide";
    request.config.schema.assign(c.schema_bytes, 0x5A);
    const auto payload = protocol::EncodeRequest(request);
    ASSERT_GT(payload.size(), c.schema_bytes);
    Inject("CreateTopic with a schema of " + std::to_string(c.schema_bytes) + " bytes",
           Framed(payload), false);
    ASSERT_EQ(last_replies_.size(), 1u);
    EXPECT_NE(last_replies_[0].status.message().find(c.limit), std::string::npos)
        << last_replies_[0].status.ToString();
  }
  // Nothing was created.
  ASSERT_OK_AND_ASSIGN(auto client, client::BrokerClient::Connect(broker_.socket()));
  ASSERT_OK_AND_ASSIGN(auto topics, client->ListTopics());
  EXPECT_TRUE(topics.empty());
}

TEST_F(GarbageControlTest, ZeroLengthFrame) { Inject("zero-length frame", LengthPrefix(0), false); }

TEST_F(GarbageControlTest, TruncatedFrames) {
  // A prefix announcing 100 bytes, then fewer bytes and end-of-stream.
  for (std::size_t sent : {0u, 1u, 50u, 99u}) {
    auto bytes = LengthPrefix(100);
    bytes.resize(bytes.size() + sent, 0x11);
    Inject("frame truncated after " + std::to_string(sent) + " of 100 bytes", bytes, true,
           Want::kClosedMaybeInvalidFirst);
  }
  // A length prefix cut in the middle.
  Inject("truncated length prefix", {0x10, 0x00}, true, Want::kClosedMaybeInvalidFirst);
}

TEST_F(GarbageControlTest, HostileFlatbuffers) {
  std::vector<std::pair<std::string, std::vector<uint8_t>>> cases;
  {
    std::vector<uint8_t> b(16, 0);
    PutU32(&b, 0, 0xFFFFFF00u);  // root table offset far past the buffer
    cases.emplace_back("root offset out of range", b);
  }
  {
    std::vector<uint8_t> b(16, 0);
    PutU32(&b, 0, 8);
    PutU32(&b, 8, 0x7FFFFFF0u);  // vtable soffset pointing before the buffer
    cases.emplace_back("vtable offset out of range", b);
  }
  {
    // A vtable claiming a huge size and fields far outside the table.
    std::vector<uint8_t> b(32, 0);
    PutU32(&b, 0, 16);  // root at 16
    b[4] = 0xFF;
    b[5] = 0xFF;  // vtable size 65535
    b[6] = 0xFF;
    b[7] = 0x7F;  // table size
    b[8] = 0xF0;
    b[9] = 0xFF;  // field 0 at +65520
    b[10] = 0x04;
    b[11] = 0x00;                 // field 1 at +4
    PutU32(&b, 16, 12);           // vtable at 16 - 12 = 4
    PutU32(&b, 20, 0xFFFFFFF0u);  // an offset field pointing backwards
    cases.emplace_back("vtable with fields out of range", b);
  }
  {
    // A table whose string/vector field claims 2^31 elements.
    std::vector<uint8_t> b(40, 0);
    PutU32(&b, 0, 16);
    b[4] = 10;
    b[5] = 0;  // vtable size 10 (3 fields)
    b[6] = 12;
    b[7] = 0;  // table size
    b[8] = 4;
    b[9] = 0;  // field 0 at +4
    b[10] = 4;
    b[11] = 0;  // field 1 at +4
    b[12] = 4;
    b[13] = 0;                    // field 2 at +4
    PutU32(&b, 16, 12);           // vtable at 4
    PutU32(&b, 20, 8);            // field -> 28
    PutU32(&b, 28, 0x80000000u);  // vector/string length
    cases.emplace_back("vector length 2^31", b);
  }
  {
    // A nested offset loop: a table whose field points back at itself.
    std::vector<uint8_t> b(32, 0);
    PutU32(&b, 0, 12);
    b[4] = 6;
    b[5] = 0;
    b[6] = 8;
    b[7] = 0;
    b[8] = 4;
    b[9] = 0;
    PutU32(&b, 12, 8);  // vtable at 4
    PutU32(&b, 16, 0);  // field offset 0: points at itself
    cases.emplace_back("self-referencing offset", b);
  }
  for (const auto& [what, payload] : cases) Inject(what, Framed(payload), false);
}

// The fuzzer's seeds (fuzz/corpus/control_protocol_fuzz) with their
// payload bytes flipped: frames the broker's parser has seen in some form.
TEST_F(GarbageControlTest, MutatedCorpusFrames) {
  std::mt19937 rng(7);
  int sent = 0;
  for (const auto& entry : std::filesystem::directory_iterator(ALKAID_CONTROL_CORPUS)) {
    std::ifstream in(entry.path(), std::ios::binary);
    std::vector<uint8_t> seed((std::istreambuf_iterator<char>(in)),
                              std::istreambuf_iterator<char>());
    if (seed.empty()) continue;
    for (int round = 0; round < 4; ++round) {
      std::vector<uint8_t> payload = seed;
      for (int flips = 0; flips < 3; ++flips) payload[rng() % payload.size()] ^= 1u << (rng() % 8);
      Inject(entry.path().filename().string() + " mutation " + std::to_string(round),
             Framed(payload), true, Want::kDecodableReplyOrClosed);
      ++sent;
    }
  }
  EXPECT_GT(sent, 0) << "no seeds in " << ALKAID_CONTROL_CORPUS;
}

// Several bad connections open at once, then a good client.
TEST_F(GarbageControlTest, ManyBadConnectionsAtOnce) {
  std::vector<std::unique_ptr<RawConnection>> open;
  for (int i = 0; i < 32; ++i) {
    open.push_back(std::make_unique<RawConnection>(broker_.socket()));
    ASSERT_TRUE(open.back()->ok());
    open.back()->Send(LengthPrefix(1000));  // incomplete, left hanging
  }
  ExpectStillServing("32 connections with incomplete frames");
  open.clear();
  ExpectStillServing("closing 32 connections with incomplete frames");
}

// A schema of `columns` int32 columns with names of `name_length` characters.
format::SchemaPtr WideSchema(int columns, std::size_t name_length) {
  std::vector<format::FieldPtr> fields;
  for (int i = 0; i < columns; ++i) {
    std::string name = "c" + std::to_string(i);
    name.resize(std::max(name.size(), name_length), 'x');
    fields.push_back(format::field(name, format::int32()));
  }
  return format::schema(fields);
}

// What a request carries of a schema: a framed IPC Schema message and
// end-of-stream.
std::vector<uint8_t> SchemaBytes(const format::SchemaPtr& schema) {
  auto sink = format::ipc::BufferOutputStream::Create();
  EXPECT_TRUE(sink.ok());
  auto writer = format::ipc::MakeStreamWriter(sink->get(), schema);
  EXPECT_TRUE(writer.ok());
  EXPECT_TRUE((*writer)->Close().ok());
  auto buffer = (*sink)->Finish();
  EXPECT_TRUE(buffer.ok());
  return std::vector<uint8_t>((*buffer)->data(), (*buffer)->data() + (*buffer)->size());
}

// Requests that decode as flatbuffers (the Verifier passes) but carry a
// field out of its range: each gets one Invalid reply naming the field and
// the value, then a closed connection; nothing is created, and the broker
// keeps serving (docs/BROKER.md, "Untrusted input").
TEST_F(GarbageControlTest, FieldLevelRefusalsOfDecodableRequests) {
  const std::vector<uint8_t> schema = SchemaBytes(WideSchema(1, 1));
  auto create = [&](auto change) {
    protocol::Request r;
    r.type = protocol::RequestType::kCreateTopic;
    r.id = 11;
    r.config.name = "t";
    r.config.schema = schema;
    r.config.slot_count = 8;
    r.config.arena_bytes = 1 << 20;
    change(r);
    return r;
  };
  struct Case {
    std::string what;
    protocol::Request request;
    std::string named;  // a piece of the reply's message
  };
  std::vector<Case> cases = {
      {"slot_count 3", create([](auto& r) { r.config.slot_count = 3; }),
       "slot_count 3 is not a power of two in [2, 16777216]"},
      {"slot_count 1", create([](auto& r) { r.config.slot_count = 1; }), "slot_count 1 is not"},
      {"slot_count 2^25", create([](auto& r) { r.config.slot_count = 1u << 25; }),
       "slot_count 33554432 is not"},
      {"slot_count 2^32-1", create([](auto& r) { r.config.slot_count = 0xFFFFFFFFu; }),
       "slot_count 4294967295 is not"},
      {"arena_bytes 4095", create([](auto& r) { r.config.arena_bytes = 4095; }),
       "arena_bytes 4095 is outside [4096, 1099511627776]"},
      {"arena_bytes 2^40+1",
       create([](auto& r) { r.config.arena_bytes = (uint64_t{1} << 40) + 1; }),
       "arena_bytes 1099511627777 is outside"},
      {"a slash in the topic name", create([](auto& r) { r.config.name = "a/../b"; }),
       "topic name 'a/../b' has a character outside [A-Za-z0-9._-]"},
      {"a topic name starting with '.'", create([](auto& r) { r.config.name = ".hidden"; }),
       "topic name '.hidden' starts with '.'"},
      {"an empty topic name", create([](auto& r) { r.config.name = ""; }), "topic name is empty"},
      {"a topic name of 129 characters",
       create([](auto& r) { r.config.name = std::string(129, 'n'); }),
       "topic name is 129 bytes long, more than the maximum of 128"},
      {"a payload kind of 7",
       create([](auto& r) { r.config.kind = static_cast<protocol::TopicKind>(7); }),
       "unknown payload kind 7"},
      {"a policy of 9", create([](auto& r) { r.config.policy = static_cast<protocol::Policy>(9); }),
       "unknown slow-consumer policy 9"},
  };
  {
    protocol::Request r;
    r.type = protocol::RequestType::kAttachProducer;
    r.topic = "t";
    r.channel = "channel/../../etc";
    cases.push_back({"AttachProducer with a channel name holding '/'", r,
                     "channel name 'channel/../../etc' has a bad character"});
    r.channel = ".channel";
    cases.push_back({"AttachProducer with a channel name starting with '.'", r,
                     "channel name starts with '.'"});
    r.channel = "cha nnel";
    cases.push_back({"AttachProducer with a space in the channel name", r,
                     "channel name 'cha nnel' has a bad character"});
    r.channel = "channel";
    r.kind = static_cast<protocol::TopicKind>(200);
    cases.push_back({"AttachProducer with a payload kind of 200", r, "unknown payload kind 200"});
  }
  {
    protocol::Request r;
    r.type = protocol::RequestType::kAttachConsumer;
    r.topic = "t";
    r.kind = static_cast<protocol::TopicKind>(2);
    cases.push_back({"AttachConsumer with a payload kind of 2", r, "unknown payload kind 2"});
    r.kind = protocol::TopicKind::kRecordBatch;
    r.topic = "t\n";
    cases.push_back({"AttachConsumer of a topic name with a newline", r,
                     "has a character outside [A-Za-z0-9._-]"});
  }
  {
    protocol::Request r;
    r.type = protocol::RequestType::kDetach;
    r.role = static_cast<protocol::Role>(3);
    r.target_id = 1;
    cases.push_back({"Detach with a role of 3", r, "Detach with unknown role 3"});
  }
  // A client from before versions (it sends none) or of another version:
  // refused on its first request, whatever that asks, naming both versions.
  cases.push_back({"CreateTopic from a client without a protocol version",
                   create([](auto& r) { r.version = 0; }),
                   "control protocol version mismatch: the client (pid " +
                       std::to_string(::getpid()) +
                       ") speaks version 0 (a client from before versions), this broker "
                       "speaks version " +
                       std::to_string(protocol::kControlProtocolVersion)});
  cases.push_back({"CreateTopic from a client of protocol version 77",
                   create([](auto& r) { r.version = 77; }),
                   "speaks version 77, this broker speaks version " +
                       std::to_string(protocol::kControlProtocolVersion)});
  for (const Case& c : cases) {
    const auto payload = protocol::EncodeRequest(c.request);
    Inject(c.what, Framed(payload), false);
    ASSERT_EQ(last_replies_.size(), 1u) << c.what;
    EXPECT_NE(last_replies_[0].status.message().find(c.named), std::string::npos)
        << c.what << ": " << last_replies_[0].status.ToString();
  }
  // Nothing was created, nothing is awaited.
  ASSERT_OK_AND_ASSIGN(auto client, client::BrokerClient::Connect(broker_.socket()));
  ASSERT_OK_AND_ASSIGN(auto topics, client->ListTopics());
  EXPECT_TRUE(topics.empty());
  ASSERT_OK_AND_ASSIGN(auto awaited, client->ListAwaitedTopics());
  EXPECT_TRUE(awaited.empty());
  // The same topic with its fields in range is accepted: the refusals above
  // were for the field, not for the rest of the request.
  client::TopicOptions options;
  options.slot_count = 8;
  options.arena_bytes = 1 << 20;
  ASSERT_OK_AND_ASSIGN(bool created, client->CreateTopic("t", WideSchema(1, 1), options));
  EXPECT_TRUE(created);
}

// A client that sends requests and never reads the replies is disconnected
// once more than 8 MiB of replies wait for it (kMaxQueuedOutput): the
// broker's memory for it is bounded, and it keeps serving the others. Each
// ListTopics reply here carries a ~600 KB schema; 64 of them (~38 MiB)
// would all be sent to a client the broker never gives up on.
TEST_F(GarbageControlTest, AClientLeavingMoreThan8MiBOfRepliesUnreadIsDisconnected) {
  const format::SchemaPtr schema = WideSchema(6000, 90);
  const std::size_t schema_bytes = SchemaBytes(schema).size();
  ASSERT_GT(schema_bytes, 500'000u);
  ASSERT_LT(schema_bytes, protocol::kMaxSchemaBytes);
  {
    ASSERT_OK_AND_ASSIGN(auto client, client::BrokerClient::Connect(broker_.socket()));
    ASSERT_OK_AND_ASSIGN(bool created, client->CreateTopic("wide", schema));
    ASSERT_TRUE(created);
  }
  RawConnection conn(broker_.socket());
  ASSERT_TRUE(conn.ok());
  constexpr int kRequests = 64;
  std::vector<uint8_t> requests;
  for (int i = 0; i < kRequests; ++i) {
    protocol::Request r;
    r.type = protocol::RequestType::kListTopics;
    r.id = static_cast<uint64_t>(i);
    const auto framed = Framed(protocol::EncodeRequest(r));
    requests.insert(requests.end(), framed.begin(), framed.end());
  }
  conn.Send(requests);  // a few KB: fits the socket buffer, nothing read
  // The broker is still serving others while this client reads nothing.
  ExpectStillServing("a client that reads no replies");
  // Now read: the connection ends before all 64 replies came (what was
  // queued may be lost with it: the broker's close of a socket holding
  // unread requests resets it). The 60 s is a guard against a hang, not a
  // verdict.
  const RawConnection::Outcome got = conn.Read(std::chrono::milliseconds(60000));
  EXPECT_TRUE(got.closed) << "the broker kept the connection of a client that read nothing";
  std::size_t replies = 0;
  for (std::size_t pos = 0; pos + 4 <= got.bytes.size();) {
    uint32_t length = 0;
    std::memcpy(&length, got.bytes.data() + pos, 4);
    if (pos + 4 + length > got.bytes.size()) break;
    pos += 4 + length;
    ++replies;
  }
  EXPECT_LT(replies, static_cast<std::size_t>(kRequests));
  ExpectStillServing("disconnecting a client that read no replies");
}

}  // namespace
}  // namespace alkaid::broker
