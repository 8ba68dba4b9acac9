// Dictionary-encoded topics through a real alkaid-broker: a producer in
// another process sends whole, delta and replacement dictionaries; a
// consumer attached from the start and consumers that join mid-stream each
// decode every batch they receive with the dictionaries it was published
// with, lose nothing, and leave no segment behind; the same across a broker
// restart, with a consumer that joins after it.

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <iostream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "alkaid/client/broker_client.h"
#include "alkaid/client/consumer.h"
#include "alkaid/client/producer.h"
#include "alkaid/format/builder_dict.h"
#include "broker_process.h"
#include "broker_test_util.h"
#include "dictionary_script.h"
#include "test_util.h"

namespace alkaid::broker {
namespace {

using client::BrokerClient;
using client::Consumer;
using client::Producer;
using testing::BrokerProcess;
using testing::ConsumerOn;
using testing::WaitNoSegments;
using namespace std::chrono_literals;

constexpr int64_t kBatches = 300;

// Receives batches until `until` (exclusive) or end of stream; checks each
// against the script and that they follow each other from the first one.
// Returns the first batch number seen (-1 if none) and sets `*next` past
// the last.
int64_t ReceiveChecked(Consumer* consumer, int64_t until, int64_t* next) {
  int64_t first = -1;
  while (*next < until || first < 0) {
    auto got = consumer->Next(10s);
    if (got.status().code() == StatusCode::kEndOfStream) {
      // An end before the first batch is a failure of the caller's
      // expectations: say why the consumer ended.
      if (first < 0) std::cerr << "end before any batch: " << got.status().ToString() << "\n";
      break;
    }
    EXPECT_TRUE(got.ok()) << got.status();
    if (!got.ok()) break;
    const int64_t b = alkaid::testing::BatchId(**got);
    if (first < 0) {
      first = b;
    } else {
      EXPECT_EQ(b, *next) << "batch " << b << " after " << *next - 1;
    }
    EXPECT_TRUE(alkaid::testing::IsBatch(**got, b));
    *next = b + 1;
  }
  return first;
}

TEST(BrokerDictionaryTest, LateJoinersDecodeEveryBatchWithItsDictionaries) {
  BrokerProcess broker;
  ASSERT_TRUE(broker.Start());
  ASSERT_OK_AND_ASSIGN(auto admin, BrokerClient::Connect(broker.socket()));
  ASSERT_OK(admin->CreateTopic("words", alkaid::testing::WordSchema()).status());
  ASSERT_OK_AND_ASSIGN(auto early, Consumer::Open("words", ConsumerOn(broker)));

  // The producer publishes up to `allowed` batches and waits there, so that
  // each late consumer joins at a known batch: 40 (mid-generation), 125 and
  // 199 (just before a replacement).
  auto* allowed = static_cast<std::atomic<int64_t>*>(::mmap(nullptr, sizeof(std::atomic<int64_t>),
                                                            PROT_READ | PROT_WRITE,
                                                            MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(allowed, MAP_FAILED);
  new (allowed) std::atomic<int64_t>(40);
  const pid_t child = testing::ForkTestChild();
  if (child == 0) {
    client::ProducerOptions options;
    options.socket_path = broker.socket();
    options.wait_for_consumers = 5s;
    auto producer = Producer::Open("words", alkaid::testing::WordSchema(), options);
    if (!producer.ok()) ::_exit(1);
    alkaid::testing::Script script;
    for (int64_t b = 0; b < kBatches; ++b) {
      const auto give_up = std::chrono::steady_clock::now() + 60s;
      while (b >= allowed->load()) {
        if (std::chrono::steady_clock::now() > give_up) ::_exit(4);
        std::this_thread::sleep_for(1ms);
      }
      auto batch = script.Build(b);
      if (!batch.ok() || !(*producer)->PublishCopy(**batch).ok()) ::_exit(2);
    }
    ::_exit((*producer)->Close().ok() ? 0 : 3);
  }

  std::vector<std::unique_ptr<Consumer>> late;
  std::vector<int64_t> joins;
  int64_t next = 0;
  EXPECT_EQ(ReceiveChecked(early.get(), 40, &next), 0);
  for (int64_t join : {40, 125, 199}) {
    if (join > 40) ReceiveChecked(early.get(), join, &next);
    ASSERT_EQ(next, join);
    ASSERT_OK_AND_ASSIGN(auto c, Consumer::Open("words", ConsumerOn(broker)));
    late.push_back(std::move(c));
    joins.push_back(join);
    allowed->store(join == 199 ? kBatches : (join == 40 ? 125 : 199));
  }
  ReceiveChecked(early.get(), kBatches, &next);
  EXPECT_EQ(next, kBatches);
  EXPECT_EQ(early->lost(), 0u);

  for (size_t i = 0; i < late.size(); ++i) {
    SCOPED_TRACE("late consumer " + std::to_string(i));
    int64_t late_next = 0;
    const int64_t first = ReceiveChecked(late[i].get(), kBatches, &late_next);
    EXPECT_EQ(first, joins[i]);      // the first batch published after it joined
    EXPECT_EQ(late_next, kBatches);  // and every one after it
    EXPECT_EQ(late[i]->lost(), 0u);
    auto end = late[i]->Next(5s);
    EXPECT_EQ(end.status().code(), StatusCode::kEndOfStream) << end.status();
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  early.reset();
  late.clear();
  ::munmap(allowed, sizeof(std::atomic<int64_t>));
  EXPECT_TRUE(WaitNoSegments(broker.name() + "."));
}

// The broker is SIGKILLed and restarted while a dictionary topic's producer
// (another process) waits mid-stream: the producer re-registers with the new
// broker, a consumer that joins after the restart decodes every batch from
// the first one published after it joined, with its dictionaries (the
// producer's replay), and the consumer attached before the outage loses
// nothing. Every step waits for a condition (the producer's
// reregistrations, the consumer's registration), not for a duration.
TEST(BrokerDictionaryTest, ConsumerJoiningAfterABrokerRestartDecodesEveryBatch) {
  BrokerProcess broker;
  ASSERT_TRUE(broker.Start());
  {
    ASSERT_OK_AND_ASSIGN(auto admin, BrokerClient::Connect(broker.socket()));
    ASSERT_OK(admin->CreateTopic("words", alkaid::testing::WordSchema()).status());
  }
  ASSERT_OK_AND_ASSIGN(auto early, Consumer::Open("words", ConsumerOn(broker)));
  struct Shared {
    std::atomic<int64_t> allowed;
    std::atomic<uint64_t> reregistrations;
  };
  auto* shared = static_cast<Shared*>(
      ::mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(shared, MAP_FAILED);
  new (shared) Shared{{60}, {0}};
  const pid_t child = testing::ForkTestChild();
  if (child == 0) {
    client::ProducerOptions options;
    options.socket_path = broker.socket();
    auto producer = Producer::Open("words", alkaid::testing::WordSchema(), options);
    if (!producer.ok()) ::_exit(1);
    alkaid::testing::Script script;
    for (int64_t b = 0; b < kBatches; ++b) {
      const auto give_up = std::chrono::steady_clock::now() + 120s;
      while (b >= shared->allowed.load()) {
        if (std::chrono::steady_clock::now() > give_up) ::_exit(4);
        shared->reregistrations.store((*producer)->stats().reregistrations);
        std::this_thread::sleep_for(1ms);
      }
      auto batch = script.Build(b);
      if (!batch.ok() || !(*producer)->PublishCopy(**batch).ok()) ::_exit(2);
    }
    ::_exit((*producer)->Close().ok() ? 0 : 3);
  }
  int64_t next = 0;
  EXPECT_EQ(ReceiveChecked(early.get(), 60, &next), 0);
  ASSERT_EQ(next, 60);
  broker.Kill();
  ASSERT_TRUE(broker.Start());
  // The producer's session thread re-registers with the new broker.
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  while (shared->reregistrations.load() == 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(2ms);
  }
  ASSERT_GE(shared->reregistrations.load(), 1u) << "the producer never re-registered";
  ASSERT_OK_AND_ASSIGN(auto late, Consumer::Open("words", ConsumerOn(broker)));
  ASSERT_EQ(late->producer_count(), 1u);
  shared->allowed.store(kBatches);
  int64_t late_next = 0;
  EXPECT_EQ(ReceiveChecked(late.get(), kBatches, &late_next), 60);
  EXPECT_EQ(late_next, kBatches);
  EXPECT_EQ(late->lost(), 0u);
  ReceiveChecked(early.get(), kBatches, &next);
  EXPECT_EQ(next, kBatches);
  EXPECT_EQ(early->lost(), 0u);
  for (Consumer* c : {early.get(), late.get()}) {
    auto end = c->Next(10s);
    EXPECT_EQ(end.status().code(), StatusCode::kEndOfStream) << end.status();
  }
  EXPECT_EQ(testing::Wait(child), 0);
  early.reset();
  late.reset();
  ::munmap(shared, sizeof(Shared));
  EXPECT_TRUE(WaitNoSegments(broker.name() + "."));
}

// A third column, dictionary-encoded too, with a life of its own: a
// vocabulary replaced every 7 batches and grown by one word every 3, so its
// whole, delta and replacement dictionaries fall on other batches than
// the word column's.
format::TypePtr SizeType() { return format::dictionary(format::int8(), format::utf8()); }

format::SchemaPtr ThreeColumnSchema() {
  return format::schema({format::field("batch", format::int64()),
                         format::field("word", alkaid::testing::WordType()),
                         format::field("size", SizeType(), false)});
}

std::string Size(int64_t b, int64_t i) {
  return "s" + std::to_string(b / 7) + "-" + std::to_string(i % (2 + (b % 7) / 3));
}

class ThreeColumnScript {
 public:
  Result<format::RecordBatchPtr> Build(int64_t b) {
    ALKAID_ASSIGN_OR_RAISE(auto two, words_.Build(b));
    if (sizes_ == nullptr || b % 7 == 0)
      sizes_ = std::make_unique<format::DictionaryBuilder>(SizeType());
    for (int64_t i = 0; i < alkaid::testing::kRows; ++i) {
      ALKAID_RETURN_NOT_OK(sizes_->Append(Size(b, i)));
    }
    ALKAID_ASSIGN_OR_RAISE(auto sizes, sizes_->Finish());
    return format::RecordBatch::Make(ThreeColumnSchema(), alkaid::testing::kRows,
                                     {two->column(0), two->column(1), sizes});
  }

 private:
  alkaid::testing::Script words_;
  std::unique_ptr<format::DictionaryBuilder> sizes_;
};

// Checks that `batch` holds exactly `names` of batch b of ThreeColumnScript,
// in that order, each value read through its own column's dictionary.
::testing::AssertionResult IsProjection(const format::RecordBatch& batch,
                                        const std::vector<std::string>& names, int64_t b) {
  using alkaid::testing::kRows;
  if (batch.num_columns() != static_cast<int>(names.size()) || batch.num_rows() != kRows) {
    return ::testing::AssertionFailure()
           << batch.num_columns() << " columns, " << batch.num_rows() << " rows";
  }
  for (int c = 0; c < batch.num_columns(); ++c) {
    const std::string& name = names[static_cast<std::size_t>(c)];
    if (batch.schema()->field(c)->name() != name) {
      return ::testing::AssertionFailure()
             << "column " << c << " is '" << batch.schema()->field(c)->name() << "', not '" << name
             << "'";
    }
    if (name == "batch") {
      auto ids = std::static_pointer_cast<format::Int64Array>(batch.column(c));
      for (int64_t i = 0; i < kRows; ++i) {
        if (ids->Value(i) != b)
          return ::testing::AssertionFailure() << "batch id " << ids->Value(i);
      }
      continue;
    }
    auto dict_array = std::static_pointer_cast<format::DictionaryArray>(batch.column(c));
    if (dict_array->dictionary() == nullptr) {
      return ::testing::AssertionFailure() << name << ": no dictionary";
    }
    auto dict = std::static_pointer_cast<format::StringArray>(dict_array->dictionary());
    for (int64_t i = 0; i < kRows; ++i) {
      const bool null = name == "word" && alkaid::testing::IsNull(i);
      if (dict_array->IsNull(i) != null) {
        return ::testing::AssertionFailure() << name << " row " << i << " nullness";
      }
      if (null) continue;
      const int64_t index = dict_array->GetIndex(i);
      const std::string want = name == "word" ? alkaid::testing::Word(b, i) : Size(b, i);
      if (index < 0 || index >= dict->length() || dict->GetView(index) != want) {
        return ::testing::AssertionFailure()
               << "batch " << b << " " << name << " row " << i << ": index " << index << " of "
               << dict->length() << ", expected '" << want << "'";
      }
    }
  }
  return ::testing::AssertionSuccess();
}

// Column subsets of a topic with two dictionary-encoded columns (whole,
// delta and replacement dictionaries): consumers that keep a dictionary
// column (reordered), only the plain column, only the other dictionary
// column, and a late joiner (at batch 45, mid-generation of both) keeping
// both dictionary columns and not the plain one: each gets exactly its
// columns, in its order, every value decoded through the right dictionary,
// every batch from its join on, nothing lost.
TEST(BrokerDictionaryTest, ColumnSubsetsGetExactlyTheirColumnsAndDictionaries) {
  constexpr int64_t kSubsetBatches = 120;
  constexpr int64_t kJoin = 45;
  BrokerProcess broker;
  ASSERT_TRUE(broker.Start());
  {
    ASSERT_OK_AND_ASSIGN(auto admin, BrokerClient::Connect(broker.socket()));
    ASSERT_OK(admin->CreateTopic("sizes", ThreeColumnSchema()).status());
  }
  const std::vector<std::vector<std::string>> subsets = {
      {"word", "batch"}, {"batch"}, {"size"}, {"size", "word"}};
  std::vector<std::unique_ptr<Consumer>> consumers;
  for (std::size_t k = 0; k + 1 < subsets.size(); ++k) {
    auto options = ConsumerOn(broker);
    options.columns = subsets[k];
    ASSERT_OK_AND_ASSIGN(auto c, Consumer::Open("sizes", options));
    ASSERT_EQ(c->schema()->num_fields(), static_cast<int>(subsets[k].size()));
    EXPECT_EQ(c->topic_schema()->num_fields(), 3);
    consumers.push_back(std::move(c));
  }
  auto* allowed = static_cast<std::atomic<int64_t>*>(::mmap(nullptr, sizeof(std::atomic<int64_t>),
                                                            PROT_READ | PROT_WRITE,
                                                            MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(allowed, MAP_FAILED);
  new (allowed) std::atomic<int64_t>(0);
  const pid_t child = testing::ForkTestChild();
  if (child == 0) {
    client::ProducerOptions options;
    options.socket_path = broker.socket();
    options.wait_for_consumers = 30s;
    auto producer = Producer::Open("sizes", ThreeColumnSchema(), options);
    if (!producer.ok()) ::_exit(1);
    ThreeColumnScript script;
    for (int64_t b = 0; b < kSubsetBatches; ++b) {
      const auto give_up = std::chrono::steady_clock::now() + 60s;
      while (b >= allowed->load()) {
        if (std::chrono::steady_clock::now() > give_up) ::_exit(4);
        std::this_thread::sleep_for(1ms);
      }
      auto batch = script.Build(b);
      if (!batch.ok() || !(*producer)->PublishCopy(**batch).ok()) ::_exit(2);
    }
    ::_exit((*producer)->Close().ok() ? 0 : 3);
  }
  // Each early consumer registers on the producer's channel when it looks
  // for data (it learns of the producer then): all three before the first
  // batch, so that each gets every batch (the producer waits for them).
  for (auto& c : consumers) {
    const auto deadline = std::chrono::steady_clock::now() + 30s;
    while (c->producer_count() == 0 && std::chrono::steady_clock::now() < deadline) {
      ASSERT_OK_AND_ASSIGN(auto none, c->TryNext());
      ASSERT_EQ(none, nullptr);  // nothing is published before `allowed` moves
      std::this_thread::sleep_for(1ms);
    }
    ASSERT_EQ(c->producer_count(), 1u);
  }
  allowed->store(kJoin);
  std::vector<int64_t> next(subsets.size(), 0);
  auto receive = [&](std::size_t k, int64_t until) {
    SCOPED_TRACE("subset " + std::to_string(k));
    while (next[k] < until) {
      auto got = consumers[k]->Next(20s);
      ASSERT_TRUE(got.ok()) << got.status() << " at batch " << next[k];
      ASSERT_TRUE(IsProjection(**got, subsets[k], next[k]));
      ++next[k];
    }
  };
  for (std::size_t k = 0; k < consumers.size(); ++k) receive(k, kJoin);
  {
    auto options = ConsumerOn(broker);
    options.columns = subsets.back();
    ASSERT_OK_AND_ASSIGN(auto late, Consumer::Open("sizes", options));
    consumers.push_back(std::move(late));
    next.back() = kJoin;  // its first batch is the first published after it joined
  }
  allowed->store(kSubsetBatches);
  for (std::size_t k = 0; k < consumers.size(); ++k) {
    receive(k, kSubsetBatches);
    EXPECT_EQ(consumers[k]->lost(), 0u) << "subset " << k;
    auto end = consumers[k]->Next(10s);
    EXPECT_EQ(end.status().code(), StatusCode::kEndOfStream) << end.status();
  }
  EXPECT_EQ(testing::Wait(child), 0);
  consumers.clear();
  ::munmap(allowed, sizeof(std::atomic<int64_t>));
  EXPECT_TRUE(WaitNoSegments(broker.name() + "."));
}

}  // namespace
}  // namespace alkaid::broker
