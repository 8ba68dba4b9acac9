// The C ABI (alkaid/alkaid.h) over the C++ client library. Every entry point
// catches what C++ could throw (only allocation failures, in practice) and
// turns every Status into a code plus the thread's last-error message.

#include "alkaid/alkaid.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cstddef>
#include <cstring>
#include <exception>
#include <limits>
#include <memory>
#include <new>
#include <optional>
#include <span>
#include <stop_token>
#include <string>
#include <vector>

#include "alkaid/client/batch_publisher.h"
#include "alkaid/client/broker_client.h"
#include "alkaid/client/consumer.h"
#include "alkaid/client/producer.h"
#include "alkaid/client/shm_batch_pool.h"
#include "alkaid/client/writer_cache.h"
#include "alkaid/common/status.h"
#include "alkaid/format/bit_util.h"
#include "alkaid/format/buffer.h"
#include "alkaid/format/c_data.h"
#include "alkaid/format/record_batch.h"
#include "alkaid/format/type.h"
#include "batch_export_internal.h"

// alkaid.h's *_options_init are macros over *_init_sized; the functions of
// that name are version 1's, defined below for programs built against it.
#undef alkaid_producer_options_init
#undef alkaid_consumer_options_init

#ifndef ALKAID_VERSION_STRING
#define ALKAID_VERSION_STRING "unknown"
#endif

namespace client = alkaid::client;
namespace format = alkaid::format;
using alkaid::Status;
using alkaid::StatusCode;

// The versions of the options structs: fields are only added at the end.
static_assert(offsetof(alkaid_producer_options, publish_timestamps) ==
              ALKAID_PRODUCER_OPTIONS_SIZE_V1);
static_assert(offsetof(alkaid_producer_options, fixed_block_bytes) ==
              ALKAID_PRODUCER_OPTIONS_SIZE_V2);
static_assert(sizeof(alkaid_producer_options) == 96);
static_assert(sizeof(alkaid_consumer_options) == ALKAID_CONSUMER_OPTIONS_SIZE_V1);
// And of the out struct alkaid_batch_info.
static_assert(offsetof(alkaid_batch_info, publish_ns) == ALKAID_BATCH_INFO_SIZE_V1);
static_assert(sizeof(alkaid_batch_info) == 40);

// The C codes are the C++ codes, number for number.
static_assert(static_cast<int>(StatusCode::kOk) == ALKAID_OK);
static_assert(static_cast<int>(StatusCode::kInvalid) == ALKAID_INVALID);
static_assert(static_cast<int>(StatusCode::kKeyError) == ALKAID_KEY_ERROR);
static_assert(static_cast<int>(StatusCode::kCapacityError) == ALKAID_CAPACITY_ERROR);
static_assert(static_cast<int>(StatusCode::kIOError) == ALKAID_IO_ERROR);
static_assert(static_cast<int>(StatusCode::kSerializationError) == ALKAID_SERIALIZATION_ERROR);
static_assert(static_cast<int>(StatusCode::kTimedOut) == ALKAID_TIMED_OUT);
static_assert(static_cast<int>(StatusCode::kEndOfStream) == ALKAID_END_OF_STREAM);
static_assert(static_cast<int>(StatusCode::kCancelled) == ALKAID_CANCELLED);
static_assert(static_cast<int>(StatusCode::kUnknown) == ALKAID_UNKNOWN);

namespace {

// Which loanable layout a column has.
enum class LoanLayout : uint8_t { kFixed, kBitmap, kVariable };

// How one column of a producer's schema is loaned: worked out once, at the
// producer's first loan, so that a loan inspects no types and builds no
// strings (a message is made only for a loan that fails).
struct LoanPlan {
  format::FieldPtr field;
  LoanLayout layout = LoanLayout::kFixed;
  int64_t byte_width = 0;  // kFixed
  int offset_width = 0;    // kVariable: 4 or 8
  bool loanable = true;    // false: a type a loan cannot lay out
};

}  // namespace

struct alkaid_loan;

struct alkaid_producer {
  std::unique_ptr<client::Producer> producer;
  std::stop_source stop;
  std::vector<LoanPlan> loan_plans;  // one per field, made by the first loan
  // The loans published since the producer's last loan, freed by its next
  // loan (or close) rather than by publish: freeing a loan's batch (objects
  // and references over the region) costs about as much as the publish
  // itself, and a caller measures the publish. Several when loans overlap
  // (a loan taken before the one before it was published: the next one
  // made while the current one is filled), each held until then, as a
  // consumer holding the batch would. Their capacity stays: no allocation
  // per publish once it has grown.
  std::vector<alkaid_loan*> spent_loans;
  // Whether loans of this producer go through fixed-shape writers (see
  // "Loans through a fixed-shape writer" below): decided with the loan
  // plans, turned off for good if the client refuses a writer.
  bool shape_writers = false;
  // Writer loans published and ready for the next loan of their rows, and
  // which row counts get a writer (client::WriterCache's rule, Python's).
  client::WriterCache<std::unique_ptr<alkaid_loan>> writers;
};

struct alkaid_consumer {
  std::unique_ptr<client::Consumer> consumer;
  // next's export when every column is flat (batch_export_internal.h);
  // null: Consumer::ExportBatch. Its blocks still out outlive it.
  std::unique_ptr<alkaid::capi::internal::FlatExporter> flat;
  uint64_t max_held = 0;
  uint64_t refused = 0;  // nexts refused by max_held_batches (the consumer's thread)
  bool wait_fd = false;  // alkaid_consumer_wait_fd was called: next(0) arms it
  // Requested by alkaid_consumer_cancel on any thread; seen by next and the
  // stream's get_next between their slices.
  std::stop_source cancel;
};

struct alkaid_broker {
  std::unique_ptr<client::BrokerClient> client;
};

struct alkaid_topic_list {
  std::vector<client::TopicStatus> topics;
  std::vector<alkaid_topic_info> infos;  // names point into `topics`
};

