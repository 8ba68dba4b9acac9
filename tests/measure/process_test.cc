#include "alkaid/measure/process.h"

#include <gtest/gtest.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <functional>
#include <string>
#include <vector>

#include "alkaid/measure/shared_mapping.h"
#include "test_util.h"

namespace alkaid::measure {
namespace {

TEST(ProcessTest, AllowedCpusAreAscendingAndIncludeTheCurrentOne) {
  const std::vector<int> cpus = AllowedCpus();
  ASSERT_FALSE(cpus.empty());
  for (size_t i = 1; i < cpus.size(); ++i) EXPECT_LT(cpus[i - 1], cpus[i]);
  const int now = ::sched_getcpu();
  EXPECT_NE(std::find(cpus.begin(), cpus.end(), now), cpus.end()) << "running on CPU " << now;
}

TEST(ProcessTest, EachChildRunsOnItsCpuAndSharesTheMapping) {
  const std::vector<int> allowed = AllowedCpus();
  if (allowed.size() < 2) GTEST_SKIP() << "needs two CPUs";
  auto control = SharedMapping<ChildControl>::MapOrDie();
  auto seen = SharedMapping<std::atomic<int>>::MapOrDie(2);
  EXPECT_EQ(seen.get()[1].load(), 0) << "a fresh mapping is zero-filled";
  const std::vector<int> cpus = {allowed[1], allowed[0]};
  std::vector<std::function<int()>> bodies;
  for (int i = 0; i < 2; ++i) {
    bodies.push_back([&, i] {
      seen.get()[i].store(::sched_getcpu() + 1);
      return 0;
    });
  }
  ASSERT_OK(RunChildren(bodies, cpus, control.get(), nullptr));
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(seen.get()[i].load(), cpus[i] + 1) << "child " << i << "'s CPU, seen by the parent";
  }
}

TEST(ProcessTest, SharedMappingIsMoveOnlyAndZeroFilled) {
  SharedMapping<int64_t> values;
  ASSERT_OK(values.Map(1000, "test values"));
  for (size_t i = 0; i < 1000; ++i) ASSERT_EQ(values.get()[i], 0) << i;
  int64_t* const objects = values.get();
  SharedMapping<int64_t> moved = std::move(values);
  EXPECT_EQ(values.get(), nullptr);
  EXPECT_EQ(moved.get(), objects);
}

TEST(ProcessTest, ChildExitCodeIsZeroThreeOrOneWithTheFirstErrorRecorded) {
  auto control = SharedMapping<ChildControl>::MapOrDie();
  EXPECT_EQ(ChildExitCode(control.get(), "a", Status::OK()), 0);
  // Cancelled while nobody asked to stop is an error like any other.
  EXPECT_EQ(ChildExitCode(control.get(), "a", Status::Cancelled("early")), 1);
  EXPECT_EQ(ChildExitCode(control.get(), "b", Status::Invalid("second")), 1);
  EXPECT_EQ(std::string(control->error), "a: Cancelled: early") << "the first error wins";
  control->stop.store(1);
  EXPECT_EQ(ChildExitCode(control.get(), "c", Status::Cancelled("stopped")), 3);
  EXPECT_TRUE(Stopping(*control.get()));
}

TEST(ProcessTest, RunChildrenIsOkWhenEveryChildExitsZero) {
  auto control = SharedMapping<ChildControl>::MapOrDie();
  auto counter = SharedMapping<std::atomic<int>>::MapOrDie();
  std::vector<std::function<int()>> bodies(3, [&] {
    counter->fetch_add(1);
    return 0;
  });
  ASSERT_OK(RunChildren(bodies, {}, control.get(), nullptr));
  EXPECT_EQ(counter->load(), 3);
}

TEST(ProcessTest, AFailedChildStopsTheOthersAndItsErrorIsReturned) {
  auto control = SharedMapping<ChildControl>::MapOrDie();
  auto left_on_stop = SharedMapping<std::atomic<int>>::MapOrDie();
  std::vector<std::function<int()>> bodies;
  bodies.push_back(
      [&] { return ChildExitCode(control.get(), "ping side", Status::Invalid("boom")); });
  // Ends only when told to stop (else RunChildren kills it after 5 s).
  bodies.push_back([&] {
    while (!Stopping(*control.get())) {
    }
    left_on_stop->store(1);
    return ChildExitCode(control.get(), "pong side", Status::Cancelled("stopped"));
  });
  const Status st = RunChildren(bodies, {}, control.get(), nullptr);
  EXPECT_EQ(st.code(), StatusCode::kIOError) << st.ToString();
  EXPECT_EQ(st.message(), "ping side: Invalid: boom");
  EXPECT_EQ(left_on_stop->load(), 1) << "the other child was not told to stop";
}

}  // namespace
}  // namespace alkaid::measure
