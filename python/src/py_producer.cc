// alkaid.Producer and alkaid.Loan: publishing Arrow data from Python, one
// copy from any Arrow object, none from a loan's numpy views.

#include "py_producer.h"

#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <stop_token>
#include <utility>
#include <vector>

#include "alkaid/format/array_data.h"
#include "alkaid/format/buffer.h"
#include "py_common.h"
#include "py_numpy.h"
#include "py_types.h"

namespace alkaid::python {

namespace {

std::chrono::milliseconds Millis(double seconds, const char* what) {
  if (std::isnan(seconds) || seconds < 0 || seconds > 365.0 * 24 * 3600) {
    ThrowStatus(
        Status::Invalid(what, " must be a number of seconds in [0, 1 year], got ", seconds));
  }
  return std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::duration<double>(seconds));
}

// Hands a call's stop token (CallInterruptibly) to the producer's waits
// for the scope, then gives it a token that is never stopped again, so
// that a later wait (the destructor's Close among them) is not cut short
// by this call's interrupt. Holds the producer's mutex.
class StopScope {
 public:
  StopScope(client::Producer* producer, std::stop_token stop) : producer_(producer) {
    if (producer_ != nullptr) producer_->set_stop(std::move(stop));
  }
  ~StopScope() {
    if (producer_ != nullptr) producer_->set_stop({});
  }
  StopScope(const StopScope&) = delete;
  StopScope& operator=(const StopScope&) = delete;

 private:
  client::Producer* producer_;
};

// A C Data Interface struct (ArrowArray or ArrowSchema) moved out of
// `*c_struct` into one heap block with a count of its references: this
// owner's and one per lent copy not yet released. The struct is released
// with the last of them, on whichever thread.
template <typename T>
class Owned {
 public:
  explicit Owned(T* c_struct) : block_(new Block{*c_struct}) { c_struct->release = nullptr; }
  ~Owned() { Unref(block_); }
  Owned(const Owned&) = delete;
  Owned& operator=(const Owned&) = delete;

  // The struct, to read (not to take: Lend that).
  const T& get() const { return block_->value; }

  // A shallow copy for one call that takes the struct: the same buffers and
  // children (the import reads them in place); its release only drops its
  // reference. A publish that failed (and released what it was given) can
  // so be made again.
  void Lend(T* out) const {
    *out = block_->value;
    block_->refs.fetch_add(1, std::memory_order_relaxed);  // the owner holds one: no race to 0
    out->private_data = block_;
    out->release = [](T* self) {
      Unref(static_cast<Block*>(self->private_data));
      self->release = nullptr;
    };
  }

 private:
  struct Block {
    T value;
    std::atomic<int> refs{1};
  };
  static void Unref(Block* block) {
    // acq_rel: the last one sees every other holder's use of the struct.
    if (block->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      if (block->value.release != nullptr) block->value.release(&block->value);
      delete block;
    }
  }
  Block* block_;
};

std::string TypeName(nb::handle obj) { return nb::cast<std::string>(nb::str(obj.type())); }

// The numpy dtype (its name) of a column a loan can lend, or null.
// Fixed-width types without a numpy equivalent (decimals, intervals,
// fixed-size binary) and bit-packed booleans are not lent; temporal types
// are lent as their integers.
const char* LoanDtype(const format::DataType& type) {
  using format::TypeId;
  switch (type.id()) {
    case TypeId::kInt8:
      return "int8";
    case TypeId::kInt16:
      return "int16";
    case TypeId::kInt32:
    case TypeId::kDate32:
    case TypeId::kTime32:
      return "int32";
    case TypeId::kInt64:
    case TypeId::kDate64:
    case TypeId::kTime64:
    case TypeId::kTimestamp:
    case TypeId::kDuration:
      return "int64";
    case TypeId::kUInt8:
      return "uint8";
    case TypeId::kUInt16:
      return "uint16";
    case TypeId::kUInt32:
      return "uint32";
    case TypeId::kUInt64:
      return "uint64";
    case TypeId::kHalfFloat:
      return "float16";
    case TypeId::kFloat:
      return "float32";
    case TypeId::kDouble:
      return "float64";
    default:
      return nullptr;
  }
}

// An interned str, made once and kept for the process's life (never
// released: a module-level constant).
PyObject* Interned(const char* text) {
  PyObject* s = PyUnicode_InternFromString(text);
  if (s == nullptr) throw nb::python_error();
  return s;
}

// obj.name, or an invalid object if it has no such attribute.
nb::object OptionalAttr(nb::handle obj, PyObject* name) {
  PyObject* value = PyObject_GetAttr(obj.ptr(), name);
  if (value == nullptr) {
    if (!PyErr_ExceptionMatches(PyExc_AttributeError)) throw nb::python_error();
    PyErr_Clear();
    return {};
  }
  return nb::steal(value);
}

nb::object CallNoArgs(const nb::object& callable) {
  PyObject* result = PyObject_CallNoArgs(callable.ptr());
  if (result == nullptr) throw nb::python_error();
  return nb::steal(result);
}

bool SameText(const char* a, const char* b) {
  if (a == nullptr || b == nullptr) return a == b;
  return std::strcmp(a, b) == 0;
}

// The bytes of C Data Interface metadata (an int32 count, then each key and
// value as an int32 length and its bytes), -1 if malformed.
int64_t MetadataBytes(const char* metadata) {
  if (metadata == nullptr) return 0;
  int32_t pairs = 0;
  std::memcpy(&pairs, metadata, sizeof(pairs));
  if (pairs < 0) return -1;
  int64_t pos = sizeof(pairs);
  for (int64_t i = 0; i < int64_t{2} * pairs; ++i) {
    int32_t length = 0;
    std::memcpy(&length, metadata + pos, sizeof(length));
    if (length < 0) return -1;
    pos += static_cast<int64_t>(sizeof(length)) + length;
  }
  return pos;
}

// Every format, name, flag and metadata byte the same, children and
// dictionaries too.
bool SameSchema(const ArrowSchema& a, const ArrowSchema& b) {
  if (!SameText(a.format, b.format) || !SameText(a.name, b.name) || a.flags != b.flags ||
      a.n_children != b.n_children || (a.dictionary == nullptr) != (b.dictionary == nullptr)) {
    return false;
  }
  const int64_t metadata = MetadataBytes(a.metadata);
  if (metadata < 0 || metadata != MetadataBytes(b.metadata) ||
      (metadata > 0 && std::memcmp(a.metadata, b.metadata, static_cast<size_t>(metadata)) != 0)) {
    return false;
  }
  if (a.dictionary != nullptr && !SameSchema(*a.dictionary, *b.dictionary)) return false;
  for (int64_t i = 0; i < a.n_children; ++i) {
    if (!SameSchema(*a.children[i], *b.children[i])) return false;
  }
  return true;
}

// A publish of a batch of at most this many rows is first tried with the
// GIL held (CallInterruptiblyRepeatable): its import, checks and copy take
// a few microseconds at most, about what handing the GIL over and back
// costs. Larger batches are copied with the GIL released.
constexpr int64_t kSmallBatchRows = 1024;

// True if `array` is a struct array of `widths.size()` fixed-width
// children (byte widths `widths`) of at least its length, none with nulls,
// all with their values buffer: what PublishSameLayout copies. Its own
// offset is 0 and it has no nulls; a child's offset is read past. A
// struct that is not (a slice, nulls, another layout) goes through the
// import, which checks it and says what is wrong.
bool IsFixedWidthStruct(const ArrowArray& array, const std::vector<int64_t>& widths) {
  constexpr int64_t kMaxRows = int64_t{1} << 40;  // no product below can overflow
  if (array.length <= 0 || array.length > kMaxRows || array.offset != 0 || array.null_count != 0 ||
      array.n_buffers != 1 || array.dictionary != nullptr ||
      array.n_children != static_cast<int64_t>(widths.size()) || array.children == nullptr) {
    return false;
  }
  for (size_t i = 0; i < widths.size(); ++i) {
    const ArrowArray* child = array.children[i];
    if (child == nullptr || child->n_buffers != 2 || child->n_children != 0 ||
        child->dictionary != nullptr || child->null_count != 0 || child->offset < 0 ||
        child->offset > kMaxRows || child->length < array.length || child->buffers == nullptr ||
        child->buffers[1] == nullptr) {
      return false;
    }
  }
  return true;
}

}  // namespace

