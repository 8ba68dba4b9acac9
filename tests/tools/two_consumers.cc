// alkaid_test_two_consumers: one process holding two consumers of one topic
// that read at different rates, for the tests of the per-consumer figures
// (tests/tools/test_metrics.py; docs/BROKER.md, "Watching it live").
//
//   alkaid_test_two_consumers SOCKET TOPIC ALL SOME
//
// Opens two consumers of TOPIC through the broker at SOCKET, both waiting
// for the topic together (start it before the topic's producer, which then
// waits for both). Receives SOME batches with each (dropping each at once),
// prints "read SOME SOME" and waits for a line on standard input (the test
// publishes the rest then: so the second consumer had caught up when it
// stopped, and its cursor is where its producer sees it); then receives
// ALL - SOME more with the first, prints "read ALL SOME", and keeps both
// consumers open, reading nothing more, until its standard input ends.
//
// Exit 0 after standard input ended, 2 on a usage error or any failure
// (printed to stderr).

#include <charconv>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <string_view>
#include <system_error>
#include <thread>
#include <utility>

#include "alkaid/client/consumer.h"

namespace {

namespace client = alkaid::client;
using alkaid::Result;
using alkaid::Status;

Status Read(client::Consumer* consumer, uint64_t count) {
  for (uint64_t i = 0; i < count; ++i) {
    ALKAID_ASSIGN_OR_RAISE(auto batch, consumer->Next(std::chrono::seconds(60)));
    if (batch == nullptr) return Status::Invalid("no batch ", i, " of ", count);
  }
  return Status::OK();
}

// Receives `count` batches with each consumer, taking turns: a consumer
// registers on a producer's channel when it looks at the broker's news,
// which it does from its receive calls, and the producer waits for both.
Status ReadBoth(client::Consumer* first, client::Consumer* second, uint64_t count) {
  uint64_t got[2] = {0, 0};
  client::Consumer* consumers[2] = {first, second};
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (got[0] < count || got[1] < count) {
    bool any = false;
    for (int k = 0; k < 2; ++k) {
      ALKAID_ASSIGN_OR_RAISE(auto batch, consumers[k]->TryNext());
      if (batch == nullptr) continue;
      if (got[k] == count)
        return Status::Invalid("consumer ", k, ": more than ", count, " batches");
      ++got[k];
      any = true;
    }
    if (any) continue;
    if (std::chrono::steady_clock::now() > deadline) {
      return Status::TimedOut("received ", got[0], " and ", got[1], " of ", count, " batches");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return Status::OK();
}

Status Run(const std::string& socket, const std::string& topic, uint64_t all, uint64_t some) {
  if (some > all) return Status::Invalid("SOME (", some, ") is more than ALL (", all, ")");
  client::ConsumerOptions options;
  options.socket_path = socket;
  options.wait_for_topic = std::chrono::seconds(60);
  // Both wait for the topic at once (Open returns once it exists), so that
  // both are attached before its producer, which waits for them: neither
  // misses a batch. Which of them attaches first is not said.
  Result<std::unique_ptr<client::Consumer>> opened_first = Status::Invalid("not opened");
  std::thread opening([&] { opened_first = client::Consumer::Open(topic, options); });
  auto opened_second = client::Consumer::Open(topic, options);
  opening.join();
  ALKAID_ASSIGN_OR_RAISE(auto first, std::move(opened_first));
  ALKAID_ASSIGN_OR_RAISE(auto second, std::move(opened_second));
  ALKAID_RETURN_NOT_OK(ReadBoth(first.get(), second.get(), some));
  (void)std::printf("read %llu %llu\n", static_cast<unsigned long long>(some),
                    static_cast<unsigned long long>(some));
  (void)std::fflush(stdout);
  int c = 0;
  while ((c = std::fgetc(stdin)) != EOF && c != '\n') {
  }
  if (c == EOF) return Status::Invalid("standard input ended before the line to go on");
  ALKAID_RETURN_NOT_OK(Read(first.get(), all - some));
  (void)std::printf("read %llu %llu\n", static_cast<unsigned long long>(all),
                    static_cast<unsigned long long>(some));
  (void)std::fflush(stdout);
  while (std::fgetc(stdin) != EOF) {
  }
  return Status::OK();
}

// A decimal count, the whole of `text`.
bool Count(std::string_view text, uint64_t* out) {
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), *out);
  return error == std::errc() && end == text.data() + text.size() && !text.empty();
}

}  // namespace

int main(int argc, char** argv) {
  uint64_t all = 0;
  uint64_t some = 0;
  if (argc != 5 || !Count(argv[3], &all) || !Count(argv[4], &some)) {
    (void)std::fprintf(stderr, "usage: %s SOCKET TOPIC ALL SOME (ALL, SOME: counts)\n", argv[0]);
    return 2;
  }
  const Status st = Run(argv[1], argv[2], all, some);
  if (!st.ok()) {
    (void)std::fprintf(stderr, "alkaid_test_two_consumers: %s\n", st.ToString().c_str());
    return 2;
  }
  return 0;
}
