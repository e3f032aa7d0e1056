#include "strategies/gradient_arrival_hooks.h"

#include <ATen/TensorOperators.h>
#include <ATen/ops/full.h>
#include <ATen/ops/mul.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/sum.h>
#include <ATen/ops/zeros.h>
#include <gtest/gtest.h>
#include <torch/csrc/autograd/autograd.h>

#include <memory>
#include <vector>

namespace strata::strategies {
namespace {

// A leaf of `n` elements that requires grad.
at::Tensor Leaf(int64_t n) { return at::zeros({n}).set_requires_grad(true); }

TEST(GradientArrivalHooksTest, RunsBeforeTheGradientIsAccumulated) {
  at::Tensor w = Leaf(3);
  bool grad_defined_in_callback = true;
  GradientArrivalHooks hooks(
      {w}, [&] { grad_defined_in_callback = w.grad().defined(); });
  torch::autograd::backward({w.mul(2).sum()});
  EXPECT_FALSE(grad_defined_in_callback);
  ASSERT_TRUE(w.grad().defined());
  EXPECT_TRUE(w.grad().equal(at::full({3}, 2.0)));
}

TEST(GradientArrivalHooksTest, MemoryGivenInTheCallbackReceivesTheGradient) {
  // What FSDP does: .grad is a view of a buffer that the callback fills in
  // (here: defines) just before the first accumulation; autograd then adds
  // the gradient into it in place.
  at::Tensor w = Leaf(4);
  at::Tensor buffer;
  GradientArrivalHooks hooks({w}, [&] {
    if (buffer.defined()) return;
    buffer = at::ones({4});
    w.mutable_grad() = buffer;
  });
  torch::autograd::backward({w.mul(3).sum()});
  ASSERT_TRUE(buffer.defined());
  EXPECT_TRUE(buffer.equal(at::full({4}, 4.0)));  // 1 + 3, in place.
  EXPECT_TRUE(w.grad().is_same(buffer));
}

TEST(GradientArrivalHooksTest, ATiedParameterCallsOnceAfterItsLastUse) {
  // Two uses, one AccumulateGrad: autograd sums both gradients before the
  // hook runs.
  at::Tensor w = Leaf(2);
  int calls = 0;
  GradientArrivalHooks hooks({w}, [&] { ++calls; });
  torch::autograd::backward({w.mul(2).sum() + w.mul(5).sum()});
  EXPECT_EQ(calls, 1);
  EXPECT_TRUE(w.grad().equal(at::full({2}, 7.0)));
}

TEST(GradientArrivalHooksTest, CallsOncePerParameterThatGetsAGradient) {
  at::Tensor a = Leaf(2);
  at::Tensor b = Leaf(2);
  at::Tensor unused = Leaf(2);
  int calls = 0;
  GradientArrivalHooks hooks({a, b, unused}, [&] { ++calls; });
  torch::autograd::backward({a.mul(b).sum()});
  EXPECT_EQ(calls, 2);
}

TEST(GradientArrivalHooksTest, SkipsParametersWithoutRequiresGrad) {
  at::Tensor frozen = at::zeros({2});
  GradientArrivalHooks hooks({frozen, Leaf(2)}, [] {});
  EXPECT_EQ(hooks.num_hooks(), 1u);
}

TEST(GradientArrivalHooksTest, DestructionRemovesTheHooks) {
  at::Tensor w = Leaf(2);
  int calls = 0;
  {
    GradientArrivalHooks hooks({w}, [&] { ++calls; });
  }
  torch::autograd::backward({w.sum()});
  EXPECT_EQ(calls, 0);
  EXPECT_TRUE(w.grad().equal(at::ones({2})));
}

}  // namespace
}  // namespace strata::strategies