PyProducer::PyProducer(const std::string& topic, nb::handle schema,
                       const std::optional<std::string>& socket, uint32_t slot_count,
                       uint64_t arena_bytes, const std::string& policy, double publish_timeout,
                       double wait_for_consumers, double drain_timeout,
                       std::optional<uint32_t> ring_slots, std::optional<uint64_t> segment_bytes,
                       bool publish_timestamps, uint64_t fixed_block_bytes,
                       uint32_t fixed_block_count)
    : topic_(topic), schema_(SchemaFromObject(schema)) {
  client::ProducerOptions options;
  if (socket.has_value()) options.socket_path = *socket;
  // The previous release's keywords: deprecated, honoured where the new
  // ones are left at 0.
  if (ring_slots.has_value()) {
    WarnDeprecated("Producer(ring_slots=...) is deprecated; use slot_count=...");
    if (slot_count == 0) slot_count = *ring_slots;
  }
  if (segment_bytes.has_value()) {
    WarnDeprecated("Producer(segment_bytes=...) is deprecated; use arena_bytes=...");
    if (arena_bytes == 0) arena_bytes = *segment_bytes;
  }
  options.topic.slot_count = slot_count;
  options.topic.arena_bytes = arena_bytes;
  options.topic.publish_timestamps = publish_timestamps;
  options.fixed_block_bytes = fixed_block_bytes;
  options.fixed_block_count = fixed_block_count;
  if (policy == "block") {
    options.topic.policy = shm::SlowConsumerPolicy::kBlockProducer;
  } else if (policy == "drop-oldest") {
    options.topic.policy = shm::SlowConsumerPolicy::kDropOldest;
  } else {
    ThrowStatus(Status::Invalid("policy must be 'block' or 'drop-oldest', got '", policy, "'"));
  }
  options.publish_timeout = Millis(publish_timeout, "publish_timeout");
  options.wait_for_consumers = Millis(wait_for_consumers, "wait_for_consumers");
  options.drain_timeout = Millis(drain_timeout, "drain_timeout");
  // Open waits (wait_for_consumers) for the consumers already attached to
  // register; Ctrl-C ends that wait. A producer opened just before the
  // interrupt is closed with the dropped result.
  producer_ = Unwrap(CallInterruptibly([&](std::stop_token stop) {
    options.stop = std::move(stop);
    return client::Producer::Open(topic, schema_, options);
  }));
  producer_->set_stop({});  // the token above is this call's only
  Check(format::ExportSchema(*schema_, &exported_schema_));
  for (const auto& field : schema_->fields()) {
    if (LoanDtype(*field->type()) == nullptr) {
      fixed_widths_.clear();
      break;
    }
    fixed_widths_.push_back(field->type()->layout().buffers[1].byte_width);
  }
}

// Set once by Open (the producer lives as long as this object).
uint64_t PyProducer::fixed_block_bytes() const { return producer_->fixed_block_bytes(); }
uint32_t PyProducer::fixed_block_count() const { return producer_->fixed_block_count(); }

PyProducer::~PyProducer() {
  if (exported_schema_.release != nullptr) exported_schema_.release(&exported_schema_);
}

