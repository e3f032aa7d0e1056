#include "optim/adamw.h"

#include <ATen/ATen.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <torch/optim.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "base/testing/status_matchers.h"
#include "optim/testing/buffers.h"

namespace strata::optim {
namespace {

using ::strata::testing::IsOk;

using ::strata::optim::testing::RandomParts;
using ::strata::optim::testing::Ranges;
using ::testing::HasSubstr;

// Ranges of sizes larger than a parallel chunk (32768 elements) so that
// chunks start inside ranges, plus a tiny one.
const std::vector<int64_t> kSizes = {40000, 7, 30001};
const std::vector<double> kWeightDecays = {0.1, 0.0, 0.01};

double Lr(int step) { return 1e-2 * (1 + step % 3) / 3; }

std::unique_ptr<Optimizer> MustCreateAdamW(at::Tensor params, at::Tensor grads,
                                           std::vector<ParamRange> ranges,
                                           const AdamWOptions& options = {}) {
  auto opt = CreateAdamW(std::move(params), std::move(grads), std::move(ranges),
                         options);
  EXPECT_THAT(opt, IsOk());
  return *std::move(opt);
}

// Runs LibTorch's TorchAdam (torch::optim::AdamW or torch::optim::Adam; one
// parameter and param group per range) and Strata's (`create`) side by side
// for `steps` steps on the same random gradients; returns the largest
// difference between their parameters.
template <typename TorchAdam, typename TorchOptions>
double MaxDifferenceFromTorch(const AdamWOptions& options, int steps,
                              absl::StatusOr<std::unique_ptr<Optimizer>> (
                                  *create)(at::Tensor, at::Tensor,
                                           std::vector<ParamRange>,
                                           const AdamWOptions&)) {
  // Values below 2.5: differences of one or two float ulps stay < 1e-6.
  std::vector<at::Tensor> reference = RandomParts(kSizes, 1);
  for (at::Tensor& r : reference) r.mul_(0.5);
  std::vector<torch::optim::OptimizerParamGroup> groups;
  for (size_t i = 0; i < reference.size(); ++i) {
    reference[i].requires_grad_();
    auto group_options = std::make_unique<TorchOptions>(0.0);
    group_options->betas({options.beta1, options.beta2})
        .eps(options.eps)
        .weight_decay(kWeightDecays[i]);
    groups.emplace_back(std::vector<at::Tensor>{reference[i]},
                        std::move(group_options));
  }
  TorchAdam torch_adam(std::move(groups));

  at::Tensor params = at::cat(reference).detach().clone();
  at::Tensor grads = at::zeros_like(params);
  auto created = create(params, grads, Ranges(kSizes, kWeightDecays), options);
  EXPECT_THAT(created, IsOk());
  std::unique_ptr<Optimizer> adam = *std::move(created);

  for (int step = 0; step < steps; ++step) {
    std::vector<at::Tensor> g = RandomParts(kSizes, 100 + step);
    for (size_t i = 0; i < reference.size(); ++i) {
      reference[i].mutable_grad() = g[i].clone();
    }
    grads.copy_(at::cat(g));
    for (auto& group : torch_adam.param_groups()) {
      group.options().set_lr(Lr(step));
    }
    torch_adam.step();
    adam->Step(Lr(step));
  }
  return (params - at::cat(reference).detach()).abs().max().item<double>();
}

double MaxDifferenceFromTorchAdamW(const AdamWOptions& options, int steps) {
  return MaxDifferenceFromTorch<torch::optim::AdamW,
                                torch::optim::AdamWOptions>(options, steps,
                                                            &CreateAdamW);
}

TEST(AdamWTest, MatchesTorchAdamW) {
  const double difference = MaxDifferenceFromTorchAdamW(AdamWOptions(), 12);
  RecordProperty("max_abs_difference", ::testing::PrintToString(difference));
  EXPECT_LE(difference, 1e-6);
}

TEST(AdamWTest, MatchesTorchAdamWWithOtherBetasAndEps) {
  AdamWOptions options;
  options.beta1 = 0.8;
  options.beta2 = 0.95;
  options.eps = 1e-6;
  const double difference = MaxDifferenceFromTorchAdamW(options, 12);
  RecordProperty("max_abs_difference", ::testing::PrintToString(difference));
  EXPECT_LE(difference, 1e-6);
}

TEST(AdamTest, MatchesTorchAdamWithL2WeightDecay) {
  AdamWOptions options;
  options.beta2 = 0.95;
  const double difference =
      MaxDifferenceFromTorch<torch::optim::Adam, torch::optim::AdamOptions>(
          options, 12, &CreateAdam);
  RecordProperty("max_abs_difference", ::testing::PrintToString(difference));
  EXPECT_LE(difference, 1e-6);
}

TEST(AdamTest, FirstStepFoldsTheDecayIntoTheGradient) {
  // Step 1 of Adam: d = g + wd * p, m / bc1 = d and sqrt(v / bc2) = |d|, so
  // p -= lr * d / (|d| + eps): the parameter is not shrunk (AdamW would
  // give 2 * 0.95 - 0.1 = 1.8 for the last element), and a decay that flips
  // the sign of d flips the step. p = {1, 1, 2}, g = {2, -0.5, -0.5},
  // wd = {0, 0, 0.5}: d = {2, -0.5, 0.5}.
  at::Tensor params = at::tensor({1.0f, 1.0f, 2.0f});
  at::Tensor grads = at::tensor({2.0f, -0.5f, -0.5f});
  auto adam = CreateAdam(params, grads, {{0, 2, 0.0}, {2, 1, 0.5}}, {});
  ASSERT_THAT(adam, IsOk());
  EXPECT_EQ((*adam)->name(), "adam");
  (*adam)->Step(0.1);
  EXPECT_NEAR(params[0].item<float>(), 0.9, 1e-6);
  EXPECT_NEAR(params[1].item<float>(), 1.1, 1e-6);
  EXPECT_NEAR(params[2].item<float>(), 1.9, 1e-6);
  // The moments hold the decayed gradient.
  EXPECT_NEAR((*adam)->State()[0].second[2].item<float>(), 0.1 * 0.5, 1e-7);
}

TEST(AdamTest, InvalidOptionsNameAdam) {
  AdamWOptions options;
  options.beta1 = -0.1;
  auto adam = CreateAdam(at::zeros({4}), at::zeros({4}), {}, options);
  EXPECT_THAT(adam.status().ToString(),
              HasSubstr("Adam beta1 must be in [0, 1), got -0.1"));
}

TEST(AdamWTest, FirstStepMovesEachParameterByLrAgainstItsGradient) {
  // Step 1: m / bc1 = g and sqrt(v / bc2) = |g|, so p -= lr * g / (|g| + eps)
  // after the decoupled decay p *= 1 - lr * wd.
  at::Tensor params = at::tensor({1.0f, 1.0f, 2.0f});
  at::Tensor grads = at::tensor({2.0f, -0.5f, 4.0f});
  std::unique_ptr<Optimizer> adamw =
      MustCreateAdamW(params, grads, {{0, 2, 0.0}, {2, 1, 0.5}});
  adamw->Step(0.1);
  EXPECT_NEAR(params[0].item<float>(), 0.9, 1e-6);
  EXPECT_NEAR(params[1].item<float>(), 1.1, 1e-6);
  EXPECT_NEAR(params[2].item<float>(), 2.0 * 0.95 - 0.1, 1e-6);
}

TEST(AdamWTest, AShardMatchesTheWholeBuffer) {
  const std::vector<int64_t> sizes = {300, 700};
  const std::vector<double> wds = {0.1, 0.0};
  at::Tensor whole = at::cat(RandomParts(sizes, 1));
  at::Tensor sharded = whole.clone();
  at::Tensor whole_grads = at::zeros_like(whole);
  at::Tensor sharded_grads = at::zeros_like(whole);
  std::unique_ptr<Optimizer> whole_adamw =
      MustCreateAdamW(whole, whole_grads, Ranges(sizes, wds));
  // Two ranks' shards of 500 elements: the first range is cut by the second.
  std::unique_ptr<Optimizer> shard0 = MustCreateAdamW(
      sharded.narrow(0, 0, 500), sharded_grads.narrow(0, 0, 500),
      {{0, 300, 0.1}, {300, 200, 0.0}});
  std::unique_ptr<Optimizer> shard1 =
      MustCreateAdamW(sharded.narrow(0, 500, 500),
                      sharded_grads.narrow(0, 500, 500), {{0, 500, 0.0}});
  for (int step = 0; step < 5; ++step) {
    at::Tensor g = at::cat(RandomParts(sizes, 100 + step));
    whole_grads.copy_(g);
    sharded_grads.copy_(g);
    whole_adamw->Step(Lr(step));
    shard0->Step(Lr(step));
    shard1->Step(Lr(step));
  }
  EXPECT_TRUE(at::equal(whole, sharded));
}

TEST(AdamWTest, ElementsOutsideTheRangesAreNeverTouched) {
  at::Tensor params = at::randn({10});
  at::Tensor grads = at::randn({10});
  const at::Tensor padding = params.narrow(0, 7, 3).clone();
  std::unique_ptr<Optimizer> adamw =
      MustCreateAdamW(params, grads, {{0, 7, 0.1}});
  adamw->Step(0.1);
  adamw->Step(0.1);
  EXPECT_TRUE(at::equal(params.narrow(0, 7, 3), padding));
  EXPECT_TRUE(
      at::equal(adamw->State()[0].second.narrow(0, 7, 3), at::zeros({3})));
}

TEST(AdamWTest, StateNamesAndShapes) {
  std::unique_ptr<Optimizer> adamw =
      MustCreateAdamW(at::zeros({10}), at::zeros({10}), {});
  EXPECT_EQ(adamw->name(), "adamw");
  const NamedTensors state = adamw->State();
  ASSERT_EQ(state.size(), 3u);
  EXPECT_EQ(state[0].first, "exp_avg");
  EXPECT_EQ(state[0].second.sizes(), (std::vector<int64_t>{10}));
  EXPECT_EQ(state[1].first, "exp_avg_sq");
  EXPECT_EQ(state[2].first, "step");
  EXPECT_EQ(state[2].second.dim(), 0);
  EXPECT_EQ(state[2].second.scalar_type(), at::kLong);
}

TEST(AdamWTest, StateAliasesTheLiveState) {
  at::Tensor grads = at::ones({10});
  std::unique_ptr<Optimizer> adamw =
      MustCreateAdamW(at::zeros({10}), grads, {});
  const NamedTensors state = adamw->State();
  adamw->Step(0.1);
  EXPECT_EQ(state[2].second.item<int64_t>(), 1);
  EXPECT_TRUE(at::allclose(state[0].second, at::full({10}, 0.1)));
  // Writing the returned tensors writes the optimizer's state.
  state[2].second.fill_(41);
  EXPECT_EQ(adamw->num_steps(), 41);
}

TEST(AdamWTest, StateRoundTripContinuesIdentically) {
  at::Tensor params_a = at::randn({1000});
  at::Tensor grads_a = at::zeros({1000});
  const std::vector<ParamRange> ranges = {{0, 600, 0.05}, {600, 400, 0.0}};
  std::unique_ptr<Optimizer> a = MustCreateAdamW(params_a, grads_a, ranges);
  for (int step = 0; step < 5; ++step) {
    grads_a.copy_(at::randn({1000}));
    a->Step(Lr(step));
  }
  NamedTensors saved;
  for (const auto& [key, tensor] : a->State()) {
    saved.emplace_back(key, tensor.clone());
  }
  at::Tensor params_b = params_a.clone();
  at::Tensor grads_b = at::zeros({1000});
  std::unique_ptr<Optimizer> b = MustCreateAdamW(params_b, grads_b, ranges);
  ASSERT_THAT(b->LoadState(saved), IsOk());
  EXPECT_EQ(b->num_steps(), 5);
  for (int step = 5; step < 10; ++step) {
    grads_a.copy_(at::randn({1000}));
    grads_b.copy_(grads_a);
    a->Step(Lr(step));
    b->Step(Lr(step));
  }
  EXPECT_TRUE(at::equal(params_a, params_b));
  const NamedTensors state_a = a->State();
  const NamedTensors state_b = b->State();
  for (size_t i = 0; i < state_a.size(); ++i) {
    EXPECT_TRUE(at::equal(state_a[i].second, state_b[i].second))
        << state_a[i].first;
  }
}

TEST(AdamWTest, LoadStateNamesTheKeyAndBothShapes) {
  std::unique_ptr<Optimizer> adamw =
      MustCreateAdamW(at::zeros({10}), at::zeros({10}), {});
  const absl::Status status =
      adamw->LoadState({{"exp_avg", at::zeros({12})},
                        {"exp_avg_sq", at::zeros({10})},
                        {"step", at::scalar_tensor(3, at::kLong)}});
  EXPECT_THAT(status.ToString(),
              HasSubstr("optimizer 'adamw' state 'exp_avg': expected shape "
                        "[10] (Float), got [12] (Float)"));
  EXPECT_EQ(adamw->num_steps(), 0);
}

absl::Status CreateError(at::Tensor params, at::Tensor grads,
                         std::vector<ParamRange> ranges,
                         const AdamWOptions& options = {}) {
  auto opt = CreateAdamW(std::move(params), std::move(grads), std::move(ranges),
                         options);
  EXPECT_FALSE(opt.ok());
  return opt.status();
}

TEST(AdamWTest, ValidateNamesTheFlagsWithAPrefix) {
  AdamWOptions options;
  options.eps = -1;
  EXPECT_THAT(ValidateAdamWOptions(options, "--").ToString(),
              HasSubstr("--eps must be >= 0, got -1"));
}

TEST(AdamWTest, RejectsBeta1OfOne) {
  AdamWOptions options;
  options.beta1 = 1.0;
  EXPECT_THAT(
      CreateError(at::zeros({4}), at::zeros({4}), {}, options).ToString(),
      HasSubstr("AdamW beta1 must be in [0, 1), got 1"));
}

TEST(AdamWTest, RejectsNegativeEps) {
  AdamWOptions options;
  options.eps = -1e-8;
  EXPECT_THAT(
      CreateError(at::zeros({4}), at::zeros({4}), {}, options).ToString(),
      HasSubstr("AdamW eps must be >= 0"));
}

TEST(AdamWTest, RejectsBadRanges) {
  EXPECT_THAT(
      CreateError(at::zeros({4}), at::zeros({4}), {{0, 2, 0.0}, {3, 1, 0.0}})
          .ToString(),
      HasSubstr("ranges[1] starts at offset 3, expected 2"));
}

TEST(AdamWTest, RejectsMismatchedBuffers) {
  EXPECT_THAT(CreateError(at::zeros({4}), at::zeros({5}), {}).ToString(),
              HasSubstr("grads must have as many elements as params (4), got "
                        "5"));
}

}  // namespace
}  // namespace strata::optim
