// libFuzzer target for the broker's control protocol: the bytes are fed
// through the frame assembler in uneven pieces, and every frame (and the
// whole input) is decoded both as a client Request (what the broker
// parses) and as a ServerMessage (what the client parses). Decoded values
// are re-encoded and decoded again, which must succeed.

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>

#include "protocol/control.h"
#include "protocol/frame.h"

namespace p = alkaid::broker::protocol;

namespace {

void DecodeBoth(std::span<const uint8_t> bytes) {
  auto request = p::DecodeRequest(bytes);
  if (request.ok()) {
    const auto again = p::EncodeRequest(*request);
    if (!p::DecodeRequest(again).ok()) std::abort();
  }
  auto message = p::DecodeServerMessage(bytes);
  if (message.ok()) {
    const auto again = p::EncodeServerMessage(*message);
    if (!p::DecodeServerMessage(again).ok()) std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  DecodeBoth({data, size});
  p::FrameAssembler assembler;
  std::size_t pos = 0;
  std::size_t piece = 1;
  while (pos < size) {
    const std::size_t n = std::min(piece, size - pos);
    assembler.Append({data + pos, n});
    pos += n;
    piece = piece * 3 + 1;
    while (true) {
      auto frame = assembler.Next();
      if (!frame.ok()) return 0;  // the broker closes such a connection
      if (!frame->has_value()) break;
      DecodeBoth(**frame);
    }
  }
  return 0;
}
