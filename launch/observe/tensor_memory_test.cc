#include "launch/observe/tensor_memory.h"

#include <ATen/ops/empty.h>

#include <cstdint>
#include <optional>

#include "base/tracking_allocator.h"
#include "glog/logging.h"
#include "gtest/gtest.h"

namespace strata::launch {
namespace {

// Runs first (gtest runs a file's tests in order): nothing installed yet.
TEST(TensorMemoryTest, UnknownWithoutTheTrackingAllocator) {
  ASSERT_FALSE(TrackingAllocator::installed());
  EXPECT_EQ(TrackedLiveBytes(), std::nullopt);
  EXPECT_EQ(TrackedPeakAbove(int64_t{0}), std::nullopt);
  auto world = WorldTensorPeakBytes(nullptr, int64_t{0});
  ASSERT_TRUE(world.ok()) << world.status();
  EXPECT_TRUE(world->empty());
}

TEST(TensorMemoryTest, PeakSinceResetAboveTheBaseline) {
  CHECK(TrackingAllocator::Install().ok());
  const std::optional<int64_t> baseline = TrackedLiveBytes();
  ASSERT_TRUE(baseline.has_value());
  // 4 MiB live from before the window, then a transient 1 MiB: the peak in
  // the window is 5 MiB above the baseline, the 8 MiB before it forgotten.
  { at::Tensor before = at::empty({int64_t{2} << 20}, at::kFloat); }
  at::Tensor kept = at::empty({int64_t{1} << 20}, at::kFloat);
  ResetTrackedPeak();
  { at::Tensor transient = at::empty({int64_t{1} << 18}, at::kFloat); }
  EXPECT_EQ(TrackedPeakAbove(baseline), int64_t{5} << 20);
  EXPECT_EQ(TrackedPeakAbove(std::nullopt), std::nullopt);
  auto world = WorldTensorPeakBytes(nullptr, baseline);
  ASSERT_TRUE(world.ok()) << world.status();
  ASSERT_EQ(world->size(), 1u);
  EXPECT_EQ((*world)[0], int64_t{5} << 20);
}

}  // namespace
}  // namespace strata::launch