bool PyProducer::IsTopicSchema(const ArrowSchema& schema) const {
  return exported_schema_.release != nullptr && SameSchema(schema, exported_schema_);
}

Result<std::unique_ptr<client::FixedShapeWriter>> PyProducer::TakeWriter(int64_t rows) {
  if (fixed_widths_.empty() || producer_ == nullptr) return nullptr;
  // Begun before it leaves the cache: a Begin that fails (no space in
  // time) leaves it idle and reusable.
  ALKAID_ASSIGN_OR_RAISE(
      std::optional<IdleWriter> idle, writers_.TakeIdle(rows, [](IdleWriter& w) -> Status {
        if (w.begun) return Status::OK();
        ALKAID_RETURN_NOT_OK(w.writer->Begin(client::FixedShapeWriter::Fill::kNone));
        w.begun = true;
        return Status::OK();
      }));
  if (idle.has_value()) return std::move(idle->writer);
  // A writer for a row count that comes back, as the C ABI's loans.
  if (!writers_.ShouldMake(rows)) return nullptr;
  client::FixedShapeWriterOptions options;
  options.keep_prototype = false;  // every Begin is Fill::kNone
  Result<std::unique_ptr<client::FixedShapeWriter>> made =
      producer_->NewFixedShapeWriter(rows, options);
  if (!made.ok()) {
    // A wait for space cut short or timed out: the batch fails as it would
    // have for its own space.
    const StatusCode code = made.status().code();
    if (code == StatusCode::kCancelled || code == StatusCode::kTimedOut) return made.status();
    fixed_widths_.clear();  // a layout the client refuses: no writers from now on
    return nullptr;
  }
  writers_.Made();
  std::unique_ptr<client::FixedShapeWriter> writer = std::move(made).ValueOrDie();
  if (Status begun = writer->Begin(client::FixedShapeWriter::Fill::kNone); !begun.ok()) {
    KeepWriter(rows, std::move(writer), /*begun=*/false);  // for the call made again
    return begun;
  }
  return writer;
}

void PyProducer::KeepWriter(int64_t rows, std::unique_ptr<client::FixedShapeWriter> writer,
                            bool begun) {
  writers_.Keep(rows, IdleWriter{begun, std::move(writer)});
}

Result<bool> PyProducer::PublishSameLayout(const ArrowArray& array) {
  if (fixed_widths_.empty() || !IsFixedWidthStruct(array, fixed_widths_)) return false;
  ALKAID_ASSIGN_OR_RAISE(std::unique_ptr<client::FixedShapeWriter> writer,
                         TakeWriter(array.length));
  if (writer == nullptr) return false;
  // Buffers depth first: each column's (empty) validity bitmap, then its
  // values.
  for (size_t i = 0; i < fixed_widths_.size(); ++i) {
    const ArrowArray& child = *array.children[i];
    const std::span<uint8_t> values = writer->buffer(2 * i + 1);
    const auto bytes = static_cast<size_t>(array.length * fixed_widths_[i]);
    if (values.size() != bytes) {
      const size_t size = values.size();
      KeepWriter(array.length, std::move(writer), /*begun=*/true);
      return Status::Invalid("the writer's buffer ", 2 * i + 1, " has ", size, " bytes, not ",
                             bytes);
    }
    std::memcpy(values.data(),
                static_cast<const uint8_t*>(child.buffers[1]) + child.offset * fixed_widths_[i],
                bytes);
  }
  const Status published = writer->Publish();
  const uint64_t body = writer->body_length();
  KeepWriter(array.length, std::move(writer), /*begun=*/!published.ok());
  ALKAID_RETURN_NOT_OK(published);
  ++same_layout_published_;
  same_layout_bytes_ += body;
  return true;
}

const std::vector<PyProducer::LoanColumn>& PyProducer::LoanColumns() {
  if (loan_columns_.size() == static_cast<size_t>(schema_->num_fields())) return loan_columns_;
  for (const auto& field : schema_->fields()) {
    if (LoanDtype(*field->type()) == nullptr) {
      ThrowStatus(Status::TypeError(
          "column '", field->name(), "' has type ", field->type()->ToString(),
          ": a loan lends numpy views of numeric and temporal columns only; publish "
          "other schemas with Producer.publish"));
    }
  }
  // numpy is needed from the first loan on (not to import alkaid).
  nb::module_ numpy = nb::module_::import_("numpy");
  frombuffer_ = numpy.attr("frombuffer");
  numpy_c_api_ = numpy_c_api::Available();
  std::vector<LoanColumn> columns;
  for (const auto& field : schema_->fields()) {
    LoanColumn column;
    column.dtype = numpy.attr("dtype")(LoanDtype(*field->type()));
    PyObject* name = PyUnicode_FromStringAndSize(field->name().data(),
                                                 static_cast<Py_ssize_t>(field->name().size()));
    if (name == nullptr) throw nb::python_error();
    PyUnicode_InternInPlace(&name);
    column.name = nb::steal(name);
    column.width = field->type()->layout().buffers[1].byte_width;
    columns.push_back(std::move(column));
  }
  loan_columns_ = std::move(columns);
  return loan_columns_;
}

Status PyProducer::ClosedStatus() const {
  return Status::Invalid("the producer of topic '", topic_, "' is closed");
}

