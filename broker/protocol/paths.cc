#include "protocol/paths.h"

#include <unistd.h>

#include <cstdlib>

namespace alkaid::broker::protocol {

std::string DefaultSocketPath() {
  // NOLINTNEXTLINE(concurrency-mt-unsafe): reads only; the library never sets the environment
  const char* xdg = std::getenv("XDG_RUNTIME_DIR");
  if (xdg != nullptr && xdg[0] == '/') return std::string(xdg) + "/alkaid/broker.sock";
  return "/tmp/alkaid-" + std::to_string(::getuid()) + "/broker.sock";
}

std::string ClientSocketPath() {
  // NOLINTNEXTLINE(concurrency-mt-unsafe): reads only; the library never sets the environment
  const char* env = std::getenv(kSocketEnvVar);
  if (env != nullptr && env[0] != '\0') return env;
  return DefaultSocketPath();
}

}  // namespace alkaid::broker::protocol
