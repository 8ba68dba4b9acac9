#pragma once

// Shared pieces of the Python module (_alkaid): Status -> Python exception,
// the Arrow PyCapsule protocol, and waits that release the GIL and let
// Ctrl-C through.

#include <nanobind/nanobind.h>

#include <chrono>
#include <functional>
#include <future>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>
#include <utility>

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

/// Issues a DeprecationWarning with `message` at the caller's line (a
/// deprecated keyword or name); raises if warnings are errors.
void WarnDeprecated(const char* message);

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
nb::object BatchCapsules(const format::RecordBatchPtr& batch);  // (schema, array) tuple
nb::object StreamCapsule(ArrowArrayStream* stream);             // moves *stream into the capsule

/// Moves the struct out of a capsule of the given name (the capsule is then
/// marked released and frees only its shell). TypeError if `capsule` is not
/// a capsule of that name, Invalid if it was already consumed.
void TakeSchema(nb::handle capsule, ArrowSchema* out);
void TakeArray(nb::handle capsule, ArrowArray* out);
void TakeStream(nb::handle capsule, ArrowArrayStream* out);

/// Imports any object with `__arrow_c_schema__` (pyarrow.Schema, ...).
format::SchemaPtr SchemaFromObject(nb::handle obj);

/// InvalidError unless `seconds` is None or a number >= 0 (what Deadline
/// takes), without reading the clock.
void CheckTimeout(std::optional<double> seconds);

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

/// The thread id of Python's main thread (threading.main_thread()), the
/// only thread signal handlers run on. Needs the GIL.
unsigned long MainThreadId();

/// Runs `call(stop)`, a C++ call that may wait long (a producer's Open,
/// publish, loan or close; a consumer's Open), so that Ctrl-C ends it. The
/// caller holds the GIL; `call` runs without it and hands `stop` to the
/// C++ waits it makes (ProducerOptions::stop, ConsumerOptions::stop).
///
/// On Python's main thread, `call` runs on a thread of its own while this
/// thread waits for it with the GIL released and, every kSlice, takes the
/// GIL to check for signals. A pending signal (Ctrl-C) requests the stop,
/// which ends the C++ wait at once (Cancelled); once `call` returned, the
/// handler's exception (KeyboardInterrupt) is raised and its result
/// dropped. `call` is always finished when this returns or throws, so it
/// may use the caller's locals by reference. On other threads (where
/// PyErr_CheckSignals finds nothing) `call` runs right here with the GIL
/// released and a token that is never stopped.
template <typename Call>
auto CallInterruptibly(Call&& call) -> decltype(call(std::stop_token{})) {
  using R = decltype(call(std::stop_token{}));
  if (PyThread_get_thread_ident() != MainThreadId()) {
    nb::gil_scoped_release release;
    return call(std::stop_token{});
  }
  std::stop_source stop;
  std::future<R> running =
      std::async(std::launch::async, [&call, token = stop.get_token()] { return call(token); });
  for (;;) {
    bool ready = false;
    {
      nb::gil_scoped_release release;
      ready = running.wait_for(kSlice) == std::future_status::ready;
    }
    if (ready) return running.get();
    if (PyErr_CheckSignals() != 0) {
      stop.request_stop();
      {
        nb::gil_scoped_release release;
        (void)running.get();
      }
      throw nb::python_error();
    }
  }
}

/// The Status code of a call's result, for CallInterruptiblyRepeatable
/// (without copying the Status of a Result).
inline StatusCode CodeOf(const Status& status) { return status.code(); }
template <typename T>
StatusCode CodeOf(const Result<T>& result) {
  return result.ok() ? StatusCode::kOk : result.status().code();
}

/// A token whose stop was requested, for a first attempt that must not
/// wait (CallInterruptiblyRepeatable). Shared; copying it costs an atomic
/// increment, not an allocation.
std::stop_token StoppedToken();

/// As CallInterruptibly, for a call on an object guarded by `mutex` that did
/// nothing when it returns Cancelled (a publish or loan whose wait was
/// cancelled: nothing published, no block lent), so that it can be made
/// again; `call(stop)` runs with `mutex` held. It is made first right here,
/// with a stop already requested: one that need not wait (the common case)
/// costs no thread and no GIL hand-off; one that would wait ends at its
/// first look at the token (after the channel's spin for room,
/// ChannelOptions::publish_spin) with Cancelled and is then made again with
/// CallInterruptibly. The first attempt keeps the GIL when `small` (a
/// batch whose copy and checks take about a microsecond: releasing and
/// taking back the GIL would cost as much) and `mutex` is free; otherwise
/// (another thread uses the object) it releases the GIL, then waits for
/// `mutex`.
template <typename Call>
auto CallInterruptiblyRepeatable(std::mutex& mutex, bool small, Call&& call)
    -> decltype(call(std::stop_token{})) {
  bool tried = false;
  if (small) {
    // try_lock: a thread holding the mutex may be waiting for the GIL we hold.
    std::unique_lock lock(mutex, std::try_to_lock);
    if (lock.owns_lock()) {
      auto first = call(StoppedToken());
      if (CodeOf(first) != StatusCode::kCancelled) return first;
      tried = true;
    }
  }
  if (!tried) {
    nb::gil_scoped_release release;
    std::lock_guard lock(mutex);
    auto first = call(StoppedToken());
    if (CodeOf(first) != StatusCode::kCancelled) return first;
  }
  return CallInterruptibly([&mutex, &call](std::stop_token stop) {
    std::lock_guard lock(mutex);
    return call(std::move(stop));
  });
}

/// "1.5 s", for messages.
std::string SecondsText(std::optional<double> seconds);

}  // namespace alkaid::python
