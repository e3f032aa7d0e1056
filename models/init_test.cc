#include "models/init.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>
#include <string>

namespace strata::models {
namespace {

InitScheme Gpt2Scheme(int64_t num_layers) {
  InitScheme scheme;
  scheme.family = InitFamily::kGpt2;
  scheme.num_layers = num_layers;
  return scheme;
}

InitScheme LlamaScheme() {
  InitScheme scheme;
  scheme.family = InitFamily::kLlama;
  return scheme;
}

TEST(ParameterSeedTest, IsFnv1aOfSeedBytesThenName) {
  // FNV-1a 64 of eight zero bytes: the reference values were computed
  // independently (Python).
  EXPECT_EQ(ParameterSeed(0, ""), 12161962213042174405ULL);
  EXPECT_EQ(ParameterSeed(1, "wte.weight"), 16115466443168723096ULL);
}

TEST(InitialValueTest, SameArgumentsGiveBitwiseSameValues) {
  const at::Tensor a =
      InitialValue("blocks.0.mlp.fc.weight", {64, 16}, 7, Gpt2Scheme(2));
  const at::Tensor b =
      InitialValue("blocks.0.mlp.fc.weight", {64, 16}, 7, Gpt2Scheme(2));
  EXPECT_TRUE(at::equal(a, b));
}

TEST(InitialValueTest, IndependentOfGlobalGeneratorState) {
  at::manual_seed(1);
  const at::Tensor a = InitialValue("wte.weight", {8, 8}, 3, Gpt2Scheme(2));
  at::manual_seed(2);
  at::randn({100});
  const at::Tensor b = InitialValue("wte.weight", {8, 8}, 3, Gpt2Scheme(2));
  EXPECT_TRUE(at::equal(a, b));
}

TEST(InitialValueTest, DifferentNameOrSeedGivesDifferentValues) {
  const at::Tensor a = InitialValue("wte.weight", {8, 8}, 3, Gpt2Scheme(2));
  EXPECT_FALSE(
      at::equal(a, InitialValue("wpe.weight", {8, 8}, 3, Gpt2Scheme(2))));
  EXPECT_FALSE(
      at::equal(a, InitialValue("wte.weight", {8, 8}, 4, Gpt2Scheme(2))));
}

TEST(InitialValueTest, IsContiguousFloatOnCpu) {
  const at::Tensor a = InitialValue("wte.weight", {3, 5}, 0, Gpt2Scheme(2));
  EXPECT_EQ(a.scalar_type(), at::kFloat);
  EXPECT_TRUE(a.device().is_cpu());
  EXPECT_TRUE(a.is_contiguous());
  EXPECT_EQ(a.sizes(), at::IntArrayRef({3, 5}));
}

TEST(InitialValueTest, Gpt2BiasesAreZeroAndLayerNormWeightsOne) {
  EXPECT_TRUE(
      at::equal(InitialValue("blocks.1.attn.qkv.bias", {6}, 0, Gpt2Scheme(2)),
                at::zeros({6})));
  EXPECT_TRUE(
      at::equal(InitialValue("blocks.1.ln_2.weight", {6}, 0, Gpt2Scheme(2)),
                at::ones({6})));
  EXPECT_TRUE(at::equal(InitialValue("ln_f.bias", {6}, 0, Gpt2Scheme(2)),
                        at::zeros({6})));
}

double SampleStd(const std::string& name, const InitScheme& scheme) {
  return InitialValue(name, {512, 512}, 11, scheme).std().item<double>();
}

TEST(InitialValueTest, Gpt2WeightStd) {
  // 262144 samples: the sample std is within 0.5% of sigma w.h.p.
  EXPECT_NEAR(SampleStd("blocks.0.mlp.fc.weight", Gpt2Scheme(8)), 0.02,
              0.02 * 0.01);
  EXPECT_NEAR(SampleStd("wte.weight", Gpt2Scheme(8)), 0.02, 0.02 * 0.01);
}

TEST(InitialValueTest, Gpt2ResidualProjectionsScaledBySqrtTwoLayers) {
  const double expected = 0.02 / std::sqrt(2.0 * 8);
  EXPECT_NEAR(SampleStd("blocks.3.attn.proj.weight", Gpt2Scheme(8)), expected,
              expected * 0.01);
  EXPECT_NEAR(SampleStd("blocks.3.mlp.proj.weight", Gpt2Scheme(8)), expected,
              expected * 0.01);
}

TEST(InitialValueTest, LlamaNormsOneAndWeightsNormal) {
  EXPECT_TRUE(at::equal(
      InitialValue("layers.0.attention_norm.weight", {4}, 0, LlamaScheme()),
      at::ones({4})));
  EXPECT_TRUE(at::equal(InitialValue("norm.weight", {4}, 0, LlamaScheme()),
                        at::ones({4})));
  EXPECT_NEAR(SampleStd("layers.0.attention.wo.weight", LlamaScheme()), 0.02,
              0.02 * 0.01);
}

TEST(ReplaceParameterDataTest, MetaParameterTakesValueKeepingIdentity) {
  at::Tensor parameter = MetaTensor({2, 3});
  parameter.set_requires_grad(true);
  const at::Tensor alias = parameter;  // e.g. a module member
  ReplaceParameterData(parameter, at::full({2, 3}, 2.0));
  EXPECT_FALSE(alias.is_meta());
  EXPECT_TRUE(alias.requires_grad());
  EXPECT_TRUE(at::equal(alias, at::full({2, 3}, 2.0)));
  (alias * alias).sum().backward();
  EXPECT_TRUE(at::equal(alias.grad(), at::full({2, 3}, 4.0)));
}

TEST(ReplaceParameterDataTest, RealParameterUsesSetData) {
  at::Tensor parameter = at::zeros({2});
  const at::Tensor alias = parameter;
  ReplaceParameterData(parameter, at::ones({2}));
  EXPECT_TRUE(at::equal(alias, at::ones({2})));
}

}  // namespace
}  // namespace strata::models
