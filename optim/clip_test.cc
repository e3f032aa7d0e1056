#include "optim/clip.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <gtest/gtest.h>
#include <torch/types.h>

// Not self-contained: needs torch/types.h first.
#include <torch/nn/utils/clip_grad.h>

#include <cmath>
#include <limits>
#include <vector>

namespace strata::optim {
namespace {

// Gradients of three parameters, with their concatenation as a flat buffer.
struct Grads {
  std::vector<at::Tensor> params;  // Each with .grad set.
  at::Tensor flat;
};

Grads MakeGrads(double scale) {
  at::manual_seed(3);
  Grads g;
  std::vector<at::Tensor> parts;
  for (int64_t n : {50000, 13, 20000}) {
    at::Tensor p = at::zeros({n}).requires_grad_();
    p.mutable_grad() = at::randn({n}) * scale;
    parts.push_back(p.grad());
    g.params.push_back(p);
  }
  g.flat = at::cat(parts);
  return g;
}

at::Tensor ConcatGrads(const Grads& g) {
  std::vector<at::Tensor> parts;
  for (const at::Tensor& p : g.params) parts.push_back(p.grad());
  return at::cat(parts);
}

TEST(ClipGradNormTest, MatchesTorchWhenClipping) {
  Grads g = MakeGrads(1.0);  // Norm about 265.
  const double torch_norm = torch::nn::utils::clip_grad_norm_(g.params, 1.0);
  const double norm = ClipGradNorm(g.flat, 1.0);
  EXPECT_NEAR(norm, torch_norm, 1e-6 * torch_norm);
  // torch computes the norm and the factor in float.
  EXPECT_TRUE(at::allclose(g.flat, ConcatGrads(g), /*rtol=*/1e-6, /*atol=*/0));
  EXPECT_NEAR(std::sqrt((g.flat.to(at::kDouble) * g.flat.to(at::kDouble))
                            .sum()
                            .item<double>()),
              1.0, 1e-5);
}

TEST(ClipGradNormTest, LeavesGradientsBelowMaxNormUntouched) {
  Grads g = MakeGrads(1e-3);  // Norm about 0.265.
  const at::Tensor before = g.flat.clone();
  const double torch_norm = torch::nn::utils::clip_grad_norm_(g.params, 1.0);
  const double norm = ClipGradNorm(g.flat, 1.0);
  EXPECT_NEAR(norm, torch_norm, 1e-6 * torch_norm);
  EXPECT_TRUE(at::equal(g.flat, before));
}

TEST(ClipGradNormTest, ClosedForm) {
  at::Tensor grads = at::tensor({3.0f, 0.0f, -4.0f});
  EXPECT_DOUBLE_EQ(ClipGradNorm(grads, 1.0), 5.0);
  const float coef = static_cast<float>(1.0 / (5.0 + 1e-6));
  EXPECT_TRUE(at::equal(grads, at::tensor({3.0f * coef, 0.0f, -4.0f * coef})));
}

TEST(ClipGradNormTest, TwoShardsWithASummingHookMatchTheWholeBuffer) {
  at::manual_seed(5);
  at::Tensor whole = at::randn({100001});
  at::Tensor sharded = whole.clone();
  at::Tensor shard0 = sharded.narrow(0, 0, 50001);
  at::Tensor shard1 = sharded.narrow(0, 50001, 50000);
  // What an all-reduce of the two ranks' local sums would return.
  const double local0 = SumOfSquares(shard0);
  const double local1 = SumOfSquares(shard1);
  int calls = 0;
  auto all_reduce = [&](double local) {
    ++calls;
    EXPECT_TRUE(local == local0 || local == local1);
    return local0 + local1;
  };
  const double norm = ClipGradNorm(whole, 2.0);
  EXPECT_NEAR(ClipGradNorm(shard0, 2.0, 2.0, all_reduce), norm, 1e-12 * norm);
  EXPECT_NEAR(ClipGradNorm(shard1, 2.0, 2.0, all_reduce), norm, 1e-12 * norm);
  EXPECT_EQ(calls, 2);
  EXPECT_LE((whole - sharded).abs().max().item<double>(), 1e-9);
}

TEST(ClipGradNormTest, InfinityNormIsTheLargestMagnitude) {
  const double inf = std::numeric_limits<double>::infinity();
  at::Tensor grads = at::tensor({3.0f, 0.0f, -4.0f});
  EXPECT_DOUBLE_EQ(ClipGradNorm(grads, 2.0, inf), 4.0);
  const float coef = static_cast<float>(2.0 / (4.0 + 1e-6));
  EXPECT_TRUE(at::equal(grads, at::tensor({3.0f * coef, 0.0f, -4.0f * coef})));
}

TEST(ClipGradNormTest, OneNormIsTheSumOfMagnitudes) {
  at::Tensor grads = at::tensor({3.0f, 0.0f, -4.0f}).to(at::kBFloat16);
  const at::Tensor before = grads.clone();
  EXPECT_DOUBLE_EQ(ClipGradNorm(grads, 10.0, 1.0), 7.0);
  EXPECT_TRUE(at::equal(grads, before));  // 7 < 10: not clipped.
}

TEST(ClipGradNormTest, ThreeNormIsTheCubeRootOfTheSumOfCubes) {
  at::Tensor grads = at::tensor({3.0f, 0.0f, -4.0f, 5.0f});
  // 27 + 64 + 125 = 216 = 6^3.
  EXPECT_NEAR(ClipGradNorm(grads, 100.0, 3.0), 6.0, 1e-12);
}

// The norm is the double-precision p-norm; torch's (in float) is within
// 1e-5 relative of it: torch sums each parameter's |g|^p in float, whose
// rounding grows with the number of terms (measured 4.9e-6 for p = 1 over
// these gradients, 1e-7 for p = 3, exact for inf), and the clipped
// gradients carry the same relative difference through the factor.
TEST(ClipGradNormTest, PNormsMatchTorch) {
  for (double p : {1.0, 3.0, std::numeric_limits<double>::infinity()}) {
    Grads g = MakeGrads(1.0);
    const at::Tensor magnitudes = g.flat.to(at::kDouble).abs();
    const double exact =
        std::isinf(p) ? magnitudes.max().item<double>()
                      : std::pow(magnitudes.pow(p).sum().item<double>(), 1 / p);
    const double torch_norm =
        torch::nn::utils::clip_grad_norm_(g.params, 1.0, p);
    const double norm = ClipGradNorm(g.flat, 1.0, p);
    EXPECT_NEAR(norm, exact, 1e-12 * exact) << "p " << p;
    EXPECT_NEAR(norm, torch_norm, 1e-5 * torch_norm) << "p " << p;
    EXPECT_TRUE(at::allclose(g.flat, ConcatGrads(g), /*rtol=*/1e-5,
                             /*atol=*/0))
        << "p " << p;
  }
}

TEST(ClipGradNormTest, InfinityNormShardsCombineByTheirLargest) {
  const double inf = std::numeric_limits<double>::infinity();
  at::Tensor whole = at::tensor({1.0f, -7.0f, 2.0f, 5.0f});
  const double part0 = NormPart(whole.narrow(0, 0, 2), inf);
  const double part1 = NormPart(whole.narrow(0, 2, 2), inf);
  EXPECT_EQ(part0, 7.0);
  EXPECT_EQ(part1, 5.0);
  EXPECT_FALSE(NormPartsAdd(inf));
  EXPECT_TRUE(NormPartsAdd(2.0));
  at::Tensor shard1 = whole.narrow(0, 2, 2).clone();
  EXPECT_EQ(ClipGradNorm(shard1, 1.0, inf,
                         [&](double local) { return std::max(local, part0); }),
            7.0);
  const float coef = static_cast<float>(1.0 / (7.0 + 1e-6));
  EXPECT_TRUE(at::equal(shard1, at::tensor({2.0f * coef, 5.0f * coef})));
}

TEST(ClipGradNormTest, InfinityNormOfANanGradientIsNan) {
  at::Tensor grads =
      at::tensor({1.0f, std::numeric_limits<float>::quiet_NaN(), 2.0f});
  const at::Tensor before = grads.clone();
  EXPECT_TRUE(std::isnan(
      ClipGradNorm(grads, 1.0, std::numeric_limits<double>::infinity())));
  EXPECT_TRUE(at::equal(grads.nan_to_num(), before.nan_to_num()));
}

TEST(NormPartTest, ValidNormTypes) {
  EXPECT_TRUE(IsValidNormType(2.0));
  EXPECT_TRUE(IsValidNormType(0.5));
  EXPECT_TRUE(IsValidNormType(std::numeric_limits<double>::infinity()));
  EXPECT_FALSE(IsValidNormType(0.0));
  EXPECT_FALSE(IsValidNormType(-1.0));
  EXPECT_FALSE(IsValidNormType(std::numeric_limits<double>::quiet_NaN()));
}

TEST(ClipGradNormTest, NonFiniteNormLeavesGradientsUntouched) {
  at::Tensor grads =
      at::tensor({1.0f, std::numeric_limits<float>::infinity(), 2.0f});
  const at::Tensor before = grads.clone();
  EXPECT_TRUE(std::isinf(ClipGradNorm(grads, 1.0)));
  EXPECT_TRUE(at::equal(grads, before));
}

TEST(SumOfSquaresTest, AccumulatesInDouble) {
  // 2^24 + 1 ones: a float accumulator would stop at 2^24.
  const int64_t n = (int64_t{1} << 24) + 1;
  EXPECT_EQ(SumOfSquares(at::ones({n})), static_cast<double>(n));
}

TEST(SumOfSquaresTest, DoesNotDependOnTheNumberOfThreads) {
  at::manual_seed(9);
  const at::Tensor grads = at::randn({1000003});
  const int threads = at::get_num_threads();
  at::set_num_threads(1);
  const double one_thread = SumOfSquares(grads);
  at::set_num_threads(std::max(threads, 2));
  const double many_threads = SumOfSquares(grads);
  at::set_num_threads(threads);
  EXPECT_EQ(one_thread, many_threads);
  const double reference =
      (grads.to(at::kDouble) * grads.to(at::kDouble)).sum().item<double>();
  EXPECT_NEAR(one_thread, reference, 1e-12 * reference);
}

TEST(SumOfSquaresTest, ReadsBFloat16Gradients) {
  EXPECT_EQ(SumOfSquares(at::tensor({1.5f, -2.0f}).to(at::kBFloat16)), 6.25);
}

}  // namespace
}  // namespace strata::optim
