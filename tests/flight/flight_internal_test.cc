// The bridge's pieces without a network: the zero-copy FlightData
// serialization (byte-identical to protobuf's, bodies referenced, blocks
// released when gRPC drops the slices), the token table, tickets, and the
// loopback rule.

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/slice.h>

#include "alkaid/flight/server.h"
#include "alkaid/format/builder_binary.h"
#include "alkaid/format/builder_primitive.h"
#include "alkaid/format/compare.h"
#include "alkaid/format/ipc/io.h"
#include "alkaid/format/ipc/reader.h"
#include "alkaid/format/ipc/writer.h"
#include "alkaid/format/record_batch.h"
#include "auth_internal.h"
#include "flight_data_internal.h"
#include "payload_serialization_internal.h"
#include "test_util.h"

namespace alkaid::flight {
namespace {

namespace ipc = format::ipc;
using internal::FlightPayload;

format::RecordBatchPtr MakeBatch(int64_t rows) {
  format::NumericBuilder<int64_t> ints;
  format::StringBuilder strings;
  for (int64_t i = 0; i < rows; ++i) {
    EXPECT_TRUE(ints.Append(i * 3).ok());
    EXPECT_TRUE((i % 7 == 0 ? strings.AppendNull() : strings.Append("s" + std::to_string(i))).ok());
  }
  auto a = ints.FinishData();
  auto b = strings.FinishData();
  auto schema =
      format::schema({format::field("i", format::int64()), format::field("s", format::utf8())});
  return format::RecordBatch::Make(schema, rows, std::vector<format::ArrayDataPtr>{*a, *b})
      .ValueOrDie();
}

std::string Flatten(const grpc::ByteBuffer& buffer) {
  std::vector<grpc::Slice> slices;
  EXPECT_TRUE(buffer.Dump(&slices).ok());
  std::string out;
  for (const auto& s : slices) out.append(reinterpret_cast<const char*>(s.begin()), s.size());
  return out;
}

TEST(PayloadSerialization, SameBytesAsProtobufForEverySize) {
  for (int64_t rows : {0, 1, 5, 100, 20000}) {
    SCOPED_TRACE(rows);
    auto batch = MakeBatch(rows);
    FlightPayload payload;
    ASSERT_OK_AND_ASSIGN(payload.ipc,
                         ipc::GetRecordBatchPayload(*batch, internal::FlightWriteOptions()));
    payload.app_metadata = internal::LostMetadata(3);
    grpc::ByteBuffer serialized;
    ASSERT_TRUE(internal::SerializePayload(payload, &serialized).ok());

    internal::pb::FlightData reference;
    ASSERT_OK(internal::PayloadToFlightData(payload.ipc, &reference));
    reference.set_app_metadata(payload.app_metadata);
    std::string expected;
    ASSERT_TRUE(reference.SerializeToString(&expected));
    EXPECT_EQ(Flatten(serialized), expected);

    // And it parses back into the batch.
    internal::pb::FlightData parsed;
    ASSERT_TRUE(parsed.ParseFromString(Flatten(serialized)));
    EXPECT_EQ(internal::ParseLostMetadata(parsed.app_metadata()), 3u);
  }
}

TEST(PayloadSerialization, LargeBodyBuffersAreReferencedAndReleasedWithTheSlices) {
  auto batch = MakeBatch(20000);
  FlightPayload payload;
  ASSERT_OK_AND_ASSIGN(payload.ipc,
                       ipc::GetRecordBatchPayload(*batch, internal::FlightWriteOptions()));
  const uint8_t* values = batch->column_data(0)->buffers[1]->data();
  std::weak_ptr<format::Buffer> watch = batch->column_data(0)->buffers[1];

  auto serialized = std::make_unique<grpc::ByteBuffer>();
  int64_t referenced = 0;
  ASSERT_TRUE(internal::SerializePayload(payload, serialized.get(), &referenced).ok());
  EXPECT_GE(referenced, 20000 * 8);
  std::vector<grpc::Slice> slices;
  ASSERT_TRUE(serialized->Dump(&slices).ok());
  bool found = false;
  for (const auto& s : slices) found = found || s.begin() == values;
  EXPECT_TRUE(found) << "no slice points at the int64 values: they were copied";

  // The batch and the payload gone, the slices still hold the buffer...
  slices.clear();
  payload = FlightPayload();
  batch.reset();
  EXPECT_FALSE(watch.expired());
  // ...until gRPC drops the byte buffer.
  serialized.reset();
  EXPECT_TRUE(watch.expired());
}

// The seeds of fuzz/flight_data_fuzz (fuzz/make_flight_data_seeds.py): each
// is a whole DoPut of a gold stream, and the server's decoder reads from it
// exactly the batches our stream reader reads from the gold file. Shows the
// seeds are real DoPut input (the fuzzer starts past the decoder's first
// checks) and that PutDecoder decodes them as DoPut must.
TEST(PutDecoder, FuzzSeedsDecodeToTheGoldStreamsBatches) {
  const std::filesystem::path seeds = ALKAID_FLIGHT_SEEDS_DIR;
  int cases = 0;
  for (const auto& entry : std::filesystem::directory_iterator(seeds)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("gold-", 0) != 0) continue;
    SCOPED_TRACE(name);
    ++cases;
    std::ifstream in(entry.path(), std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::vector<std::shared_ptr<internal::pb::FlightData>> messages;
    for (std::size_t at = 0; at < bytes.size();) {
      ASSERT_LE(at + 5, bytes.size());
      ASSERT_EQ(bytes[at], '\0');
      const auto* p = reinterpret_cast<const uint8_t*>(bytes.data() + at + 1);
      const std::size_t length = (std::size_t{p[0]} << 24) | (std::size_t{p[1]} << 16) |
                                 (std::size_t{p[2]} << 8) | std::size_t{p[3]};
      ASSERT_LE(at + 5 + length, bytes.size());
      auto message = std::make_shared<internal::pb::FlightData>();
      ASSERT_TRUE(message->ParseFromArray(bytes.data() + at + 5, static_cast<int>(length)));
      messages.push_back(std::move(message));
      at += 5 + length;
    }
    ASSERT_FALSE(messages.empty());
    ASSERT_TRUE(messages[0]->has_flight_descriptor());
    ASSERT_OK_AND_ASSIGN(auto topic, internal::DescriptorTopic(messages[0]->flight_descriptor()));
    EXPECT_EQ(topic, "seed");

    const std::string gold =
        std::string(ALKAID_GOLD_DIR) + "/generated_" + name.substr(5) + ".stream";
    ASSERT_OK_AND_ASSIGN(auto file, ipc::FileInputStream::Open(gold));
    ASSERT_OK_AND_ASSIGN(auto reader, ipc::RecordBatchStreamReader::Open(file));
    ASSERT_OK_AND_ASSIGN(auto expected, reader->ReadAll());

    internal::PutDecoder decoder(kDefaultMaxMessageBytes);
    ASSERT_OK(decoder.Start(messages[0]));
    EXPECT_TRUE(decoder.schema()->Equals(*reader->schema()));
    std::size_t batches = 0;
    for (std::size_t i = 1; i < messages.size(); ++i) {
      ASSERT_OK_AND_ASSIGN(auto batch, decoder.Next(messages[i]));
      if (batch == nullptr) continue;  // a dictionary
      ASSERT_LT(batches, expected.size());
      ASSERT_OK(format::CheckRecordBatchEquals(*expected[batches], *batch));
      ++batches;
    }
    EXPECT_EQ(batches, expected.size());
    // A second schema, or a record batch before any schema, is refused.
    EXPECT_TRUE(decoder.Next(messages[0]).status().IsInvalid());
    internal::PutDecoder fresh(kDefaultMaxMessageBytes);
    EXPECT_TRUE(fresh.Next(messages[0]).status().IsInvalid());
  }
  EXPECT_GE(cases, 5);
}

// FlightServerOptions::max_message_bytes through PutDecoder: a schema
// header, a body, and a compressed buffer's declared decompressed size over
// the limit are each refused (Invalid naming the limit); at the limit they
// pass.
TEST(PutDecoder, RefusesMessagesOverTheLimit) {
  // 20000 int64 zeros: 160000 bytes, which ZSTD compresses to a few.
  format::NumericBuilder<int64_t> zeros;
  for (int i = 0; i < 20000; ++i) ASSERT_OK(zeros.Append(0));
  ASSERT_OK_AND_ASSIGN(auto column, zeros.FinishData());
  ASSERT_OK_AND_ASSIGN(
      auto batch, format::RecordBatch::Make(format::schema({format::field("z", format::int64())}),
                                            20000, std::vector<format::ArrayDataPtr>{column}));
  ipc::DictionaryMemo ids;
  ASSERT_OK(ids.AssignIds(*batch->schema()));
  ipc::IpcWriteOptions options = internal::FlightWriteOptions();
  ASSERT_OK_AND_ASSIGN(auto schema_payload, ipc::GetSchemaPayload(*batch->schema(), ids, options));
  auto schema = std::make_shared<internal::pb::FlightData>();
  ASSERT_OK(internal::PayloadToFlightData(schema_payload, schema.get()));
  ASSERT_OK_AND_ASSIGN(auto plain_payload, ipc::GetRecordBatchPayload(*batch, options));
  auto plain = std::make_shared<internal::pb::FlightData>();
  ASSERT_OK(internal::PayloadToFlightData(plain_payload, plain.get()));
  options.compression = ipc::CompressionType::kZstd;
  ASSERT_OK_AND_ASSIGN(auto zstd_payload, ipc::GetRecordBatchPayload(*batch, options));
  auto zstd = std::make_shared<internal::pb::FlightData>();
  ASSERT_OK(internal::PayloadToFlightData(zstd_payload, zstd.get()));
  const auto header = static_cast<int64_t>(schema->data_header().size());
  const auto body = static_cast<int64_t>(plain->data_body().size());
  const int64_t decompressed = 20000 * 8;
  // The compressed body is far smaller than its int64 column decompressed.
  ASSERT_LT(static_cast<int64_t>(zstd->data_body().size()), decompressed / 4);
  ASSERT_GE(body, decompressed);

  internal::PutDecoder tiny(header - 1);
  Status st = tiny.Start(schema);
  ASSERT_TRUE(st.IsInvalid()) << st.ToString();
  EXPECT_NE(st.message().find("data_header is " + std::to_string(header) +
                              " bytes, over the server's limit of " + std::to_string(header - 1)),
            std::string::npos)
      << st.ToString();

  internal::PutDecoder small(body - 1);
  ASSERT_OK(small.Start(schema));
  st = small.Next(plain).status();
  ASSERT_TRUE(st.IsInvalid()) << st.ToString();
  EXPECT_NE(st.message().find("data_body is " + std::to_string(body) + " bytes"), std::string::npos)
      << st.ToString();
  // The compressed body is small, but its int64 column decompresses to
  // more than the limit.
  internal::PutDecoder under(decompressed - 1);
  ASSERT_OK(under.Start(schema));
  st = under.Next(zstd).status();
  ASSERT_TRUE(st.IsInvalid()) << st.ToString();
  EXPECT_NE(st.message().find("declares " + std::to_string(decompressed) +
                              " uncompressed bytes (limit " + std::to_string(decompressed - 1)),
            std::string::npos)
      << st.ToString();

  internal::PutDecoder exact(std::max(body, decompressed));
  ASSERT_OK(exact.Start(schema));
  ASSERT_OK_AND_ASSIGN(auto from_plain, exact.Next(plain));
  ASSERT_OK(format::CheckRecordBatchEquals(*batch, *from_plain));
  ASSERT_OK_AND_ASSIGN(auto from_zstd, exact.Next(zstd));
  ASSERT_OK(format::CheckRecordBatchEquals(*batch, *from_zstd));
}

TEST(TokenTable, ParsesChecksAndGrants) {
  ASSERT_OK_AND_ASSIGN(auto table, internal::TokenTable::Parse(R"({"tokens": [
      {"token": "r", "read": ["a"]},
      {"token": "w", "read": ["*"], "write": ["b"]}]})",
                                                               "t"));
  EXPECT_EQ(table.Find("r"), nullptr);  // no "Bearer "
  EXPECT_EQ(table.Find("Bearer x"), nullptr);
  EXPECT_EQ(table.Find("Bearer r "), nullptr);
  const auto* r = table.Find("Bearer r");
  const auto* w = table.Find("Bearer w");
  ASSERT_NE(r, nullptr);
  ASSERT_NE(w, nullptr);
  EXPECT_TRUE(internal::TokenTable::MayRead(*r, "a"));
  EXPECT_FALSE(internal::TokenTable::MayRead(*r, "b"));
  EXPECT_FALSE(internal::TokenTable::MayWrite(*r, "a"));
  EXPECT_TRUE(internal::TokenTable::MayRead(*w, "anything"));
  EXPECT_TRUE(internal::TokenTable::MayWrite(*w, "b"));
  EXPECT_FALSE(internal::TokenTable::MayWrite(*w, "a"));

  for (const char* bad :
       {"", "[]", R"({"tokens": []})", R"({"tokens": [{"read": ["a"]}]})",
        R"({"tokens": [{"token": "a b"}]})", R"({"tokens": [{"token": "a"}, {"token": "a"}]})",
        R"({"tokens": [{"token": "a", "read": "x"}]})",
        R"({"tokens": [{"token": "a", "write": [1]}]})"}) {
    SCOPED_TRACE(bad);
    EXPECT_TRUE(internal::TokenTable::Parse(bad, "t").status().IsInvalid());
  }
}

