// Fuzzes what alkaid-flight's DoPut decodes from a remote client: a stream
// of FlightData protobuf messages, each framed as gRPC frames a message on
// the wire (a compression flag byte, a 4-byte big-endian length, the
// serialized message). The first message's descriptor is checked as DoPut
// checks it; then every message goes through internal::PutDecoder, the
// server's own decoder (schema first, dictionaries applied, record batches
// decoded zero-copy from the parsed protobuf), and every batch that decodes
// is exercised.

#include <cstddef>
#include <cstdint>
#include <memory>

#include "flight_data_internal.h"
#include "fuzz_util.h"
#include "proto_internal.h"

namespace {

namespace internal = alkaid::flight::internal;

// The next framed message of [*at, end), or null when none is left whole.
std::shared_ptr<internal::pb::FlightData> NextMessage(const uint8_t** at, const uint8_t* end) {
  constexpr std::size_t kPrefix = 5;
  if (static_cast<std::size_t>(end - *at) < kPrefix) return nullptr;
  const uint8_t* p = *at;
  const uint32_t length =
      (uint32_t{p[1]} << 24) | (uint32_t{p[2]} << 16) | (uint32_t{p[3]} << 8) | uint32_t{p[4]};
  if (p[0] != 0 || length > static_cast<std::size_t>(end - p) - kPrefix) return nullptr;
  auto message = std::make_shared<internal::pb::FlightData>();
  if (!message->ParseFromArray(p + kPrefix, static_cast<int>(length))) return nullptr;
  *at = p + kPrefix + length;
  return message;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const uint8_t* at = data;
  const uint8_t* end = data + size;
  auto first = NextMessage(&at, end);
  if (first == nullptr) return 0;
  if (first->has_flight_descriptor()) {
    (void)internal::DescriptorTopic(first->flight_descriptor());
  }
  // The server's option (FlightServerOptions::max_message_bytes), smaller
  // than its 64 MiB default so that inputs decompressing many buffers stay
  // within the fuzzer's memory limit.
  internal::PutDecoder decoder(int64_t{1} << 24);
  if (!decoder.Start(first).ok()) return 0;
  while (auto message = NextMessage(&at, end)) {
    auto batch = decoder.Next(message);
    if (batch.ok() && *batch != nullptr) alkaid::fuzz::Exercise(**batch);
  }
  return 0;
}
