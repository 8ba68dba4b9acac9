#pragma once

/// \file
/// Process liveness, as the broker, the client library and libshm judge it
/// when they clean up after a crashed peer.

#include <cstdint>

#include "alkaid/common/export.h"

namespace alkaid {

/// True if process `pid` has exited: no such process, or a zombie its parent
/// has not reaped yet (kill(pid, 0) still succeeds for those). 0 and live
/// processes of other users count as alive. Needs the caller and `pid` to
/// share a pid namespace. Thread-safe.
ALKAID_EXPORT bool ProcessIsGone(uint32_t pid);

}  // namespace alkaid
