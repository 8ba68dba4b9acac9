// alkaid record / replay: a topic's batches to Arrow IPC files and back
// (docs/BROKER.md, "Recording and replaying").
//
// record: one consumer per topic, each on its own thread, writing with the
// format library's stream or file writer. Every batch carries custom
// metadata saying when it arrived, from which producer, its sequence and
// the batches lost before it. A file being written is named `<name>.partial`
// and renamed to its final name once its writer closed it: a file without
// the suffix is complete. SIGINT and SIGTERM end every current file cleanly.
//
// replay: the batches of recordings published to a topic, each copied once
// from the mapped file into shared memory (Producer::PublishCopy), at the
// recorded pace unless told otherwise.

#include <signal.h>
#include <sys/stat.h>
#include <time.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include "alkaid/client/consumer.h"
#include "alkaid/client/producer.h"
#include "alkaid/format/ipc/dictionary_tracker.h"
#include "alkaid/format/ipc/io.h"
#include "alkaid/format/ipc/writer.h"
#include "batch_source.h"
#include "commands.h"
#include "output.h"
#include "record_metadata.h"

namespace alkaid::tools {

namespace ipc = format::ipc;
namespace fs = std::filesystem;

namespace {

constexpr auto kReceiveSlice = std::chrono::milliseconds(100);

int64_t RealtimeNanos() {
  timespec ts{};
  ::clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

// Where a topic's files go: `<stem>.<NNNNNN><ext>` when numbered, else
// `<stem><ext>`.
struct FileNaming {
  std::string stem;
  std::string ext;
  bool numbered = false;

  std::string Name(int index) const {
    if (!numbered) return stem + ext;
    char digits[16];
    (void)std::snprintf(digits, sizeof digits, ".%06d", index);
    return stem + digits + ext;
  }
};

// The batch's own metadata, then the recorder's keys.
format::MetadataPtr RecordMetadata(const format::RecordBatch& batch,
                                   const client::BatchOrigin& origin, int64_t receive_ns) {
  auto md = batch.metadata() != nullptr
                ? std::make_shared<format::KeyValueMetadata>(*batch.metadata())
                : std::make_shared<format::KeyValueMetadata>();
  md->Set(std::string(kReceiveTimeKey), std::to_string(receive_ns));
  // Only where the topic stamps publish times (0: not stamped).
  if (origin.publish_ns != 0) {
    md->Set(std::string(kPublishTimeKey), std::to_string(origin.publish_ns));
  }
  md->Set(std::string(kProducerIdKey), std::to_string(origin.producer_id));
  md->Set(std::string(kProducerPidKey), std::to_string(origin.producer_pid));
  md->Set(std::string(kSequenceKey), std::to_string(origin.sequence));
  md->Set(std::string(kLostBeforeKey), std::to_string(origin.lost_before));
  return md;
}

// One topic's recording: its consumer and the file being written.
class TopicRecorder {
 public:
  TopicRecorder(std::string topic, FileNaming naming, const RecordOptions& options)
      : topic_(std::move(topic)), naming_(std::move(naming)), options_(options) {
    WriteChoice choice;
    choice.to = options.format;
    choice.compression = options.compression;
    choice.magic = "arrow";  // ARROW1 files and ARROW: extension names: other tools read them
    write_options_ = MakeWriteOptions(choice);
  }

  // Records until the stop is requested, the topic ends, --count or the
  // idle --timeout; every file it leaves without `.partial` is complete.
  Status Run(const std::stop_token& stop) {
    client::ConsumerOptions co;
    co.socket_path = options_.socket;
    co.from_oldest = options_.from_oldest;
    co.kind = std::nullopt;  // row topics are recorded as record batches
    co.stop = stop;
    co.wait_for_topic = options_.timeout_seconds > 0 ? Millis(options_.timeout_seconds)
                                                     : std::chrono::milliseconds::max();
    auto consumer = client::Consumer::Open(topic_, co);
    if (!consumer.ok()) {
      if (consumer.status().code() == StatusCode::kCancelled) return Status::OK();
      return consumer.status().WithContext("topic '" + topic_ + "'");
    }
    consumer_ = std::move(*consumer);
    schema_ = consumer_->schema();
    if (options_.format == "file") {
      ALKAID_RETURN_NOT_OK(ids_.AssignIds(*schema_));
      if (ids_.num_fields() > 0) {
        replacements_.emplace(ids_, ipc::DictionaryTrackerOptions{});
      }
    }
    // The first file at once: even a recording without batches says the
    // schema.
    ALKAID_RETURN_NOT_OK(OpenFile());
    auto last_data = std::chrono::steady_clock::now();
    const auto idle_limit = Millis(options_.timeout_seconds);
    Status ended;
    while (!stop.stop_requested() && (options_.count < 0 || batches_ < options_.count)) {
      client::BatchOrigin origin;
      auto batch = consumer_->Next(kReceiveSlice, &origin);
      const int64_t receive_ns = RealtimeNanos();
      if (!batch.ok()) {
        const StatusCode code = batch.status().code();
        if (code == StatusCode::kEndOfStream) break;
        if (code == StatusCode::kTimedOut) {
          if (options_.timeout_seconds > 0 &&
              std::chrono::steady_clock::now() - last_data >= idle_limit) {
            break;
          }
          continue;
        }
        // One bad message or a producer we cannot attach to: said, skipped.
        std::cerr << "alkaid record: topic '" << topic_ << "': " << batch.status().message()
                  << " (skipped; recording goes on)\n";
        ++skipped_;
        continue;
      }
      last_data = std::chrono::steady_clock::now();
      ended = Write(**batch, origin, receive_ns);
      if (!ended.ok()) break;
    }
    if (ended.ok() && writer_ != nullptr) ended = CloseFile();
    (void)consumer_->Close();
    return ended;
  }

  const std::string& topic() const { return topic_; }
  int64_t batches() const { return batches_; }
  uint64_t lost() const { return lost_; }
  uint64_t skipped() const { return skipped_; }
  const std::vector<std::string>& completed() const { return completed_; }
  // The file left unfinished by an error, or empty.
  const std::string& unfinished() const { return unfinished_; }

 private:
  static std::chrono::milliseconds Millis(double seconds) {
    return std::chrono::milliseconds(static_cast<int64_t>(std::llround(seconds * 1000)));
  }

  Status OpenFile() {
    path_ = naming_.Name(index_++);
    partial_ = path_ + ".partial";
    std::error_code ec;
    if (fs::exists(path_, ec)) {
      return Status::AlreadyExists("topic '", topic_, "': '", path_,
                                   "' exists; record does not overwrite recordings");
    }
    auto sink = ipc::FileOutputStream::Open(partial_);
    if (!sink.ok()) return sink.status().WithContext("topic '" + topic_ + "'");
    sink_ = *sink;
    auto writer = options_.format == "file"
                      ? ipc::MakeFileWriter(sink_.get(), schema_, write_options_)
                      : ipc::MakeStreamWriter(sink_.get(), schema_, write_options_);
    if (!writer.ok()) return Fail(writer.status());
    writer_ = std::move(*writer);
    if (replacements_) replacements_.emplace(ids_, ipc::DictionaryTrackerOptions{});
    return Status::OK();
  }

  // End-of-stream (and footer), close, then the final name.
  Status CloseFile() {
    Status st = writer_->Close();
    if (st.ok()) st = sink_->Close();
    if (!st.ok()) return Fail(st);
    writer_.reset();
    sink_.reset();
    std::error_code ec;
    fs::rename(partial_, path_, ec);
    if (ec) {
      unfinished_ = partial_;
      return Status::IOError("topic '", topic_, "': cannot rename '", partial_, "' to '", path_,
                             "': ", ec.message());
    }
    completed_.push_back(path_);
    return Status::OK();
  }

  // A write failed (a full disk...): the file keeps its `.partial` name and
  // what was written of it; the completed files are untouched.
  Status Fail(const Status& st) {
    if (sink_ != nullptr) (void)sink_->Close();
    writer_.reset();
    sink_.reset();
    unfinished_ = partial_;
    return st.WithContext("topic '" + topic_ + "': writing '" + partial_ + "'");
  }

  // A dictionary of `batch` that changed other than by growing at its end:
  // the file format cannot say that, so the batch starts a new file.
  Result<bool> ReplacesDictionary(const format::RecordBatch& batch) {
    if (!replacements_) return false;
    ALKAID_ASSIGN_OR_RAISE(auto changes, replacements_->Diff(batch));
    bool replaces = false;
    for (const auto& change : changes) {
      if (change.values == nullptr || change.is_delta) continue;
      for (const auto& [id, dictionary] : replacements_->current()) {
        if (id == change.id) replaces = true;
      }
    }
    for (const auto& change : changes) ALKAID_RETURN_NOT_OK(replacements_->Commit(change));
    return replaces;
  }

  Status Write(const format::RecordBatch& batch, const client::BatchOrigin& origin,
               int64_t receive_ns) {
    ALKAID_ASSIGN_OR_RAISE(const bool replaces, ReplacesDictionary(batch));
    if (replaces && writer_ != nullptr && writer_->stats().num_record_batches > 0) {
      if (!naming_.numbered) naming_.numbered = true;  // the first file keeps its name
      ALKAID_RETURN_NOT_OK(CloseFile());
      ALKAID_RETURN_NOT_OK(OpenFile());
      // The new file's tracker has not seen the batch yet.
      ALKAID_ASSIGN_OR_RAISE(const bool again, ReplacesDictionary(batch));
      (void)again;
    }
    if (writer_ == nullptr) ALKAID_RETURN_NOT_OK(OpenFile());
    const auto stamped = batch.WithMetadata(RecordMetadata(batch, origin, receive_ns));
    const Status st = writer_->WriteRecordBatch(*stamped);
    if (!st.ok()) return Fail(st);
    ++batches_;
    lost_ += origin.lost_before;
    if (options_.rotate_bytes > 0 &&
        static_cast<uint64_t>(writer_->stats().total_bytes) >= options_.rotate_bytes) {
      // The next file is opened by the next batch: a recording that ends
      // here leaves no empty file behind.
      ALKAID_RETURN_NOT_OK(CloseFile());
    }
    return Status::OK();
  }

  std::string topic_;
  FileNaming naming_;
  const RecordOptions& options_;
  ipc::IpcWriteOptions write_options_;
  std::unique_ptr<client::Consumer> consumer_;
  format::SchemaPtr schema_;
  ipc::DictionaryMemo ids_;
  std::optional<ipc::DictionaryTracker> replacements_;  // --format file with dictionaries
  std::shared_ptr<ipc::FileOutputStream> sink_;
  std::unique_ptr<ipc::RecordBatchWriter> writer_;
  int index_ = 0;
  std::string path_;
  std::string partial_;
  std::string unfinished_;
  std::vector<std::string> completed_;
  int64_t batches_ = 0;
  uint64_t lost_ = 0;
  uint64_t skipped_ = 0;
};

// The files of each topic: one topic and a --out that is not a directory:
// that file; otherwise DIR/<topic>.NNNNNN.arrows (.arrow for files).
Result<std::vector<FileNaming>> PlanNames(const RecordOptions& options) {
  const std::string ext = options.format == "file" ? ".arrow" : ".arrows";
  std::error_code ec;
  const bool is_dir = fs::is_directory(options.out, ec);
  const bool want_dir =
      options.topics.size() > 1 || is_dir || (!options.out.empty() && options.out.back() == '/');
  std::vector<FileNaming> names;
  if (want_dir) {
    if (!is_dir) {
      fs::create_directory(options.out, ec);
      if (ec) {
        return Status::IOError("cannot create output directory '", options.out,
                               "': ", ec.message());
      }
    }
    for (const auto& topic : options.topics) {
      names.push_back({(fs::path(options.out) / topic).string(), ext, true});
    }
    return names;
  }
  const fs::path out(options.out);
  FileNaming naming;
  naming.ext = out.extension().string();
  naming.stem = naming.ext.empty() ? options.out : (out.parent_path() / out.stem()).string();
  naming.numbered = options.rotate_bytes > 0;
  names.push_back(std::move(naming));
  return names;
}

// Blocks SIGINT and SIGTERM in this thread and every thread it starts
// afterwards; the caller takes them with sigtimedwait. Restored on scope
// exit.
class SignalsAsRequests {
 public:
  SignalsAsRequests() {
    sigemptyset(&set_);
    sigaddset(&set_, SIGINT);
    sigaddset(&set_, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set_, &old_);
  }
  ~SignalsAsRequests() { Release(); }
  // This thread takes the signals' default action again (the threads
  // started meanwhile keep them blocked).
  void Release() {
    if (released_) return;
    released_ = true;
    pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }
  SignalsAsRequests(const SignalsAsRequests&) = delete;
  SignalsAsRequests& operator=(const SignalsAsRequests&) = delete;

  // The signal that arrived within `timeout`, or 0.
  int Wait(std::chrono::milliseconds timeout) const {
    timespec ts{static_cast<time_t>(timeout.count() / 1000),
                static_cast<long>(timeout.count() % 1000 * 1000000)};
    siginfo_t info{};
    const int sig = ::sigtimedwait(&set_, &info, &ts);
    return sig > 0 ? sig : 0;
  }

 private:
  sigset_t set_{};
  sigset_t old_{};
  bool released_ = false;
};

// replay: SIGINT and SIGTERM set a flag the publishing loop looks at, once;
// a second one takes the default action (a publish blocked on full slots
// cannot look).
std::atomic<int> g_replay_signal{0};

void OnReplaySignal(int sig) { g_replay_signal.store(sig); }

class ReplaySignals {
 public:
  ReplaySignals() {
    struct sigaction sa {};
    sa.sa_handler = OnReplaySignal;
    sa.sa_flags = SA_RESETHAND;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old_int_);
    sigaction(SIGTERM, &sa, &old_term_);
  }
  ~ReplaySignals() {
    sigaction(SIGINT, &old_int_, nullptr);
    sigaction(SIGTERM, &old_term_, nullptr);
  }
  ReplaySignals(const ReplaySignals&) = delete;
  ReplaySignals& operator=(const ReplaySignals&) = delete;
  bool raised() const { return g_replay_signal.load() != 0; }

 private:
  struct sigaction old_int_ {};
  struct sigaction old_term_ {};
};

}  // namespace

int RunRecord(const RecordOptions& options) {
  auto names = PlanNames(options);
  if (!names.ok()) return ReportError("record", names.status());
  SignalsAsRequests signals;
  std::stop_source stop;
  std::vector<std::unique_ptr<TopicRecorder>> recorders;
  for (size_t i = 0; i < options.topics.size(); ++i) {
    recorders.push_back(std::make_unique<TopicRecorder>(options.topics[i], (*names)[i], options));
  }
  std::vector<Status> results(recorders.size());
  std::atomic<size_t> running{recorders.size()};
  std::vector<std::jthread> threads;
  for (size_t i = 0; i < recorders.size(); ++i) {
    threads.emplace_back([&, i] {
      results[i] = recorders[i]->Run(stop.get_token());
      // One topic failing (its disk is full...) ends the others cleanly.
      if (!results[i].ok()) stop.request_stop();
      running.fetch_sub(1);
    });
  }
  const auto deadline =
      options.duration_seconds > 0
          ? std::chrono::steady_clock::now() +
                std::chrono::milliseconds(std::llround(options.duration_seconds * 1000))
          : std::chrono::steady_clock::time_point::max();
  int signal = 0;
  while (running.load() > 0) {
    const int got = signals.Wait(std::chrono::milliseconds(100));
    if (got != 0 && signal == 0) {
      signal = got;
      stop.request_stop();
      // A second Ctrl-C, should a write hang, ends the process.
      signals.Release();
    }
    if (std::chrono::steady_clock::now() >= deadline) stop.request_stop();
  }
  threads.clear();  // joined

  int code = kExitOk;
  for (size_t i = 0; i < recorders.size(); ++i) {
    const TopicRecorder& r = *recorders[i];
    std::cerr << "alkaid record: '" << r.topic() << "': " << r.batches() << " batches";
    if (r.lost() > 0) std::cerr << ", " << r.lost() << " lost before them (recorded as gaps)";
    if (r.skipped() > 0) std::cerr << ", " << r.skipped() << " bad messages skipped";
    std::cerr << " in " << r.completed().size() << " complete file(s)";
    for (const auto& f : r.completed()) std::cerr << " " << f;
    std::cerr << "\n";
    if (!results[i].ok()) {
      Status st = results[i];
      if (!r.unfinished().empty()) {
        st = Status(st.code(), st.message() + "; '" + r.unfinished() +
                                   "' is unfinished: read it as a stream up to its last whole "
                                   "batch (docs/BROKER.md)");
      }
      code = std::max(code, ReportError("record", st));
    }
  }
  return code;
}

// ---- replay ---------------------------------------------------------------------

namespace {

// When the batch was published, or else received; nullopt if neither is
// recorded (not a recording: published without delay).
std::optional<int64_t> RecordedTime(const format::RecordBatch& batch) {
  if (batch.metadata() == nullptr) return std::nullopt;
  for (std::string_view key : {kPublishTimeKey, kReceiveTimeKey}) {
    auto value = batch.metadata()->Get(key);
    if (!value) continue;
    try {
      return std::stoll(*value);
    } catch (const std::exception&) {
      return std::nullopt;
    }
  }
  return std::nullopt;
}

// The batch as its producer published it: without the recorder's keys.
format::RecordBatchPtr WithoutRecordKeys(const format::RecordBatchPtr& batch) {
  if (batch->metadata() == nullptr) return batch;
  auto kept = batch->metadata()->Without(
      std::vector<std::string_view>(std::begin(kRecordKeys), std::end(kRecordKeys)));
  return batch->WithMetadata(kept->empty() ? nullptr : kept);
}

}  // namespace

int RunReplay(const ReplayOptions& options) {
  if (options.inputs.empty()) {
    return ReportError("replay", Status::Invalid("give one or more recordings, then the topic"));
  }
  // Every input opened (and its schema compared) before anything is
  // published.
  std::vector<std::unique_ptr<BatchSource>> sources;
  for (const auto& path : options.inputs) {
    auto source = BatchSource::Open(path);
    if (!source.ok()) return ReportError("replay", source.status().WithContext(path));
    if (!sources.empty() && !(*source)->schema()->Equals(*sources.front()->schema())) {
      return ReportError("replay", Status::Invalid("'", path, "' has schema ",
                                                   (*source)->schema()->ToString(false), "; '",
                                                   options.inputs.front(), "' has ",
                                                   sources.front()->schema()->ToString(false)));
    }
    sources.push_back(std::move(*source));
  }
  client::ProducerOptions po;
  po.socket_path = options.socket;
  auto producer = client::Producer::Open(options.topic, sources.front()->schema(), po);
  if (!producer.ok()) return ReportError("replay", producer.status());

  ReplaySignals signals;
  using Clock = std::chrono::steady_clock;
  const bool paced = !options.as_fast_as_possible;
  // Recorded times: the recording's first, the last seen, and what each
  // loop adds (the length of the loops before).
  std::optional<int64_t> first_time;
  int64_t last_time = 0;
  int64_t loop_base = 0;
  const Clock::time_point start = Clock::now();
  int64_t published = 0;
  Status error;
  bool stopped = false;
  for (int round = 0; !stopped && error.ok(); ++round) {
    if (round > 0) {
      if (!options.loop) break;
      // Reopened: the sources were read to their ends.
      for (size_t i = 0; i < sources.size() && error.ok(); ++i) {
        auto again = BatchSource::Open(options.inputs[i]);
        if (!again.ok()) error = again.status().WithContext(options.inputs[i]);
        if (again.ok()) sources[i] = std::move(*again);
      }
      if (!error.ok()) break;
      if (first_time) loop_base += last_time - *first_time;
    }
    for (size_t i = 0; i < sources.size() && !stopped && error.ok(); ++i) {
      BatchSource& input = *sources[i];
      while (true) {
        if (signals.raised()) {
          stopped = true;
          break;
        }
        auto batch = input.Next();
        if (!batch.ok()) {
          error = batch.status().WithContext(options.inputs[i] + ": after " +
                                             std::to_string(input.batches_read()) +
                                             " complete batches");
          break;
        }
        if (*batch == nullptr) break;
        const auto recorded = RecordedTime(**batch);
        if (paced && recorded) {
          if (!first_time) first_time = *recorded;
          last_time = *recorded;
          const int64_t at = std::max<int64_t>(0, *recorded - *first_time + loop_base);
          const auto due = start + std::chrono::nanoseconds(static_cast<int64_t>(
                                       static_cast<double>(at) / options.speed));
          // Sleeps in slices, polling the channel (consumers that join are
          // accepted) and taking Ctrl-C at once.
          while (!signals.raised() && Clock::now() < due) {
            (*producer)->Poll();
            std::this_thread::sleep_for(
                std::min<Clock::duration>(due - Clock::now(), std::chrono::milliseconds(20)));
          }
          if (signals.raised()) {
            stopped = true;
            break;
          }
        }
        const Status st = (*producer)->PublishCopy(*WithoutRecordKeys(*batch));
        if (!st.ok()) {
          error = st.WithContext(options.inputs[i] + ": batch " +
                                 std::to_string(input.batches_read() - 1));
          break;
        }
        ++published;
      }
    }
  }
  const Status closed = (*producer)->Close();
  std::cerr << "alkaid replay: " << published << " batches published to '" << options.topic << "'"
            << (stopped ? " (stopped by a signal)" : "") << "\n";
  if (!error.ok()) return ReportError("replay", error);
  if (!closed.ok()) return ReportError("replay", closed);
  return kExitOk;
}

}  // namespace alkaid::tools
