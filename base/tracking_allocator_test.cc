#include "base/tracking_allocator.h"

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <c10/core/CPUAllocator.h>
#include <c10/core/StorageImpl.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "base/testing/status_matchers.h"

namespace strata {
namespace {

using ::strata::testing::IsOk;

// Every test uses tags of its own, so figures start at zero and no other
// test's tensors interfere. Byte counts are what LibTorch asks the allocator
// for: numel * element size, with no rounding (the allocator's alignment and
// its 64-byte header are not counted).
class TrackingAllocatorTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_THAT(TrackingAllocator::Install(), IsOk()); }
};

TEST_F(TrackingAllocatorTest, InstallIsIdempotentAndBecomesTheCpuAllocator) {
  c10::Allocator* installed = c10::GetCPUAllocator();
  ASSERT_THAT(TrackingAllocator::Install(), IsOk());
  EXPECT_TRUE(TrackingAllocator::installed());
  EXPECT_EQ(c10::GetCPUAllocator(), installed);
  EXPECT_NE(c10::GetCPUAllocator(), c10::GetDefaultCPUAllocator());
}

TEST_F(TrackingAllocatorTest, AllocationAndFreeMoveLiveByExactlyNbytes) {
  MemoryTagScope scope("exact");
  {
    at::Tensor floats = at::empty({1000}, at::kFloat);  // 4000 bytes.
    EXPECT_EQ(TrackingAllocator::Stats("exact").live_bytes, 4000);
    at::Tensor bytes = at::empty({3}, at::kByte);  // 3 bytes: no rounding.
    EXPECT_EQ(TrackingAllocator::Stats("exact").live_bytes, 4003);
    EXPECT_EQ(TrackingAllocator::Stats("exact").num_allocations, 2);
  }
  const MemoryStats after = TrackingAllocator::Stats("exact");
  EXPECT_EQ(after.live_bytes, 0);
  EXPECT_EQ(after.peak_bytes, 4003);
}

TEST_F(TrackingAllocatorTest, PeakIsTheMaximumOfLiveUntilReset) {
  MemoryTagScope scope("peak");
  at::Tensor a = at::empty({1000}, at::kFloat);   // live 4000
  at::Tensor b = at::empty({1000}, at::kDouble);  // live 12000
  a.reset();                                      // live 8000
  at::Tensor c = at::empty({500}, at::kFloat);    // live 10000
  MemoryStats stats = TrackingAllocator::Stats("peak");
  EXPECT_EQ(stats.live_bytes, 10000);
  EXPECT_EQ(stats.peak_bytes, 12000);
  TrackingAllocator::ResetPeak("peak");
  EXPECT_EQ(TrackingAllocator::Stats("peak").peak_bytes, 10000);
  b.reset();
  EXPECT_EQ(TrackingAllocator::Stats("peak").peak_bytes, 10000);
  EXPECT_EQ(TrackingAllocator::Stats("peak").live_bytes, 2000);
}

TEST_F(TrackingAllocatorTest, TotalCountsEveryTag) {
  // This test's thread is the only one allocating tensors in the process.
  const MemoryStats before = TrackingAllocator::Total();
  at::Tensor untagged = at::empty({100}, at::kFloat);
  MemoryTagScope scope("total");
  at::Tensor tagged = at::empty({50}, at::kFloat);
  EXPECT_EQ(TrackingAllocator::Total().live_bytes - before.live_bytes, 600);
  EXPECT_EQ(TrackingAllocator::Total().num_allocations - before.num_allocations,
            2);
  TrackingAllocator::ResetTotalPeak();
  untagged.reset();
  tagged.reset();
  EXPECT_EQ(TrackingAllocator::Total().live_bytes, before.live_bytes);
  EXPECT_EQ(TrackingAllocator::Total().peak_bytes, before.live_bytes + 600);
}

TEST_F(TrackingAllocatorTest, ScopesNestAndRestoreThePreviousTag) {
  EXPECT_EQ(TrackingAllocator::CurrentTag(), "");
  {
    MemoryTagScope outer("outer");
    at::Tensor x = at::empty({10}, at::kFloat);
    {
      MemoryTagScope inner("inner");
      EXPECT_EQ(TrackingAllocator::CurrentTag(), "inner");
      at::Tensor y = at::empty({20}, at::kFloat);
      EXPECT_EQ(TrackingAllocator::Stats("inner").live_bytes, 80);
    }
    EXPECT_EQ(TrackingAllocator::CurrentTag(), "outer");
    at::Tensor z = at::empty({5}, at::kFloat);
    EXPECT_EQ(TrackingAllocator::Stats("outer").live_bytes, 60);
  }
  EXPECT_EQ(TrackingAllocator::CurrentTag(), "");
}

