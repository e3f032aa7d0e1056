#include "optim/sgd.h"

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

const std::vector<int64_t> kSizes = {40000, 7, 30001};
const std::vector<double> kWeightDecays = {0.01, 0.0, 0.05};

double Lr(int step) { return 0.01 * (1 + step % 3) / 3; }

std::unique_ptr<Optimizer> MustCreateSgd(at::Tensor params, at::Tensor grads,
                                         std::vector<ParamRange> ranges,
                                         const SgdOptions& options = {}) {
  auto opt = CreateSgd(std::move(params), std::move(grads), std::move(ranges),
                       options);
  EXPECT_THAT(opt, IsOk());
  return *std::move(opt);
}

struct SgdCase {
  std::string name;
  SgdOptions options;
};

class SgdMatchesTorchTest : public ::testing::TestWithParam<SgdCase> {};

TEST_P(SgdMatchesTorchTest, OverTwelveStepsWithSeveralWeightDecays) {
  const SgdOptions& options = GetParam().options;
  // Values below 2.5: differences of one or two float ulps stay < 1e-6.
  std::vector<at::Tensor> reference = RandomParts(kSizes, 1);
  for (at::Tensor& r : reference) r.mul_(0.5);
  std::vector<torch::optim::OptimizerParamGroup> groups;
  for (size_t i = 0; i < reference.size(); ++i) {
    reference[i].requires_grad_();
    auto group_options = std::make_unique<torch::optim::SGDOptions>(0.0);
    group_options->momentum(options.momentum)
        .dampening(options.dampening)
        .nesterov(options.nesterov)
        .weight_decay(kWeightDecays[i]);
    groups.emplace_back(std::vector<at::Tensor>{reference[i]},
                        std::move(group_options));
  }
  torch::optim::SGD torch_sgd(std::move(groups), torch::optim::SGDOptions(0.0));

  at::Tensor params = at::cat(reference).detach().clone();
  at::Tensor grads = at::zeros_like(params);
  std::unique_ptr<Optimizer> sgd =
      MustCreateSgd(params, grads, Ranges(kSizes, kWeightDecays), options);

  for (int step = 0; step < 12; ++step) {
    std::vector<at::Tensor> g = RandomParts(kSizes, 100 + step);
    for (size_t i = 0; i < reference.size(); ++i) {
      reference[i].mutable_grad() = g[i].clone();
    }
    grads.copy_(at::cat(g));
    for (auto& group : torch_sgd.param_groups()) {
      group.options().set_lr(Lr(step));
    }
    torch_sgd.step();
    sgd->Step(Lr(step));
  }
  const double difference =
      (params - at::cat(reference).detach()).abs().max().item<double>();
  RecordProperty("max_abs_difference", ::testing::PrintToString(difference));
  EXPECT_LE(difference, 1e-6);
}

SgdOptions Options(double momentum, double dampening, bool nesterov) {
  SgdOptions options;
  options.momentum = momentum;
  options.dampening = dampening;
  options.nesterov = nesterov;
  return options;
}

INSTANTIATE_TEST_SUITE_P(
    Variants, SgdMatchesTorchTest,
    ::testing::Values(SgdCase{"Plain", Options(0.0, 0.0, false)},
                      SgdCase{"Momentum", Options(0.9, 0.0, false)},
                      SgdCase{"Dampening", Options(0.9, 0.3, false)},
                      SgdCase{"Nesterov", Options(0.9, 0.0, true)}),
    [](const ::testing::TestParamInfo<SgdCase>& info) {
      return info.param.name;
    });

TEST(SgdTest, ClosedFormMomentumWithWeightDecay) {
  // wd 0.5, momentum 0.9, lr 0.1, g = 1 each step, p0 = 2:
  //   d1 = 1 + 0.5 * 2 = 2,      b1 = 2,               p1 = 2 - 0.2 = 1.8
  //   d2 = 1 + 0.5 * 1.8 = 1.9,  b2 = 1.8 + 1.9 = 3.7, p2 = 1.8 - 0.37 = 1.43
  at::Tensor params = at::tensor({2.0f});
  at::Tensor grads = at::tensor({1.0f});
  std::unique_ptr<Optimizer> sgd =
      MustCreateSgd(params, grads, {{0, 1, 0.5}}, Options(0.9, 0.0, false));
  sgd->Step(0.1);
  EXPECT_NEAR(params.item<float>(), 1.8, 1e-6);
  sgd->Step(0.1);
  EXPECT_NEAR(params.item<float>(), 1.43, 1e-6);
  EXPECT_NEAR(sgd->State()[0].second.item<float>(), 3.7, 1e-6);
}

TEST(SgdTest, MomentumBufferStartsAsTheFirstGradient) {
  at::Tensor grads = at::tensor({3.0f, -1.0f});
  std::unique_ptr<Optimizer> sgd =
      MustCreateSgd(at::zeros({2}), grads, {}, Options(0.9, 0.5, false));
  sgd->Step(0.1);
  // Not dampened on the first step (PyTorch: buf = clone(d_p)).
  EXPECT_TRUE(at::equal(sgd->State()[0].second, grads));
}