uint64_t PyProducer::Publish(nb::handle obj) {
  if (closed()) ThrowStatus(ClosedStatus());
  if (arrow_batch_type_.is_valid() &&
      reinterpret_cast<PyObject*>(Py_TYPE(obj.ptr())) == arrow_batch_type_.ptr() &&
      PublishArrowBatch(obj)) {
    return 1;
  }
  static PyObject* const c_array = Interned("__arrow_c_array__");
  static PyObject* const c_stream = Interned("__arrow_c_stream__");
  if (nb::object method = OptionalAttr(obj, c_array); method.is_valid()) {
    nb::object capsules = CallNoArgs(method);
    if (!PyTuple_Check(capsules.ptr()) || PyTuple_GET_SIZE(capsules.ptr()) != 2) {
      throw nb::type_error("__arrow_c_array__ must return a (schema, array) tuple of capsules");
    }
    ArrowSchema schema;
    ArrowArray array;
    TakeSchema(PyTuple_GET_ITEM(capsules.ptr(), 0), &schema);
    try {
      TakeArray(PyTuple_GET_ITEM(capsules.ptr(), 1), &array);
    } catch (...) {
      schema.release(&schema);
      throw;
    }
    // The topic's own schema (the usual case) need not be imported and
    // compared: the batch is imported with the producer's.
    if (!IsTopicSchema(schema)) return PublishArray(&array, &schema);
    schema.release(&schema);
    const uint64_t published = PublishArray(&array, nullptr);
    if (!arrow_batch_probed_) LearnArrowBatch(obj);
    return published;
  }
  if (nb::object method = OptionalAttr(obj, c_stream); method.is_valid()) {
    nb::object capsule = CallNoArgs(method);
    ArrowArrayStream stream;
    TakeStream(capsule, &stream);
    // Ctrl-C ends a wait for room or space; the batches before it stay
    // published. A stream cannot be read again, so this call always costs
    // a thread (CallInterruptibly), once per stream.
    return Unwrap(CallInterruptibly([&](std::stop_token stop) -> Result<uint64_t> {
      std::lock_guard lock(mutex_);
      if (producer_ == nullptr) {
        stream.release(&stream);
        return ClosedStatus();
      }
      StopScope scope(producer_.get(), std::move(stop));
      return producer_->PublishArrowStream(&stream);
    }));
  }
  throw nb::type_error(("publish: expected an Arrow object (with __arrow_c_array__ or "
                        "__arrow_c_stream__: a pyarrow RecordBatch, Table or "
                        "RecordBatchReader, a polars DataFrame, ...), got " +
                        TypeName(obj))
                           .c_str());
}

uint64_t PyProducer::PublishArray(ArrowArray* array, ArrowSchema* schema) {
  // Released when this returns, unless an import took it (owned_array).
  struct Held {
    explicit Held(ArrowArray* from) : array(*from) { from->release = nullptr; }
    ArrowArray array;
    Held(const Held&) = delete;
    Held& operator=(const Held&) = delete;
    ~Held() {
      if (array.release != nullptr) array.release(&array);
    }
  } held(array);
  std::optional<Owned<ArrowSchema>> owned_schema;
  if (schema != nullptr) owned_schema.emplace(schema);
  // An import takes the array (PublishArrowArray): each attempt gets a lent
  // copy of it, made on the first that needs one (PublishSameLayout only
  // reads it).
  std::optional<Owned<ArrowArray>> owned_array;
  const bool small = held.array.length <= kSmallBatchRows;
  // A wait for room or space ends on Ctrl-C (nothing is published).
  Check(CallInterruptiblyRepeatable(mutex_, small, [&](std::stop_token stop) {
    if (producer_ == nullptr) return ClosedStatus();
    StopScope scope(producer_.get(), std::move(stop));
    if (!owned_schema.has_value()) {
      ALKAID_ASSIGN_OR_RAISE(
          const bool done,
          PublishSameLayout(owned_array.has_value() ? owned_array->get() : held.array));
      if (done) return Status::OK();
    }
    if (!owned_array.has_value()) owned_array.emplace(&held.array);
    ArrowArray lent_array;
    owned_array->Lend(&lent_array);
    ArrowSchema lent_schema;
    if (owned_schema.has_value()) owned_schema->Lend(&lent_schema);
    return producer_->PublishArrowArray(&lent_array,
                                        owned_schema.has_value() ? &lent_schema : nullptr);
  }));
  return 1;
}

namespace {

// The C Device Data Interface's ArrowDeviceArray (as the Arrow
// specification lays it out), for RecordBatch._export_to_c_device.
struct DeviceArray {
  ArrowArray array;
  int64_t device_id;
  int32_t device_type;
  void* sync_event;
  int64_t reserved[3];
};
static_assert(sizeof(DeviceArray) == 128 && offsetof(DeviceArray, device_type) == 88 &&
                  offsetof(DeviceArray, sync_event) == 96,
              "ArrowDeviceArray's layout (the C Device Data Interface, 64-bit)");
constexpr int32_t kDeviceCpu = 1;  // ARROW_DEVICE_CPU

// After a Python call that failed: false (with the error cleared) for an
// Exception, which the general way will meet again and report; a
// KeyboardInterrupt or SystemExit is raised.
bool NotTaken() {
  if (!PyErr_ExceptionMatches(PyExc_Exception)) throw nb::python_error();
  PyErr_Clear();
  return false;
}

// obj.method(args...) without a bound method object; `args` starts with a
// free slot (PY_VECTORCALL_ARGUMENTS_OFFSET), then obj.
PyObject* CallMethod(PyObject* method, PyObject** args, size_t count) {
  return PyObject_VectorcallMethod(method, args + 1, count | PY_VECTORCALL_ARGUMENTS_OFFSET,
                                   nullptr);
}

}  // namespace

