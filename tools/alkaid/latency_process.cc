// alkaid-measure: what the processes of a measurement leave in the shared
// block, and batch values.

#include "alkaid/format/array.h"
#include "alkaid/format/array_data.h"
#include "alkaid/format/buffer.h"
#include "latency_internal.h"

namespace alkaid::tools::latency {

Status NotOneInt64Column(const format::RecordBatch& batch) {
  return Status::Invalid("received a batch of ", batch.num_columns(), " columns and ",
                         batch.num_rows(), " rows; expected 1 int64 column and at least 1 row");
}

Status AwaitOtherSideWaiting(const Shared* shared, int64_t value) {
  const int64_t deadline = NowNs() + 30'000'000'000;
  // Acquire: partner of B's release store before it waits.
  for (uint32_t spins = 1; shared->answered.load(std::memory_order_acquire) != value; ++spins) {
    if ((spins & 1023) == 0) {
      if (Stopping(shared)) return Status::Cancelled("stopped");
      if (NowNs() > deadline) {
        return Status::TimedOut("the consumer process did not wait again within 30 s");
      }
    }
  }
  return Status::OK();
}

format::SchemaPtr BatchSchema() {
  return format::schema({format::field("v", format::int64(), false)});
}

Result<format::RecordBatchPtr> Int64Batch(const format::SchemaPtr& schema, int64_t rows,
                                          format::MemoryPool* pool, int64_t** values) {
  // Not zeroed: every caller writes every value, and a zeroing pass would be
  // a second write of the whole column (a 16 MiB ping, a 16 MiB memset).
  ALKAID_ASSIGN_OR_RAISE(auto buffer, format::AllocateUninitializedBuffer(rows * 8, pool));
  *values = reinterpret_cast<int64_t*>(buffer->mutable_data());
  auto data = format::ArrayData::Make(format::int64(), rows, {nullptr, std::move(buffer)}, 0);
  return format::RecordBatch::Make(schema, rows, {format::MakeArray(std::move(data))});
}

Status RunProcesses(const std::vector<std::function<int()>>& bodies, const RunSpec& spec,
                    const ProgressHook& progress, Shared* s) {
  std::function<void()> on_wait;
  if (progress) on_wait = [&] { progress(*s); };
  return measure::RunChildren(bodies, spec.cpus, &s->control, on_wait);
}

void Finish(const RunSpec& spec, const Shared& shared, const std::string& transport,
            const std::string& mode, const std::string& pattern, Measurement* out) {
  out->transport = transport;
  out->mode = mode;
  out->pattern = pattern;
  out->payload_bytes = spec.payload_bytes;
  out->consumers = pattern == "stream" ? spec.consumers : 1;
  out->histogram = std::make_shared<Histogram>();
  out->histogram->Reset();
  if (pattern == "stream") {
    double rate_sum = 0;
    const int64_t start = shared.start_ns.load();
    for (int k = 0; k < spec.consumers; ++k) {
      out->histogram->Merge(shared.histograms[k]);
      const int64_t span = shared.end_ns[k] - start;
      if (span > 0) {
        rate_sum += static_cast<double>(shared.received[k]) * 1e9 / static_cast<double>(span);
      }
    }
    out->msgs_per_s = rate_sum / spec.consumers;
  } else {
    out->histogram->Merge(shared.histograms[0]);
    // Paired: [1] holds the 64 B pings, round trips as well.
    const bool paired = pattern == "paired";
    if (paired) {
      out->paired = shared.paired;
      out->paired.p50_64_ns = Summarize(shared.histograms[1]).p50_ns;
    }
    const uint64_t round_trips =
        shared.histograms[0].total + (paired ? shared.histograms[1].total : 0);
    if (shared.elapsed_ns > 0) {
      out->msgs_per_s =
          static_cast<double>(round_trips) * 1e9 / static_cast<double>(shared.elapsed_ns);
    }
  }
  out->summary = Summarize(*out->histogram);
}

}  // namespace alkaid::tools::latency
