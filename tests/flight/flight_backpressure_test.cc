// A slow remote reader of a kDropOldest topic through our own Flight client:
// the producer never waits, the batches the reader could not keep up with
// are dropped, and each gap reaches the client in the next batch's
// app_metadata (FlightReader::lost_before): what arrived plus what was
// reported lost is exactly what was published, in order.

#include <gtest/gtest.h>

#include <signal.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <string>
#include <thread>

#include "alkaid/client/producer.h"
#include "alkaid/flight/client.h"
#include "alkaid/format/builder_primitive.h"
#include "broker_process.h"
#include "test_util.h"

namespace alkaid::flight {
namespace {

using broker::testing::BrokerProcess;

format::RecordBatchPtr Batch(const format::SchemaPtr& schema, int64_t id, int64_t rows) {
  format::NumericBuilder<int64_t> values;
  for (int64_t i = 0; i < rows; ++i) EXPECT_TRUE(values.Append(id).ok());
  return format::RecordBatch::Make(schema, rows,
                                   std::vector<format::ArrayDataPtr>{*values.FinishData()})
      .ValueOrDie();
}

// Starts alkaid-flight on a free loopback port; returns the port (the line
// it prints), 0 if it did not start.
int StartFlightServer(const BrokerProcess& broker, const std::string& out, pid_t* pid) {
  *pid = broker::testing::Spawn(
      {ALKAID_FLIGHT_BIN, "--socket", broker.socket(), "--listen", "127.0.0.1:0"}, out);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (std::chrono::steady_clock::now() < deadline) {
    std::ifstream in(out);
    std::string line;
    if (std::getline(in, line) && line.find("listening on port ") != std::string::npos) {
      return std::stoi(line.substr(line.rfind(' ') + 1));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return 0;
}

TEST(FlightBackPressure, DropOldestGapsReachTheClient) {
  BrokerProcess broker;
  ASSERT_TRUE(broker.Start());
  pid_t server_pid = -1;
  const std::string out = "/tmp/alkaid-flight-test-" + broker.name() + ".out";
  const int port = StartFlightServer(broker, out, &server_pid);
  ASSERT_GT(port, 0);

  auto schema = format::schema({format::field("id", format::int64())});
  client::ProducerOptions options;
  options.socket_path = broker.socket();
  options.topic.policy = shm::SlowConsumerPolicy::kDropOldest;
  options.topic.slot_count = 8;
  ASSERT_OK_AND_ASSIGN(auto producer, client::Producer::Open("drops", schema, options));

  ASSERT_OK_AND_ASSIGN(auto flight, FlightClient::Connect("127.0.0.1:" + std::to_string(port),
                                                          /*tls=*/false));
  ASSERT_OK_AND_ASSIGN(auto reader, flight->Subscribe("drops", /*from_oldest=*/false));
  // The bridge's consumer is attached once the schema came (Subscribe
  // returns after it). Publish far more than the slots and gRPC's windows
  // hold while this reader reads nothing: 400 batches of 64 KiB.
  constexpr int64_t kBatches = 400;
  constexpr int64_t kRows = 8192;
  for (int64_t id = 0; id < kBatches; ++id) {
    ASSERT_OK(producer->PublishCopy(*Batch(schema, id, kRows)));
  }
  std::thread closer([&] { EXPECT_OK(producer->Close()); });

  int64_t received = 0;
  uint64_t lost = 0;
  int64_t last_id = -1;
  while (true) {
    ASSERT_OK_AND_ASSIGN(auto batch, reader->Next());
    if (batch == nullptr) break;
    const auto* ids = batch->column_data(0)->buffers[1]->data_as<int64_t>();
    const int64_t id = ids[0];
    EXPECT_GT(id, last_id);
    // Every batch skipped since the last one was reported as lost.
    EXPECT_EQ(static_cast<uint64_t>(id - last_id - 1), reader->lost_before()) << "at id " << id;
    lost += reader->lost_before();
    last_id = id;
    ++received;
  }
  closer.join();
  EXPECT_EQ(last_id, kBatches - 1);
  EXPECT_GT(lost, 0u) << "nothing was dropped: the test did not make the reader slow";
  EXPECT_EQ(static_cast<uint64_t>(received) + lost, static_cast<uint64_t>(kBatches));

  ::kill(server_pid, SIGTERM);
  EXPECT_EQ(broker::testing::Wait(server_pid), 0);
  ::unlink(out.c_str());
}

}  // namespace
}  // namespace alkaid::flight
