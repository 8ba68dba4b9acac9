#pragma once

// Private to alkaid-measure: the ping-pong, the paired ping-pong and the
// stream, written once over a sending end (`Out`: Make, Send, SendValue,
// Prepare, SendAnswer, Close; the stream's Begin, Commit) and a receiving end (`In`: Next, Release,
// Close, `stamp`), which each transport gives: Alkaid's two process layers
// (latency_alkaid.cc), the Unix socket and the stream's floor
// (latency_baselines.cc).

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <limits>
#include <thread>
#include <vector>

#include "latency_internal.h"

namespace alkaid::tools::latency {

// Control values carried as a message's id; measured messages have ids >= 0.
constexpr int64_t kWarmValue = -2;     // untimed round trip before each ping
constexpr int64_t kIdleValue = -3;     // side B: measure an idle period now
constexpr int64_t kHelloBase = -1000;  // the client layer's hellos: kHelloBase - k

constexpr std::chrono::milliseconds kSlice{50};  // waits are cut in slices to notice a stop
constexpr int64_t kLinkTimeoutNs = 20'000'000'000;

inline Status StopStatus() { return Status::Cancelled("stopped"); }

// A message received: its id (client layer: the first value), its rows
// (none for a message without body), first and last value, and when it was
// received (only if the receiving end stamps: a clock read).
struct Got {
  int64_t id = 0, rows = 0, first = 0, last = 0, at_ns = 0;
};

// A received batch as a Got (its id is its first value), then held in
// `*held` until the next; stamped first (`stamp`: a clock read), so that
// dropping the batch held before is not timed.
inline Status TakeBatch(format::RecordBatchPtr&& batch, bool stamp, format::RecordBatchPtr* held,
                        Got* got) {
  if (stamp) got->at_ns = NowNs();
  *held = std::move(batch);
  got->rows = (*held)->num_rows();
  ALKAID_RETURN_NOT_OK(FirstLast(**held, &got->first, &got->last));
  got->id = got->first;
  return Status::OK();
}

// Processes without a broker (the channel layer, the stream floor) find
// each other by counts in the shared block: waits until `counter` reaches
// `want`.
inline Status AwaitCount(const std::atomic<int>& counter, int want, const Shared* s,
                         const char* what) {
  const int64_t deadline = NowNs() + kLinkTimeoutNs;
  while (counter.load() < want) {
    if (Stopping(s)) return StopStatus();
    if (NowNs() > deadline) return Status::TimedOut(what, " within 20 s");
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return Status::OK();
}

// The next message on `in`, waiting in slices to notice a stop (up to
// `timeout_ns` if > 0); EndOfStream once its producer closed.
template <typename In>
Status Await(In* in, Got* got, const Shared* s, int64_t timeout_ns = 0) {
  const int64_t deadline = timeout_ns > 0 ? NowNs() + timeout_ns : 0;
  while (true) {
    Status st = in->Next(kSlice, got);
    if (st.code() != StatusCode::kTimedOut) return st;
    if (Stopping(s)) return StopStatus();
    if (timeout_ns > 0 && NowNs() > deadline) return Status::TimedOut("nothing within 30 s");
  }
}

// Waits for the answer carrying `expected`, skipping older answers (to
// hellos the other side saw late).
template <typename In>
Status AwaitAnswer(In* in, int64_t expected, const Shared* s) {
  Got got;
  do {
    ALKAID_RETURN_NOT_OK(Await(in, &got, s, 30'000'000'000));
    in->Release();
  } while (got.id != expected);
  return Status::OK();
}

// Side A, once linked: publishes pings, times the round trips; then asks B
// for the idle period.
template <typename Out, typename In>
Status PingLoop(const RunSpec& spec, Shared* s, Out* out, In* answers) {
  const measure::LoopBounds bounds{spec.count, static_cast<int64_t>(spec.duration_seconds * 1e9)};
  // Ping `i` of `rows` values.
  auto ping_once = [&](int64_t i, int64_t rows, measure::RoundTripTimer* timer) -> Status {
    const uint64_t region = PingRegionBytes(rows);
    // Not timed: build the body in shared memory, then an untimed round
    // trip with a body of the same shape of which only the first and last
    // value are written, as the previous message of a one-shape stream
    // would be: it brings the publish and receive paths and their
    // per-shape state (the metadata cache entry, the decode plan) back
    // into the caches a large build evicted, and makes sure B is running.
    ALKAID_ASSIGN_OR_RAISE(auto ping, out->Make(rows, region));
    for (int64_t r = 0; r < rows; ++r) ping.values[r] = i + r;
    if (spec.warmup) {
      ALKAID_ASSIGN_OR_RAISE(auto warm, out->Make(rows, region));
      warm.values[0] = kWarmValue;
      warm.values[rows - 1] = kWarmValue + rows - 1;
      ALKAID_RETURN_NOT_OK(out->Send(warm, kWarmValue));
      ALKAID_RETURN_NOT_OK(AwaitAnswer(answers, kWarmValue, s));
      ALKAID_RETURN_NOT_OK(AwaitOtherSideWaiting(s, kWarmValue));
    } else if (i > 0) {
      ALKAID_RETURN_NOT_OK(AwaitOtherSideWaiting(s, i - 1));
    }
    // Timed: publish -> B holds the body, read first and last value,
    // answers -> A holds the answer.
    timer->Start();
    ALKAID_RETURN_NOT_OK(out->Send(ping, i));
    ALKAID_RETURN_NOT_OK(AwaitAnswer(answers, i, s));
    timer->Stop();
    return Status::OK();
  };
  // Paired: step i is pings 2i and 2i + 1, one of the size (timed by
  // `timer`, into histograms[0]) and one of 64 B (into histograms[1]).
  const bool paired = spec.pattern == "paired";
  std::vector<int64_t> diffs;
  auto step = [&](int64_t i, measure::RoundTripTimer* timer) -> Status {
    if (!paired) return ping_once(i, RowsFor(spec.payload_bytes), timer);
    measure::RoundTripTimer small;
    for (int64_t id = 2 * i; id < 2 * i + 2; ++id) {
      ALKAID_RETURN_NOT_OK(IsLarge(id) ? ping_once(id, RowsFor(spec.payload_bytes), timer)
                                       : ping_once(id, RowsFor(64), &small));
    }
    s->histograms[1].Record(small.HalfNs());
    diffs.push_back(timer->HalfNs() - small.HalfNs());
    return Status::OK();
  };
  ALKAID_RETURN_NOT_OK(measure::RunPingPongLoop(
      bounds, &s->histograms[0], &s->progress, &s->elapsed_ns, [s] { return Stopping(s); }, step));
  if (!diffs.empty()) {
    const auto pairs = static_cast<int64_t>(diffs.size());
    const measure::MedianInterval d = measure::MedianWithInterval(std::move(diffs));
    s->paired = {pairs, 0, d.median, d.lo, d.hi};
  }
  // The idle period (none when it is 0 s): B waits with nothing coming.
  if (spec.idle_seconds > 0) {
    s->phase.store(1);
    ALKAID_RETURN_NOT_OK(out->SendValue(kIdleValue));
    while (s->phase.load() != 2) {
      if (Stopping(s)) return StopStatus();
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  return out->Close();
}

// Side B: answers each ping once it holds it and read its first and last
// value, until A's producer closes.
template <typename Out, typename In>
Status PongLoop(const RunSpec& spec, Shared* s, Out* out, In* pings) {
  const bool paired = spec.pattern == "paired";
  int64_t next_id = 0;  // of the next measured ping
  ALKAID_RETURN_NOT_OK(out->Prepare(next_id));
  // What A waits for before a timed ping (AwaitOtherSideWaiting).
  int64_t answered = std::numeric_limits<int64_t>::min();
  Got got;
  while (true) {
    // Release: partner of A's acquire load; everything done since the
    // answer is done before A times anything.
    s->answered.store(answered, std::memory_order_release);
    const Status st = Await(pings, &got, s);
    if (st.code() == StatusCode::kEndOfStream) return out->Close();
    ALKAID_RETURN_NOT_OK(st);
    // The rows of the next measured ping (and of the warm-up before it).
    const int64_t rows = RowsFor(paired && !IsLarge(next_id) ? 64 : spec.payload_bytes);
    if (got.id >= 0) {
      if (got.id != next_id || got.rows != rows || got.last != got.first + rows - 1) {
        return Status::Invalid("ping ", next_id, ": got ", got.rows, " rows, values ", got.first,
                               "..", got.last, "; expected ", rows, " rows, values ", next_id, "..",
                               next_id + rows - 1);
      }
      pings->Release();
      ALKAID_RETURN_NOT_OK(out->SendAnswer(next_id++));
      answered = got.id;
    } else if (got.id == kIdleValue) {
      pings->Release();
      const int64_t cpu0 = ProcessCpuNs();
      const int64_t wall0 = NowNs();
      Status idle = pings->Next(
          std::chrono::nanoseconds(static_cast<int64_t>(spec.idle_seconds * 1e9)), &got);
      s->idle_cpu_ns = ProcessCpuNs() - cpu0;
      s->idle_wall_ns = NowNs() - wall0;
      if (idle.ok()) return Status::Invalid("a message arrived during the idle period");
      if (idle.code() != StatusCode::kTimedOut) return idle;
      s->phase.store(2);
    } else {
      // A hello (one row) or a warm-up (the ping's shape).
      if (got.id == kWarmValue && (got.rows != rows || got.last != got.first + rows - 1)) {
        return Status::Invalid("warm-up: got ", got.rows, " rows, values ", got.first, "..",
                               got.last, "; expected ", rows, " rows, values ", got.first, "..",
                               got.first + rows - 1);
      }
      pings->Release();
      if (got.id <= kHelloBase) s->hellos_seen.fetch_add(1);
      ALKAID_RETURN_NOT_OK(out->SendValue(got.id));
      answered = got.id;
    }
  }
}

// Stores `value` in v[0, n). Whole 64-byte runs of eight values go by
// 16-byte vector stores (g++ 12 -O2 keeps a plain loop of unknown count
// scalar, one value per store: it does not vectorise a loop that needs an
// epilogue); the rest, n mod 8 values, one by one.
inline void FillValue(int64_t* v, int64_t n, int64_t value) {
  using Pair = int64_t __attribute__((vector_size(16)));
  const Pair pair = {value, value};
  int64_t r = 0;
  for (; r + 8 <= n; r += 8) {
    std::memcpy(v + r, &pair, sizeof pair);
    std::memcpy(v + r + 2, &pair, sizeof pair);
    std::memcpy(v + r + 4, &pair, sizeof pair);
    std::memcpy(v + r + 6, &pair, sizeof pair);
  }
  for (; r < n; ++r) v[r] = value;
}

// The stream's producer, once linked: `spec.count` bodies whose first value
// is the publish time and the others the sequence number. Each body is
// begun by `out->Begin(rows, region, &values)`, which gives the `rows`
// values to write (every one: nothing is zeroed), and published by
// `out->Commit(i)`; the ends keep what they reuse from body to body.
template <typename Out>
Status StreamLoop(const RunSpec& spec, Shared* s, Out* out) {
  const int64_t rows = RowsFor(spec.payload_bytes);
  const uint64_t region = RoundUp64(static_cast<uint64_t>(rows) * 8) + 1024;
  const int64_t limit_ns = static_cast<int64_t>(spec.duration_seconds * 1e9);
  const int64_t start = NowNs();
  s->start_ns.store(start);
  for (int64_t i = 0; i < spec.count; ++i) {
    if ((i & 1023) == 0) {
      if (Stopping(s)) return StopStatus();
      if (limit_ns > 0 && NowNs() - start > limit_ns) break;
    }
    int64_t* values = nullptr;
    ALKAID_RETURN_NOT_OK(out->Begin(rows, region, &values));
    // Every value the sequence number, then the first the publish time:
    // one clock read a body, the last thing before the publish.
    FillValue(values, rows, i);
    values[0] = NowNs();
    ALKAID_RETURN_NOT_OK(out->Commit(i));
  }
  return out->Close();
}

// Stream consumer `index`: checks every sequence number, records publish
// to receive; consumer 0 of the client layer samples memory (`memory`).
template <typename In>
Status StreamRead(const RunSpec& spec, Shared* s, In* in, int index, bool memory) {
  const int64_t rows = RowsFor(spec.payload_bytes);
  bool linked = false;
  int64_t expected = 0;
  int64_t last_ns = 0;  // when the last batch was received
  const int64_t checkpoint = std::min<int64_t>(1'000'000, std::max<int64_t>(1, spec.count / 2));
  auto sample_memory = [&](int which) {
    MemorySample& m = s->memory[which];
    m.messages = expected;
    m.producer_rss = ResidentBytes(s->producer_pid.load());
    m.consumer_rss = ResidentBytes(static_cast<int>(::getpid()));
    m.broker_rss = ResidentBytes(spec.broker_pid);
    m.segments_bytes = SegmentBytes(spec.shm_prefix);
    s->memory_samples.store(which + 1);
  };
  memory = memory && index == 0;
  in->stamp = true;
  Got got;
  while (true) {
    const Status st = Await(in, &got, s);
    if (st.code() == StatusCode::kEndOfStream) break;
    ALKAID_RETURN_NOT_OK(st);
    if (got.first < 0) {  // a hello (client layer)
      if (!linked) {
        linked = true;
        s->linked.fetch_add(1);
      }
      continue;
    }
    if (got.rows != rows || (rows >= 2 && got.last != expected)) {
      return Status::Invalid("consumer ", index, ": message ", expected, " has ", got.rows,
                             " rows and sequence number ", got.last, "; expected ", rows,
                             " rows (lost or reordered)");
    }
    s->histograms[index].Record(got.at_ns - got.first);
    ++expected;
    last_ns = got.at_ns;
    // The parent's progress line: every 1,024th batch (a store the parent's
    // look moves to its core, not one a batch).
    if (index == 0 && (expected & 1023) == 0)
      s->progress.store(expected, std::memory_order_relaxed);
    if (memory && expected == checkpoint) sample_memory(0);
    // At the last batch the producer still runs (it drains in Close()).
    if (memory && expected == spec.count && expected > checkpoint) sample_memory(1);
  }
  // What the rate is taken from (Finish), once the stream ended.
  s->received[index] = expected;
  s->end_ns[index] = last_ns;
  if (index == 0) s->progress.store(expected, std::memory_order_relaxed);
  if (memory && expected > checkpoint && expected < spec.count) sample_memory(1);
  return in->Close();
}

}  // namespace alkaid::tools::latency