bool PyProducer::PublishArrowBatch(nb::handle batch) {
  static PyObject* const schema_name = Interned("schema");
  static PyObject* const equals_name = Interned("equals");
  static PyObject* const export_name = Interned("_export_to_c_device");
  // pyarrow's own comparison, metadata included (check_metadata=True):
  // names, types, nullability, dictionaries, every key and value.
  const nb::object schema = nb::steal(PyObject_GetAttr(batch.ptr(), schema_name));
  if (!schema.is_valid()) return NotTaken();
  PyObject* equals_args[] = {nullptr, schema.ptr(), arrow_schema_.ptr(), Py_True};
  const nb::object same = nb::steal(CallMethod(equals_name, equals_args, 3));
  if (!same.is_valid()) return NotTaken();
  if (!same.is(nb::handle(Py_True))) return false;
  // Exported without its schema (the topic's, which the import uses); as
  // a device array, to see where its buffers are.
  DeviceArray exported{};
  const nb::object address = nb::steal(PyLong_FromVoidPtr(&exported));
  if (!address.is_valid()) throw nb::python_error();
  PyObject* export_args[] = {nullptr, batch.ptr(), address.ptr()};
  if (!nb::steal(CallMethod(export_name, export_args, 2)).is_valid()) {
    if (exported.array.release != nullptr) exported.array.release(&exported.array);
    return NotTaken();
  }
  if (exported.array.release == nullptr) return false;
  if (exported.device_type != kDeviceCpu) {  // __arrow_c_array__ refuses it
    exported.array.release(&exported.array);
    return false;
  }
  PublishArray(&exported.array, nullptr);
  return true;
}

void PyProducer::LearnArrowBatch(nb::handle batch) {
  PyTypeObject* type = Py_TYPE(batch.ptr());
  if (std::strcmp(type->tp_name, "pyarrow.lib.RecordBatch") != 0) return;
  arrow_batch_probed_ = true;  // one look, whatever it finds
  // pyarrow's RecordBatch itself (not a namesake), of a pyarrow with the
  // device export (16 and later). An Exception on the way: no fast path,
  // nothing raised (a KeyboardInterrupt is, the batch being published).
  const nb::object lib = nb::steal(PyImport_GetModule(nb::str("pyarrow.lib").ptr()));
  nb::object known_type;
  if (lib.is_valid()) known_type = nb::steal(PyObject_GetAttrString(lib.ptr(), "RecordBatch"));
  nb::object schema;
  if (known_type.is(nb::handle(reinterpret_cast<PyObject*>(type))) &&
      PyObject_HasAttrString(known_type.ptr(), "_export_to_c_device") != 0) {
    schema = nb::steal(PyObject_GetAttrString(batch.ptr(), "schema"));
  }
  if (PyErr_Occurred() != nullptr) (void)NotTaken();
  if (!schema.is_valid()) return;
  arrow_schema_ = std::move(schema);
  arrow_batch_type_ = std::move(known_type);
}

void PyProducer::Close() {
  closed_.store(true, std::memory_order_release);
  // Ctrl-C cuts the drain short; the producer is closed either way.
  Check(CallInterruptibly([&](std::stop_token stop) {
    std::lock_guard lock(mutex_);
    if (producer_ == nullptr) return Status::OK();
    writers_.Clear();  // their pending regions, if any, back to the arena first
    producer_->set_stop(std::move(stop));
    Status status = producer_->Close();
    producer_.reset();
    return status;
  }));
}

nb::dict PyProducer::Stats() {
  client::ProducerStats stats;
  bool open = false;
  {
    nb::gil_scoped_release release;
    std::lock_guard lock(mutex_);
    if (producer_ != nullptr) {
      open = true;
      producer_->Poll();
      stats = producer_->stats();
      stats.arrow_copied += same_layout_published_;
      stats.copied_bytes += same_layout_bytes_;
    }
  }
  if (!open) ThrowStatus(ClosedStatus());
  nb::dict out;
  out["published"] = stats.published;
  out["copied_bytes"] = stats.copied_bytes;
  out["blocks_live"] = stats.blocks_live;
  out["arena_bytes_free"] = stats.arena_bytes_free;
  out["held_by_consumers"] = stats.held_by_consumers;
  out["dead_consumers_detached"] = stats.dead_consumers_detached;
  out["reregistrations"] = stats.reregistrations;
  out["arrow_zero_copy"] = stats.arrow_zero_copy;
  out["arrow_copied"] = stats.arrow_copied;
  return out;
}

// ---------------------------------------------------------------------------
// Loan: a batch of fixed-width columns allocated in the producer's shared
// memory and handed to Python as writable numpy arrays.

namespace {

class PyLoan {
 public:
  PyLoan(nb::object producer, int64_t num_rows)
      : producer_obj_(std::move(producer)), owner_(&nb::cast<PyProducer&>(producer_obj_)) {
    if (num_rows < 0) ThrowStatus(Status::Invalid("num_rows must be >= 0, got ", num_rows));
    const std::vector<PyProducer::LoanColumn>& columns = owner_->LoanColumns();
    num_rows_ = num_rows;
    // A wait for arena space ends on Ctrl-C.
    Check(CallInterruptiblyRepeatable(owner_->mutex(), /*small=*/true, [&](std::stop_token stop) {
      StopScope scope(owner_->Get(), std::move(stop));
      return Allocate(columns);
    }));
  }

