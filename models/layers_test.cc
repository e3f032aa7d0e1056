#include "models/layers.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>
#include <initializer_list>
#include <string>

#include "models/init.h"

namespace strata::models {
namespace {

// A float tensor of `values`.
at::Tensor Floats(std::initializer_list<double> values) {
  return at::tensor(at::ArrayRef<double>(values), at::dtype(at::kFloat));
}

// Gives the module's parameter `name` the value `value`.
void Set(torch::nn::Module& module, const std::string& name,
         const at::Tensor& value) {
  ReplaceParameterData(module.named_parameters()[name], value);
}

TEST(LayersTest, ParametersStartOnMetaDevice) {
  Linear linear(3, 2, /*bias=*/true);
  for (const at::Tensor& p : linear.parameters()) EXPECT_TRUE(p.is_meta());
  EXPECT_EQ(linear.named_parameters()["weight"].sizes(),
            at::IntArrayRef({2, 3}));
  EXPECT_EQ(linear.named_parameters()["bias"].sizes(), at::IntArrayRef({2}));
}

TEST(LayersTest, LinearComputesXWTransposePlusB) {
  Linear linear(2, 2, /*bias=*/true);
  Set(linear, "weight", Floats({1., 2., 3., 4.}).view({2, 2}));
  Set(linear, "bias", Floats({10., 20.}));
  // [1, 1] -> [1+2+10, 3+4+20].
  EXPECT_TRUE(at::equal(linear.Forward(at::ones({1, 2})),
                        Floats({13., 27.}).view({1, 2})));
}

TEST(LayersTest, LinearWithoutBiasHasOnlyWeight) {
  Linear linear(2, 3, /*bias=*/false);
  EXPECT_EQ(linear.named_parameters().size(), 1);
}

TEST(LayersTest, LayerNormStandardises) {
  LayerNorm norm(3, /*eps=*/0.0);
  Set(norm, "weight", at::ones({3}));
  Set(norm, "bias", at::zeros({3}));
  // mean 2, biased variance 2/3.
  const double s = std::sqrt(2.0 / 3.0);
  EXPECT_TRUE(at::allclose(norm.Forward(Floats({1., 2., 3.})),
                           Floats({-1 / s, 0.0, 1 / s}), 1e-6, 1e-6));
}

TEST(LayersTest, RmsNormDividesByRootMeanSquare) {
  RmsNorm norm(2, /*eps=*/0.0);
  Set(norm, "weight", Floats({1., 2.}));
  const double rms = std::sqrt(12.5);
  EXPECT_TRUE(at::allclose(norm.Forward(Floats({3., 4.})),
                           Floats({3 / rms, 8 / rms}), 1e-6, 1e-6));
}

TEST(LayersTest, RmsNormKeepsLowPrecisionDtype) {
  RmsNorm norm(2, 1e-5);
  Set(norm, "weight", at::ones({2}, at::kBFloat16));
  EXPECT_EQ(norm.Forward(at::ones({2}, at::kBFloat16)).scalar_type(),
            at::kBFloat16);
}

TEST(LayersTest, CausalAttentionWithEqualScoresAveragesThePast) {
  // q = k = 0: every allowed position scores the same, so position t
  // averages v[0..t].
  const at::Tensor q = at::zeros({1, 1, 3, 2});
  const at::Tensor v = Floats({3., 0., 0., 3., 6., 6.}).view({1, 1, 3, 2});
  const at::Tensor y = CausalAttention(q, q, v, DropoutSpec{});
  EXPECT_TRUE(at::allclose(
      y, Floats({3., 0., 1.5, 1.5, 3., 3.}).view({1, 1, 3, 2}), 1e-6, 1e-6));
}

TEST(LayersTest, CausalAttentionIgnoresTheFuture) {
  const at::Tensor q = at::randn({1, 2, 4, 8});
  const at::Tensor k = at::randn({1, 2, 4, 8});
  const at::Tensor v = at::randn({1, 2, 4, 8});
  const at::Tensor full = CausalAttention(q, k, v, DropoutSpec{});
  const at::Tensor prefix = CausalAttention(
      q.narrow(2, 0, 2), k.narrow(2, 0, 2), v.narrow(2, 0, 2), DropoutSpec{});
  EXPECT_TRUE(at::allclose(full.narrow(2, 0, 2), prefix, 1e-6, 1e-6));
}

TEST(LayersTest, RotaryTablesAreCosSinOfPositionTimesFrequency) {
  const auto [cos, sin] = RotaryTables(3, 4, 10000.0, at::kCPU);
  ASSERT_EQ(cos.sizes(), at::IntArrayRef({3, 2}));
  // Frequencies 1 and 10000^(-1/2) = 0.01.
  EXPECT_NEAR(cos[0][0].item<double>(), 1.0, 1e-7);
  EXPECT_NEAR(sin[0][1].item<double>(), 0.0, 1e-7);
  EXPECT_NEAR(sin[2][0].item<double>(), std::sin(2.0), 1e-6);
  EXPECT_NEAR(cos[2][1].item<double>(), std::cos(0.02), 1e-6);
}

TEST(LayersTest, Llama3ScalingKeepsStretchesOrBlendsEachFrequency) {
  // head_dim 16, theta 1000: f_i = 1000^(-2i/16). Original context 64,
  // low/high factors 1 and 4: wavelengths 2 pi / f below 16 are kept, above
  // 64 divided by the factor 8, and between blended.
  RopeScaling scaling;
  scaling.type = "llama3";
  scaling.factor = 8;
  scaling.low_freq_factor = 1;
  scaling.high_freq_factor = 4;
  scaling.original_max_position_embeddings = 64;
  const auto [cos, sin] = RotaryTables(2, 16, 1000.0, at::kCPU, scaling);
  auto angle = [&](int i) {  // At position 1: the frequency itself.
    return std::atan2(sin[1][i].item<double>(), cos[1][i].item<double>());
  };
  // i = 0: f = 1, wavelength 6.3: kept.
  EXPECT_NEAR(angle(0), 1.0, 1e-6);
  // i = 7: f = 1000^(-14/16) = 0.002371, wavelength 2650: divided by 8.
  EXPECT_NEAR(angle(7), std::pow(1000.0, -14.0 / 16) / 8, 1e-8);
  // i = 2: f = 1000^(-1/4) = 0.177828, wavelength 35.33: blended with
  // s = (64 / 35.33 - 1) / 3 = 0.270447: (1 - s) f / 8 + s f = 0.064310.
  const double f2 = std::pow(1000.0, -0.25);
  const double s2 = (64 / (2 * M_PI / f2) - 1) / 3;
  EXPECT_NEAR(s2, 0.270447, 1e-6);
  EXPECT_NEAR(angle(2), (1 - s2) * f2 / 8 + s2 * f2, 1e-7);
  EXPECT_NEAR(angle(2), 0.064310, 1e-6);
}

TEST(LayersTest, ApplyRotaryRotatesConsecutivePairs) {
  const auto [cos, sin] = RotaryTables(2, 2, 10000.0, at::kCPU);
  // One head, D = 2: the pair (1, 0) at position 1 turns by 1 radian.
  const at::Tensor x = Floats({1., 0., 1., 0.}).view({1, 2, 1, 2});
  const at::Tensor y = ApplyRotary(x, cos, sin);
  EXPECT_TRUE(at::allclose(
      y, Floats({1., 0., std::cos(1.0), std::sin(1.0)}).view({1, 2, 1, 2}),
      1e-6, 1e-6));
}

}  // namespace
}  // namespace strata::models
