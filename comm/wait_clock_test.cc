#include "comm/wait_clock.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

namespace strata::comm {
namespace {

double Since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
      .count();
}

TEST(CollectiveWaitTimerTest, AddsItsLifetimeToThisThread) {
  const double before = ThreadCollectiveWaitSeconds();
  const auto outer = std::chrono::steady_clock::now();
  double inner = 0;
  {
    const auto start = std::chrono::steady_clock::now();
    CollectiveWaitTimer timer;
    // Some work inside the timer's scope: its duration is what is added.
    volatile double sink = 0;
    for (int i = 0; i < 100000; ++i) sink = sink + i;
    inner = Since(start);
  }
  const double added = ThreadCollectiveWaitSeconds() - before;
  EXPECT_GT(added, 0.0);
  EXPECT_LE(added, Since(outer));
  EXPECT_GE(added, inner);
}

TEST(CollectiveWaitTimerTest, OtherThreadsTimersDoNotCountHere) {
  const double before = ThreadCollectiveWaitSeconds();
  double other = 0;
  std::thread thread([&] {
    { CollectiveWaitTimer timer; }
    other = ThreadCollectiveWaitSeconds();
  });
  thread.join();
  EXPECT_EQ(ThreadCollectiveWaitSeconds(), before);
  EXPECT_GE(other, 0.0);
}

TEST(CollectiveWaitTimerTest, TheCounterOnlyGrows) {
  double last = ThreadCollectiveWaitSeconds();
  for (int i = 0; i < 3; ++i) {
    { CollectiveWaitTimer timer; }
    const double now = ThreadCollectiveWaitSeconds();
    EXPECT_GE(now, last);
    last = now;
  }
}

}  // namespace
}  // namespace strata::comm