  // loan[key]: a numpy array over the column's shared buffer, whose base
  // is this loan: the array keeps the loan, and so the buffer, alive.
  nb::object Column(nb::handle self, nb::handle key) {
    const std::vector<PyProducer::LoanColumn>& columns = owner_->LoanColumns();
    const auto count = static_cast<Py_ssize_t>(columns.size());
    Py_ssize_t index = -1;
    if (PyUnicode_Check(key.ptr())) {
      for (Py_ssize_t i = 0; i < count && index < 0; ++i) {
        if (columns[static_cast<size_t>(i)].name.ptr() == key.ptr()) index = i;
      }
      for (Py_ssize_t i = 0; i < count && index < 0; ++i) {
        const int cmp = PyUnicode_Compare(columns[static_cast<size_t>(i)].name.ptr(), key.ptr());
        if (cmp == -1 && PyErr_Occurred() != nullptr) throw nb::python_error();
        if (cmp == 0) index = i;
      }
      if (index < 0) {
        ThrowStatus(Status::FromArgs(StatusCode::kKeyError, "no column '",
                                     nb::cast<std::string>(key), "' in ",
                                     owner_->schema()->ToString(false)));
      }
    } else {
      index = PyNumber_AsSsize_t(key.ptr(), PyExc_IndexError);
      if (index == -1 && PyErr_Occurred() != nullptr) throw nb::python_error();
      if (index < 0 || index >= count) {
        ThrowStatus(Status::IndexError("column ", index, " of ", count));
      }
    }
    if (published_) ThrowStatus(Status::Invalid("this loan was already published"));
    const auto i = static_cast<size_t>(index);
    nb::object result;
    if (owner_->numpy_c_api()) {
      result = numpy_c_api::NewView(columns[i].dtype, values_[i], num_rows_, self);
    } else {
      result = FromBuffer(self, columns[i].dtype, values_[i] - memory_.data());
    }
    // A weak reference: the array holds this loan (its base), so a strong
    // one would be a cycle.
    PyObject* ref = PyWeakref_NewRef(result.ptr(), nullptr);
    if (ref == nullptr) throw nb::python_error();
    views_.push_back(nb::steal(ref));
    return result;
  }

  // numpy.frombuffer(self, dtype, rows, offset): a view through the loan's
  // buffer protocol (below), when numpy's C API is not at hand.
  nb::object FromBuffer(nb::handle self, nb::handle dtype, int64_t offset) const {
    nb::object rows = nb::steal(PyLong_FromLongLong(num_rows_));
    nb::object at = nb::steal(PyLong_FromLongLong(offset));
    if (!rows.is_valid() || !at.is_valid()) throw nb::python_error();
    PyObject* args[] = {self.ptr(), dtype.ptr(), rows.ptr(), at.ptr()};
    PyObject* view = PyObject_Vectorcall(owner_->frombuffer().ptr(), args, 4, nullptr);
    if (view == nullptr) throw nb::python_error();
    return nb::steal(view);
  }

  // The buffer protocol: the loan's columns, writable until published.
  int GetBuffer(PyObject* self, Py_buffer* view, int flags) {
    if (published_ && (flags & PyBUF_WRITABLE) == PyBUF_WRITABLE) {
      PyErr_SetString(PyExc_BufferError, "this loan was published: its memory is read-only");
      view->obj = nullptr;
      return -1;
    }
    return PyBuffer_FillInfo(view, self, memory_.data(), static_cast<Py_ssize_t>(memory_.size()),
                             published_ ? 1 : 0, flags);
  }

  void Publish() {
    if (published_) ThrowStatus(Status::Invalid("this loan was already published"));
    format::RecordBatchPtr batch;
    if (writer_ == nullptr) {
      const format::SchemaPtr& schema = owner_->schema();
      std::vector<format::ArrayDataPtr> columns;
      columns.reserve(buffers_.size());
      for (int i = 0; i < schema->num_fields(); ++i) {
        columns.push_back(format::ArrayData::Make(schema->field(i)->type(), num_rows_,
                                                  {nullptr, buffers_[static_cast<size_t>(i)]}, 0));
      }
      batch = Unwrap(format::RecordBatch::Make(schema, num_rows_, std::move(columns)));
    }
    // A wait for room ends on Ctrl-C: KeyboardInterrupt, and the loan
    // counts as published (its memory stays the loan's, read-only).
    Status status;
    try {
      status =
          CallInterruptiblyRepeatable(owner_->mutex(), /*small=*/true, [&](std::stop_token stop) {
            client::Producer* producer = owner_->Get();
            if (producer == nullptr) return owner_->ClosedStatus();
            StopScope scope(producer, std::move(stop));
            if (writer_ == nullptr) return producer->Publish(*batch, pool_.get());
            // Held: the views (and the buffer protocol) go on showing what
            // was published while this loan lives, as a pool's region does.
            ALKAID_RETURN_NOT_OK(writer_->Publish(&held_));
            owner_->KeepWriter(num_rows_, std::move(writer_), /*begun=*/false);
            return Status::OK();
          });
    } catch (...) {
      Seal();
      throw;
    }
    Seal();
    Check(status);
  }

  // An unpublished writer loan gives its writer back, region and all (no
  // view of it is left: each holds the loan), when the producer is free
  // at once; otherwise the region goes back to the arena with the writer.
  ~PyLoan() {
    if (writer_ == nullptr) return;
    std::unique_lock lock(owner_->mutex(), std::try_to_lock);
    if (lock.owns_lock() && owner_->Get() != nullptr) {
      owner_->KeepWriter(num_rows_, std::move(writer_), /*begun=*/true);
    }
  }
  PyLoan(PyLoan&&) noexcept = default;
  PyLoan(const PyLoan&) = delete;
  PyLoan& operator=(const PyLoan&) = delete;
  PyLoan& operator=(PyLoan&&) = delete;

  bool published() const { return published_; }
  int64_t num_rows() const { return num_rows_; }

 private:
  // After a publish, successful or not: no more writes through the views,
  // which now show what consumers read.
  void Seal() {
    published_ = true;
    for (auto& ref : views_) {
      PyObject* view = PyWeakref_GetObject(ref.ptr());  // borrowed; None once dead
      if (view == nullptr || view == Py_None) continue;
      if (owner_->numpy_c_api()) {
        numpy_c_api::MakeReadOnly(view);
      } else {
        nb::borrow(view).attr("flags").attr("writeable") = false;
      }
    }
    views_.clear();
  }

