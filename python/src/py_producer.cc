// alkaid.Producer and alkaid.Loan: publishing Arrow data from Python, one
// copy from any Arrow object, none from a loan's numpy views.

#include "py_producer.h"

#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>

#include <chrono>
#include <cmath>
#include <memory>
#include <mutex>
#include <stop_token>
#include <utility>
#include <vector>

#include "alkaid/format/array_data.h"
#include "alkaid/format/buffer.h"
#include "py_common.h"
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

// Takes a C Data Interface struct (ArrowArray or ArrowSchema) moved out of
// `*c_struct`, released when the last reference goes.
template <typename T>
std::shared_ptr<T> Own(T* c_struct) {
  std::shared_ptr<T> owned(new T(*c_struct), [](T* p) {
    if (p->release != nullptr) p->release(p);
    delete p;
  });
  c_struct->release = nullptr;
  return owned;
}

// A shallow copy of `*owner` for one call that takes the struct: the same
// buffers and children (the import reads them in place); its release only
// drops its reference to `owner`. A publish that failed (and released what
// it was given) can so be made again.
template <typename T>
void Lend(const std::shared_ptr<T>& owner, T* out) {
  *out = *owner;
  out->private_data = new std::shared_ptr<T>(owner);
  out->release = [](T* self) {
    delete static_cast<std::shared_ptr<T>*>(self->private_data);
    self->release = nullptr;
  };
}

std::string TypeName(nb::handle obj) { return nb::cast<std::string>(nb::str(obj.type())); }

// The numpy dtype of a column a loan can lend, or nullopt. Fixed-width
// types without a numpy equivalent (decimals, intervals, fixed-size binary)
// and bit-packed booleans are not lent.
std::optional<nb::dlpack::dtype> LoanDtype(const format::DataType& type) {
  using format::TypeId;
  const auto make = [](nb::dlpack::dtype_code code, int bits) {
    return nb::dlpack::dtype{static_cast<uint8_t>(code), static_cast<uint8_t>(bits), 1};
  };
  switch (type.id()) {
    case TypeId::kInt8:
      return make(nb::dlpack::dtype_code::Int, 8);
    case TypeId::kInt16:
      return make(nb::dlpack::dtype_code::Int, 16);
    case TypeId::kInt32:
    case TypeId::kDate32:
    case TypeId::kTime32:
      return make(nb::dlpack::dtype_code::Int, 32);
    case TypeId::kInt64:
    case TypeId::kDate64:
    case TypeId::kTime64:
    case TypeId::kTimestamp:
    case TypeId::kDuration:
      return make(nb::dlpack::dtype_code::Int, 64);
    case TypeId::kUInt8:
      return make(nb::dlpack::dtype_code::UInt, 8);
    case TypeId::kUInt16:
      return make(nb::dlpack::dtype_code::UInt, 16);
    case TypeId::kUInt32:
      return make(nb::dlpack::dtype_code::UInt, 32);
    case TypeId::kUInt64:
      return make(nb::dlpack::dtype_code::UInt, 64);
    case TypeId::kHalfFloat:
      return make(nb::dlpack::dtype_code::Float, 16);
    case TypeId::kFloat:
      return make(nb::dlpack::dtype_code::Float, 32);
    case TypeId::kDouble:
      return make(nb::dlpack::dtype_code::Float, 64);
    default:
      return std::nullopt;
  }
}

}  // namespace

PyProducer::PyProducer(const std::string& topic, nb::handle schema,
                       const std::optional<std::string>& socket, uint32_t ring_slots,
                       uint64_t segment_bytes, const std::string& policy, double publish_timeout,
                       double wait_for_consumers, double drain_timeout)
    : topic_(topic), schema_(SchemaFromObject(schema)) {
  client::ProducerOptions options;
  if (socket.has_value()) options.socket_path = *socket;
  options.topic.ring_slots = ring_slots;
  options.topic.segment_bytes = segment_bytes;
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
}

Status PyProducer::ClosedStatus() const {
  return Status::Invalid("the producer of topic '", topic_, "' is closed");
}