namespace {

thread_local std::string last_error;

alkaid_status Fail(const Status& status) {
  last_error = status.message();
  return static_cast<alkaid_status>(status.code());
}

alkaid_status Fail(alkaid_status code, const std::string& message) {
  last_error = message;
  return code;
}

// The largest struct_size read: a newer alkaid.h's options struct is
// larger than ours, but not by this much; a size beyond it (a struct never
// initialised, say) is refused without reading past the fields we know.
constexpr size_t kMaxOptionsSize = 1024;

// What *_options_init_sized writes: the first `size` bytes of `defaults`,
// zeros past them up to `size`, and struct_size (the first field) = size.
template <typename Options>
void InitSized(const Options& defaults, Options* out, size_t size) {
  if (out == nullptr || size < sizeof(uint32_t)) return;
  auto* bytes = reinterpret_cast<unsigned char*>(out);
  const size_t known = std::min(size, sizeof(Options));
  std::memcpy(bytes, &defaults, known);
  if (size > known) std::memset(bytes + known, 0, size - known);
  const auto size32 = static_cast<uint32_t>(std::min<size_t>(size, UINT32_MAX));
  std::memcpy(bytes, &size32, sizeof size32);
}

// A caller's options struct of any version over `*out` (the defaults), as
// alkaid.h's contract says ("Options structs across versions"): a size of
// an older version (`older`) takes the fields it has; a larger size than
// ours is taken if every byte past ours is zero.
template <typename Options, size_t N>
Status ReadOptions(const char* fn, const char* what, const Options* in,
                   const std::array<size_t, N>& older, Options* out) {
  const size_t size = in->struct_size;
  const auto* bytes = reinterpret_cast<const unsigned char*>(in);
  if (size > sizeof(Options) && size <= kMaxOptionsSize) {
    for (size_t i = sizeof(Options); i < size; ++i) {
      if (bytes[i] != 0) {
        return Status::Invalid(fn, ": options->struct_size is ", size, " (", what,
                               " of a newer alkaid.h) and its byte ", i,
                               " is not zero: it sets a field this library (C API version ",
                               ALKAID_C_API_VERSION, ", ", sizeof(Options),
                               " bytes) does not have");
      }
    }
  } else if (size != sizeof(Options) &&
             std::find(older.begin(), older.end(), size) == older.end()) {
    std::string sizes;
    for (size_t s : older) sizes += std::to_string(s) + ", ";
    return Status::Invalid(fn, ": options->struct_size is ", size,
                           ", not the size of a version of ", what, " (", sizes, sizeof(Options),
                           ", or larger up to ", kMaxOptionsSize, " with zeros past ",
                           sizeof(Options), "; initialise it with ", what, "_init)");
  }
  std::memcpy(out, in, std::min(size, sizeof(Options)));
  return Status::OK();
}

// Runs `body` (returning a Status) with nothing thrown past the interface.
template <typename F>
alkaid_status Guard(const char* function, F&& body) noexcept {
  try {
    const Status st = body();
    return st.ok() ? ALKAID_OK : Fail(st);
  } catch (const std::bad_alloc&) {
    return Fail(ALKAID_OUT_OF_MEMORY, std::string(function) + ": out of memory");
  } catch (const std::exception& e) {
    return Fail(ALKAID_UNKNOWN, std::string(function) + ": " + e.what());
  } catch (...) {
    return Fail(ALKAID_UNKNOWN, std::string(function) + ": unknown C++ exception");
  }
}

// Every Arrow struct passed in is taken, also on an error found before the
// import that would have released it.
void Drop(ArrowSchema* s) {
  if (s != nullptr && s->release != nullptr) s->release(s);
}
void Drop(ArrowArray* a) {
  if (a != nullptr && a->release != nullptr) a->release(a);
}

std::chrono::milliseconds Millis(int64_t ms, std::chrono::milliseconds fallback) {
  // For ever: a century, which every wait takes as no deadline, and which,
  // unlike milliseconds::max(), survives conversion to nanoseconds and
  // addition to the clock.
  if (ms == ALKAID_FOREVER) return std::chrono::hours(24 * 365 * 100);
  if (ms < 0) return fallback;
  return std::chrono::milliseconds(ms);
}

Status NullArgument(const char* function, const char* what) {
  return Status::Invalid(function, ": ", what, " is NULL");
}

// ---- loans ----------------------------------------------------------------

// A loaned column: in the C Data Interface's order, validity (null for a
// non-nullable field), values or offsets, value bytes.
struct LoanColumn {
  const LoanPlan* plan = nullptr;
  int n_buffers = 0;
  std::array<std::shared_ptr<format::Buffer>, 3> buffers;
  // The buffers' bytes, writable (the Buffer objects are read-only views
  // held by the region).
  std::array<uint8_t*, 3> data{};
  // The buffers' sizes in bytes (0 for a buffer the column does not have).
  std::array<int64_t, 3> sizes{};
  int64_t null_count = -1;  // -1: not set, counted at publish
};

constexpr int64_t kAlign = 64;

int64_t Padded(int64_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

std::string ColumnName(const LoanPlan& plan, size_t column) {
  return "column " + std::to_string(column) + " ('" + plan.field->name() + "')";
}

}  // namespace

struct alkaid_loan {
  // First, in one cache line, what a writer loan's publish reads: after a
  // large fill of the loan's values nothing of the loan is in the caches,
  // and each line is a miss on the publish (docs/INTEROP.md).
  alkaid_producer* producer = nullptr;
  // Set instead of `pool` and `batch` for a loan through a fixed-shape
  // writer: the loan's region is the writer's (Begin to Publish), and
  // the loan object, writer and all, is kept for the producer's next loan
  // of the same rows once published (alkaid_producer::writers).
  std::unique_ptr<client::FixedShapeWriter> writer;
  std::unique_ptr<client::ShmBatchPool> pool;
  int64_t rows = 0;
  std::vector<LoanColumn> columns;
  // The batch over the loan's buffers, made with the loan (off the publish
  // path); publish sets its null counts.
  format::RecordBatchPtr batch;