TEST(SgdTest, StateWithoutMomentumIsTheStepOnly) {
  std::unique_ptr<Optimizer> sgd =
      MustCreateSgd(at::zeros({4}), at::zeros({4}), {});
  EXPECT_EQ(sgd->name(), "sgd");
  const NamedTensors state = sgd->State();
  ASSERT_EQ(state.size(), 1u);
  EXPECT_EQ(state[0].first, "step");
}

TEST(SgdTest, StateWithMomentumHasTheBuffer) {
  std::unique_ptr<Optimizer> sgd = MustCreateSgd(at::zeros({4}), at::zeros({4}),
                                                 {}, Options(0.9, 0.0, false));
  const NamedTensors state = sgd->State();
  ASSERT_EQ(state.size(), 2u);
  EXPECT_EQ(state[0].first, "momentum_buffer");
  EXPECT_EQ(state[0].second.sizes(), (std::vector<int64_t>{4}));
  EXPECT_EQ(state[1].first, "step");
}

TEST(SgdTest, StateRoundTripContinuesIdentically) {
  const SgdOptions options = Options(0.9, 0.1, false);
  const std::vector<ParamRange> ranges = {{0, 600, 0.05}, {600, 400, 0.0}};
  at::Tensor params_a = at::randn({1000});
  at::Tensor grads_a = at::zeros({1000});
  std::unique_ptr<Optimizer> a =
      MustCreateSgd(params_a, grads_a, ranges, options);
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
  std::unique_ptr<Optimizer> b =
      MustCreateSgd(params_b, grads_b, ranges, options);
  ASSERT_THAT(b->LoadState(saved), IsOk());
  for (int step = 5; step < 10; ++step) {
    grads_a.copy_(at::randn({1000}));
    grads_b.copy_(grads_a);
    a->Step(Lr(step));
    b->Step(Lr(step));
  }
  EXPECT_TRUE(at::equal(params_a, params_b));
  EXPECT_TRUE(at::equal(a->State()[0].second, b->State()[0].second));
}

TEST(SgdTest, ElementsOutsideTheRangesAreNeverTouched) {
  at::Tensor params = at::randn({10});
  const at::Tensor padding = params.narrow(0, 8, 2).clone();
  std::unique_ptr<Optimizer> sgd = MustCreateSgd(
      params, at::randn({10}), {{0, 8, 0.1}}, Options(0.9, 0.0, true));
  sgd->Step(0.1);
  sgd->Step(0.1);
  EXPECT_TRUE(at::equal(params.narrow(0, 8, 2), padding));
}

absl::Status CreateError(const SgdOptions& options,
                         std::vector<ParamRange> ranges = {},
                         int64_t grads_numel = 4) {
  auto opt = CreateSgd(at::zeros({4}), at::zeros({grads_numel}),
                       std::move(ranges), options);
  EXPECT_FALSE(opt.ok());
  return opt.status();
}

TEST(SgdTest, RejectsNesterovWithoutMomentum) {
  EXPECT_THAT(CreateError(Options(0.0, 0.0, true)).ToString(),
              HasSubstr("SGD nesterov needs momentum > 0 and dampening == 0, "
                        "got momentum 0 and dampening 0"));
}

TEST(SgdTest, RejectsNesterovWithDampening) {
  EXPECT_THAT(CreateError(Options(0.9, 0.1, true)).ToString(),
              HasSubstr("got momentum 0.9 and dampening 0.1"));
}

TEST(SgdTest, ValidateNamesTheFlagsWithAPrefix) {
  EXPECT_THAT(ValidateSgdOptions(Options(0.9, 0.1, true), "--").ToString(),
              HasSubstr("--nesterov needs --momentum > 0 and --dampening == 0, "
                        "got --momentum 0.9 and --dampening 0.1"));
}

TEST(SgdTest, RejectsNegativeMomentum) {
  EXPECT_THAT(CreateError(Options(-0.1, 0.0, false)).ToString(),
              HasSubstr("SGD momentum must be >= 0, got -0.1"));
}

TEST(SgdTest, RejectsBadRanges) {
  EXPECT_THAT(CreateError(SgdOptions(), {{0, 5, 0.0}}).ToString(),
              HasSubstr("ranges[0] [0, 5) ends past the end of the buffer (4 "
                        "elements)"));
}

TEST(SgdTest, RejectsMismatchedBuffers) {
  EXPECT_THAT(CreateError(SgdOptions(), {}, 3).ToString(),
              HasSubstr("grads must have as many elements as params (4)"));
}

TEST(SgdTest, LoadStateNamesTheKeyAndBothShapes) {
  std::unique_ptr<Optimizer> sgd = MustCreateSgd(at::zeros({4}), at::zeros({4}),
                                                 {}, Options(0.9, 0.0, false));
  EXPECT_THAT(sgd->LoadState({{"momentum_buffer", at::zeros({2, 2})},
                              {"step", at::scalar_tensor(1, at::kLong)}})
                  .ToString(),
              HasSubstr("'momentum_buffer': expected shape [4] (Float), got "
                        "[2, 2] (Float)"));
}

}  // namespace
}  // namespace strata::optim
