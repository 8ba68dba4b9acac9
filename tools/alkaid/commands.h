#pragma once

// The subcommands of the `alkaid` tool. Each returns the process exit code:
// 0 success, 1 the data is invalid or differs, 2 usage or I/O error.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace CLI {
class App;
}

namespace alkaid::tools {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;
inline constexpr int kExitUsage = 2;

struct CatOptions {
  std::string input;
  int64_t limit = -1;  ///< rows to print; -1: all
};
int RunCat(const CatOptions& options);

int RunSchema(const std::string& input);

int RunValidate(const std::string& input);

struct WriteChoice {
  std::string to = "stream";         ///< stream | file
  std::string compression = "none";  ///< none | lz4 | zstd
  std::string magic = "alkaid";      ///< alkaid | arrow
};

struct ConvertOptions {
  std::string input;
  std::string output;
  WriteChoice write;
};
int RunConvert(const ConvertOptions& options);

struct IntegrationOptions {
  std::string json;
  std::string ipc;
  WriteChoice write;
  /// Arrow integration-runner quirks to apply (`no_decimal_validate`: accept
  /// decimal values beyond their precision, as older Arrow wrote them).
  std::vector<std::string> quirks;
  bool HasQuirk(std::string_view name) const {
    for (const auto& q : quirks) {
      if (q == name) return true;
    }
    return false;
  }
};
int RunIntegrationValidate(const IntegrationOptions& options);
int RunJsonToIpc(const IntegrationOptions& options);
int RunIpcToJson(const IntegrationOptions& options);

struct RowsOptions {
  std::string input;
  std::string output;
  std::string schema_from;     ///< decode: IPC input whose schema the rows have
  int64_t batch_rows = 65536;  ///< decode: rows per output record batch
};
/// IPC stream/file -> one UnsafeRow batch file (every batch's rows in order).
int RunRowsEncode(const RowsOptions& options);
/// UnsafeRow batch file + schema -> IPC stream.
int RunRowsDecode(const RowsOptions& options);

struct BrokerToolOptions {
  std::string socket;  ///< empty: the client's default (ALKAID_BROKER_SOCKET...)
  bool json = false;   ///< one JSON document instead of the table
};
/// Lists the broker's topics with producers, consumers, depth and drops,
/// then its shared-memory limit (and where it came from), the bytes its
/// producers hold and /dev/shm's free space.
int RunTopics(const BrokerToolOptions& options);
/// `alkaid topics rm NAME`: removes a topic that has no producer (its
/// consumers see the end of the stream, saying why). Exit 1 if it has
/// producers or does not exist, 2 if the broker cannot be reached.
int RunTopicsRemove(const BrokerToolOptions& options, const std::string& topic);

struct PublishOptions {
  std::string socket;
  std::string topic;
  std::string input;
  uint64_t arena_bytes = 0;  ///< topic option if this creates it; 0: broker default
  uint32_t slot_count = 0;
  std::string policy = "block-producer";  ///< block-producer | drop-oldest, if this creates it
  bool unsafe_row = false;  ///< publish each batch as UnsafeRows (an unsafe-row topic)
  bool timestamps = false;  ///< if this creates the topic: producers stamp publish times
};
/// Streams an IPC stream or file into a topic, then detaches (end of stream).
int RunPublish(const PublishOptions& options);

struct SubscribeOptions {
  std::string socket;
  std::string topic;
  std::string out = "-";
  int64_t count = -1;          ///< stop after N batches; -1: no limit
  double timeout_seconds = 0;  ///< stop after this long without data; 0: never
  bool from_oldest = false;
  std::vector<std::string> columns;    ///< receive only these columns; empty: all
  std::string validate = "structure";  ///< structure | full
  bool private_copy = false;           ///< copy each body, then validate it in full
};
/// Writes what arrives on a topic as an IPC stream (rows of an unsafe-row
/// topic converted to record batches). Waits up to --timeout for the topic
/// to be created.
int RunSubscribe(const SubscribeOptions& options);

struct RecordOptions {
  std::string socket;
  std::vector<std::string> topics;
  std::string out;
  std::string format = "stream";     ///< stream | file (ARROW1)
  std::string compression = "none";  ///< none | lz4 | zstd
  int64_t count = -1;                ///< stop after N batches per topic; -1: no limit
  double duration_seconds = 0;       ///< stop after this long; 0: no limit
  uint64_t rotate_bytes = 0;         ///< start a new file past this size; 0: never
  bool from_oldest = false;
  double timeout_seconds = 0;  ///< stop after this long without data (or topic); 0: never
};
/// Writes every batch of each topic to Arrow IPC with per-batch custom
/// metadata (record_metadata.h), until a signal, the end of the topic, or
/// a limit; files being written are named *.partial until complete.
int RunRecord(const RecordOptions& options);

struct ReplayOptions {
  std::string socket;
  std::vector<std::string> inputs;  ///< recordings, in order
  std::string topic;
  double speed = 1.0;  ///< 1: the recorded pace; 2: twice as fast
  bool as_fast_as_possible = false;
  bool loop = false;
};
/// Publishes the batches of recordings to a topic at the recorded pace.
int RunReplay(const ReplayOptions& options);

struct TopOptions {
  std::string socket;
  double interval_seconds = 1.0;  ///< between snapshots
  bool once = false;              ///< one snapshot pair, printed, then exit
  bool json = false;              ///< with once: one JSON document
};
/// The broker's topics live (full screen), or one snapshot with rates.
int RunTop(const TopOptions& options);

struct HzOptions {
  std::string socket;
  std::string topic;
  double window_seconds = 1.0;
  int64_t windows = -1;  ///< stop after N windows; -1: until Ctrl-C or end of stream
};
/// Rates of one topic, as received by a consumer, per window.
int RunHz(const HzOptions& options);

#ifdef ALKAID_HAVE_FLIGHT
/// `topic` is grpc://HOST:PORT/TOPIC or grpc+tls://... (cmd_flight.cc).
bool IsFlightTarget(const std::string& topic);
/// publish / subscribe through an alkaid-flight server.
int RunFlightPublish(const PublishOptions& options);
int RunFlightSubscribe(const SubscribeOptions& options);
#endif

/// Registers `alkaid latency`, a front end of the measurement program
/// alkaid-measure (cmd_latency.cc); its callback stores the exit code in `*code`.
void AddLatencyCommand(CLI::App* app, int* code);

}  // namespace alkaid::tools
