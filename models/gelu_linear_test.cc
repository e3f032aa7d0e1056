#include "models/gelu_linear.h"

#include <ATen/Context.h>
#include <ATen/autocast_mode.h>
#include <ATen/ops/gelu.h>
#include <ATen/ops/linear.h>
#include <ATen/ops/randn.h>
#include <gtest/gtest.h>
#include <torch/csrc/autograd/autograd.h>

#include <vector>

#include "base/torch_compat.h"
#include "base/tracking_allocator.h"

namespace strata::models {
namespace {

struct Grads {
  at::Tensor out, h, weight, bias;
};

// Forward and backward of `fused` or the unfused ops on fresh leaves with
// the same values; the upstream gradient is a fixed random tensor.
Grads ForwardBackward(bool fused, bool autocast = false) {
  const bool with_bias = true;
  at::manual_seed(7);
  const at::Tensor h = at::randn({2, 5, 16}).set_requires_grad(true);
  const at::Tensor w = at::randn({8, 16}).set_requires_grad(true);
  const at::Tensor b =
      with_bias ? at::randn({8}).set_requires_grad(true) : at::Tensor();
  at::Tensor out;
  {
    const torch_compat::AutocastState was =
        torch_compat::GetAutocastState(c10::kCPU);
    torch_compat::SetAutocastState(c10::kCPU, {autocast, at::kBFloat16});
    out = fused ? GeluLinear(h, w, b) : at::linear(at::gelu(h, "tanh"), w, b);
    torch_compat::SetAutocastState(c10::kCPU, was);
    at::autocast::clear_cache();
  }
  const at::Tensor upstream = at::randn(out.sizes()).to(out.scalar_type());
  torch::autograd::backward({out}, {upstream});
  return {out.detach(), h.grad(), w.grad(),
          with_bias ? b.grad() : at::Tensor()};
}

TEST(GeluLinearTest, ForwardAndGradientsAreBitwiseTheUnfusedOnes) {
  const Grads fused = ForwardBackward(true);
  const Grads ref = ForwardBackward(false);
  EXPECT_TRUE(fused.out.equal(ref.out));
  EXPECT_TRUE(fused.h.equal(ref.h));
  EXPECT_TRUE(fused.weight.equal(ref.weight));
  EXPECT_TRUE(fused.bias.equal(ref.bias));
}

TEST(GeluLinearTest, Bf16InputsGradientsAreBitwiseTheUnfusedOnes) {
  // As in a bf16 model: every operand bf16, no autocast.
  at::manual_seed(3);
  Grads g[2];
  for (int fused = 0; fused < 2; ++fused) {
    at::manual_seed(3);
    const at::Tensor h =
        at::randn({3, 4, 16}).to(at::kBFloat16).set_requires_grad(true);
    const at::Tensor w =
        at::randn({8, 16}).to(at::kBFloat16).set_requires_grad(true);
    const at::Tensor b =
        at::randn({8}).to(at::kBFloat16).set_requires_grad(true);
    const at::Tensor out =
        fused ? GeluLinear(h, w, b) : at::linear(at::gelu(h, "tanh"), w, b);
    torch::autograd::backward({out},
                              {at::randn(out.sizes()).to(at::kBFloat16)});
    g[fused] = {out.detach(), h.grad(), w.grad(), b.grad()};
  }
  EXPECT_TRUE(g[1].out.equal(g[0].out));
  EXPECT_TRUE(g[1].h.equal(g[0].h));
  EXPECT_TRUE(g[1].weight.equal(g[0].weight));
  EXPECT_TRUE(g[1].bias.equal(g[0].bias));
}

TEST(GeluLinearTest, UnderBf16AutocastGradientsAreBitwiseTheUnfusedOnes) {
  const Grads fused = ForwardBackward(true, /*autocast=*/true);
  const Grads ref = ForwardBackward(false, /*autocast=*/true);
  EXPECT_EQ(fused.out.scalar_type(), ref.out.scalar_type());
  EXPECT_TRUE(fused.out.equal(ref.out));
  EXPECT_EQ(fused.weight.scalar_type(), at::kFloat);  // The leaf's dtype.
  EXPECT_TRUE(fused.h.equal(ref.h));
  EXPECT_TRUE(fused.weight.equal(ref.weight));
  EXPECT_TRUE(fused.bias.equal(ref.bias));
}

TEST(GeluLinearTest, KeepsOnlyTheInputForBackward) {
  // After forward, the unfused ops keep h and gelu(h) (plus the output);
  // the fused one keeps h only: one [N, in] tensor less.
  ASSERT_TRUE(TrackingAllocator::Install().ok());
  const int64_t n = 64, in = 256, out = 32;
  at::Tensor w = at::randn({out, in}).set_requires_grad(true);
  at::Tensor b = at::randn({out}).set_requires_grad(true);
  int64_t kept[2];
  for (int fused = 0; fused < 2; ++fused) {
    at::Tensor h = at::randn({n, in}).set_requires_grad(true);
    const int64_t before = TrackingAllocator::Total().live_bytes;
    at::Tensor y =
        fused ? GeluLinear(h, w, b) : at::linear(at::gelu(h, "tanh"), w, b);
    kept[fused] = TrackingAllocator::Total().live_bytes - before;
  }
  EXPECT_EQ(kept[0] - kept[1], n * in * 4);
}

}  // namespace
}  // namespace strata::models