  // Takes the loan's memory: a region of one of the producer's writers
  // (TakeWriter), or a pool with a buffer per column. The values are
  // zeroed either way, and with a writer the padding after them too (a
  // pool's buffers come zeroed, padding and all). Holds the producer's
  // mutex, not necessarily the GIL (and so touches no Python object).
  Status Allocate(const std::vector<PyProducer::LoanColumn>& columns) {
    client::Producer* producer = owner_->Get();
    if (producer == nullptr) return owner_->ClosedStatus();
    ALKAID_ASSIGN_OR_RAISE(writer_, owner_->TakeWriter(num_rows_));
    values_.clear();
    if (writer_ != nullptr) {
      uint8_t* begin = nullptr;
      uint8_t* end = nullptr;
      for (size_t i = 0; i < columns.size(); ++i) {
        const std::span<uint8_t> values = writer_->buffer(2 * i + 1);
        uint8_t* data = values.empty() ? EmptyValues() : values.data();
        const size_t padded = (values.size() + 63) / 64 * 64;
        std::memset(data, 0, padded);
        values_.push_back(data);
        if (!values.empty()) {
          begin = begin == nullptr ? data : std::min(begin, data);
          end = std::max(end, data + padded);
        }
      }
      memory_ = begin == nullptr ? std::span<uint8_t>(EmptyValues(), 0)
                                 : std::span<uint8_t>(begin, static_cast<size_t>(end - begin));
      return Status::OK();
    }
    uint64_t bytes = 64;
    for (const auto& column : columns) {
      bytes +=
          (static_cast<uint64_t>(num_rows_) * static_cast<uint64_t>(column.width) + 63) / 64 * 64;
    }
    ALKAID_ASSIGN_OR_RAISE(pool_, producer->NewBatchPool(bytes));
    buffers_.clear();
    for (const auto& column : columns) {
      ALKAID_ASSIGN_OR_RAISE(auto buffer,
                             format::AllocateBuffer(num_rows_ * column.width, pool_.get()));
      values_.push_back(buffer->size() > 0 ? buffer->mutable_data() : EmptyValues());
      buffers_.push_back(std::move(buffer));
    }
    memory_ = {pool_->region_data(), static_cast<size_t>(pool_->region_size())};
    return Status::OK();
  }

  // Where the views of columns without values point: any address will do
  // for zero items, and numpy wants one.
  static uint8_t* EmptyValues() {
    alignas(64) static uint8_t empty[64];
    return empty;
  }

  nb::object producer_obj_;
  PyProducer* owner_;  // producer_obj_'s
  int64_t num_rows_ = 0;
  // The loan's memory: a writer's region (given back to the producer at
  // publish, the region then held by held_ while the loan lives), or a
  // pool and its buffers.
  std::unique_ptr<client::FixedShapeWriter> writer_;
  shm::ChannelLoan held_;
  std::unique_ptr<client::ShmBatchPool> pool_;
  std::vector<std::shared_ptr<format::Buffer>> buffers_;
  std::vector<uint8_t*> values_;   // each column's values
  std::span<uint8_t> memory_;      // every column's values: the buffer protocol's
  std::vector<nb::object> views_;  // weak references to the arrays Column made
  bool published_ = false;
};

// Type slots of alkaid.Loan: loan[key] without a method lookup, and the
// buffer protocol numpy.frombuffer reads. C++ exceptions become Python ones.
PyObject* LoanSubscript(PyObject* self, PyObject* key) {
  try {
    return nb::inst_ptr<PyLoan>(self)->Column(self, key).release().ptr();
  } catch (nb::python_error& e) {
    e.restore();
  } catch (const std::exception& e) {
    PyErr_SetString(PyExc_RuntimeError, e.what());
  }
  return nullptr;
}

int LoanGetBuffer(PyObject* self, Py_buffer* view, int flags) {
  return nb::inst_ptr<PyLoan>(self)->GetBuffer(self, view, flags);
}

PyType_Slot loan_slots[] = {
    {Py_mp_subscript, reinterpret_cast<void*>(LoanSubscript)},
    {Py_bf_getbuffer, reinterpret_cast<void*>(LoanGetBuffer)},
    {0, nullptr},
};

}  // namespace

