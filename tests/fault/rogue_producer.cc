// alkaid_fault_rogue_producer: a producer that lies about its values, for
// the tests of what consumers check in each Verification mode
// (rogue_producer_test.cc, tests/python/test_verification.py).
//
//   alkaid_fault_rogue_producer SOCKET TOPIC
//
// Built from the public producer API only: it publishes three batches of
// (id int64, name utf8) with 3 rows each to TOPIC through the broker at
// SOCKET. The first and the third are honest (ids 0-2 and 200-202); the
// second (ids 100-102) is built with the format builders in a pool of the
// producer, like any zero-copy batch, and then its name column's offsets are
// corrupted in place before Publish: the first and last offsets stay right
// (so the structural checks pass), the one between them says 2^30, far past
// the 21-byte data buffer. Consumers started before it (waiting for the
// topic) receive all three: Producer::Open waits for them.
//
// Exit 0 once the three batches are published and the producer closed
// (Close's drain may end early, e.g. when a consumer quit on the hostile
// batch: that is not an error here), 2 on a usage or setup error (printed to
// stderr).

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>

#include "alkaid/client/producer.h"
#include "alkaid/format/builder_binary.h"
#include "alkaid/format/builder_primitive.h"
#include "alkaid/format/record_batch.h"

namespace {

using alkaid::Result;
using alkaid::Status;
namespace client = alkaid::client;
namespace format = alkaid::format;

format::SchemaPtr Schema() {
  return format::schema(
      {format::field("id", format::int64()), format::field("name", format::utf8())});
}

// Three rows (first, first + 1, first + 2), "row-<id>" each, built in
// `pool`; with `hostile`, the name column's second offset is then set to
// 2^30 in place.
Status PublishRows(client::Producer* producer, int64_t first, bool hostile) {
  ALKAID_ASSIGN_OR_RAISE(auto pool, producer->NewBatchPool(64 << 10));
  format::Int64Builder ids(pool.get());
  format::StringBuilder names(pool.get());
  for (int64_t i = first; i < first + 3; ++i) {
    ALKAID_RETURN_NOT_OK(ids.Append(i));
    ALKAID_RETURN_NOT_OK(names.Append("row-" + std::to_string(i)));
  }
  ALKAID_ASSIGN_OR_RAISE(auto id_array, ids.Finish());
  ALKAID_ASSIGN_OR_RAISE(auto name_array, names.Finish());
  ALKAID_ASSIGN_OR_RAISE(auto batch,
                         format::RecordBatch::Make(Schema(), 3, {id_array, name_array}));
  if (hostile) {
    // The pool's memory is the producer's own, writable until published.
    const_cast<int32_t*>(name_array->data()->GetValues<int32_t>(1))[1] = int32_t{1} << 30;
  }
  return producer->Publish(*batch, pool.get());
}

int Fail(const std::string& why) {
  std::fprintf(stderr, "alkaid_fault_rogue_producer: %s\n", why.c_str());
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) return Fail("usage: SOCKET TOPIC");
  client::ProducerOptions options;
  options.socket_path = argv[1];
  options.topic.arena_bytes = 4 << 20;
  options.drain_timeout = std::chrono::seconds(10);
  auto producer = client::Producer::Open(argv[2], Schema(), options);
  if (!producer.ok()) return Fail(producer.status().ToString());
  for (const auto& [first, hostile] :
       {std::pair{0, false}, std::pair{100, true}, std::pair{200, false}}) {
    const Status st = PublishRows(producer->get(), first, hostile);
    if (!st.ok()) return Fail(st.ToString());
  }
  const Status closed = (*producer)->Close();
  if (!closed.ok())
    std::fprintf(stderr, "alkaid_fault_rogue_producer: %s\n", closed.ToString().c_str());
  return 0;
}
