#pragma once

// The generated flatbuffers code of broker/fbs/control.fbs. Only
// broker/protocol/control.cc includes this header.

#include "alkaid/broker_fbs/control_generated.h"  // IWYU pragma: export