uint64_t PyProducer::Publish(nb::handle obj) {
  if (closed()) ThrowStatus(ClosedStatus());
  if (nb::hasattr(obj, "__arrow_c_array__")) {
    nb::object capsules = obj.attr("__arrow_c_array__")();
    if (!nb::isinstance<nb::tuple>(capsules) || nb::len(capsules) != 2) {
      throw nb::type_error("__arrow_c_array__ must return a (schema, array) tuple of capsules");
    }
    ArrowSchema schema;
    ArrowArray array;
    TakeSchema(capsules[0], &schema);
    try {
      TakeArray(capsules[1], &array);
    } catch (...) {
      schema.release(&schema);
      throw;
    }
    // A wait for room or space ends on Ctrl-C (nothing is published). Each
    // attempt gets lent copies of the structs.
    const std::shared_ptr<ArrowArray> owned_array = Own(&array);
    const std::shared_ptr<ArrowSchema> owned_schema = Own(&schema);
    Check(CallInterruptiblyRepeatable([&](std::stop_token stop) {
      std::lock_guard lock(mutex_);
      if (producer_ == nullptr) return ClosedStatus();
      ArrowArray lent_array;
      ArrowSchema lent_schema;
      Lend(owned_array, &lent_array);
      Lend(owned_schema, &lent_schema);
      StopScope scope(producer_.get(), std::move(stop));
      return producer_->PublishArrowArray(&lent_array, &lent_schema);
    }));
    return 1;
  }
  if (nb::hasattr(obj, "__arrow_c_stream__")) {
    nb::object capsule = obj.attr("__arrow_c_stream__")();
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

void PyProducer::Close() {
  closed_.store(true, std::memory_order_release);
  // Ctrl-C cuts the drain short; the producer is closed either way.
  Check(CallInterruptibly([&](std::stop_token stop) {
    std::lock_guard lock(mutex_);
    if (producer_ == nullptr) return Status::OK();
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
  PyLoan(nb::object producer, int64_t num_rows) : producer_obj_(std::move(producer)) {
    PyProducer& owner = nb::cast<PyProducer&>(producer_obj_);
    if (num_rows < 0) ThrowStatus(Status::Invalid("num_rows must be >= 0, got ", num_rows));
    schema_ = owner.schema();
    uint64_t bytes = 0;
    for (const auto& field : schema_->fields()) {
      if (!LoanDtype(*field->type()).has_value()) {
        ThrowStatus(Status::TypeError(
            "column '", field->name(), "' has type ", field->type()->ToString(),
            ": a loan lends numpy views of numeric and temporal columns only; publish "
            "other schemas with Producer.publish"));
      }
      bytes +=
          (static_cast<uint64_t>(num_rows) * field->type()->layout().buffers[1].byte_width + 63) /
          64 * 64;
    }
    num_rows_ = num_rows;
    // A wait for arena space ends on Ctrl-C.
    Check(CallInterruptiblyRepeatable([&](std::stop_token stop) {
      std::lock_guard lock(owner.mutex());
      StopScope scope(owner.Get(), std::move(stop));
      return Allocate(&owner, bytes + 64);
    }));
  }

  nb::object Column(nb::handle self, nb::handle key) {
    int index = -1;
    if (nb::isinstance<nb::str>(key)) {
      index = schema_->GetFieldIndex(nb::cast<std::string>(key));
      if (index < 0) {
        ThrowStatus(Status::FromArgs(StatusCode::kKeyError, "no column '",
                                     nb::cast<std::string>(key), "' in ",
                                     schema_->ToString(false)));
      }
    } else {
      index = nb::cast<int>(key);
      if (index < 0 || index >= schema_->num_fields()) {
        ThrowStatus(Status::IndexError("column ", index, " of ", schema_->num_fields()));
      }
    }
    if (published_) ThrowStatus(Status::Invalid("this loan was already published"));
    const auto& buffer = buffers_[static_cast<size_t>(index)];
    const size_t shape[1] = {static_cast<size_t>(num_rows_)};
    nb::ndarray<nb::numpy> array(buffer->mutable_data(), 1, shape, self, nullptr,
                                 *LoanDtype(*schema_->field(index)->type()));
    nb::object view = nb::cast(array, nb::rv_policy::reference);
    // A weak reference: the array holds this loan (its owner), so a strong
    // one would be a cycle.
    views_.push_back(nb::module_::import_("weakref").attr("ref")(view));
    return view;
  }

  void Publish() {
    if (published_) ThrowStatus(Status::Invalid("this loan was already published"));
    std::vector<format::ArrayDataPtr> columns;
    columns.reserve(buffers_.size());
    for (int i = 0; i < schema_->num_fields(); ++i) {
      columns.push_back(format::ArrayData::Make(schema_->field(i)->type(), num_rows_,
                                                {nullptr, buffers_[static_cast<size_t>(i)]}, 0));
    }
    auto batch = Unwrap(format::RecordBatch::Make(schema_, num_rows_, std::move(columns)));
    PyProducer& owner = nb::cast<PyProducer&>(producer_obj_);
    // A wait for room ends on Ctrl-C: KeyboardInterrupt, and the loan
    // counts as published (its pool is sealed).
    Status status;
    try {
      status = CallInterruptiblyRepeatable([&](std::stop_token stop) {
        std::lock_guard lock(owner.mutex());
        if (owner.Get() == nullptr) return owner.ClosedStatus();
        StopScope scope(owner.Get(), std::move(stop));
        return owner.Get()->Publish(*batch, pool_.get());
      });
    } catch (...) {
      Seal();
      throw;
    }
    Seal();
    Check(status);
  }

  bool published() const { return published_; }
  int64_t num_rows() const { return num_rows_; }

 private:
  // After a publish, successful or not: no more writes through the views,
  // which now show what consumers read.
  void Seal() {
    published_ = true;
    for (auto& ref : views_) {
      nb::object view = ref();
      if (!view.is_none()) view.attr("flags").attr("writeable") = false;
    }
  }

  // Holds the producer's mutex, not the GIL.
  Status Allocate(PyProducer* owner, uint64_t bytes) {
    if (owner->Get() == nullptr) return owner->ClosedStatus();
    ALKAID_ASSIGN_OR_RAISE(pool_, owner->Get()->NewBatchPool(bytes));
    for (const auto& field : schema_->fields()) {
      const int64_t width = field->type()->layout().buffers[1].byte_width;
      ALKAID_ASSIGN_OR_RAISE(auto buffer, format::AllocateBuffer(num_rows_ * width, pool_.get()));
      buffers_.push_back(std::move(buffer));
    }
    return Status::OK();
  }

  nb::object producer_obj_;
  format::SchemaPtr schema_;
  int64_t num_rows_ = 0;
  std::unique_ptr<client::ShmBatchPool> pool_;
  std::vector<std::shared_ptr<format::Buffer>> buffers_;
  std::vector<nb::object> views_;
  bool published_ = false;
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
                    uint64_t, const std::string&, double, double, double>(),
           nb::arg("topic"), nb::arg("schema"), nb::kw_only(),
           nb::arg("socket").none() = nb::none(), nb::arg("ring_slots") = 0,
           nb::arg("segment_bytes") = 0, nb::arg("policy") = "block",
           nb::arg("publish_timeout") = 5.0, nb::arg("wait_for_consumers") = 10.0,
           nb::arg("drain_timeout") = 5.0,
           "Creates topic `topic` with `schema` (any object with ``__arrow_c_schema__``, e.g. a "
           "pyarrow.Schema), or joins it if it exists with that schema (InvalidError otherwise), "
           "on the broker at `socket` (None: $ALKAID_BROKER_SOCKET or the default socket).\n\n"
           "ring_slots, segment_bytes, policy ('block' or 'drop-oldest'): the topic's settings "
           "if this creates it (0: the broker's defaults). publish_timeout: longest wait of a "
           "publish for room. wait_for_consumers: how long opening waits for the consumers "
           "already waiting to register, so that they get the first batch. drain_timeout: how "
           "long close() waits for consumers to read everything.")
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
      .def_prop_ro(
          "schema", [](const PyProducer& self) { return PySchema{self.schema()}; },
          "The topic's schema.")
      .def("stats", &PyProducer::Stats,
           "Counters, as of now: 'published', 'copied_bytes', 'blocks_live' (blocks of the "
           "arena not free: lent, in the ring or held by consumers), 'arena_bytes_free', "
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
      "producer. A context manager: leaving the block without an exception publishes it.")
      .def(
          "__getitem__",
          [](nb::handle self, nb::handle key) { return nb::cast<PyLoan&>(self).Column(self, key); },
          nb::arg("column"),
          "The column's values as a writable numpy array over the shared buffer.")
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
