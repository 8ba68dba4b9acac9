// alkaid: inspect, validate and convert Alkaid/Arrow IPC data.

#include <CLI/CLI.hpp>

#include <iostream>

#include "commands.h"

namespace {

using alkaid::tools::WriteChoice;

void AddWriteChoice(CLI::App* cmd, WriteChoice* choice, bool with_to) {
  if (with_to) {
    cmd->add_option("--to", choice->to, "Output format")
        ->check(CLI::IsMember({"stream", "file"}))
        ->capture_default_str();
  }
  cmd->add_option("--compression", choice->compression, "Body buffer compression")
      ->check(CLI::IsMember({"none", "lz4", "zstd"}))
      ->capture_default_str();
  cmd->add_option("--magic", choice->magic,
                  "File magic: alkaid (ALKAID1) or arrow (ARROW1, opens in Arrow tools)")
      ->check(CLI::IsMember({"alkaid", "arrow"}))
      ->capture_default_str();
}

int Run(int argc, char** argv) {
  namespace tools = alkaid::tools;
  CLI::App app{"alkaid: inspect, validate and convert Alkaid and Apache Arrow IPC data"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "alkaid 0.1.0");

  int code = tools::kExitOk;

  tools::CatOptions cat;
  auto* cat_cmd = app.add_subcommand("cat", "Print the schema, then the batches as readable rows");
  cat_cmd->add_option("input", cat.input, "IPC stream or file, or - for stdin")->required();
  cat_cmd->add_option("--limit", cat.limit, "Print at most N rows")->check(CLI::NonNegativeNumber);
  cat_cmd->callback([&] { code = tools::RunCat(cat); });

  std::string schema_input;
  auto* schema_cmd =
      app.add_subcommand("schema", "Print the schema, with metadata and dictionary ids");
  schema_cmd->add_option("input", schema_input, "IPC stream or file, or - for stdin")->required();
  schema_cmd->callback([&] { code = tools::RunSchema(schema_input); });

  std::string validate_input;
  auto* validate_cmd = app.add_subcommand(
      "validate", "Fully validate every batch and dictionary: exit 0 valid, 1 invalid, 2 error");
  validate_cmd->add_option("input", validate_input, "IPC stream or file, or - for stdin")
      ->required();
  validate_cmd->callback([&] { code = tools::RunValidate(validate_input); });

  tools::ConvertOptions convert;
  auto* convert_cmd = app.add_subcommand(
      "convert", "Convert between the stream and file formats (input kind auto-detected)");
  convert_cmd->add_option("input", convert.input, "IPC stream (current or legacy) or file, or -")
      ->required();
  convert_cmd->add_option("output", convert.output, "Output path, or - for stdout")->required();
  AddWriteChoice(convert_cmd, &convert.write, true);
  convert_cmd->callback([&] { code = tools::RunConvert(convert); });

  auto* integration =
      app.add_subcommand("integration", "Arrow integration-test commands (JSON format)");
  integration->require_subcommand(1);

  tools::IntegrationOptions ivalidate;
  auto* iv =
      integration->add_subcommand("validate", "Exit 0 iff the IPC input holds exactly J's data");
  iv->add_option("--json", ivalidate.json, "JSON integration file (.json or .json.gz)")->required();
  iv->add_option("--ipc", ivalidate.ipc, "IPC stream or file")->required();
  const char* quirks_help =
      "Arrow integration-runner quirks, comma-separated: no_decimal_validate (accept decimal "
      "values beyond their precision, as older Arrow versions wrote them)";
  iv->add_option("--quirks", ivalidate.quirks, quirks_help)
      ->delimiter(',')
      ->check(CLI::IsMember({"no_decimal_validate"}));
  iv->callback([&] { code = tools::RunIntegrationValidate(ivalidate); });

  tools::IntegrationOptions j2i;
  auto* j2i_cmd = integration->add_subcommand("json-to-ipc", "Write J's data as IPC");
  j2i_cmd->add_option("--json", j2i.json, "JSON integration file (.json or .json.gz)")->required();
  j2i_cmd->add_option("--out", j2i.ipc, "Output path, or - for stdout")->required();
  AddWriteChoice(j2i_cmd, &j2i.write, true);
  j2i_cmd->add_option("--quirks", j2i.quirks, quirks_help)
      ->delimiter(',')
      ->check(CLI::IsMember({"no_decimal_validate"}));
  j2i_cmd->callback([&] { code = tools::RunJsonToIpc(j2i); });

  tools::IntegrationOptions i2j;
  auto* i2j_cmd = integration->add_subcommand("ipc-to-json", "Write an IPC input as J");
  i2j_cmd->add_option("--ipc", i2j.ipc, "IPC stream or file, or -")->required();
  i2j_cmd->add_option("--out", i2j.json, "Output path (.gz: gzip-compressed), or - for stdout")
      ->required();
  i2j_cmd->callback([&] { code = tools::RunIpcToJson(i2j); });

  auto* rows = app.add_subcommand(
      "rows", "Spark UnsafeRow batches (docs/UNSAFE_ROW.md): encode from / decode to IPC");
  rows->require_subcommand(1);

  tools::RowsOptions rows_encode;
  auto* re = rows->add_subcommand(
      "encode", "Write every row of an IPC input as one UnsafeRow batch (4-byte BE sizes)");
  re->add_option("input", rows_encode.input, "IPC stream or file, or - for stdin")->required();
  re->add_option("output", rows_encode.output, "Row batch file, or - for stdout")->required();
  re->callback([&] { code = tools::RunRowsEncode(rows_encode); });

  tools::RowsOptions rows_decode;
  auto* rd = rows->add_subcommand("decode", "Read an UnsafeRow batch file back as an IPC stream");
  rd->add_option("--schema-from", rows_decode.schema_from,
                 "IPC stream or file whose schema the rows have")
      ->required();
  rd->add_option("--batch-rows", rows_decode.batch_rows, "Rows per output record batch")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  rd->add_option("input", rows_decode.input, "Row batch file, or - for stdin")->required();
  rd->add_option("output", rows_decode.output, "IPC stream path, or - for stdout")->required();
  rd->callback([&] { code = tools::RunRowsDecode(rows_decode); });

  tools::BrokerToolOptions topics;
  auto* topics_cmd = app.add_subcommand(
      "topics",
      "List the broker's topics (producers, consumers, published, depth, drops) and its "
      "shared-memory limit, what producers hold of it and /dev/shm's free space");
  topics_cmd->add_option("--socket", topics.socket, "Broker socket (default: the client's)");
  topics_cmd->add_flag("--json", topics.json, "Write the same as one JSON document on stdout");
  std::string topic_to_remove;
  auto* topics_rm = topics_cmd->add_subcommand(
      "rm",
      "Remove a topic that has no producer (to create it again with another schema, say); "
      "its consumers see the end of the stream");
  topics_rm->add_option("topic", topic_to_remove, "Topic name")->required();
  topics_rm->add_option("--socket", topics.socket, "Broker socket (default: the client's)");
  topics_rm->callback([&] { code = tools::RunTopicsRemove(topics, topic_to_remove); });
  topics_cmd->callback([&] {
    if (!topics_cmd->got_subcommand(topics_rm)) code = tools::RunTopics(topics);
  });

  tools::PublishOptions publish;
  auto* publish_cmd = app.add_subcommand(
      "publish",
      "Publish an IPC stream or file to a topic, each batch as soon as it is read "
      "(stdin: as it arrives), then end the stream");
  publish_cmd
      ->add_option("topic", publish.topic,
                   "Topic name, or grpc://HOST:PORT/TOPIC (an alkaid-flight server)")
      ->required();
  publish_cmd->add_option("input", publish.input, "IPC stream or file, or - for stdin")->required();
  publish_cmd->add_option("--socket", publish.socket, "Broker socket (default: the client's)");
  publish_cmd->add_option("--arena-bytes", publish.arena_bytes,
                          "Each producer's initial arena in bytes if this creates the topic "
                          "(0: broker default)");
  publish_cmd->add_option("--slot-count", publish.slot_count,
                          "Slots of each producer's channel if this creates the topic (0: broker "
                          "default)");
  // The previous release's names: deprecated, hidden, warned about on use.
  publish_cmd->add_option("--segment-bytes", publish.arena_bytes)
      ->group("")
      ->each([](const std::string&) {
        std::cerr << "alkaid publish: --segment-bytes is deprecated; use --arena-bytes\n";
      });
  publish_cmd->add_option("--ring-slots", publish.slot_count)
      ->group("")
      ->each([](const std::string&) {
        std::cerr << "alkaid publish: --ring-slots is deprecated; use --slot-count\n";
      });
  publish_cmd
      ->add_option("--policy", publish.policy,
                   "Slow-consumer policy if this creates the topic: block-producer (wait for "
                   "the slowest consumer) or drop-oldest (overwrite what it has not read)")
      ->check(CLI::IsMember({"block-producer", "drop-oldest"}))
      ->capture_default_str();
  publish_cmd->add_flag("--timestamps", publish.timestamps,
                        "If this creates the topic: its producers stamp each batch with its "
                        "publish time (realtime clock), which consumers read, `alkaid hz` turns "
                        "into latency and `alkaid record` keeps");
  publish_cmd->add_flag("--unsafe-row", publish.unsafe_row,
                        "Publish each batch as an UnsafeRow row batch (an unsafe-row topic)");
  publish_cmd->callback([&] { code = tools::RunPublish(publish); });

  tools::SubscribeOptions subscribe;
  auto* subscribe_cmd =
      app.add_subcommand("subscribe",
                         "Write what arrives on a topic as an IPC stream; ends at end of stream, "
                         "after --count batches or --timeout seconds without data (or without the "
                         "topic being created)");
  subscribe_cmd
      ->add_option("topic", subscribe.topic,
                   "Topic name, or grpc://HOST:PORT/TOPIC (an alkaid-flight server)")
      ->required();
  subscribe_cmd->add_option("--out", subscribe.out, "Output path, or - for stdout")
      ->capture_default_str();
  subscribe_cmd->add_option("--count", subscribe.count, "Stop after N batches")
      ->check(CLI::NonNegativeNumber);
  subscribe_cmd
      ->add_option("--timeout", subscribe.timeout_seconds, "Stop after SEC seconds without data")
      ->check(CLI::PositiveNumber);
  subscribe_cmd->add_flag("--from-oldest", subscribe.from_oldest,
                          "Start at the oldest batch the producers' channels still hold");
  subscribe_cmd
      ->add_option("--columns", subscribe.columns,
                   "Receive only these columns (comma-separated names)")
      ->delimiter(',');
  subscribe_cmd
      ->add_option("--validate", subscribe.validate,
                   "What to check of each batch: structure (buffer sizes and the "
                   "first and last offsets; for producers you trust) or full (every "
                   "offset, index and run end, still zero-copy)")
      ->check(CLI::IsMember({"structure", "full"}))
      ->capture_default_str();
  subscribe_cmd->add_flag("--private-copy", subscribe.private_copy,
                          "Copy each batch out of shared memory and validate the copy in full "
                          "(for producers you do not trust: what is written out cannot change "
                          "after it was checked)");
  subscribe_cmd->add_option("--socket", subscribe.socket, "Broker socket (default: the client's)");
  subscribe_cmd->callback([&] { code = tools::RunSubscribe(subscribe); });

  tools::RecordOptions record;
  auto* record_cmd = app.add_subcommand(
      "record",
      "Record topics to Arrow IPC files, each batch with custom metadata (receive time, "
      "producer, sequence, batches lost before it, and publish time on topics created with "
      "--timestamps); until Ctrl-C/SIGTERM, the end of the "
      "topic, --count, --duration or --timeout. Files being written end in .partial");
  record_cmd->add_option("topics", record.topics, "Topic names")->required();
  record_cmd
      ->add_option("--out", record.out,
                   "Output file (one topic), or directory: DIR/<topic>.NNNNNN.arrows "
                   "(.arrow with --format file); created if missing")
      ->required();
  record_cmd->add_option("--format", record.format, "stream or file (ARROW1, with a footer)")
      ->check(CLI::IsMember({"stream", "file"}))
      ->capture_default_str();
  record_cmd->add_option("--compression", record.compression, "Body buffer compression")
      ->check(CLI::IsMember({"none", "lz4", "zstd"}))
      ->capture_default_str();
  auto* record_count =
      record_cmd->add_option("--count", record.count, "Stop after N batches of each topic")
          ->check(CLI::NonNegativeNumber);
  record_cmd->add_option("--duration", record.duration_seconds, "Stop after SEC seconds")
      ->check(CLI::PositiveNumber)
      ->excludes(record_count);
  record_cmd
      ->add_option("--rotate-bytes", record.rotate_bytes,
                   "Close the file and start the next one once it holds B bytes")
      ->check(CLI::PositiveNumber);
  record_cmd->add_flag("--from-oldest", record.from_oldest,
                       "Start at the oldest batch the producers' channels still hold");
  record_cmd
      ->add_option("--timeout", record.timeout_seconds,
                   "Stop after SEC seconds without data (or without the topic being created); "
                   "default: wait as long as it takes")
      ->check(CLI::PositiveNumber);
  record_cmd->add_option("--socket", record.socket, "Broker socket (default: the client's)");
  record_cmd->callback([&] { code = tools::RunRecord(record); });

  tools::ReplayOptions replay;
  std::vector<std::string> replay_args;
  auto* replay_cmd = app.add_subcommand(
      "replay",
      "Publish recordings (IPC streams or files, in order) to a topic at the recorded pace; "
      "the recorder's metadata is removed, the producer's own kept");
  replay_cmd->add_option("args", replay_args, "FILE... TOPIC")->required()->expected(2, -1);
  auto* replay_speed =
      replay_cmd->add_option("--speed", replay.speed, "Pace: 1 as recorded, 2 twice as fast")
          ->check(CLI::PositiveNumber)
          ->capture_default_str();
  replay_cmd
      ->add_flag("--as-fast-as-possible", replay.as_fast_as_possible,
                 "Publish without waiting between batches")
      ->excludes(replay_speed);
  replay_cmd->add_flag("--loop", replay.loop, "Start again from the first file at the end");
  replay_cmd->add_option("--socket", replay.socket, "Broker socket (default: the client's)");
  replay_cmd->callback([&] {
    replay.topic = replay_args.back();
    replay.inputs.assign(replay_args.begin(), replay_args.end() - 1);
    code = tools::RunReplay(replay);
  });

  tools::TopOptions top;
  auto* top_cmd = app.add_subcommand(
      "top",
      "Watch the broker's topics live, sorted by lag: batches/s, MB/s, published, lag "
      "(depth), drops, held bodies, policy; q quits, up/down select, enter or right expands a "
      "topic into its producers (pid, uid, batches/s, MB/s, arena) and consumers (pid, MB/s, "
      "lag, drops, held bodies and bytes, wait mode)");
  top_cmd->add_option("--socket", top.socket, "Broker socket (default: the client's)");
  top_cmd->add_option("--interval", top.interval_seconds, "Seconds between snapshots")
      ->check(CLI::Range(0.05, 3600.0))
      ->capture_default_str();
  top_cmd->add_flag("--once", top.once, "Print one snapshot (rates over one interval), then exit");
  top_cmd->add_flag("--json", top.json, "With --once: one JSON document")->needs("--once");
  top_cmd->callback([&] { code = tools::RunTop(top); });

  tools::HzOptions hz;
  auto* hz_cmd = app.add_subcommand(
      "hz",
      "Print a topic's rate per window as a consumer receives it: batches/s, rows/s, "
      "bytes/s, rows and bytes per batch, publish-to-receive latency (p50, p90, p99, max) on "
      "topics created with --timestamps, batches lost");
  hz_cmd->add_option("topic", hz.topic, "Topic name (waited for if not created yet)")->required();
  hz_cmd->add_option("--window", hz.window_seconds, "Seconds per line")
      ->check(CLI::Range(0.01, 3600.0))
      ->capture_default_str();
  hz_cmd->add_option("--windows", hz.windows, "Stop after N lines")->check(CLI::PositiveNumber);
  hz_cmd->add_option("--socket", hz.socket, "Broker socket (default: the client's)");
  hz_cmd->callback([&] { code = tools::RunHz(hz); });

  tools::AddLatencyCommand(&app, &code);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // Help and version print and exit 0; every other parse error is usage (2).
    const int parse_code = app.exit(e);
    return parse_code == 0 ? tools::kExitOk : tools::kExitUsage;
  }
  return code;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return Run(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "alkaid: " << e.what() << '\n';
  } catch (...) {
    std::cerr << "alkaid: unknown exception\n";
  }
  return 1;
}
