// alkaid.Consumer: a subscription, iterated from Python with the GIL
// released while waiting, and exported as an Arrow C stream.

#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>
#include <vector>

#include "alkaid/client/consumer.h"
#include "py_common.h"
#include "py_consumer.h"
#include "py_types.h"

namespace alkaid::python {

namespace {

using client::Consumer;

// The C++ consumer, shared by the Python object and the streams exported
// from it, so that a stream pyarrow still holds never outlives it. `mutex`
// serialises its use (the consumer is one-thread-at-a-time); it is taken
// with the GIL released.
struct ConsumerState {
  std::mutex mutex;
  std::unique_ptr<Consumer> consumer;  // null once closed
  std::atomic<bool> closed{false};
  std::string topic;
};

Status ClosedStatus(const std::string& topic) {
  return Status::Invalid("the consumer of topic '", topic, "' is closed");
}

// Next on `state` for one wait slice; the caller holds neither the GIL nor
// the mutex.
Result<format::RecordBatchPtr> NextSlice(ConsumerState* state, std::chrono::nanoseconds slice,
                                         client::BatchOrigin* origin = nullptr) {
  std::lock_guard lock(state->mutex);
  if (state->consumer == nullptr) return ClosedStatus(state->topic);
  if (slice.count() == 0) {
    ALKAID_ASSIGN_OR_RAISE(auto batch, state->consumer->TryNext(origin));
    if (batch == nullptr) return Status(StatusCode::kTimedOut, "no batch yet");
    return batch;
  }
  return state->consumer->Next(slice, origin);
}

// Opens the consumer. A wait for the topic (wait_for_topic) is made
// interruptible (CallInterruptibly): Ctrl-C requests the stop, which ends
// Open's wait at once (Cancelled; the broker forgets the waiting consumer
// with its connection), and KeyboardInterrupt is raised.
std::unique_ptr<Consumer> OpenInterruptibly(const std::string& topic,
                                            client::ConsumerOptions options) {
  if (options.wait_for_topic.count() == 0) {
    Result<std::unique_ptr<Consumer>> opened = Status::Unknown("not run");
    {
      nb::gil_scoped_release release;
      opened = Consumer::Open(topic, options);
    }
    return Unwrap(std::move(opened));
  }
  // A consumer Open made just before a stop is closed with the dropped
  // result: either way nothing stays registered.
  return Unwrap(CallInterruptibly([&topic, &options](std::stop_token stop) {
    options.stop = std::move(stop);
    return Consumer::Open(topic, options);
  }));
}

shm::WaitMode ParseWaitMode(const std::string& mode) {
  if (mode == "spin-then-block") return shm::WaitMode::kSpinThenBlock;
  if (mode == "spin") return shm::WaitMode::kBusyPoll;
  if (mode == "block") return shm::WaitMode::kBlock;
  ThrowStatus(
      Status::Invalid("wait_mode must be 'spin-then-block', 'spin' or 'block', got '", mode, "'"));
}

client::Verification ParseVerification(const std::string& v) {
  if (v == "structure") return client::Verification::kStructure;
  if (v == "full") return client::Verification::kFull;
  if (v == "private-copy") return client::Verification::kPrivateCopy;
  ThrowStatus(
      Status::Invalid("verification must be 'structure', 'full' or 'private-copy', got '", v, "'"));
}

}  // namespace

struct PyConsumer::Impl {
  std::shared_ptr<ConsumerState> state = std::make_shared<ConsumerState>();
  format::SchemaPtr schema;
};

PyConsumer::PyConsumer(const std::string& topic, std::optional<double> wait_for_topic,
                       const std::optional<std::string>& socket,
                       const std::optional<std::vector<std::string>>& columns, bool from_oldest,
                       const std::string& wait_mode, const std::string& verification)
    : impl_(std::make_shared<Impl>()) {
  client::ConsumerOptions options;
  if (socket.has_value()) options.socket_path = *socket;
  // None (or beyond a year): no limit; 0: fail at once; otherwise at least
  // 1 ms, so that a tiny positive wait still registers as waiting.
  const Deadline deadline(wait_for_topic);  // validates the number
  if (deadline.forever) {
    options.wait_for_topic = std::chrono::milliseconds::max();
  } else if (*wait_for_topic > 0) {
    options.wait_for_topic = std::max(std::chrono::milliseconds(1),
                                      std::chrono::duration_cast<std::chrono::milliseconds>(
                                          std::chrono::duration<double>(*wait_for_topic)));
  }
  if (columns.has_value()) options.columns = *columns;
  options.from_oldest = from_oldest;
  options.wait_mode = ParseWaitMode(wait_mode);
  options.verification = ParseVerification(verification);
  impl_->state->topic = topic;
  impl_->state->consumer = OpenInterruptibly(topic, options);
  impl_->schema = impl_->state->consumer->schema();
}

PyConsumer::~PyConsumer() = default;

nb::object PyConsumer::Next(std::optional<double> timeout) {
  ConsumerState* state = impl_->state.get();
  if (state->closed.load(std::memory_order_acquire)) ThrowStatus(ClosedStatus(state->topic));
  CheckTimeout(timeout);
  // A batch already there is taken with the GIL held: no hand-off of the
  // GIL, no deadline, nothing but the receive. try_lock: a thread holding
  // the mutex (waiting in NextSlice) runs without the GIL, but the lock is
  // not worth waiting for here.
  {
    std::unique_lock lock(state->mutex, std::try_to_lock);
    if (lock.owns_lock() && state->consumer != nullptr) {
      client::BatchOrigin origin;
      Result<format::RecordBatchPtr> result = state->consumer->TryNext(&origin);
      lock.unlock();
      if (!result.ok()) ThrowStatus(result.status());
      if (*result != nullptr) {
        return nb::cast(PyBatch{std::move(result).ValueOrDie(), origin.publish_ns});
      }
    }
  }
  const Deadline deadline(timeout);
  for (;;) {
    if (state->closed.load(std::memory_order_acquire)) ThrowStatus(ClosedStatus(state->topic));
    std::optional<Result<format::RecordBatchPtr>> result;
    client::BatchOrigin origin;
    {
      nb::gil_scoped_release release;
      result.emplace(NextSlice(state, deadline.NextSlice(), &origin));
    }
    if (result->ok()) return nb::cast(PyBatch{std::move(*result).ValueOrDie(), origin.publish_ns});
    if (!result->status().IsTimedOut()) ThrowStatus(result->status());
    if (deadline.Expired()) {
      ThrowStatus(Status(StatusCode::kTimedOut, "no batch on topic '" + state->topic + "' within " +
                                                    SecondsText(timeout)));
    }
    CheckSignals();
  }
}

namespace {

// Runs `f` on the consumer with the mutex held: taken at once with the GIL
// held when free; otherwise (a thread receiving, without the GIL) waited for
// with the GIL released.
template <typename F>
auto WithConsumer(ConsumerState* state, F&& f) -> decltype(f(*state->consumer)) {
  if (state->closed.load(std::memory_order_acquire)) return ClosedStatus(state->topic);
  std::unique_lock lock(state->mutex, std::try_to_lock);
  if (!lock.owns_lock()) {
    nb::gil_scoped_release release;
    lock.lock();
  }
  if (state->consumer == nullptr) return ClosedStatus(state->topic);
  return f(*state->consumer);
}

}  // namespace

nb::object PyConsumer::TryNext() {
  client::BatchOrigin origin;
  auto batch = Unwrap(
      WithConsumer(impl_->state.get(), [&origin](Consumer& c) { return c.TryNext(&origin); }));
  if (batch == nullptr) return nb::none();
  return nb::cast(PyBatch{std::move(batch), origin.publish_ns});
}

int PyConsumer::WaitFd() {
  return Unwrap(WithConsumer(impl_->state.get(), [](Consumer& c) { return c.WaitFd(); }));
}

bool PyConsumer::ArmWait() {
  return Unwrap(WithConsumer(impl_->state.get(), [](Consumer& c) { return c.ArmWait(); }));
}

void PyConsumer::Close() {
  ConsumerState* state = impl_->state.get();
  state->closed.store(true, std::memory_order_release);
  Status status;
  {
    nb::gil_scoped_release release;
    std::lock_guard lock(state->mutex);
    if (state->consumer != nullptr) {
      status = state->consumer->Close();
      state->consumer.reset();
    }
  }
  Check(status);
}

bool PyConsumer::closed() const { return impl_->state->closed.load(std::memory_order_acquire); }
const std::string& PyConsumer::topic() const { return impl_->state->topic; }
format::SchemaPtr PyConsumer::schema() const { return impl_->schema; }

nb::dict PyConsumer::Stats() const {
  ConsumerState* state = impl_->state.get();
  client::ConsumerStats stats;
  std::size_t producers = 0;
  bool open = false;
  {
    nb::gil_scoped_release release;
    std::lock_guard lock(state->mutex);
    if (state->consumer != nullptr) {
      open = true;
      stats = state->consumer->stats();
      producers = state->consumer->producer_count();
    }
  }
  if (!open) ThrowStatus(ClosedStatus(state->topic));
  nb::dict out;
  out["lost"] = stats.lost;
  out["reregistrations"] = stats.reregistrations;
  out["producers"] = producers;
  return out;
}

nb::object PyConsumer::ExportStream() {
  if (closed()) ThrowStatus(ClosedStatus(topic()));
  std::shared_ptr<ConsumerState> state = impl_->state;
  // Runs on whichever thread the foreign reader calls get_next on, holding
  // the GIL or not (pyarrow releases it; polars may keep it). Waits in
  // slices with the GIL released, so that Python threads, a producer in this
  // process among them, run meanwhile. Between slices, on Python's main
  // thread only (the only one where signal handlers run), Ctrl-C is checked;
  // other threads never take the GIL here: their caller may hold it while
  // waiting for them.
  const unsigned long main_thread = MainThreadId();
  format::NextBatchFunction next = [state, main_thread]() -> Result<format::RecordBatchPtr> {
    for (;;) {
      if (state->closed.load(std::memory_order_acquire)) return ClosedStatus(state->topic);
      if (!Py_IsInitialized()) return Status(StatusCode::kCancelled, "interpreter finalizing");
      const bool holds_gil = PyGILState_Check() != 0;
      Result<format::RecordBatchPtr> result = Status::Unknown("not run");
      if (holds_gil) {
        nb::gil_scoped_release release;
        result = NextSlice(state.get(), kSlice);
      } else {
        result = NextSlice(state.get(), kSlice);
      }
      if (result.ok()) return result;
      if (result.status().IsEndOfStream()) return format::RecordBatchPtr{};
      if (!result.status().IsTimedOut()) return result.status();
      if (PyThread_get_thread_ident() != main_thread) continue;
      int interrupted = 0;
      if (holds_gil) {
        interrupted = PyErr_CheckSignals();
        if (interrupted != 0) PyErr_Clear();
      } else {
        nb::gil_scoped_acquire acquire;
        interrupted = PyErr_CheckSignals();
        if (interrupted != 0) PyErr_Clear();
      }
      if (interrupted != 0) {
        return Status(StatusCode::kCancelled,
                      "reading topic '" + state->topic + "' was interrupted (KeyboardInterrupt)");
      }
    }
  };
  ArrowArrayStream stream;
  Check(format::ExportRecordBatchStream(impl_->schema, std::move(next), &stream));
  return StreamCapsule(&stream);
}

void BindConsumer(nb::module_& m) {
  nb::class_<PyConsumer>(
      m, "Consumer",
      "A subscription to a topic: receives every producer's batches, zero-copy from shared "
      "memory.\n\n"
      "Iterate it (``for batch in consumer``, or ``async for`` on an asyncio loop: many "
      "consumers on one thread) or call ``next(timeout=...)``; the stream ends "
      "(StopIteration) once every producer it saw has closed or died and everything was read. "
      "It is also an Arrow C stream (``__arrow_c_stream__``): "
      "``pyarrow.RecordBatchReader.from_stream(consumer)``, ``polars.DataFrame(consumer)`` or "
      "a DuckDB scan read the topic to its end. Waits release the GIL and end on Ctrl-C "
      "(KeyboardInterrupt). A context manager: leaving the block closes it. Batches it gave "
      "out stay valid after close.")
      .def(nb::init<const std::string&, std::optional<double>, const std::optional<std::string>&,
                    const std::optional<std::vector<std::string>>&, bool, const std::string&,
                    const std::string&>(),
           nb::arg("topic"), nb::kw_only(), nb::arg("wait_for_topic").none() = 0.0,
           nb::arg("socket").none() = nb::none(), nb::arg("columns").none() = nb::none(),
           nb::arg("from_oldest") = false, nb::arg("wait_mode") = "spin-then-block",
           nb::arg("verification") = "structure",
           "Subscribes to `topic` on the broker at `socket` (None: $ALKAID_BROKER_SOCKET or the "
           "default socket).\n\n"
           "wait_for_topic: seconds to wait for the topic to be created (0: fail at once with "
           "NotFoundError; None: no limit); a consumer that waited gets every batch from the "
           "first. columns: receive only these columns, in this order. from_oldest: start at the "
           "oldest batch the producers' channels still hold. wait_mode: 'spin-then-block' "
           "(default), "
           "'spin' (lowest latency, one core busy) or 'block'. verification: 'structure' "
           "(default), 'full' or 'private-copy' (docs/RELIABILITY.md).")
      .def("next", &PyConsumer::Next, nb::arg("timeout").none() = nb::none(),
           "The next batch, waiting up to `timeout` seconds (None: until one comes). Raises "
           "TimedOutError if none came in time, StopIteration at the end of the stream, "
           "InvalidError if the consumer is closed.")
      .def("try_next", &PyConsumer::TryNext,
           "The batch already there, or None if none is (never waits). StopIteration at the end "
           "of the stream.")
      .def("wait_fd", &PyConsumer::WaitFd,
           "A descriptor for select, poll or an event loop (level-triggered) that turns "
           "readable when the consumer may have news for try_next: a batch, a new or finished "
           "producer. Drain with try_next until None, call arm_wait(), then sleep on it; a "
           "producer that dies sounds nothing (the broker tells the consumer a little later): "
           "sleep with a timeout. Owned by the consumer: do not close it. ``async for`` does "
           "all this on the running asyncio loop.")
      .def("arm_wait", &PyConsumer::ArmWait,
           "Before sleeping on wait_fd(): arms every producer's doorbell. True if a batch may be "
           "there already (call try_next instead of sleeping). next()'s own waits end the "
           "arming.")
      .def("__iter__", [](nb::handle self) { return nb::borrow(self); })
      .def("__aiter__", [](nb::handle self) { return nb::borrow(self); })
      .def(
          "__anext__",
          [](nb::handle self) {
            // A coroutine of alkaid._aio: awaits the next batch on the
            // running asyncio loop (StopAsyncIteration at the end). Looked
            // up once and kept for the life of the process (a static
            // nb::object would be released after the interpreter).
            static nb::handle anext =
                nb::object(nb::module_::import_("alkaid._aio").attr("anext")).release();
            return anext(self);
          },
          "Awaits the next batch on the running asyncio loop without a thread: the loop "
          "sleeps on wait_fd(). StopAsyncIteration at the end of the stream.")
      .def(
          "__next__", [](PyConsumer& self) { return self.Next(std::nullopt); },
          "next(timeout=None).")
      .def("close", &PyConsumer::Close,
           "Detaches from the broker and the channels. Idempotent. Batches already received stay "
           "valid.")
      .def_prop_ro("closed", &PyConsumer::closed, "True after close().")
      .def_prop_ro("topic", &PyConsumer::topic, "The topic's name.")
      .def_prop_ro(
          "schema", [](const PyConsumer& self) { return PySchema{self.schema()}; },
          "The schema of the batches it returns (the topic's, restricted to `columns`).")
      .def("stats", &PyConsumer::Stats,
           "Counters: 'lost' (batches lost to overwritten slots), 'reregistrations' (broker "
           "restarts survived), 'producers' (producers read from now).")
      .def(
          "__arrow_c_stream__",
          [](PyConsumer& self, nb::handle /*requested_schema*/) { return self.ExportStream(); },
          nb::arg("requested_schema").none() = nb::none(),
          "Exports the consumer as an ``arrow_array_stream`` PyCapsule: each get_next is the "
          "next batch (zero-copy), the end of the topic's stream ends it. The stream keeps the "
          "subscription alive until released; once the consumer is closed it fails.")
      .def("__enter__", [](nb::handle self) { return nb::borrow(self); })
      .def(
          "__exit__",
          [](PyConsumer& self, nb::handle, nb::handle, nb::handle) {
            self.Close();
            return false;
          },
          nb::arg("exc_type").none(), nb::arg("exc").none(), nb::arg("tb").none())
      .def("__repr__", [](const PyConsumer& self) {
        return "alkaid.Consumer('" + self.topic() + "'" + (self.closed() ? ", closed)" : ")");
      });
}

}  // namespace alkaid::python