void BindProducer(nb::module_& m) {
  nb::class_<PyProducer>(
      m, "Producer",
      "A producer of a topic: publishes record batches into its own shared memory; consumers "
      "read them without a copy.\n\n"
      "A context manager: leaving the block closes it (consumers then read what was published "
      "and see the end of the stream). Calls from several threads are serialised.\n\n"
      "Its waits (opening for the consumers already attached, a publish or loan for room or "
      "space, close for the consumers to read everything) release the GIL, and on the main "
      "thread Ctrl-C ends them: KeyboardInterrupt, with nothing published by the interrupted "
      "call; an interrupted close still closes the producer.")
      .def(nb::init<const std::string&, nb::handle, const std::optional<std::string>&, uint32_t,
                    uint64_t, const std::string&, double, double, double, std::optional<uint32_t>,
                    std::optional<uint64_t>, bool, uint64_t, uint32_t>(),
           nb::arg("topic"), nb::arg("schema"), nb::kw_only(),
           nb::arg("socket").none() = nb::none(), nb::arg("slot_count") = 0,
           nb::arg("arena_bytes") = 0, nb::arg("policy") = "block",
           nb::arg("publish_timeout") = 5.0, nb::arg("wait_for_consumers") = 10.0,
           nb::arg("drain_timeout") = 5.0, nb::arg("ring_slots").none() = nb::none(),
           nb::arg("segment_bytes").none() = nb::none(), nb::arg("publish_timestamps") = false,
           nb::arg("fixed_block_bytes") = 0, nb::arg("fixed_block_count") = 0,
           "Creates topic `topic` with `schema` (any object with ``__arrow_c_schema__``, e.g. a "
           "pyarrow.Schema), or joins it if it exists with that schema (InvalidError otherwise), "
           "on the broker at `socket` (None: $ALKAID_BROKER_SOCKET or the default socket).\n\n"
           "slot_count, arena_bytes, policy ('block' or 'drop-oldest'): the topic's settings "
           "if this creates it (0: the broker's defaults). publish_timeout: longest wait of a "
           "publish for room. wait_for_consumers: how long opening waits for the consumers "
           "already waiting to register, so that they get the first batch. drain_timeout: how "
           "long close() waits for consumers to read everything. ring_slots and segment_bytes: the "
           "previous release's names of slot_count and arena_bytes (deprecated: "
           "DeprecationWarning). publish_timestamps: if this creates the topic, its producers "
           "stamp each batch with its publish time (Batch.publish_ns). fixed_block_bytes, "
           "fixed_block_count: fixed blocks in this producer's shared memory (0: none; a count "
           "of 0: twice the slots): a loan whose columns' values, each padded to 64 bytes, fit "
           "in fixed_block_bytes takes one, which costs less per batch than the arena; the "
           "broker counts them against its limit beside the arena.")
      .def("publish", &PyProducer::Publish, nb::arg("data"),
           "Publishes `data`: an object with ``__arrow_c_array__`` (a pyarrow.RecordBatch, a "
           "nanoarrow array, ...) as one batch, or with ``__arrow_c_stream__`` (a pyarrow.Table "
           "or RecordBatchReader, a polars DataFrame, ...) batch by batch, each copied once into "
           "shared memory. Its schema must equal the topic's (InvalidError naming both "
           "otherwise); anything else is a TypeError. Returns the number of batches published.")
      .def(
          "loan",
          [](nb::handle self, int64_t num_rows) { return PyLoan(nb::borrow(self), num_rows); },
          nb::arg("num_rows"),
          "A new batch of `num_rows` rows allocated in shared memory, for schemas of numeric and "
          "temporal columns without nulls: fill ``loan['column']`` (writable numpy arrays over "
          "the shared buffers, zero-initialised), then ``loan.publish()``: no copy at all.")
      .def(
          "publish_numpy",
          [](nb::handle self, nb::handle columns) {
            nb::module_::import_("alkaid._numpy").attr("publish_numpy")(self, columns);
          },
          nb::arg("columns"),
          "Publishes one batch from numpy arrays (or anything numpy.asarray takes), one per "
          "column: a mapping by column name or a sequence in schema order, one-dimensional and "
          "of one length. Each is copied once, straight into the loan's shared buffers (numeric "
          "and temporal columns only; same-kind casts).")
      .def("close", &PyProducer::Close,
           "Ends the stream: waits (up to drain_timeout) for the consumers to read everything, "
           "detaches and removes the shared memory names. Idempotent.")
      .def_prop_ro("closed", &PyProducer::closed, "True after close().")
      .def_prop_ro("topic", &PyProducer::topic, "The topic's name.")
      .def_prop_ro("fixed_block_bytes", &PyProducer::fixed_block_bytes,
                   "Bytes of each fixed block of this producer (rounded up to 64; 0: none, also "
                   "from a broker of an earlier release).")
      .def_prop_ro("fixed_block_count", &PyProducer::fixed_block_count,
                   "How many fixed blocks the broker granted (0: none).")
      .def_prop_ro(
          "schema", [](const PyProducer& self) { return PySchema{self.schema()}; },
          "The topic's schema.")
      .def("stats", &PyProducer::Stats,
           "Counters, as of now: 'published', 'copied_bytes', 'blocks_live' (blocks of the "
           "arena not free: lent, in a slot or held by consumers), 'arena_bytes_free', "
           "'held_by_consumers' (bodies consumers, or foreign code they exported to, still "
           "hold), 'dead_consumers_detached', 'reregistrations', 'arrow_zero_copy', "
           "'arrow_copied'.")
      .def("__enter__", [](nb::handle self) { return nb::borrow(self); })
      .def(
          "__exit__",
          [](PyProducer& self, nb::handle, nb::handle, nb::handle) {
            self.Close();
            return false;
          },
          nb::arg("exc_type").none(), nb::arg("exc").none(), nb::arg("tb").none())
      .def("__repr__", [](const PyProducer& self) {
        return "alkaid.Producer('" + self.topic() + "'" + (self.closed() ? ", closed)" : ")");
      });

  nb::class_<PyLoan>(
      m, "Loan",
      "A batch being written in place in a producer's shared memory (Producer.loan). Index it "
      "by column name or position for a writable numpy array; publish() sends the batch without "
      "copying and makes those arrays read-only. Dropped unpublished, its memory returns to the "
      "producer. A context manager: leaving the block without an exception publishes it.\n\n"
      "``loan[column]`` (a name or a position): the column's values as a writable numpy array "
      "over the shared buffer. The loan exports its memory through the buffer protocol "
      "(read-only once published), which these arrays are made from.",
      nb::type_slots(loan_slots))
      .def("publish", &PyLoan::Publish, "Publishes the batch (zero copies). Once only.")
      .def_prop_ro("published", &PyLoan::published, "True after publish().")
      .def_prop_ro("num_rows", &PyLoan::num_rows, "The batch's row count.")
      .def("__len__", &PyLoan::num_rows, "The batch's row count.")
      .def("__enter__", [](nb::handle self) { return nb::borrow(self); })
      .def(
          "__exit__",
          [](PyLoan& self, nb::handle exc_type, nb::handle, nb::handle) {
            if (exc_type.is_none() && !self.published()) self.Publish();
            return false;
          },
          nb::arg("exc_type").none(), nb::arg("exc").none(), nb::arg("tb").none());
}

}  // namespace alkaid::python
