#include "py_common.h"

#include <nanobind/stl/string.h>

#include <cmath>
#include <memory>
#include <sstream>

namespace alkaid::python {

namespace {

const char* ExceptionName(StatusCode code) {
  switch (code) {
    case StatusCode::kKeyError:
      return "NotFoundError";
    case StatusCode::kTimedOut:
      return "TimedOutError";
    case StatusCode::kInvalid:
    case StatusCode::kTypeError:
    case StatusCode::kIndexError:
    case StatusCode::kCapacityError:
      return "InvalidError";
    case StatusCode::kPermissionDenied:
      return "PermissionDeniedError";
    case StatusCode::kIOError:
      return "IOFailedError";
    default:
      return "Error";
  }
}

template <typename T>
void DestroyCapsule(PyObject* capsule, const char* name) {
  auto* data = static_cast<T*>(PyCapsule_GetPointer(capsule, name));
  if (data == nullptr) {  // not ours: cannot happen, but never crash at exit
    PyErr_Clear();
    return;
  }
  if (data->release != nullptr) data->release(data);
  delete data;
}

void DestroySchemaCapsule(PyObject* capsule) {
  DestroyCapsule<ArrowSchema>(capsule, "arrow_schema");
}
void DestroyArrayCapsule(PyObject* capsule) { DestroyCapsule<ArrowArray>(capsule, "arrow_array"); }
void DestroyStreamCapsule(PyObject* capsule) {
  DestroyCapsule<ArrowArrayStream>(capsule, "arrow_array_stream");
}

template <typename T>
nb::object MakeCapsule(std::unique_ptr<T> data, const char* name, PyCapsule_Destructor destroy) {
  PyObject* capsule = PyCapsule_New(data.get(), name, destroy);
  if (capsule == nullptr) {
    if (data->release != nullptr) data->release(data.get());
    throw nb::python_error();
  }
  (void)data.release();  // the capsule owns it now
  return nb::steal(capsule);
}

template <typename T>
void Take(nb::handle capsule, const char* name, T* out) {
  if (!PyCapsule_IsValid(capsule.ptr(), name)) {
    throw nb::type_error(("expected a PyCapsule named '" + std::string(name) + "', got " +
                          nb::cast<std::string>(nb::str(capsule.type())))
                             .c_str());
  }
  auto* data = static_cast<T*>(PyCapsule_GetPointer(capsule.ptr(), name));
  if (data->release == nullptr) {
    ThrowStatus(Status::Invalid("the '", name, "' capsule was already consumed"));
  }
  // The interface's move: a bitwise copy, then the source marked released.
  *out = *data;
  data->release = nullptr;
}

}  // namespace

void ThrowStatus(const Status& status) {
  if (status.IsEndOfStream()) throw nb::stop_iteration(status.message().c_str());
  nb::object errors = nb::module_::import_("alkaid._errors");
  nb::object cls = errors.attr(ExceptionName(status.code()));
  nb::object exc = cls(status.message(), std::string(StatusCodeName(status.code())));
  PyErr_SetObject(cls.ptr(), exc.ptr());
  throw nb::python_error();
}

nb::object SchemaCapsule(const format::Schema& schema) {
  auto out = std::make_unique<ArrowSchema>();
  Check(format::ExportSchema(schema, out.get()));
  return MakeCapsule(std::move(out), "arrow_schema", DestroySchemaCapsule);
}

nb::object BatchCapsules(const format::RecordBatchPtr& batch) {
  auto schema = std::make_unique<ArrowSchema>();
  auto array = std::make_unique<ArrowArray>();
  // Holds the batch itself: pyarrow's release is dropping a batch reference.
  Check(format::ExportRecordBatch(batch, array.get(), schema.get()));
  nb::object schema_capsule = MakeCapsule(std::move(schema), "arrow_schema", DestroySchemaCapsule);
  nb::object array_capsule = MakeCapsule(std::move(array), "arrow_array", DestroyArrayCapsule);
  return nb::make_tuple(schema_capsule, array_capsule);
}

nb::object StreamCapsule(ArrowArrayStream* stream) {
  auto out = std::make_unique<ArrowArrayStream>(*stream);
  stream->release = nullptr;
  return MakeCapsule(std::move(out), "arrow_array_stream", DestroyStreamCapsule);
}

void TakeSchema(nb::handle capsule, ArrowSchema* out) { Take(capsule, "arrow_schema", out); }
void TakeArray(nb::handle capsule, ArrowArray* out) { Take(capsule, "arrow_array", out); }
void TakeStream(nb::handle capsule, ArrowArrayStream* out) {
  Take(capsule, "arrow_array_stream", out);
}

format::SchemaPtr SchemaFromObject(nb::handle obj) {
  if (!nb::hasattr(obj, "__arrow_c_schema__")) {
    throw nb::type_error(("schema: expected an object with __arrow_c_schema__ (a pyarrow.Schema, "
                          "an alkaid.Schema, ...), got " +
                          nb::cast<std::string>(nb::str(obj.type())))
                             .c_str());
  }
  nb::object capsule = obj.attr("__arrow_c_schema__")();
  ArrowSchema schema;
  TakeSchema(capsule, &schema);
  return Unwrap(format::ImportSchema(&schema));
}

void CheckTimeout(std::optional<double> seconds) {
  if (seconds.has_value() && (std::isnan(*seconds) || *seconds < 0)) {
    ThrowStatus(
        Status::Invalid("timeout must be a number of seconds >= 0 or None, got ", *seconds));
  }
}

Deadline::Deadline(std::optional<double> seconds) : forever(!seconds.has_value()) {
  CheckTimeout(seconds);
  if (seconds.has_value()) {
    // Beyond a year is forever (and would overflow the clock).
    if (*seconds > 365.0 * 24 * 3600) {
      forever = true;
    } else {
      until =
          std::chrono::steady_clock::now() + std::chrono::duration_cast<std::chrono::nanoseconds>(
                                                 std::chrono::duration<double>(*seconds));
    }
  }
}

std::chrono::nanoseconds Deadline::NextSlice() const {
  if (forever) return kSlice;
  const auto left = until - std::chrono::steady_clock::now();
  if (left <= std::chrono::nanoseconds(0)) return std::chrono::nanoseconds(0);
  return std::min<std::chrono::nanoseconds>(left, kSlice);
}

bool Deadline::Expired() const { return !forever && std::chrono::steady_clock::now() >= until; }

unsigned long MainThreadId() {
  // Looked up once: the main thread stays the same for the interpreter's
  // life (a child forked from the main thread keeps its id too).
  static const unsigned long id = nb::cast<unsigned long>(
      nb::module_::import_("threading").attr("main_thread")().attr("ident"));
  return id;
}

std::stop_token StoppedToken() {
  static const std::stop_source stopped = [] {
    std::stop_source source;
    source.request_stop();
    return source;
  }();
  return stopped.get_token();
}

void CheckSignals() {
  if (PyErr_CheckSignals() != 0) throw nb::python_error();
}

std::string SecondsText(std::optional<double> seconds) {
  if (!seconds.has_value()) return "forever";
  std::ostringstream text;
  text << *seconds << " s";
  return text.str();
}

void WarnDeprecated(const char* message) {
  if (PyErr_WarnEx(PyExc_DeprecationWarning, message, 1) != 0) throw nb::python_error();
}

}  // namespace alkaid::python