  alkaid_loan() = default;
  alkaid_loan(const alkaid_loan&) = delete;
  alkaid_loan& operator=(const alkaid_loan&) = delete;
};

namespace {

// Frees the loans published since the producer's last loan.
void FreeSpentLoans(alkaid_producer* producer) {
  for (alkaid_loan* loan : producer->spent_loans) delete loan;
  producer->spent_loans.clear();
}

// ---- Loans through a fixed-shape writer --------------------------------------
//
// A loan of a schema whose columns are all fixed-width and not nullable
// has the same layout every time it has the same rows, and the C++ client
// publishes such batches most cheaply through a client::FixedShapeWriter:
// its Begin takes a region of the channel, its Publish sends the region
// with the Message sent once (the channel's shape entry), with no batch,
// no pool and no shape comparison per message. So a loan of a row count
// that comes back (client::WriterCache::ShouldMake: seen among the last
// eight pool loans'; a count seen once would pay for a writer it never
// uses again, and each writer keeps one of the channel's shape lines for
// good) is made as any loan (a pool and a batch: the prototype), turned
// into a writer of that shape, and the prototype's region is given back;
// once published, the loan object with its writer is kept
// (alkaid_producer::writers) and serves the next loan of the same rows:
// that loan is the writer's Begin, its publish the writer's Publish.
// Nullable columns stay on the pool path (a writer's null counts are its
// prototype's, and a loan's are the caller's); so do variable-width ones
// (their Message changes with their lengths). The writers keep no copy of
// their prototype (they are never asked to fill from it:
// FixedShapeWriterOptions::keep_prototype), only its Message; the cache
// keeps at most four idle and makes at most eight (half the default shape
// lines: the rest serve other shapes), as Python's loans.

// True if every column can be loaned through a writer.
bool WritersFit(const std::vector<LoanPlan>& plans) {
  for (const LoanPlan& plan : plans) {
    if (!plan.loanable || plan.layout == LoanLayout::kVariable || plan.field->nullable()) {
      return false;
    }
  }
  return !plans.empty();
}

// Frees the producer's idle writer loans (their writers hold no region).
void FreeIdleWriters(alkaid_producer* producer) { producer->writers.Clear(); }

// Takes the writer's next region (Begin) and points the loan's columns at
// it: validity none (no column is nullable), values not initialised, the
// padding after each buffer zeroed (as a pool loan's).
Status BeginWriterLoan(alkaid_loan* loan) {
  ALKAID_RETURN_NOT_OK(loan->writer->Begin(client::FixedShapeWriter::Fill::kNone));
  size_t span = 0;
  for (LoanColumn& col : loan->columns) {
    for (int b = 0; b < col.n_buffers; ++b, ++span) {
      const std::span<uint8_t> bytes = loan->writer->buffer(span);
      const auto i = static_cast<size_t>(b);
      col.data[i] = bytes.empty() ? nullptr : bytes.data();
      col.sizes[i] = static_cast<int64_t>(bytes.size());
      if (!bytes.empty()) {
        const int64_t n = col.sizes[i];
        std::memset(bytes.data() + n, 0, static_cast<size_t>(Padded(n) - n));
      }
    }
  }
  return Status::OK();
}

// An idle writer loan of `rows` rows, begun (a Begin that fails leaves it
// idle and reusable), or null if there is none.
alkaid::Result<alkaid_loan*> ReuseWriterLoan(alkaid_producer* producer, int64_t rows) {
  ALKAID_ASSIGN_OR_RAISE(std::optional<std::unique_ptr<alkaid_loan>> idle,
                         producer->writers.TakeIdle(rows, [](std::unique_ptr<alkaid_loan>& loan) {
                           return BeginWriterLoan(loan.get());
                         }));
  return idle.has_value() ? idle->release() : nullptr;
}

// Turns `loan`, a pool loan just made, into a writer loan when it fits:
// the writer is made from its batch (the prototype), the prototype's region
// given back, and the writer's first region begun. Left a pool loan
// otherwise (a shape the client refuses turns writers off for the producer).
Status MakeWriterLoan(alkaid_producer* producer, alkaid_loan* loan) {
  client::FixedShapeWriterOptions options;
  options.keep_prototype = false;
  auto writer = producer->producer->NewFixedShapeWriter(*loan->batch, *loan->pool, options);
  if (!writer.ok()) {
    producer->shape_writers = false;
    return Status::OK();
  }
  producer->writers.Made();
  loan->writer = std::move(*writer);
  loan->batch.reset();
  for (LoanColumn& col : loan->columns) col.buffers = {};
  loan->pool.reset();  // unpublished: the prototype's region goes back
  return BeginWriterLoan(loan);
}

// After a writer loan's publish: kept for the next loan of its rows, the
// oldest idle one freed beyond the cache's four (nothing allocated).
void KeepWriterLoan(alkaid_producer* producer, alkaid_loan* loan) {
  producer->writers.Keep(loan->rows, std::unique_ptr<alkaid_loan>(loan));
}

LoanPlan PlanColumn(format::FieldPtr field) {
  LoanPlan plan;
  const format::DataType& type = *field->type();
  if (format::IsFixedWidth(type.id())) {
    const auto& spec = type.layout().buffers.at(1);
    if (spec.kind == format::DataTypeLayout::BufferKind::kBitmap) {
      plan.layout = LoanLayout::kBitmap;
    } else {
      plan.layout = LoanLayout::kFixed;
      plan.byte_width = spec.byte_width;
    }
  } else if (format::IsBinaryLike(type.id()) || format::IsLargeBinaryLike(type.id())) {
    plan.layout = LoanLayout::kVariable;
    plan.offset_width = format::IsLargeBinaryLike(type.id()) ? 8 : 4;
  } else {
    plan.loanable = false;
  }
  plan.field = std::move(field);
  return plan;
}

// The sizes of a loaned column's buffers for `rows` rows (-1: none), or
// why it cannot be loaned.
Status LoanSizes(const LoanPlan& plan, size_t column, int64_t rows, int64_t var_bytes,
                 std::array<int64_t, 3>* sizes, int* n_buffers) {
  const int64_t bitmap = (rows + 7) / 8;
  (*sizes)[0] = plan.field->nullable() ? bitmap : -1;
  if (!plan.loanable) {
    return Status::NotImplemented(ColumnName(plan, column), " is of type ",
                                  plan.field->type()->ToString(),
                                  ", which a loan cannot lay out (fixed-width, binary and string "
                                  "columns only): publish such batches with "
                                  "alkaid_producer_publish");
  }
  switch (plan.layout) {
    case LoanLayout::kBitmap:
      (*sizes)[1] = bitmap;
      *n_buffers = 2;
      return Status::OK();
    case LoanLayout::kFixed:
      if (__builtin_mul_overflow(rows, plan.byte_width, &(*sizes)[1])) {
        return Status::CapacityError(ColumnName(plan, column), "'s values overflow 64 bits");
      }
      *n_buffers = 2;
      return Status::OK();
    case LoanLayout::kVariable:
      if (var_bytes < 0) {
        return Status::Invalid(ColumnName(plan, column), ": var_data_bytes is ", var_bytes,
                               ", below 0");
      }
      if (plan.offset_width == 4 && var_bytes > std::numeric_limits<int32_t>::max()) {
        return Status::CapacityError(ColumnName(plan, column), ": ", var_bytes,
                                     " value bytes do not fit the ", plan.field->type()->ToString(),
                                     " offsets (int32); use a large type");
      }
      if (__builtin_mul_overflow(rows + 1, int64_t{plan.offset_width}, &(*sizes)[1])) {
        return Status::CapacityError(ColumnName(plan, column), "'s offsets overflow 64 bits");
      }
      (*sizes)[2] = var_bytes;
      *n_buffers = 3;
      return Status::OK();
  }
  return Status::OK();
}

Status MakeLoan(alkaid_producer* producer, int64_t rows, const int64_t* var_data_bytes,
                size_t n_columns, alkaid_loan** out) {
  const char* fn = "alkaid_producer_loan";
  if (producer == nullptr) return NullArgument(fn, "the producer");
  if (out == nullptr) return NullArgument(fn, "out");
  if (rows < 0) return Status::Invalid(fn, ": rows is ", rows, ", below 0");
  FreeSpentLoans(producer);  // their blocks back before taking another
  if (producer->loan_plans.empty()) {
    const format::Schema& schema = *producer->producer->schema();
    for (int i = 0; i < schema.num_fields(); ++i) {
      producer->loan_plans.push_back(PlanColumn(schema.field(i)));
    }
    producer->shape_writers = WritersFit(producer->loan_plans);
  }
  const std::vector<LoanPlan>& plans = producer->loan_plans;
  const size_t fields = plans.size();
  if (var_data_bytes != nullptr && n_columns != fields) {
    return Status::Invalid(fn, ": var_data_bytes has ", n_columns, " entries; the topic '",
                           producer->producer->topic(), "' has ", fields, " columns");
  }
  if (var_data_bytes == nullptr && n_columns != 0) {
    return Status::Invalid(fn, ": var_data_bytes is NULL but n_columns is ", n_columns);
  }
  if (producer->shape_writers) {
    ALKAID_ASSIGN_OR_RAISE(alkaid_loan * reused, ReuseWriterLoan(producer, rows));
    if (reused != nullptr) {
      *out = reused;
      return Status::OK();
    }
  }
  auto loan = std::make_unique<alkaid_loan>();
  loan->producer = producer;
  loan->rows = rows;
  loan->columns.resize(fields);
  // Sizes first (a loan that cannot be made takes no arena space).
  std::array<std::array<int64_t, 3>, 4> sizes_of_few{};
  std::vector<std::array<int64_t, 3>> sizes_of_many;
  std::array<int64_t, 3>* sizes = sizes_of_few.data();
  if (fields > 4) {
    sizes_of_many.resize(fields);
    sizes = sizes_of_many.data();
  }
  int64_t region = 0;
  for (size_t i = 0; i < fields; ++i) {
    const int64_t var = var_data_bytes != nullptr ? var_data_bytes[i] : 0;
    LoanColumn& col = loan->columns[i];
    col.plan = &plans[i];
    sizes[i] = {-1, -1, -1};
    ALKAID_RETURN_NOT_OK(LoanSizes(plans[i], i, rows, var, &sizes[i], &col.n_buffers));
    for (int b = 0; b < col.n_buffers; ++b) {
      if (sizes[i][b] < 0) continue;
      if (__builtin_add_overflow(region, Padded(sizes[i][b]), &region)) {
        return Status::CapacityError(fn, ": a batch of ", rows, " rows overflows 64 bits");
      }
    }
  }
  // Room for the batch's Message, which goes after the buffers when it is
  // too large for the slot (a wide schema's first batch).
  const int64_t metadata = 1024 + 256 * static_cast<int64_t>(fields);
  if (__builtin_add_overflow(region, metadata, &region)) {
    return Status::CapacityError(fn, ": a batch of ", rows, " rows overflows 64 bits");
  }
  ALKAID_ASSIGN_OR_RAISE(loan->pool,
                         producer->producer->NewBatchPool(static_cast<uint64_t>(region)));
  // What every buffer of the loan holds: the region.
  const std::shared_ptr<const void> owner = loan->pool->shared_owner();
  for (size_t i = 0; i < fields; ++i) {
    LoanColumn& col = loan->columns[i];
    for (int b = 0; b < col.n_buffers; ++b) {
      const int64_t n = sizes[i][b];
      if (n < 0) continue;
      // Straight from the region's bump allocator, not AllocateBuffer,
      // which zeroes what it hands out: the caller writes the values, and
      // a pass over them here would cost as much again (a 16 MiB loan, a
      // 16 MiB memset). Validity starts all valid and offsets all 0, so
      // that an untouched column is a valid one; the padding up to the
      // next buffer is zeroed (the body a consumer or IPC writer sees).
      ALKAID_ASSIGN_OR_RAISE(uint8_t * data, loan->pool->Allocate(Padded(n), kAlign));
      const auto bytes = static_cast<size_t>(n);
      if (b == 0) std::memset(data, 0xff, bytes);
      if (b == 1 && col.plan->layout == LoanLayout::kVariable) std::memset(data, 0, bytes);
      std::memset(data + n, 0, static_cast<size_t>(Padded(n) - n));
      col.data[static_cast<size_t>(b)] = data;
      col.sizes[static_cast<size_t>(b)] = n;
      col.buffers[static_cast<size_t>(b)] = std::make_shared<format::Buffer>(data, n, owner);
    }
  }
  // The batch is made now rather than at publish, whose latency a caller
  // measures: publish only checks what the caller wrote and sets the null
  // counts.
  std::vector<format::ArrayDataPtr> columns;
  columns.reserve(fields);
  for (const LoanColumn& col : loan->columns) {
    columns.push_back(
        format::ArrayData::Make(col.plan->field->type(), rows,
                                std::vector<std::shared_ptr<format::Buffer>>(
                                    col.buffers.begin(), col.buffers.begin() + col.n_buffers),
                                0));
  }
  ALKAID_ASSIGN_OR_RAISE(loan->batch, format::RecordBatch::Make(producer->producer->schema(), rows,
                                                                std::move(columns)));
  if (producer->shape_writers && producer->writers.ShouldMake(rows)) {
    ALKAID_RETURN_NOT_OK(MakeWriterLoan(producer, loan.get()));
  }
  *out = loan.release();
  return Status::OK();
}

template <typename Offset>
Status CheckOffsets(const LoanColumn& col, size_t column, int64_t rows) {
  const auto* offsets = col.buffers[1]->data_as<Offset>();
  const int64_t bytes = col.buffers[2]->size();
  if (offsets[0] < 0) {
    return Status::Invalid(ColumnName(*col.plan, column), ": offset 0 is ", offsets[0],
                           ", below 0");
  }
  for (int64_t r = 0; r < rows; ++r) {
    if (offsets[r + 1] < offsets[r]) {
      return Status::Invalid(ColumnName(*col.plan, column), ": offset ", r + 1, " is ",
                             offsets[r + 1], ", below offset ", r, " (", offsets[r], ")");
    }
  }
  if (offsets[rows] > bytes) {
    return Status::Invalid(ColumnName(*col.plan, column), ": offset ", rows, " is ", offsets[rows],
                           ", past the ", bytes, " value bytes loaned");
  }
  return Status::OK();
}

Status PublishLoan(alkaid_producer* producer, alkaid_loan* loan) {
  const char* fn = "alkaid_producer_publish_loan";
  if (producer == nullptr) return NullArgument(fn, "the producer");
  if (loan == nullptr) return NullArgument(fn, "the loan");
  if (loan->producer != producer) {
    return Status::Invalid(fn, ": the loan belongs to another producer");
  }
  if (loan->writer != nullptr) {
    // Not nullable, not variable-width: nothing the caller wrote needs a
    // check (a null count set is 0, alkaid_loan_set_null_count's check).
    ALKAID_RETURN_NOT_OK(loan->writer->Publish());
    KeepWriterLoan(producer, loan);
    return Status::OK();
  }
  const int64_t rows = loan->rows;
  for (size_t i = 0; i < loan->columns.size(); ++i) {
    const LoanColumn& col = loan->columns[i];
    if (col.plan->layout == LoanLayout::kVariable) {
      ALKAID_RETURN_NOT_OK(col.plan->offset_width == 4 ? CheckOffsets<int32_t>(col, i, rows)
                                                       : CheckOffsets<int64_t>(col, i, rows));
    }
    int64_t nulls = 0;
    if (col.buffers[0] != nullptr) {
      nulls = rows - format::bit_util::CountSetBits(col.buffers[0]->data(), 0, rows);
      if (col.null_count >= 0 && col.null_count != nulls) {
        return Status::Invalid(ColumnName(*col.plan, i), ": null count ", col.null_count,
                               " set, but its validity bitmap has ", nulls, " nulls");
      }
    }
    loan->batch->column_data(static_cast<int>(i))->null_count = nulls;
  }
  // No format::Validate: the loan laid every buffer out for the schema's
  // types and `rows` (sizes, alignment), and what the caller wrote that
  // the structure depends on is checked above (offsets, null counts).
  ALKAID_RETURN_NOT_OK(producer->producer->Publish(*loan->batch, loan->pool.get()));
  try {
    producer->spent_loans.push_back(loan);
  } catch (const std::bad_alloc&) {
    delete loan;  // published all the same; freed now rather than lost
  }
  return Status::OK();
}

// Batches handed out and not yet released: next's own exports and the
// stream's (Consumer::ExportStream's, counted by the C++ consumer).
uint64_t Held(const alkaid_consumer& consumer) {
  const uint64_t flat = consumer.flat != nullptr ? consumer.flat->held() : 0;
  return flat + consumer.consumer->stats().exported_held;
}

// How long one wait of next lasts before it looks at the cancel flag.
constexpr auto kCancelSlice = std::chrono::milliseconds(5);

// The largest alkaid_batch_info a caller may say it has (a newer
// alkaid.h's), as for options structs.
constexpr size_t kMaxInfoSize = kMaxOptionsSize;

// Writes what `origin` says into the caller's `info` of `size` bytes (a
// size Next checked): the fields of that size, zeros past ours.
void WriteInfo(const client::BatchOrigin& origin, alkaid_batch_info* info, size_t size) {
  alkaid_batch_info full{};
  full.producer_id = origin.producer_id;
  full.producer_pid = origin.producer_pid;
  full.sequence = origin.sequence;
  full.lost_before = origin.lost_before;
  full.publish_ns = origin.publish_ns;
  auto* bytes = reinterpret_cast<unsigned char*>(info);
  const size_t known = std::min(size, sizeof full);
  std::memcpy(bytes, &full, known);
  if (size > known) std::memset(bytes + known, 0, size - known);
}

Status Next(const char* fn, alkaid_consumer* consumer, int64_t timeout_ms, ArrowArray* out,
            ArrowSchema* out_schema, alkaid_batch_info* info, size_t info_size) {
  if (consumer == nullptr) return NullArgument(fn, "the consumer");
  if (out == nullptr) return NullArgument(fn, "out");
  if (info != nullptr && info_size != ALKAID_BATCH_INFO_SIZE_V1 &&
      (info_size < sizeof(alkaid_batch_info) || info_size > kMaxInfoSize)) {
    return Status::Invalid(fn, ": info_size is ", info_size,
                           ", not the size of a version of alkaid_batch_info (",
                           ALKAID_BATCH_INFO_SIZE_V1, ", ", sizeof(alkaid_batch_info),
                           ", or larger up to ", kMaxInfoSize, "; pass sizeof(*info))");
  }
  if (timeout_ms < 0 && timeout_ms != ALKAID_FOREVER) {
    return Status::Invalid(fn, ": timeout_ms is ", timeout_ms);
  }
  client::Consumer& c = *consumer->consumer;
  // Refused before receiving, so that no batch is taken and lost.
  if (consumer->max_held > 0 && Held(*consumer) >= consumer->max_held) {
    ++consumer->refused;
    return Status::CapacityError(fn, ": topic '", c.topic(), "': ", consumer->max_held,
                                 " batches held (max_held_batches); release one first");
  }
  using Clock = std::chrono::steady_clock;
  const bool forever = timeout_ms == ALKAID_FOREVER;
  // The clock is read only once a first attempt found nothing (Next
  // itself does the same): a batch that is there costs no clock read.
  Clock::time_point deadline = Clock::time_point::max();
  client::BatchOrigin origin;
  alkaid::Result<format::RecordBatchPtr> batch = format::RecordBatchPtr{};
  for (bool first = true;; first = false) {
    if (consumer->cancel.stop_requested()) {
      return Status::Cancelled("topic '", c.topic(), "': the consumer was cancelled");
    }
    std::chrono::nanoseconds left = kCancelSlice;
    if (!forever) {
      left = first ? std::chrono::milliseconds(timeout_ms)
                   : std::max(std::chrono::nanoseconds(0), deadline - Clock::now());
    }
    batch = c.Next(std::min<std::chrono::nanoseconds>(left, kCancelSlice), &origin);
    if (batch.ok() || !batch.status().IsTimedOut()) break;
    if (forever) continue;
    const auto now = Clock::now();
    // The deadline, from the first slice's end: what is left of the
    // timeout after that slice, which waited its length at least (late by
    // the slice's own overhead at most).
    if (first) deadline = now + (left - std::min<std::chrono::nanoseconds>(left, kCancelSlice));
    if (now >= deadline) break;
  }
  // Nothing there: arm the descriptor before saying so. A message that came
  // meanwhile is taken instead (a few times at most: each one found is
  // returned).
  if (timeout_ms == 0 && consumer->wait_fd && !batch.ok() && batch.status().IsTimedOut()) {
    for (int attempt = 0; attempt < 4 && !batch.ok() && batch.status().IsTimedOut(); ++attempt) {
      ALKAID_ASSIGN_OR_RAISE(const bool ready, c.ArmWait());
      if (!ready) break;
      batch = c.Next(std::chrono::nanoseconds(0), &origin);
    }
  }
  if (!batch.ok()) return batch.status();
  if (consumer->flat == nullptr) {
    ALKAID_RETURN_NOT_OK(c.ExportBatch(*batch, out, out_schema));
  } else {
    if (out_schema != nullptr) ALKAID_RETURN_NOT_OK(format::ExportSchema(*c.schema(), out_schema));
    Status exported = consumer->flat->Export(&*batch, out);
    if (!exported.ok()) {
      Drop(out_schema);
      return exported;
    }
  }
  if (info != nullptr) WriteInfo(origin, info, info_size);
  return Status::OK();
}

}  // namespace

// ---- versions and errors ----------------------------------------------------

extern "C" {

int32_t alkaid_version(void) { return ALKAID_C_API_VERSION; }

const char* alkaid_version_string(void) { return ALKAID_VERSION_STRING; }

const char* alkaid_status_name(alkaid_status status) {
  switch (status) {
    case ALKAID_OK:
      return "OK";
    case ALKAID_INVALID:
      return "Invalid";
    case ALKAID_TYPE_ERROR:
      return "TypeError";
    case ALKAID_INDEX_ERROR:
      return "IndexError";
    case ALKAID_KEY_ERROR:
      return "KeyError";
    case ALKAID_CAPACITY_ERROR:
      return "CapacityError";
    case ALKAID_OUT_OF_MEMORY:
      return "OutOfMemory";
    case ALKAID_IO_ERROR:
      return "IOError";
    case ALKAID_NOT_IMPLEMENTED:
      return "NotImplemented";
    case ALKAID_SERIALIZATION_ERROR:
      return "SerializationError";
    case ALKAID_ALREADY_EXISTS:
      return "AlreadyExists";
    case ALKAID_TIMED_OUT:
      return "TimedOut";
    case ALKAID_PERMISSION_DENIED:
      return "PermissionDenied";
    case ALKAID_END_OF_STREAM:
      return "EndOfStream";
    case ALKAID_CANCELLED:
      return "Cancelled";
    case ALKAID_UNKNOWN:
    default:
      return "Unknown";
  }
}

const char* alkaid_last_error(void) { return last_error.c_str(); }

// ---- producer ----------------------------------------------------------------

namespace {

alkaid_producer_options ProducerDefaults() {
  alkaid_producer_options o;
  std::memset(&o, 0, sizeof o);  // padding too: init_sized copies bytes
  o.struct_size = sizeof(alkaid_producer_options);
  o.policy = ALKAID_POLICY_BLOCK_PRODUCER;
  o.huge_pages = ALKAID_HUGE_PAGES_OFF;
  o.publish_timeout_ms = 5000;
  o.wait_for_consumers_ms = 10000;
  o.drain_timeout_ms = 5000;
  o.publish_timestamps = 0;
  return o;
}

}  // namespace

void alkaid_producer_options_init_sized(alkaid_producer_options* options, size_t struct_size) {
  InitSized(ProducerDefaults(), options, struct_size);
}

void alkaid_producer_options_init(alkaid_producer_options* options) {
  InitSized(ProducerDefaults(), options, ALKAID_PRODUCER_OPTIONS_SIZE_V1);
}

alkaid_status alkaid_producer_open(const char* topic, ArrowSchema* schema,
                                   const alkaid_producer_options* options, alkaid_producer** out) {
  return Guard(__func__, [&]() -> Status {
    const char* fn = "alkaid_producer_open";
    if (topic == nullptr || out == nullptr) {
      Drop(schema);
      return NullArgument(fn, topic == nullptr ? "the topic" : "out");
    }
    if (schema == nullptr) return NullArgument(fn, "the schema");
    alkaid_producer_options opts = ProducerDefaults();
    if (options != nullptr) {
      Status read = ReadOptions(
          fn, "alkaid_producer_options", options,
          std::array<size_t, 2>{ALKAID_PRODUCER_OPTIONS_SIZE_V1, ALKAID_PRODUCER_OPTIONS_SIZE_V2},
          &opts);
      if (!read.ok()) {
        Drop(schema);
        return read;
      }
    }
    if (opts.policy != ALKAID_POLICY_BLOCK_PRODUCER && opts.policy != ALKAID_POLICY_DROP_OLDEST) {
      Drop(schema);
      return Status::Invalid(fn, ": policy ", static_cast<int>(opts.policy), " is not a policy");
    }
    if (opts.huge_pages < ALKAID_HUGE_PAGES_OFF || opts.huge_pages > ALKAID_HUGE_PAGES_REQUIRE) {
      Drop(schema);
      return Status::Invalid(fn, ": huge_pages ", static_cast<int>(opts.huge_pages),
                             " is not a setting");
    }
    auto imported = format::ImportSchema(schema);
    if (!imported.ok()) return imported.status().WithContext(std::string(fn) + ": the schema");
    auto handle = std::make_unique<alkaid_producer>();
    client::ProducerOptions po;
    if (opts.socket_path != nullptr) po.socket_path = opts.socket_path;
    po.topic.slot_count = opts.slot_count;
    po.topic.arena_bytes = opts.arena_bytes;
    po.topic.max_arena_bytes = opts.max_arena_bytes;
    po.topic.policy = static_cast<alkaid::shm::SlowConsumerPolicy>(opts.policy);
    po.huge_pages = static_cast<alkaid::shm::HugePages>(opts.huge_pages);
    po.publish_timeout = Millis(opts.publish_timeout_ms, po.publish_timeout);
    po.wait_for_consumers = Millis(opts.wait_for_consumers_ms, po.wait_for_consumers);
    po.drain_timeout = Millis(opts.drain_timeout_ms, po.drain_timeout);
    po.topic.publish_timestamps = opts.publish_timestamps != 0;
    po.fixed_block_bytes = opts.fixed_block_bytes;
    po.fixed_block_count = opts.fixed_block_count;
    po.stop = handle->stop.get_token();
    ALKAID_ASSIGN_OR_RAISE(handle->producer, client::Producer::Open(topic, *imported, po));
    *out = handle.release();
    return Status::OK();
  });
}

alkaid_status alkaid_producer_publish(alkaid_producer* producer, ArrowArray* array,
                                      ArrowSchema* schema) {
  return Guard(__func__, [&]() -> Status {
    const char* fn = "alkaid_producer_publish";
    if (producer == nullptr || array == nullptr) {
      Drop(array);
      Drop(schema);
      return NullArgument(fn, producer == nullptr ? "the producer" : "the array");
    }
    if (array->release == nullptr) {
      Drop(schema);
      return Status::Invalid(fn, ": the ArrowArray was already released");
    }
    return producer->producer->PublishArrowArray(array, schema);
  });
}

alkaid_status alkaid_producer_schema(alkaid_producer* producer, ArrowSchema* out) {
  return Guard(__func__, [&]() -> Status {
    if (producer == nullptr) return NullArgument("alkaid_producer_schema", "the producer");
    if (out == nullptr) return NullArgument("alkaid_producer_schema", "out");
    return format::ExportSchema(*producer->producer->schema(), out);
  });
}

alkaid_status alkaid_producer_stats_get(alkaid_producer* producer, alkaid_producer_stats* out) {
  return Guard(__func__, [&]() -> Status {
    if (producer == nullptr) return NullArgument("alkaid_producer_stats_get", "the producer");
    if (out == nullptr) return NullArgument("alkaid_producer_stats_get", "out");
    const client::ProducerStats s = producer->producer->stats();
    out->published = s.published;
    out->copied_bytes = s.copied_bytes;
    out->held_by_consumers = s.held_by_consumers;
    out->arena_bytes_free = s.arena_bytes_free;
    return Status::OK();
  });
}

alkaid_status alkaid_producer_cancel(alkaid_producer* producer) {
  return Guard(__func__, [&]() -> Status {
    if (producer == nullptr) return NullArgument("alkaid_producer_cancel", "the producer");
    producer->stop.request_stop();
    return Status::OK();
  });
}

alkaid_status alkaid_producer_close(alkaid_producer* producer) {
  if (producer == nullptr) return ALKAID_OK;
  FreeSpentLoans(producer);
  FreeIdleWriters(producer);  // before the producer they write through
  const alkaid_status st = Guard(__func__, [&]() { return producer->producer->Close(); });
  delete producer;
  return st;
}

// ---- loans ----------------------------------------------------------------------

alkaid_status alkaid_producer_loan(alkaid_producer* producer, int64_t rows,
                                   const int64_t* var_data_bytes, size_t n_columns,
                                   alkaid_loan** out) {
  return Guard(__func__,
               [&]() { return MakeLoan(producer, rows, var_data_bytes, n_columns, out); });
}

alkaid_status alkaid_loan_buffer(alkaid_loan* loan, int32_t column, int32_t buffer, void** data,
                                 int64_t* size) {
  return Guard(__func__, [&]() -> Status {
    const char* fn = "alkaid_loan_buffer";
    if (loan == nullptr) return NullArgument(fn, "the loan");
    if (data == nullptr || size == nullptr)
      return NullArgument(fn, data == nullptr ? "data" : "size");
    if (column < 0 || static_cast<size_t>(column) >= loan->columns.size()) {
      return Status::IndexError(fn, ": column ", column, " of a batch of ", loan->columns.size(),
                                " columns");
    }
    const LoanColumn& col = loan->columns[static_cast<size_t>(column)];
    if (buffer < 0 || buffer >= col.n_buffers) {
      return Status::IndexError(fn, ": buffer ", buffer, " of column ", column, " ('",
                                col.plan->field->name(), "', ", col.plan->field->type()->ToString(),
                                "), which has ", col.n_buffers);
    }
    *data = col.data[static_cast<size_t>(buffer)];
    *size = col.sizes[static_cast<size_t>(buffer)];
    return Status::OK();
  });
}

alkaid_status alkaid_loan_set_null_count(alkaid_loan* loan, int32_t column, int64_t null_count) {
  return Guard(__func__, [&]() -> Status {
    const char* fn = "alkaid_loan_set_null_count";
    if (loan == nullptr) return NullArgument(fn, "the loan");
    if (column < 0 || static_cast<size_t>(column) >= loan->columns.size()) {
      return Status::IndexError(fn, ": column ", column, " of a batch of ", loan->columns.size(),
                                " columns");
    }
    LoanColumn& col = loan->columns[static_cast<size_t>(column)];
    if (null_count < 0 || null_count > loan->rows) {
      return Status::Invalid(fn, ": null count ", null_count, " of column ", column,
                             " outside [0, ", loan->rows, "]");
    }
    if (col.data[0] == nullptr && null_count != 0) {
      return Status::Invalid(fn, ": column ", column, " ('", col.plan->field->name(),
                             "') is not nullable; its null count is 0");
    }
    col.null_count = null_count;
    return Status::OK();
  });
}

alkaid_status alkaid_producer_publish_loan(alkaid_producer* producer, alkaid_loan* loan) {
  return Guard(__func__, [&]() { return PublishLoan(producer, loan); });
}

void alkaid_loan_discard(alkaid_loan* loan) { delete loan; }

// ---- consumer ----------------------------------------------------------------------

namespace {

alkaid_consumer_options ConsumerDefaults() {
  alkaid_consumer_options o;
  std::memset(&o, 0, sizeof o);  // padding too: init_sized copies bytes
  o.struct_size = sizeof(alkaid_consumer_options);
  o.wait_mode = ALKAID_WAIT_SPIN_THEN_BLOCK;
  o.verification = ALKAID_VERIFY_STRUCTURE;
  return o;
}

}  // namespace

void alkaid_consumer_options_init_sized(alkaid_consumer_options* options, size_t struct_size) {
  InitSized(ConsumerDefaults(), options, struct_size);
}

void alkaid_consumer_options_init(alkaid_consumer_options* options) {
  InitSized(ConsumerDefaults(), options, ALKAID_CONSUMER_OPTIONS_SIZE_V1);
}

alkaid_status alkaid_consumer_open(const char* topic, const alkaid_consumer_options* options,
                                   alkaid_consumer** out) {
  return Guard(__func__, [&]() -> Status {
    const char* fn = "alkaid_consumer_open";
    if (topic == nullptr) return NullArgument(fn, "the topic");
    if (out == nullptr) return NullArgument(fn, "out");
    alkaid_consumer_options opts = ConsumerDefaults();
    if (options != nullptr) {
      ALKAID_RETURN_NOT_OK(
          ReadOptions(fn, "alkaid_consumer_options", options, std::array<size_t, 0>{}, &opts));
    }
    client::ConsumerOptions co;
    if (opts.socket_path != nullptr) co.socket_path = opts.socket_path;
    if (opts.wait_for_topic_ms < 0 && opts.wait_for_topic_ms != ALKAID_FOREVER) {
      return Status::Invalid(fn, ": wait_for_topic_ms is ", opts.wait_for_topic_ms);
    }
    co.wait_for_topic = Millis(opts.wait_for_topic_ms, std::chrono::milliseconds(0));
    co.from_oldest = opts.from_oldest != 0;
    if (opts.n_columns > 0 && opts.columns == nullptr) {
      return Status::Invalid(fn, ": columns is NULL but n_columns is ", opts.n_columns);
    }
    for (size_t i = 0; i < opts.n_columns; ++i) {
      if (opts.columns[i] == nullptr) return Status::Invalid(fn, ": column name ", i, " is NULL");
      co.columns.emplace_back(opts.columns[i]);
    }
    switch (opts.wait_mode) {
      case ALKAID_WAIT_BUSY_POLL:
        co.wait_mode = alkaid::shm::WaitMode::kBusyPoll;
        break;
      case ALKAID_WAIT_BLOCK:
        co.wait_mode = alkaid::shm::WaitMode::kBlock;
        break;
      case ALKAID_WAIT_SPIN_THEN_BLOCK:
        co.wait_mode = alkaid::shm::WaitMode::kSpinThenBlock;
        break;
      default:
        return Status::Invalid(fn, ": wait_mode ", static_cast<int>(opts.wait_mode),
                               " is not a wait mode");
    }
    switch (opts.verification) {
      case ALKAID_VERIFY_STRUCTURE:
        co.verification = client::Verification::kStructure;
        break;
      case ALKAID_VERIFY_FULL:
        co.verification = client::Verification::kFull;
        break;
      case ALKAID_VERIFY_PRIVATE_COPY:
        co.verification = client::Verification::kPrivateCopy;
        break;
      default:
        return Status::Invalid(fn, ": verification ", static_cast<int>(opts.verification),
                               " is not a verification mode");
    }
    co.max_exported_batches = opts.max_held_batches;
    auto handle = std::make_unique<alkaid_consumer>();
    handle->max_held = opts.max_held_batches;
    ALKAID_ASSIGN_OR_RAISE(handle->consumer, client::Consumer::Open(topic, co));
    handle->flat = alkaid::capi::internal::FlatExporter::Make(*handle->consumer->schema());
    *out = handle.release();
    return Status::OK();
  });
}

alkaid_status alkaid_consumer_next(alkaid_consumer* consumer, int64_t timeout_ms, ArrowArray* out,
                                   ArrowSchema* out_schema, alkaid_batch_info* info) {
  return Guard(__func__, [&]() {
    return Next("alkaid_consumer_next", consumer, timeout_ms, out, out_schema, info,
                ALKAID_BATCH_INFO_SIZE_V1);
  });
}

alkaid_status alkaid_consumer_next_sized(alkaid_consumer* consumer, int64_t timeout_ms,
                                         ArrowArray* out, ArrowSchema* out_schema,
                                         alkaid_batch_info* info, size_t info_size) {
  return Guard(__func__, [&]() {
    return Next("alkaid_consumer_next_sized", consumer, timeout_ms, out, out_schema, info,
                info_size);
  });
}

alkaid_status alkaid_consumer_schema(alkaid_consumer* consumer, ArrowSchema* out) {
  return Guard(__func__, [&]() -> Status {
    if (consumer == nullptr) return NullArgument("alkaid_consumer_schema", "the consumer");
    if (out == nullptr) return NullArgument("alkaid_consumer_schema", "out");
    return format::ExportSchema(*consumer->consumer->schema(), out);
  });
}

alkaid_status alkaid_consumer_stream(alkaid_consumer* consumer, int64_t batch_timeout_ms,
                                     ArrowArrayStream* out) {
  return Guard(__func__, [&]() -> Status {
    const char* fn = "alkaid_consumer_stream";
    if (consumer == nullptr) return NullArgument(fn, "the consumer");
    if (out == nullptr) return NullArgument(fn, "out");
    if (batch_timeout_ms < 0 && batch_timeout_ms != ALKAID_FOREVER) {
      return Status::Invalid(fn, ": batch_timeout_ms is ", batch_timeout_ms);
    }
    client::StreamExportOptions so;
    so.stop = consumer->cancel.get_token();
    if (batch_timeout_ms != ALKAID_FOREVER) {
      so.batch_timeout = std::chrono::milliseconds(batch_timeout_ms);
    }
    return consumer->consumer->ExportStream(out, so);
  });
}

alkaid_status alkaid_consumer_stats_get(alkaid_consumer* consumer, alkaid_consumer_stats* out) {
  return Guard(__func__, [&]() -> Status {
    if (consumer == nullptr) return NullArgument("alkaid_consumer_stats_get", "the consumer");
    if (out == nullptr) return NullArgument("alkaid_consumer_stats_get", "out");
    const client::ConsumerStats s = consumer->consumer->stats();
    out->lost = s.lost;
    const alkaid::capi::internal::FlatExporter* flat = consumer->flat.get();
    out->held = s.exported_held + (flat != nullptr ? flat->held() : 0);
    out->handed_out = s.exported_total + (flat != nullptr ? flat->total() : 0);
    // Our own refusals (max_held_batches, before a batch is taken) and the
    // C++ consumer's (max_exported_batches, none through this ABI today).
    out->refused = consumer->refused + s.exports_refused;
    out->producers = consumer->consumer->producer_count();
    return Status::OK();
  });
}

alkaid_status alkaid_consumer_wait_fd(alkaid_consumer* consumer, int* fd) {
  return Guard(__func__, [&]() -> Status {
    if (consumer == nullptr) return NullArgument("alkaid_consumer_wait_fd", "the consumer");
    if (fd == nullptr) return NullArgument("alkaid_consumer_wait_fd", "fd");
    ALKAID_ASSIGN_OR_RAISE(*fd, consumer->consumer->WaitFd());
    consumer->wait_fd = true;
    return Status::OK();
  });
}

alkaid_status alkaid_consumer_cancel(alkaid_consumer* consumer) {
  return Guard(__func__, [&]() -> Status {
    if (consumer == nullptr) return NullArgument("alkaid_consumer_cancel", "the consumer");
    consumer->cancel.request_stop();
    return Status::OK();
  });
}

alkaid_status alkaid_consumer_close(alkaid_consumer* consumer) {
  if (consumer == nullptr) return ALKAID_OK;
  const alkaid_status st = Guard(__func__, [&]() { return consumer->consumer->Close(); });
  delete consumer;
  return st;
}

// ---- broker management ----------------------------------------------------------

alkaid_status alkaid_broker_connect(const char* socket_path, alkaid_broker** out) {
  return Guard(__func__, [&]() -> Status {
    if (out == nullptr) return NullArgument("alkaid_broker_connect", "out");
    auto handle = std::make_unique<alkaid_broker>();
    ALKAID_ASSIGN_OR_RAISE(
        handle->client, client::BrokerClient::Connect(socket_path != nullptr ? socket_path : ""));
    *out = handle.release();
    return Status::OK();
  });
}

alkaid_status alkaid_broker_list_topics(alkaid_broker* broker, alkaid_topic_list** out) {
  return Guard(__func__, [&]() -> Status {
    if (broker == nullptr) return NullArgument("alkaid_broker_list_topics", "the broker");
    if (out == nullptr) return NullArgument("alkaid_broker_list_topics", "out");
    auto list = std::make_unique<alkaid_topic_list>();
    ALKAID_ASSIGN_OR_RAISE(list->topics, broker->client->ListTopics());
    for (const client::TopicStatus& t : list->topics) {
      alkaid_topic_info info{};
      info.name = t.name.c_str();
      info.slot_count = t.slot_count;
      info.arena_bytes = t.arena_bytes;
      info.max_arena_bytes = t.max_arena_bytes;
      info.policy = static_cast<alkaid_policy>(t.policy);
      info.row_topic = t.kind == client::TopicKind::kUnsafeRow ? 1 : 0;
      info.producers = t.producers;
      info.consumers = t.consumers;
      info.published = t.published;
      info.depth = t.depth;
      info.drops = t.drops;
      info.held = t.held;
      info.shm_bytes = t.shm_bytes;
      info.publish_timestamps = t.publish_timestamps ? 1 : 0;
      list->infos.push_back(info);
    }
    *out = list.release();
    return Status::OK();
  });
}

void alkaid_broker_close(alkaid_broker* broker) { delete broker; }

size_t alkaid_topic_list_size(const alkaid_topic_list* list) {
  return list != nullptr ? list->infos.size() : 0;
}

const alkaid_topic_info* alkaid_topic_list_get(const alkaid_topic_list* list, size_t index) {
  if (list == nullptr || index >= list->infos.size()) return nullptr;
  return &list->infos[index];
}

alkaid_status alkaid_topic_list_schema(const alkaid_topic_list* list, size_t index,
                                       ArrowSchema* out) {
  return Guard(__func__, [&]() -> Status {
    const char* fn = "alkaid_topic_list_schema";
    if (list == nullptr) return NullArgument(fn, "the list");
    if (out == nullptr) return NullArgument(fn, "out");
    if (index >= list->topics.size()) {
      return Status::IndexError(fn, ": topic ", index, " of ", list->topics.size());
    }
    const client::TopicStatus& t = list->topics[index];
    if (t.schema == nullptr) {
      return Status::KeyError(fn, ": the broker left the schema of topic '", t.name,
                              "' out of the list (schemas up to 1 MiB in all)");
    }
    return format::ExportSchema(*t.schema, out);
  });
}

void alkaid_topic_list_free(alkaid_topic_list* list) { delete list; }

}  // extern "C"
