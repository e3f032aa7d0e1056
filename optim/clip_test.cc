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
  EXPECT_NEAR(ClipGradNorm(shard0, 2.0, all_reduce), norm, 1e-12 * norm);
  EXPECT_NEAR(ClipGradNorm(shard1, 2.0, all_reduce), norm, 1e-12 * norm);
  EXPECT_EQ(calls, 2);
  EXPECT_LE((whole - sharded).abs().max().item<double>(), 1e-9);
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
