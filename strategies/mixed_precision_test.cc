#include "strategies/mixed_precision.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <vector>

#include "base/testing/status_matchers.h"
#include "optim/flat_parameters.h"

namespace strata::strategies {
namespace {

using ::strata::testing::IsOk;

TEST(ConcatenateFp32Test, MatchesTheFlatParametersLayout) {
  // bf16 cannot hold 1 + 2^-10: the fp32 concatenation must keep it while the
  // bf16 flat buffer rounds it, at the same offsets, padding included.
  const float fine = 1.0f + 1.0f / 1024;
  at::Tensor a = at::full({2, 3}, fine).set_requires_grad(true);
  at::Tensor b = at::arange(5, at::kFloat).set_requires_grad(true);
  std::vector<optim::NamedParameter> named = {{"a", a}, {"b", b}};
  const at::Tensor master = ConcatenateFp32(named, /*align_elems=*/4);
  auto flat = optim::FlatParameters::Create(named, 4, at::kBFloat16);
  ASSERT_THAT(flat, IsOk());
  ASSERT_EQ(master.scalar_type(), at::kFloat);
  ASSERT_EQ(master.numel(), (*flat)->padded_numel());
  EXPECT_EQ(master.numel(), 12);
  EXPECT_TRUE(at::equal(master.narrow(0, 0, 6), at::full({6}, fine)));
  EXPECT_TRUE(at::equal(master.narrow(0, 6, 5), at::arange(5, at::kFloat)));
  EXPECT_EQ(master[11].item<float>(), 0.0f);
  EXPECT_TRUE(at::equal((*flat)->params().to(at::kFloat),
                        master.to(at::kBFloat16).to(at::kFloat)));
  EXPECT_NE((*flat)->params()[0].item<float>(), fine);
}

TEST(FoldGradientsTest, AddsIntoFp32AndZeroesTheLowPrecisionGradients) {
  at::Tensor low = at::full({4}, 0.5, at::kBFloat16);
  at::Tensor fp32 = at::full({4}, 0.25, at::kFloat);
  FoldGradients(low, fp32);
  FoldGradients(low, fp32);  // Nothing left to add.
  EXPECT_TRUE(at::equal(fp32, at::full({4}, 0.75, at::kFloat)));
  EXPECT_TRUE(at::equal(low, at::zeros({4}, at::kBFloat16)));
}

TEST(ReleasableBufferTest, ReleasesAndReallocatesKeepingViewsValid) {
  at::Tensor buffer = at::ones({1000}, at::kFloat);
  at::Tensor view = buffer.narrow(0, 100, 10).view({2, 5});
  ReleasableBuffer releasable(buffer);
  EXPECT_TRUE(releasable.allocated());
  EXPECT_EQ(releasable.held_bytes(), 4000);
  releasable.Release();
  EXPECT_FALSE(releasable.allocated());
  EXPECT_EQ(releasable.held_bytes(), 0);
  EXPECT_EQ(releasable.full_bytes(), 4000);
  EXPECT_EQ(view.storage().nbytes(), 0u);
  releasable.AllocateZeroed();
  ASSERT_TRUE(releasable.allocated());
  EXPECT_EQ(view.storage().nbytes(), 4000u);
  EXPECT_TRUE(at::equal(buffer, at::zeros({1000}, at::kFloat)));
  // The view writes into the re-allocated memory.
  view.fill_(3.0f);
  EXPECT_EQ(buffer.sum().item<float>(), 30.0f);
  EXPECT_EQ(buffer[100].item<float>(), 3.0f);
}

TEST(ReleasableBufferTest, AllocateReallocatesInPlaceWithoutZeroing) {
  at::Tensor buffer = at::ones({10}, at::kFloat);
  at::Tensor view = buffer.narrow(0, 2, 3);
  ReleasableBuffer releasable(buffer);
  releasable.Release();
  releasable.Allocate();
  ASSERT_TRUE(releasable.allocated());
  EXPECT_EQ(releasable.held_bytes(), 40);
  EXPECT_EQ(buffer.storage().nbytes(), 40u);
  // Uninitialised memory: what the caller writes is what the views read.
  buffer.copy_(at::arange(10, at::kFloat));
  EXPECT_TRUE(at::equal(view, at::arange(2, 5, at::kFloat)));
}

TEST(ReleasableBufferTest, AllocateKeepsTheValuesOfAnAllocatedBuffer) {
  at::Tensor buffer = at::full({4}, 7.0f, at::kFloat);
  ReleasableBuffer releasable(buffer);
  releasable.Allocate();
  releasable.AllocateZeroed();
  EXPECT_TRUE(at::equal(buffer, at::full({4}, 7.0f, at::kFloat)));
}

TEST(ReleasableBufferTest, AutogradAccumulatesIntoReallocatedGradViews) {
  at::Tensor grads = at::zeros({4}, at::kFloat);
  at::Tensor w = at::ones({4}, at::kFloat).set_requires_grad(true);
  w.mutable_grad() = grads.view({4});
  ReleasableBuffer releasable(grads);
  releasable.Release();
  releasable.AllocateZeroed();
  (w * at::arange(4, at::kFloat)).sum().backward();
  (w * 2).sum().backward();
  EXPECT_TRUE(at::equal(grads, at::arange(4, at::kFloat) + 2));
}

}  // namespace
}  // namespace strata::strategies