TEST(Tickets, RoundTripAndRefusals) {
  ASSERT_OK_AND_ASSIGN(auto t, internal::ParseTicket(internal::MakeTicket("a/b", true)));
  EXPECT_TRUE(t.from_oldest);
  EXPECT_EQ(t.topic, "a/b");
  ASSERT_OK_AND_ASSIGN(t, internal::ParseTicket("live/x"));
  EXPECT_FALSE(t.from_oldest);
  for (const char* bad : {"", "live/", "x/y", "oldest"}) {
    EXPECT_TRUE(internal::ParseTicket(bad).status().IsInvalid()) << bad;
  }
}

TEST(Listen, LoopbackHosts) {
  for (const char* host : {"127.0.0.1", "127.1.2.3", "::1", "localhost"}) {
    EXPECT_TRUE(IsLoopbackHost(host)) << host;
  }
  for (const char* host : {"0.0.0.0", "::", "10.0.0.1", "example.com", "128.0.0.1", ""}) {
    EXPECT_FALSE(IsLoopbackHost(host)) << host;
  }
}

TEST(Listen, NonLoopbackNeedsATokenFile) {
  FlightServerOptions options;
  options.listen = "0.0.0.0:0";
  ASSERT_RAISES(kPermissionDenied, FlightServer::Start(options));
  options.listen = "nonsense";
  ASSERT_RAISES(kInvalid, FlightServer::Start(options));
  options.listen = "127.0.0.1:0";
  options.tls_cert_file = "/nonexistent";
  ASSERT_RAISES(kInvalid, FlightServer::Start(options));
}

}  // namespace
}  // namespace alkaid::flight
