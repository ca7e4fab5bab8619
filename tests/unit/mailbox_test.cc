// The threads and CUDA backends' barrier: an abort releases every waiter,
// and no thread passes a barrier after an abort it could have seen (issue
// 14: a thread that left by Aborted stayed counted, so the last arriver
// completed the barrier for it and ran on).
#include "real_runtime/mailbox.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

namespace ppsim::runtime {
namespace mailbox_test {
namespace {

// One thread fails before arriving (a setup that failed): the others are
// released by Aborted, and none gets through.
TEST(AbortableBarrier, AnAbortBeforeArrivingReleasesTheOthers) {
  RunControl control;
  AbortableBarrier barrier(3, &control);
  control.add(&barrier);
  std::atomic<int> passed{0}, aborted{0};
  const auto arrive = [&] {
    try {
      barrier.arrive_and_wait();
      ++passed;
    } catch (const Aborted&) {
      ++aborted;
    }
  };
  std::thread a(arrive), b(arrive);
  control.abort_run("rank 2, setup: no device");
  a.join();
  b.join();
  EXPECT_EQ(passed, 0);
  EXPECT_EQ(aborted, 2);
  // The failed rank's own gate, after its failure, does not pass either.
  EXPECT_THROW(barrier.arrive_and_wait(), Aborted);
}

// Many generations, one thread failing at a random one: every thread that
// passes generation k did so with every thread having arrived at k, so no
// thread passes more generations than the failing one reached.
TEST(AbortableBarrier, NoThreadPassesAGenerationTheFailedOneDidNotReach) {
  constexpr int kThreads = 4;
  for (int fail_at = 0; fail_at < 40; fail_at += 3) {
    RunControl control;
    AbortableBarrier barrier(kThreads, &control);
    control.add(&barrier);
    std::vector<int> passed(kThreads, 0);
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        try {
          for (int k = 0; k < 1000; ++k) {
            if (t == 0 && k == fail_at) control.abort_run("rank 0 failed");
            barrier.arrive_and_wait();
            ++passed[t];
          }
        } catch (const Aborted&) {
        }
      });
    }
    for (std::thread& t : threads) t.join();
    EXPECT_EQ(passed[0], fail_at);
    for (int t = 1; t < kThreads; ++t) EXPECT_LE(passed[t], fail_at) << "fail_at " << fail_at;
  }
}

}  // namespace
}  // namespace mailbox_test
}  // namespace ppsim::runtime
