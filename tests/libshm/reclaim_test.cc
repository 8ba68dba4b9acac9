// Exact release of what a dead consumer held: holder bits in the body
// descriptors (BodyReader), ReclaimDeadHolders, ReclaimDeadConsumer. The
// multi-process test kills consumers with SIGKILL at random points of a
// seeded schedule while a producer streams bodies through a small arena,
// reclaims them, and checks that the producer gets all its space back and
// that the surviving consumers receive every message exactly once, in order.

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <new>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "alkaid/shm/body_allocator.h"
#include "alkaid/shm/ring.h"
#include "ring_layout_internal.h"
#include "shm_test_util.h"
#include "test_util.h"

namespace alkaid::shm {
namespace {

using namespace std::chrono_literals;
using testing::ForkChild;
using testing::ShmTest;
using testing::WaitChild;

class ReclaimTest : public ShmTest {};

TEST_F(ReclaimTest, AReaderHoldsABlockByItsBitAlone) {
  const std::string name = NewName("b");
  ASSERT_OK_AND_ASSIGN(auto alloc, BodyAllocator::Create(name, 4096));
  ASSERT_OK_AND_ASSIGN(auto reader, BodyReader::Open(name));
  ASSERT_NE(reader->holder(), kNoHolder);
  ASSERT_OK_AND_ASSIGN(auto block, alloc->Allocate(100));
  const BlockHandle h = block.handle();
  ASSERT_OK_AND_ASSIGN(auto ref, reader->Acquire(h));
  block.Release();  // the producer's reference: only the bit is left
  EXPECT_EQ(alloc->Reclaim(), 0u);
  EXPECT_EQ(alloc->stats().in_use_blocks, 1u);
  // Nobody new may take a block whose anonymous references are gone.
  ASSERT_OK_AND_ASSIGN(auto other, BodyReader::Open(name));
  ASSERT_RAISES(kKeyError, other->Acquire(h));
  ref.Release();
  EXPECT_EQ(alloc->Reclaim(), 1u);
  EXPECT_EQ(alloc->stats().in_use_blocks, 0u);
  ASSERT_RAISES(kKeyError, reader->Acquire(h));
}

TEST_F(ReclaimTest, ASecondReferenceBySameReaderIsCounted) {
  const std::string name = NewName("b");
  ASSERT_OK_AND_ASSIGN(auto alloc, BodyAllocator::Create(name, 4096));
  ASSERT_OK_AND_ASSIGN(auto reader, BodyReader::Open(name));
  ASSERT_OK_AND_ASSIGN(auto block, alloc->Allocate(64));
  ASSERT_OK_AND_ASSIGN(auto a, reader->Acquire(block.handle()));
  ASSERT_OK_AND_ASSIGN(auto b, reader->Acquire(block.handle()));
  block.Release();
  a.Release();  // the bit goes; the counted reference keeps the block
  EXPECT_EQ(alloc->Reclaim(), 0u);
  b.Release();
  EXPECT_EQ(alloc->Reclaim(), 1u);
}

TEST_F(ReclaimTest, HolderEntriesAreFreedWithTheReaderAndRunOut) {
  const std::string name = NewName("b");
  ASSERT_OK_AND_ASSIGN(auto alloc, BodyAllocator::Create(name, 4096));
  std::vector<std::unique_ptr<BodyReader>> readers;
  for (uint32_t i = 0; i < kMaxBodyHolders; ++i) {
    ASSERT_OK_AND_ASSIGN(auto r, BodyReader::Open(name));
    ASSERT_NE(r->holder(), kNoHolder) << i;
    readers.push_back(std::move(r));
  }
  // One more: no entry left, anonymous references still work.
  ASSERT_OK_AND_ASSIGN(auto extra, BodyReader::Open(name));
  EXPECT_EQ(extra->holder(), kNoHolder);
  ASSERT_OK_AND_ASSIGN(auto block, alloc->Allocate(64));
  ASSERT_OK_AND_ASSIGN(auto ref, extra->Acquire(block.handle()));
  const uint32_t freed = readers[17]->holder();
  readers[17].reset();
  ASSERT_OK_AND_ASSIGN(auto again, BodyReader::Open(name));
  EXPECT_EQ(again->holder(), freed);
}

TEST_F(ReclaimTest, ReclaimRefusesLiveProcessesAndOtherOwners) {
  const std::string bodies = NewName("b");
  const std::string ring_name = NewName("r");
  ASSERT_OK_AND_ASSIGN(auto alloc, BodyAllocator::Create(bodies, 4096));
  ASSERT_OK_AND_ASSIGN(auto ring, RingProducer::Create(ring_name, {}, alloc.get()));
  ASSERT_OK_AND_ASSIGN(auto consumer, RingConsumer::Open(ring_name));
  const uint32_t me = static_cast<uint32_t>(::getpid());
  ASSERT_RAISES_WITH_MESSAGE(
      kInvalid, "still running",
      ReclaimDeadConsumer(ring->segment(), alloc->segment(), consumer->id(), me));
  ASSERT_RAISES(kIndexError, ReclaimDeadConsumer(ring->segment(), nullptr, 1000, me));
  // A dead pid that does not own the registration.
  const pid_t gone = ForkChild([] { return 0; });
  ASSERT_EQ(WaitChild(gone), 0);
  ASSERT_RAISES_WITH_MESSAGE(kInvalid, "is registered by process",
                             ReclaimDeadConsumer(ring->segment(), alloc->segment(), consumer->id(),
                                                 static_cast<uint32_t>(gone)));
  // kAnyConsumer with a pid that owns nothing: nothing to do.
  ASSERT_OK_AND_ASSIGN(auto report, ReclaimDeadConsumer(ring->segment(), alloc->segment(),
                                                        kAnyConsumer, static_cast<uint32_t>(gone)));
  EXPECT_EQ(report.registrations_freed, 0u);
  EXPECT_EQ(report.references_released, 0u);
}

// A consumer that died between claiming its registration and making it
// active: since layout version 4 the claim itself records its pid, so the
// entry is reclaimed like any other (it used to stay `claimed` for good).
TEST_F(ReclaimTest, AClaimedRegistrationOfADeadProcessIsFreed) {
  const std::string ring_name = NewName("r");
  RingOptions options;
  options.max_consumers = 2;
  ASSERT_OK_AND_ASSIGN(auto ring, RingProducer::Create(ring_name, options));
  const pid_t gone = ForkChild([] { return 0; });
  ASSERT_EQ(WaitChild(gone), 0);
  // Forge what the dead consumer's claim CAS left in entry 1.
  auto* consumers = reinterpret_cast<internal::ConsumerData*>(ring->segment()->payload() +
                                                              sizeof(internal::RingHeaderData));
  consumers[1].state.store(
      internal::ConsumerWord(static_cast<uint32_t>(gone), 7, internal::kConsumerClaimed));
  ASSERT_OK_AND_ASSIGN(auto first, RingConsumer::Open(ring_name));
  EXPECT_EQ(first->id(), 0u);
  ASSERT_RAISES(kCapacityError, RingConsumer::Open(ring_name));
  ASSERT_OK_AND_ASSIGN(auto report, ReclaimDeadConsumer(ring->segment(), nullptr, kAnyConsumer,
                                                        static_cast<uint32_t>(gone)));
  EXPECT_EQ(report.registrations_freed, 1u);
  ASSERT_OK_AND_ASSIGN(auto second, RingConsumer::Open(ring_name));
  EXPECT_EQ(second->id(), 1u);
}

// A child takes references to many blocks and is killed; the parent
// releases exactly those, and the producer gets all its space back.
TEST_F(ReclaimTest, ReclaimDeadHoldersReleasesExactlyWhatTheDeadReaderHeld) {
  const std::string name = NewName("b");
  BodyAllocatorOptions bo;
  bo.full_policy = FullPolicy::kError;
  ASSERT_OK_AND_ASSIGN(auto alloc, BodyAllocator::Create(name, 64 * 1024, bo));
  std::vector<BlockHandle> handles;
  std::vector<WritableBlock> blocks;
  for (int i = 0; i < 16; ++i) {
    ASSERT_OK_AND_ASSIGN(auto b, alloc->Allocate(4000));
    handles.push_back(b.handle());
    blocks.push_back(std::move(b));
  }
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t child = ForkChild([&] {
    auto reader = BodyReader::Open(name);
    CHILD_CHECK(reader.ok(), 2, "open: %s", reader.status().ToString().c_str());
    std::vector<BlockRef> refs;
    for (int i = 0; i < 16; i += 2) {  // every other block
      auto r = (*reader)->Acquire(handles[static_cast<size_t>(i)]);
      CHILD_CHECK(r.ok(), 3, "acquire: %s", r.status().ToString().c_str());
      refs.push_back(std::move(r).ValueOrDie());
    }
    char c = 'r';
    CHILD_CHECK(::write(ready[1], &c, 1) == 1, 4, "write");
    ::pause();
    return 0;
  });
  char c = 0;
  ASSERT_EQ(::read(ready[0], &c, 1), 1);
  ::close(ready[0]);
  ::close(ready[1]);
  // A live neighbour holds one of the same blocks: it must keep it.
  ASSERT_OK_AND_ASSIGN(auto neighbour, BodyReader::Open(name));
  ASSERT_OK_AND_ASSIGN(auto kept, neighbour->Acquire(handles[4]));
  blocks.clear();  // the producer's references
  EXPECT_EQ(alloc->Reclaim(), 0u);
  EXPECT_EQ(alloc->stats().in_use_blocks, 8u);
  ::kill(child, SIGKILL);
  ASSERT_EQ(WaitChild(child), 128 + SIGKILL);
  // Only the dead reader's references go, and only once.
  const DeadHolderReport report = neighbour->ReclaimDeadHolders(static_cast<uint32_t>(child));
  EXPECT_EQ(report.holders_reclaimed, 1u);
  EXPECT_EQ(report.references_released, 8u);
  EXPECT_EQ(neighbour->ReclaimDeadHolders(static_cast<uint32_t>(child)).references_released, 0u);
  EXPECT_EQ(alloc->Reclaim(), 7u);
  EXPECT_EQ(alloc->stats().in_use_blocks, 1u);
  for (std::size_t i = 0; i < kept.data().size(); ++i) ASSERT_EQ(kept.data()[i], std::byte{0});
  kept.Release();
  EXPECT_EQ(alloc->Reclaim(), 1u);
  EXPECT_EQ(alloc->stats().largest_free_bytes, alloc->stats().capacity_bytes);
}

// The soak: a producer process streams bodies through a small arena and a
// kBlockProducer ring until every victim is dead (at least kMessages); two
// surviving consumers read everything; 24 victims attach, hold references
// and die by SIGKILL (seeded: half at a random moment, during Open
// included, half once registered), and the parent reclaims each one: a
// victim known to be registered has its registration freed and at least
// the references it reported holding released. Without the reclaim the
// producer would stall (ring slots and arena space held by the dead).
TEST_F(ReclaimTest, KilledConsumersAreReclaimedAndSurvivorsSeeEverythingOnce) {
  const char* seed_env = std::getenv("ALKAID_TEST_SEED");
  const uint64_t seed = seed_env != nullptr ? std::strtoull(seed_env, nullptr, 10) : 20261121;
  std::printf("seed %llu (set ALKAID_TEST_SEED to replay)\n",
              static_cast<unsigned long long>(seed));
  const std::string bodies = NewName("b");
  const std::string ring_name = NewName("r");
  constexpr uint64_t kMessages = 20000;
  constexpr int kVictims = 24;

  struct Shared {
    std::atomic<int> created;
    std::atomic<int> survivors_ready;
    std::atomic<int> go;
    std::atomic<uint64_t> published;
    std::atomic<int> producer_done;
    std::atomic<int> victims_done;
    // The current victim: registered (after Open), references it holds.
    std::atomic<int> victim_registered;
    std::atomic<int> victim_held;
  };
  void* mem =
      ::mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(mem, MAP_FAILED);
  auto* shared = new (mem) Shared();

  const pid_t producer = ForkChild([&]() -> int {
    BodyAllocatorOptions bo;
    bo.wait_timeout = 30s;
    bo.segment.prefault = false;
    auto alloc = BodyAllocator::Create(bodies, 256 * 1024, bo);
    CHILD_CHECK(alloc.ok(), 2, "alloc: %s", alloc.status().ToString().c_str());
    RingOptions ro;
    ro.slot_count = 64;
    ro.inline_capacity = 64;
    ro.publish_timeout = 30s;
    ro.segment.prefault = false;
    auto ring = RingProducer::Create(ring_name, ro, alloc->get());
    CHILD_CHECK(ring.ok(), 3, "ring: %s", ring.status().ToString().c_str());
    shared->created.store(1);
    while (shared->go.load() == 0) std::this_thread::sleep_for(1ms);
    std::mt19937_64 rng(seed);
    for (uint64_t n = 0; n < kMessages || shared->victims_done.load() == 0; ++n) {
      const uint64_t size = 9 + rng() % 6000;  // the tag, then at least one fill byte
      auto block = (*alloc)->Allocate(size);
      CHILD_CHECK(block.ok(), 4, "allocate %llu: %s", static_cast<unsigned long long>(n),
                  block.status().ToString().c_str());
      std::memcpy(block->data().data(), &n, 8);
      std::memset(block->data().data() + 8, static_cast<int>(n & 0xff), size - 8);
      const uint64_t payload = n;
      Status st = (*ring)->Publish(
          std::span<const std::byte>(reinterpret_cast<const std::byte*>(&payload), 8), *block);
      CHILD_CHECK(st.ok(), 5, "publish %llu: %s", static_cast<unsigned long long>(n),
                  st.ToString().c_str());
      shared->published.store(n + 1);
    }
    (*ring)->Close();
    shared->producer_done.store(1);
    // Every consumer is gone or reclaimed eventually: all space comes back.
    const auto deadline = std::chrono::steady_clock::now() + 30s;
    while (std::chrono::steady_clock::now() < deadline) {
      (*ring)->ReleaseConsumedBodies();
      (*alloc)->Reclaim();
      if ((*alloc)->stats().in_use_blocks == 0) break;
      std::this_thread::sleep_for(1ms);
    }
    const BodyAllocatorStats s = (*alloc)->stats();
    CHILD_CHECK(s.in_use_blocks == 0 && s.largest_free_bytes == s.capacity_bytes &&
                    s.quarantined_blocks == 0,
                6, "space not reclaimed: %llu blocks in use, %llu quarantined",
                static_cast<unsigned long long>(s.in_use_blocks),
                static_cast<unsigned long long>(s.quarantined_blocks));
    // Space is reusable: the whole arena in one block.
    auto whole = (*alloc)->TryAllocate(s.capacity_bytes);
    CHILD_CHECK(whole.ok(), 7, "whole arena: %s", whole.status().ToString().c_str());
    return 0;
  });
  while (shared->created.load() == 0) std::this_thread::sleep_for(1ms);

  auto consume = [&](bool survivor, uint64_t hold) -> int {
    auto reader = BodyReader::Open(bodies);
    CHILD_CHECK(reader.ok(), 10, "reader: %s", reader.status().ToString().c_str());
    ConsumerOptions co;
    co.bodies = reader->get();
    co.wait_mode = WaitMode::kSpinThenBlock;
    co.spin_iterations = 256;
    auto consumer = RingConsumer::Open(ring_name, co);
    CHILD_CHECK(consumer.ok(), 11, "consumer: %s", consumer.status().ToString().c_str());
    if (survivor) {
      shared->survivors_ready.fetch_add(1);
    } else {
      shared->victim_registered.store(1);
    }
    std::vector<BlockRef> held;
    RingMessage m;
    uint64_t expected = (*consumer)->next_sequence();
    while (true) {
      Status st = (*consumer)->Receive(&m, 20s);
      if (st.IsEndOfStream()) break;
      CHILD_CHECK(st.ok(), 12, "receive: %s", st.ToString().c_str());
      CHILD_CHECK(m.sequence() == expected, 13, "got %llu, expected %llu",
                  static_cast<unsigned long long>(m.sequence()),
                  static_cast<unsigned long long>(expected));
      CHILD_CHECK(m.body().valid(), 14, "no body at %llu",
                  static_cast<unsigned long long>(expected));
      uint64_t tag = 0;
      std::memcpy(&tag, m.body().data().data(), 8);
      const auto data = m.body().data();
      CHILD_CHECK(tag == expected && data.back() == static_cast<std::byte>(expected & 0xff), 15,
                  "body of %llu is wrong", static_cast<unsigned long long>(expected));
      // Victims hoard a few references (more to release when they die).
      if (hold != 0 && expected % hold == 0 && held.size() < 6) {
        held.push_back(m.TakeBody());
        shared->victim_held.store(static_cast<int>(held.size()));
      }
      ++expected;
    }
    if (survivor) {
      CHILD_CHECK(expected == shared->published.load() && expected >= kMessages, 16,
                  "survivor ended at %llu", static_cast<unsigned long long>(expected));
    }
    return 0;
  };
  const pid_t s1 = ForkChild([&] { return consume(true, 0); });
  const pid_t s2 = ForkChild([&] { return consume(true, 0); });
  while (shared->survivors_ready.load() < 2) std::this_thread::sleep_for(1ms);
  shared->go.store(1);

  auto ring_segment = Segment::Open(ring_name, SegmentKind::kRing).ValueOrDie();
  auto body_segment = Segment::Open(bodies, SegmentKind::kBodies).ValueOrDie();
  std::mt19937_64 rng(seed ^ 0x5eed);
  uint64_t released = 0;
  uint32_t registrations = 0;
  int killed = 0;
  int killed_registered = 0;
  // However the loop ends (a failed ASSERT returns), the producer may stop.
  struct VictimsDone {
    Shared* shared;
    bool armed = true;
    ~VictimsDone() {
      if (armed) shared->victims_done.store(1);
    }
  } victims_done{shared};
  for (int v = 0; v < kVictims; ++v) {
    const uint64_t hold = 1 + rng() % 7;
    const bool anywhere = rng() % 2 == 0;
    const auto delay = std::chrono::microseconds(rng() % 20000);
    shared->victim_registered.store(0);
    shared->victim_held.store(0);
    const pid_t victim = ForkChild([&] { return consume(false, hold); });
    if (!anywhere) {
      // Once registered (a condition; the bound ends a hang).
      for (int i = 0; i < 20000 && shared->victim_registered.load() == 0; ++i) {
        std::this_thread::sleep_for(1ms);
      }
      ASSERT_EQ(shared->victim_registered.load(), 1) << "victim " << v << " never registered";
    }
    // Die anywhere: during Open, mid-receive, while holding references.
    std::this_thread::sleep_for(delay);
    ASSERT_EQ(::kill(victim, SIGKILL), 0);
    // The producer cannot finish while victims remain: each dies by SIGKILL.
    ASSERT_EQ(WaitChild(victim), 128 + SIGKILL) << "victim " << v;
    ++killed;
    const bool was_registered = shared->victim_registered.load() == 1;
    const int held = shared->victim_held.load();
    ASSERT_OK_AND_ASSIGN(auto report, ReclaimDeadConsumer(ring_segment, body_segment, kAnyConsumer,
                                                          static_cast<uint32_t>(victim)));
    if (was_registered) {
      ++killed_registered;
      EXPECT_EQ(report.registrations_freed, 1u) << "victim " << v;
      EXPECT_GE(report.references_released, static_cast<uint64_t>(held)) << "victim " << v;
    }
    EXPECT_LE(report.registrations_freed, 1u) << "victim " << v;
    released += report.references_released;
    registrations += report.registrations_freed;
  }
  shared->victims_done.store(1);
  victims_done.armed = false;  // `shared` is unmapped before the guard goes
  std::printf(
      "victims: %d killed (%d registered); reclaimed %u registrations, %llu body "
      "references\n",
      killed, killed_registered, registrations, static_cast<unsigned long long>(released));
  EXPECT_EQ(killed, kVictims);
  EXPECT_GE(killed_registered, kVictims / 2);
  EXPECT_GE(registrations, static_cast<uint32_t>(killed_registered));
  EXPECT_EQ(WaitChild(s1), 0);
  EXPECT_EQ(WaitChild(s2), 0);
  EXPECT_EQ(WaitChild(producer), 0);
  EXPECT_GE(shared->published.load(), kMessages);
  ::munmap(mem, sizeof(Shared));
}

}  // namespace
}  // namespace alkaid::shm
