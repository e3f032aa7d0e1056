#include "strategies/single.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>

#include "models/config.h"
#include "models/factory.h"
#include "strategies/factory.h"
#include "strategies/strategy.h"

namespace strata::strategies {
namespace {

std::shared_ptr<models::UnitModel> Gpt(uint64_t seed) {
  auto config = models::ConfigByName("gpt-tiny");
  EXPECT_TRUE(config.ok()) << config.status();
  auto model = models::BuildModel(*config, models::BuildOptions{seed});
  EXPECT_TRUE(model.ok()) << model.status();
  return *model;
}

optim::LrScheduleOptions Constant() {
  optim::LrScheduleOptions lr;
  lr.kind = "constant";
  lr.base_lr = 1e-3;
  return lr;
}

TEST(StrategyOptionsTest, RejectsUnknownKindNamingTheOption) {
  StrategyOptions options;
  options.kind = "fsdp2";
  absl::Status status = ValidateStrategyOptions(options);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(),
            "--strategy must be single, ddp, zero1 or zero2, got 'fsdp2'");
  auto created =
      CreateStrategy(options, Gpt(1), nullptr, OptimizerConfig(), Constant());
  EXPECT_EQ(created.status().message(), status.message());
}

TEST(StrategyOptionsTest, RejectsNonPositiveBucketBytes) {
  StrategyOptions options;
  options.kind = "ddp";
  options.bucket_bytes = 0;
  EXPECT_EQ(ValidateStrategyOptions(options).message(),
            "--bucket_bytes must be > 0, got 0");
  options.bucket_bytes = 1;
  options.first_bucket_bytes = -3;
  EXPECT_EQ(ValidateStrategyOptions(options).message(),
            "--first_bucket_bytes must be > 0, got -3");
  options.first_bucket_bytes = 1;
  EXPECT_TRUE(ValidateStrategyOptions(options).ok());
}

TEST(StrategyOptionsTest, DdpNeedsAGroup) {
  StrategyOptions options;
  options.kind = "ddp";
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

TEST(SingleStrategyTest, StepMatchesHandWrittenLoop) {
  // The same step done by hand as launch/trainer.cc does it: plain
  // backward, clip, AdamW from the flat buffers of a second copy.
  auto model = Gpt(3);
  auto created = CreateStrategy(StrategyOptions(), model, nullptr,
                                OptimizerConfig(), Constant());
  ASSERT_TRUE(created.ok()) << created.status();
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
  ASSERT_TRUE(value.ok()) << value.status();
  EXPECT_NEAR(*value, loss.item<double>(), 1e-6);
  auto result = strategy.Step(0);
  ASSERT_TRUE(result.ok()) << result.status();
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
  ASSERT_TRUE(created.ok()) << created.status();
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

}  // namespace
}  // namespace strata::strategies
