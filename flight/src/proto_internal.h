#pragma once

// The one header that includes the code protoc and grpc_cpp_plugin generate
// from flight/proto/flight.proto (the wire contract, docs/FLIGHT.md).

#include "flight.grpc.pb.h"  // IWYU pragma: export
#include "flight.pb.h"       // IWYU pragma: export

namespace alkaid::flight::internal {
namespace pb = ::arrow::flight::protocol;
}  // namespace alkaid::flight::internal
