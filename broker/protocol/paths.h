#pragma once

/// \file
/// Where the broker listens by default, shared by the daemon and the client.

#include <string>

namespace alkaid::broker::protocol {

/// Environment variable that overrides the client's default socket path.
inline constexpr const char* kSocketEnvVar = "ALKAID_BROKER_SOCKET";

/// $XDG_RUNTIME_DIR/alkaid/broker.sock if XDG_RUNTIME_DIR is set to an
/// absolute path, /tmp/alkaid-<uid>/broker.sock otherwise. Ignores
/// ALKAID_BROKER_SOCKET (the daemon takes --socket).
std::string DefaultSocketPath();

/// ALKAID_BROKER_SOCKET if set and not empty, DefaultSocketPath() otherwise.
std::string ClientSocketPath();

}  // namespace alkaid::broker::protocol
