#include "strategies/unit_buffer_pool.h"

#include <c10/core/Allocator.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <gtest/gtest.h>
#include <torch/cuda.h>

#include <algorithm>
#include <utility>

#include "base/testing/gpu.h"
#include "base/testing/status_matchers.h"
#include "base/tracking_allocator.h"

namespace strata::strategies {
namespace {

using ::strata::testing::IsOk;

const c10::Device kCpu(c10::kCPU);

TEST(UnitBufferPoolTest, OpenPoolReusesAReleasedBlockOfTheSameSize) {
  UnitBufferPool pool;
  pool.Open();
  c10::DataPtr a = pool.Take(4096, kCpu);
  void* const address = a.get();
  pool.Give(std::move(a), 4096);
  EXPECT_EQ(pool.pooled_bytes(), 4096);
  c10::DataPtr b = pool.Take(4096, kCpu);
  EXPECT_EQ(b.get(), address);
  EXPECT_EQ(pool.counters().fresh_allocations, 1);
  EXPECT_EQ(pool.counters().reuses, 1);
  EXPECT_EQ(pool.pooled_bytes(), 0);
  EXPECT_EQ(pool.live_bytes(), 4096);
}

TEST(UnitBufferPoolTest, ABlockOfAnotherSizeIsNotReused) {
  UnitBufferPool pool;
  pool.Open();
  pool.Give(pool.Take(4096, kCpu), 4096);
  c10::DataPtr b = pool.Take(2048, kCpu);
  EXPECT_EQ(pool.counters().fresh_allocations, 2);
  EXPECT_EQ(pool.counters().reuses, 0);
}

TEST(UnitBufferPoolTest, ClosedOrDisabledPoolFreesAtOnce) {
  ASSERT_THAT(TrackingAllocator::Install(), IsOk());
  MemoryTagScope scope("closed");
  const int64_t before = TrackingAllocator::Stats("closed").live_bytes;
  for (bool enabled : {true, false}) {
    UnitBufferPool pool(enabled);
    if (!enabled) pool.Open();  // Does nothing when disabled.
    EXPECT_FALSE(pool.open());
    pool.Give(pool.Take(4096, kCpu), 4096);
    EXPECT_EQ(pool.pooled_bytes(), 0);
    EXPECT_EQ(TrackingAllocator::Stats("closed").live_bytes, before);
    pool.Give(pool.Take(4096, kCpu), 4096);
    EXPECT_EQ(pool.counters().fresh_allocations, 2) << enabled;
  }
}

TEST(UnitBufferPoolTest, CloseFreesEveryPooledBlock) {
  ASSERT_THAT(TrackingAllocator::Install(), IsOk());
  MemoryTagScope scope("close");
  const int64_t before = TrackingAllocator::Stats("close").live_bytes;
  UnitBufferPool pool;
  pool.Open();
  c10::DataPtr a = pool.Take(4096, kCpu);
  c10::DataPtr b = pool.Take(1024, kCpu);
  pool.Give(std::move(a), 4096);
  pool.Give(std::move(b), 1024);
  // Pooled blocks are still allocated memory.
  EXPECT_EQ(TrackingAllocator::Stats("close").live_bytes, before + 5120);
  pool.Close();
  EXPECT_EQ(TrackingAllocator::Stats("close").live_bytes, before);
  EXPECT_EQ(pool.pooled_bytes(), 0);
  EXPECT_EQ(pool.high_water_bytes(), 0);
  EXPECT_FALSE(pool.open());
}

TEST(UnitBufferPoolTest, FreshAllocationEvictsOldestBlocksAboveTheHighWater) {
  UnitBufferPool pool;
  pool.Open();
  c10::DataPtr a = pool.Take(1000, kCpu);
  c10::DataPtr b = pool.Take(600, kCpu);
  EXPECT_EQ(pool.high_water_bytes(), 1600);
  pool.Give(std::move(a), 1000);
  pool.Give(std::move(b), 600);
  // 500 live + 1600 pooled would exceed the 1600 held at once so far: the
  // oldest block (1000) goes, 500 + 600 fits.
  c10::DataPtr c = pool.Take(500, kCpu);
  EXPECT_EQ(pool.counters().evictions, 1);
  EXPECT_EQ(pool.pooled_bytes(), 600);
  EXPECT_LE(pool.live_bytes() + pool.pooled_bytes(), pool.high_water_bytes());
  // 500 + 600 live: a new high-water mark of 1100 < 1600, nothing evicted.
  c10::DataPtr d = pool.Take(600, kCpu);
  EXPECT_EQ(pool.counters().reuses, 1);
  EXPECT_EQ(pool.pooled_bytes(), 0);
}

TEST(UnitBufferPoolTest, LivePlusPooledNeverExceedsTheHighWaterMark) {
  // A step's pattern: units of two sizes gathered and freed in turn. The
  // bytes held (live + pooled) stay within the most ever live at once.
  UnitBufferPool pool;
  pool.Open();
  int64_t most_live = 0;
  for (int round = 0; round < 4; ++round) {
    for (int64_t size : {3000, 1000, 1000, 1000, 3000}) {
      c10::DataPtr held = pool.Take(size, kCpu);
      c10::DataPtr grad = pool.Take(size, kCpu);
      most_live = std::max(most_live, pool.live_bytes());
      EXPECT_LE(pool.live_bytes() + pool.pooled_bytes(), most_live);
      pool.Give(std::move(held), size);
      pool.Give(std::move(grad), size);
      EXPECT_LE(pool.pooled_bytes(), most_live);
    }
  }
  EXPECT_EQ(pool.high_water_bytes(), most_live);
  // 40 takes. Round 0: 2 fresh 3000s (high water 6000); the first 1000
  // evicts one pooled 3000 (1000 + 6000 > 6000), 2 fresh 1000s; the next
  // 1000s reuse; the last 3000s reuse one and, live 6000 + pooled 2000,
  // evict both 1000s for 1 fresh: 5 fresh. Each later round repeats round
  // 0's tail from a pool of two 3000s: 2 + 1 fresh. 5 + 3 x 3 = 14.
  EXPECT_EQ(pool.counters().fresh_allocations, 14);
}

TEST(UnitBufferPoolTest, TrackedMemoryIsPooledWhenGivenBack) {
  UnitBufferPool pool;
  c10::DataPtr block = c10::GetAllocator(c10::kCPU)->allocate(256);
  pool.Track(256);
  pool.Open();
  EXPECT_EQ(pool.high_water_bytes(), 256);
  pool.Give(std::move(block), 256);
  EXPECT_EQ(pool.pooled_bytes(), 256);
  c10::DataPtr again = pool.Take(256, kCpu);
  EXPECT_EQ(pool.counters().fresh_allocations, 0);
}

TEST(AllocateOnTest, CpuBlockIsOnTheCpu) {
  const c10::DataPtr block = AllocateOn(kCpu, 64);
  EXPECT_NE(block.get(), nullptr);
  EXPECT_EQ(block.device(), kCpu);
}

// With the last GPU current, a block for cuda:0 lands on cuda:0 (on a machine
// with two GPUs or more the current device alone would put it on another
// one), and the last GPU is current again afterwards.
TEST(AllocateOnTest, CudaBlockIsOnTheNamedDeviceNotTheCurrentOne) {
  STRATA_SKIP_WITHOUT_GPU();
  const c10::impl::DeviceGuardImplInterface* cuda =
      c10::impl::getDeviceGuardImpl(c10::kCUDA);
  const c10::Device last(c10::kCUDA, static_cast<c10::DeviceIndex>(
                                         torch::cuda::device_count() - 1));
  cuda->setDevice(last);
  const c10::Device first(c10::kCUDA, 0);
  const c10::DataPtr block = AllocateOn(first, 1 << 20);
  EXPECT_NE(block.get(), nullptr);
  EXPECT_EQ(block.device(), first);
  EXPECT_EQ(cuda->getDevice(), last);
}

TEST(UnitBufferPoolTest, FreshCudaBlockIsOnTheTensorsDevice) {
  STRATA_SKIP_WITHOUT_GPU();
  const c10::Device last(c10::kCUDA, static_cast<c10::DeviceIndex>(
                                         torch::cuda::device_count() - 1));
  c10::impl::getDeviceGuardImpl(c10::kCUDA)->setDevice(last);
  UnitBufferPool pool;
  const c10::Device first(c10::kCUDA, 0);
  const c10::DataPtr block = pool.Take(4096, first);
  EXPECT_EQ(block.device(), first);
  EXPECT_EQ(pool.counters().fresh_allocations, 1);
}

}  // namespace
}  // namespace strata::strategies
