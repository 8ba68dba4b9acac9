#pragma once

// Shared pieces of the Python module (_alkaid): Status -> Python exception,
// the Arrow PyCapsule protocol, and waits that release the GIL and let
// Ctrl-C through.

#include <nanobind/nanobind.h>

#include <chrono>
#include <functional>
#include <optional>
#include <string>

#include "alkaid/common/result.h"
#include "alkaid/common/status.h"
#include "alkaid/format/c_data.h"
#include "alkaid/format/record_batch.h"

namespace alkaid::python {

namespace nb = nanobind;

/// Raises the alkaid exception matching `status` (alkaid/_errors.py):
/// NotFoundError, TimedOutError, InvalidError, PermissionDeniedError,
/// IOFailedError, or Error, with the Status message. EndOfStream becomes
/// StopIteration.
[[noreturn]] void ThrowStatus(const Status& status);

inline void Check(const Status& status) {
  if (!status.ok()) ThrowStatus(status);
}
template <typename T>
T Unwrap(Result<T> result) {
  if (!result.ok()) ThrowStatus(result.status());
  return std::move(result).ValueOrDie();
}

/// Wraps heap-allocated C Data Interface structs in PyCapsules named as the
/// PyCapsule protocol says ("arrow_schema", "arrow_array",
/// "arrow_array_stream"). The capsule owns the struct: its destructor calls
/// `release` unless the consumer moved the struct out (release == NULL),
/// then frees it.
nb::object SchemaCapsule(const format::Schema& schema);
nb::object BatchCapsules(const format::RecordBatch& batch);  // (schema, array) tuple
nb::object StreamCapsule(ArrowArrayStream* stream);          // moves *stream into the capsule

/// Moves the struct out of a capsule of the given name (the capsule is then
/// marked released and frees only its shell). TypeError if `capsule` is not
/// a capsule of that name, Invalid if it was already consumed.
void TakeSchema(nb::handle capsule, ArrowSchema* out);
void TakeArray(nb::handle capsule, ArrowArray* out);
void TakeStream(nb::handle capsule, ArrowArrayStream* out);

/// Imports any object with `__arrow_c_schema__` (pyarrow.Schema, ...).
format::SchemaPtr SchemaFromObject(nb::handle obj);

/// A Python timeout in seconds (None: forever) as a deadline.
struct Deadline {
  explicit Deadline(std::optional<double> seconds);
  /// The next wait slice: at most kSlice, at most what is left. Zero once
  /// the deadline passed.
  std::chrono::nanoseconds NextSlice() const;
  bool Expired() const;
  bool forever;
  std::chrono::steady_clock::time_point until;
};

/// How long one wait with the GIL released lasts before the waiting thread
/// takes the GIL back to check for signals (Ctrl-C): short enough to feel
/// immediate, long enough to cost nothing.
inline constexpr std::chrono::milliseconds kSlice{50};

/// Runs PyErr_CheckSignals (the GIL must be held): throws the exception a
/// signal handler raised (KeyboardInterrupt for Ctrl-C).
void CheckSignals();

/// "1.5 s", for messages.
std::string SecondsText(std::optional<double> seconds);

}  // namespace alkaid::python