TEST_F(TrackingAllocatorTest, UnknownTagHasZeroFigures) {
  const MemoryStats stats = TrackingAllocator::Stats("never-used");
  EXPECT_EQ(stats.live_bytes, 0);
  EXPECT_EQ(stats.peak_bytes, 0);
  EXPECT_EQ(stats.num_allocations, 0);
}

TEST_F(TrackingAllocatorTest, ThreadsWithTheirOwnTagsAreCountedSeparately) {
  // Two threads allocate different sizes concurrently, many times; each
  // tag sees only its own thread's bytes.
  auto work = [](const char* tag, int64_t numel, MemoryStats* held) {
    MemoryTagScope scope(tag);
    for (int i = 0; i < 200; ++i) at::Tensor t = at::empty({numel}, at::kFloat);
    at::Tensor kept = at::empty({numel}, at::kFloat);
    *held = TrackingAllocator::Stats(tag);
  };
  MemoryStats a, b;
  std::thread ta(work, "thread-a", 100, &a);
  std::thread tb(work, "thread-b", 300, &b);
  ta.join();
  tb.join();
  EXPECT_EQ(a.live_bytes, 400);
  EXPECT_EQ(a.peak_bytes, 400);
  EXPECT_EQ(a.num_allocations, 201);
  EXPECT_EQ(b.live_bytes, 1200);
  EXPECT_EQ(b.peak_bytes, 1200);
  EXPECT_EQ(b.num_allocations, 201);
  EXPECT_EQ(TrackingAllocator::Stats("thread-a").live_bytes, 0);
  EXPECT_EQ(TrackingAllocator::Stats("thread-b").live_bytes, 0);
}

TEST_F(TrackingAllocatorTest, FreeOnAnotherThreadCreditsTheChargedTag) {
  at::Tensor t;
  {
    MemoryTagScope scope("allocator-thread");
    t = at::empty({256}, at::kFloat);
  }
  EXPECT_EQ(TrackingAllocator::Stats("allocator-thread").live_bytes, 1024);
  std::thread freer([&t] {
    MemoryTagScope scope("freeing-thread");
    t.reset();
  });
  freer.join();
  EXPECT_EQ(TrackingAllocator::Stats("allocator-thread").live_bytes, 0);
  EXPECT_EQ(TrackingAllocator::Stats("freeing-thread").live_bytes, 0);
  EXPECT_EQ(TrackingAllocator::Stats("freeing-thread").num_allocations, 0);
}

TEST_F(TrackingAllocatorTest, StorageResetAndReallocationAreCounted) {
  // FSDP's way of freeing gathered parameters and re-allocating them in the
  // same storage (docs/ARCHITECTURE.md, "Freeing gathered parameters").
  MemoryTagScope scope("storage");
  at::Tensor t = at::empty({256}, at::kFloat);
  at::Tensor view = t.narrow(0, 128, 128);
  c10::StorageImpl* storage = t.storage().unsafeGetStorageImpl();
  const size_t nbytes = storage->nbytes();
  ASSERT_EQ(nbytes, 1024u);
  storage->reset();
  EXPECT_EQ(TrackingAllocator::Stats("storage").live_bytes, 0);
  storage->set_data_ptr_noswap(c10::GetCPUAllocator()->allocate(nbytes));
  storage->set_nbytes(nbytes);
  EXPECT_EQ(TrackingAllocator::Stats("storage").live_bytes, 1024);
  EXPECT_EQ(TrackingAllocator::Stats("storage").peak_bytes, 1024);
  // The tensor and its view use the new block.
  t.fill_(3.0);
  EXPECT_EQ(view.sum().item<float>(), 384.0f);
  view.reset();
  t.reset();
  EXPECT_EQ(TrackingAllocator::Stats("storage").live_bytes, 0);
}

TEST_F(TrackingAllocatorTest, RawAllocateAndDeallocateAreCounted) {
  MemoryTagScope scope("raw");
  void* block = c10::GetCPUAllocator()->raw_allocate(100);
  ASSERT_NE(block, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(block) % 64, 0u);
  EXPECT_EQ(TrackingAllocator::Stats("raw").live_bytes, 100);
  c10::GetCPUAllocator()->raw_deallocate(block);
  EXPECT_EQ(TrackingAllocator::Stats("raw").live_bytes, 0);
}

TEST_F(TrackingAllocatorTest, TagsListsEveryTagUsed) {
  { MemoryTagScope scope("listed"); }  // Enters and leaves the tag.
  const std::vector<std::string> tags = TrackingAllocator::Tags();
  ASSERT_FALSE(tags.empty());
  EXPECT_EQ(tags.front(), "");
  EXPECT_NE(std::find(tags.begin(), tags.end(), "listed"), tags.end());
}

}  // namespace
}  // namespace strata
