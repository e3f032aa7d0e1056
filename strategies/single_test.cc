#include "strategies/single.h"

#include <ATen/ATen.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "base/testing/status_matchers.h"
#include "models/config.h"
#include "models/factory.h"
#include "strategies/factory.h"
#include "strategies/strategy.h"
#include "strategies/testing/parity.h"

namespace strata::strategies {
namespace {

using ::strata::testing::IsOk;

using ::strata::testing::StatusIs;
using ::testing::HasSubstr;

std::shared_ptr<models::UnitModel> Gpt(uint64_t seed) {
  auto config = models::ConfigByName("gpt-tiny");
  EXPECT_THAT(config, IsOk());
  auto model = models::BuildModel(*config, models::BuildOptions{seed});
  EXPECT_THAT(model, IsOk());
  return *model;
}

optim::LrScheduleOptions Constant() {
  optim::LrScheduleOptions lr;
  lr.kind = optim::LrScheduleKind::kConstant;
  lr.base_lr = 1e-3;
  return lr;
}

TEST(StrategyOptionsTest, RejectsUnknownKindNamingTheOption) {
  EXPECT_THAT(ParseStrategyKind("fsdp2"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "--strategy must be single, ddp, zero1, zero2 or fsdp, "
                       "got 'fsdp2'"));
  StrategyOptions options;
  options.kind = static_cast<StrategyKind>(7);
  const absl::Status status = ValidateStrategyOptions(options);
  EXPECT_THAT(status, StatusIs(absl::StatusCode::kInvalidArgument,
                               HasSubstr("--strategy must be single, ddp, "
                                         "zero1, zero2 or fsdp, got")));
  auto created =
      CreateStrategy(options, Gpt(1), nullptr, OptimizerConfig(), Constant());
  EXPECT_EQ(created.status(), status);
}

TEST(StrategyOptionsTest, RejectsNonPositiveBucketBytes) {
  StrategyOptions options;
  options.kind = StrategyKind::kDdp;
  options.bucket_bytes = 0;
  EXPECT_EQ(ValidateStrategyOptions(options).message(),
            "--bucket_bytes must be > 0, got 0");
  options.bucket_bytes = 1;
  options.first_bucket_bytes = -3;
  EXPECT_EQ(ValidateStrategyOptions(options).message(),
            "--first_bucket_bytes must be > 0, got -3");
  options.first_bucket_bytes = 1;
  EXPECT_THAT(ValidateStrategyOptions(options), IsOk());
}

TEST(StrategyOptionsTest, DdpNeedsAGroup) {
  StrategyOptions options;
  options.kind = StrategyKind::kDdp;
  auto created =
      CreateStrategy(options, Gpt(1), nullptr, OptimizerConfig(), Constant());
  EXPECT_EQ(created.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(created.status().message().find("--strategy ddp"),
            std::string::npos)
      << created.status();
}

TEST(StrategyOptionsTest, RejectsBadOptimizerConfig) {
  OptimizerConfig config;
  config.grad_clip = -1;
  auto created =
      CreateStrategy(StrategyOptions(), Gpt(1), nullptr, config, Constant());
  EXPECT_NE(created.status().message().find("--grad_clip"), std::string::npos)
      << created.status();
}

TEST(StrategyOptionsTest, RejectsANormTypeThatIsNoNorm) {
  OptimizerConfig config;
  config.grad_clip_norm_type = 0;
  auto created =
      CreateStrategy(StrategyOptions(), Gpt(1), nullptr, config, Constant());
  EXPECT_NE(
      created.status().message().find("--grad_clip_norm_type must be > 0"),
      std::string::npos)
      << created.status();
}

TEST(SingleStrategyTest, StepMatchesHandWrittenLoop) {
  // The same step done by hand as launch/train/trainer.cc does it: plain
  // backward, clip, AdamW from the flat buffers of a second copy.
  auto model = Gpt(3);
  auto created = CreateStrategy(StrategyOptions(), model, nullptr,
                                OptimizerConfig(), Constant());
  ASSERT_THAT(created, IsOk());
  Strategy& strategy = **created;
  EXPECT_EQ(strategy.name(), "single");
  at::Tensor tokens = at::randint(0, 256, {4, 17}, at::kLong);
  at::Tensor inputs = tokens.narrow(1, 0, 16).contiguous();
  at::Tensor targets = tokens.narrow(1, 1, 16).contiguous();

  // Reference: unflattened model, autograd only.
  auto reference = Gpt(3);
  at::Tensor loss =
      models::UnitModel::Loss(reference->Forward(inputs), targets);
  loss.backward();
  double sum_squares = 0;
  for (const auto& p : reference->parameters()) {
    sum_squares += p.grad().pow(2).sum().item<double>();
  }

  strategy.ZeroGrad();
  auto value = strategy.ForwardBackward(inputs, targets, 1.0, true);
  ASSERT_THAT(value, IsOk());
  EXPECT_NEAR(*value, loss.item<double>(), 1e-6);
  auto result = strategy.Step(0);
  ASSERT_THAT(result, IsOk());
  EXPECT_NEAR(result->grad_norm, std::sqrt(sum_squares),
              1e-5 * std::sqrt(sum_squares));
  EXPECT_DOUBLE_EQ(result->lr, 1e-3);
  // Adam's first step moves every element with a gradient by about lr.
  for (const ShardedTensor& t : strategy.ModelState()) {
    at::Tensor before = reference->named_parameters()[t.name];
    const double moved = (t.local - before).abs().max().item<double>();
    EXPECT_GT(moved, 0.5e-3) << t.name;
    EXPECT_LT(moved, 1.5e-3) << t.name;
  }
}

TEST(SingleStrategyTest, MemoryAndStateAreCountedFromTheTensors) {
  auto model = Gpt(3);
  auto created = SingleStrategy::Create(model, OptimizerConfig(), Constant());
  ASSERT_THAT(created, IsOk());
  const SingleStrategy& strategy = **created;
  int64_t psi = 0;
  for (const auto& p : model->parameters()) psi += p.numel();
  ASSERT_EQ(strategy.flat().numel(), psi);
  const MemoryReport memory = strategy.Memory();
  EXPECT_EQ(memory.parameter_bytes, 4 * psi);
  EXPECT_EQ(memory.gradient_bytes, 4 * psi);
  // exp_avg and exp_avg_sq (fp32), plus the 0-dim int64 step counter.
  EXPECT_EQ(memory.optimizer_bytes, 8 * psi + 8);
  EXPECT_EQ(memory.communication_bytes, 0);

  const auto state = strategy.ModelState();
  ASSERT_EQ(state.size(), model->named_parameters().size());
  for (const ShardedTensor& t : state) {
    at::Tensor p = model->named_parameters()[t.name];
    EXPECT_EQ(t.global_shape, p.sizes().vec());
    EXPECT_EQ(t.offset, 0);
    EXPECT_TRUE(t.local.is_same(p)) << t.name;
  }
  const auto optimizer = strategy.OptimizerState();
  ASSERT_EQ(optimizer.size(), 2 * state.size() + 1);
  EXPECT_EQ(optimizer.back().name, "step");
  EXPECT_EQ(optimizer[0].name, state[0].name + ".exp_avg");
  EXPECT_EQ(optimizer[1].name, state[0].name + ".exp_avg_sq");
  EXPECT_EQ(optimizer[0].global_shape, state[0].global_shape);
}

TEST(StrategyOptionsTest, RejectsMixedPrecisionDtypesNamingTheFlag) {
  StrategyOptions options;
  options.mixed_precision.param_dtype = at::kDouble;
  EXPECT_EQ(ValidateStrategyOptions(options).message(),
            "--param_dtype must be fp32, bf16 or fp16, got Double");
  auto created =
      CreateStrategy(options, Gpt(1), nullptr, OptimizerConfig(), Constant());
  EXPECT_EQ(created.status().message(),
            "--param_dtype must be fp32, bf16 or fp16, got Double");
  options.mixed_precision.param_dtype = at::kBFloat16;
  options.mixed_precision.reduce_dtype = at::kDouble;
  EXPECT_EQ(ValidateStrategyOptions(options).message(),
            "--reduce_dtype must be fp32, bf16 or fp16, got Double");
  options.mixed_precision.reduce_dtype = at::kBFloat16;
  options.mixed_precision.buffer_dtype = at::kInt;
  EXPECT_EQ(ValidateStrategyOptions(options).message(),
            "--buffer_dtype must be fp32, bf16 or fp16, got Int");
  options.mixed_precision.buffer_dtype = at::kHalf;
  EXPECT_THAT(ValidateStrategyOptions(options), IsOk());
}

TEST(StrategyOptionsTest, ParsesMixedPrecisionDtypeFlags) {
  EXPECT_EQ(*ParseMixedPrecisionDtype("param_dtype", "fp32"), at::kFloat);
  EXPECT_EQ(*ParseMixedPrecisionDtype("param_dtype", "bf16"), at::kBFloat16);
  EXPECT_EQ(*ParseMixedPrecisionDtype("param_dtype", "fp16"), at::kHalf);
  auto bad = ParseMixedPrecisionDtype("reduce_dtype", "fp64");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(),
            "--reduce_dtype must be fp32, bf16 or fp16, got 'fp64'");
}

StrategyOptions Bf16Single() {
  StrategyOptions options;
  options.mixed_precision.param_dtype = at::kBFloat16;
  return options;
}

TEST(SingleStrategyTest, Bf16KeepsFp32MastersAndFoldsGradientsAfterBackward) {
  auto model = Gpt(3);
  const testing::Params initial = testing::ParametersOf(*model);
  auto created = CreateStrategy(Bf16Single(), model, nullptr, OptimizerConfig(),
                                Constant());
  ASSERT_THAT(created, IsOk());
  Strategy& strategy = **created;
  // ModelState is the fp32 masters: the initial values, unrounded; the
  // model computes with them rounded to bf16.
  for (const ShardedTensor& t : strategy.ModelState()) {
    EXPECT_EQ(t.local.scalar_type(), at::kFloat) << t.name;
    EXPECT_TRUE(at::equal(t.local, initial.at(t.name))) << t.name;
    const at::Tensor p = model->named_parameters()[t.name];
    EXPECT_EQ(p.scalar_type(), at::kBFloat16) << t.name;
    EXPECT_TRUE(at::equal(p, initial.at(t.name).to(at::kBFloat16))) << t.name;
  }
  at::Tensor tokens = at::randint(0, 256, {4, 17}, at::kLong);
  strategy.ZeroGrad();
  for (int m = 0; m < 2; ++m) {
    auto loss = strategy.ForwardBackward(tokens.narrow(1, 0, 16).contiguous(),
                                         tokens.narrow(1, 1, 16).contiguous(),
                                         0.5, m == 1);
    ASSERT_THAT(loss, IsOk());
    // Each micro-batch's bf16 gradients were moved into fp32.
    for (const auto& item : model->named_parameters()) {
      EXPECT_EQ(item.value().grad().abs().max().item<float>(), 0.0f)
          << item.key();
    }
  }
  auto result = strategy.Step(0);
  ASSERT_THAT(result, IsOk());
  EXPECT_GT(result->grad_norm, 0);
  for (const ShardedTensor& t : strategy.ModelState()) {
    // Adam's first step moves the masters by about lr = 1e-3 (no clipping
    // beyond a uniform scale), far more than bf16's rounding of them
    // could show; the bf16 parameters follow the masters.
    const double moved =
        (t.local - initial.at(t.name)).abs().max().item<double>();
    EXPECT_GT(moved, 0.5e-3) << t.name;
    EXPECT_LT(moved, 1.5e-3) << t.name;
    EXPECT_TRUE(
        at::equal(model->named_parameters()[t.name], t.local.to(at::kBFloat16)))
        << t.name;
  }
}

TEST(SingleStrategyTest, Bf16TracksFp32Single) {
  // bf16 compute changes every gradient by bf16 rounding (2^-8 relative),
  // so the bound is ExpectWithinBf16Noise's, with the ratio of this CPU's
  // bf16 GEMM against fp32 (see kBf16VsFp32MeanRatio).
  const testing::Params initial =
      testing::ParametersOf(*testing::Build(testing::Config("gpt-tiny"), 7));
  std::vector<double> fp32_norms, bf16_norms;
  const testing::Params fp32 =
      testing::TrainSingleWith("gpt-tiny", StrategyOptions(), 1, &fp32_norms);
  const testing::Params bf16 =
      testing::TrainSingleWith("gpt-tiny", Bf16Single(), 1, &bf16_norms);
  testing::ExpectWithinBf16Noise(bf16, fp32, initial,
                                 testing::kBf16VsFp32MeanRatio,
                                 "bf16 single vs fp32 single");
  ASSERT_EQ(bf16_norms.size(), fp32_norms.size());
  for (size_t s = 0; s < fp32_norms.size(); ++s) {
    // bf16 activations and gradients: a few bf16 ulps (2^-8) relative.
    EXPECT_NEAR(bf16_norms[s], fp32_norms[s], fp32_norms[s] / 16) << s;
    EXPECT_NE(bf16_norms[s], fp32_norms[s]) << s;
  }
}

TEST(SingleStrategyTest, Bf16MemoryCountsCopiesAndMasters) {
  auto model = Gpt(3);
  int64_t psi = 0;
  for (const auto& p : model->parameters()) psi += p.numel();
  auto created = CreateStrategy(Bf16Single(), model, nullptr, OptimizerConfig(),
                                Constant());
  ASSERT_THAT(created, IsOk());
  const MemoryReport memory = (*created)->Memory();
  EXPECT_EQ(memory.parameter_bytes, (2 + 4) * psi);
  EXPECT_EQ(memory.gradient_bytes, (2 + 4) * psi);
  EXPECT_EQ(memory.optimizer_bytes, 8 * psi + 8);
}

TEST(SingleStrategyTest, Bf16AfterStateLoadedRederivesTheParameters) {
  auto model = Gpt(3);
  auto created = CreateStrategy(Bf16Single(), model, nullptr, OptimizerConfig(),
                                Constant());
  ASSERT_THAT(created, IsOk());
  for (const ShardedTensor& t : (*created)->ModelState()) {
    at::Tensor local = t.local;
    local.fill_(0.375);
  }
  ASSERT_THAT((*created)->AfterStateLoaded(), IsOk());
  for (const auto& item : model->named_parameters()) {
    EXPECT_TRUE(at::equal(item.value(), at::full_like(item.value(), 0.375)))
        << item.key();
  }
}

TEST(SingleStrategyTest, FrozenParametersStayUnchanged) {
  for (const StrategyOptions& options : {StrategyOptions(), Bf16Single()}) {
    const testing::Params initial =
        testing::ParametersOf(*testing::Build(testing::Config("gpt-tiny"), 7));
    const testing::Params trained = testing::TrainSingleWith(
        "gpt-tiny", options, 2, nullptr, testing::Freeze);
    for (const char* name : testing::kFrozenParameters) {
      EXPECT_TRUE(at::equal(trained.at(name), initial.at(name))) << name;
    }
    // The others trained (weight decay and updates moved them).
    EXPECT_FALSE(at::equal(trained.at("blocks.0.ln_1.weight"),
                           initial.at("blocks.0.ln_1.weight")));
  }
}

}  // namespace
}  // namespace strata::strategies
