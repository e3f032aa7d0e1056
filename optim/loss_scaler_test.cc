#include "optim/loss_scaler.h"

#include <ATen/ATen.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "base/testing/status_matchers.h"

namespace strata::optim {
namespace {

using ::strata::testing::IsOk;

using ::testing::HasSubstr;

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

LossScalerOptions Options(double init_scale, int64_t growth_interval) {
  LossScalerOptions options;
  options.init_scale = init_scale;
  options.growth_interval = growth_interval;
  return options;
}

std::unique_ptr<LossScaler> MustCreate(const LossScalerOptions& options) {
  auto scaler = LossScaler::Create(options);
  EXPECT_THAT(scaler, IsOk());
  return *std::move(scaler);
}

TEST(LossScalerTest, DefaultsAreGradScalers) {
  std::unique_ptr<LossScaler> scaler = MustCreate(LossScalerOptions());
  EXPECT_EQ(scaler->scale(), 65536.0);
  EXPECT_EQ(scaler->options().growth_factor, 2.0);
  EXPECT_EQ(scaler->options().backoff_factor, 0.5);
  EXPECT_EQ(scaler->options().growth_interval, 2000);
}

TEST(LossScalerTest, ScaleFollowsGrowthAndBackoff) {
  std::unique_ptr<LossScaler> scaler = MustCreate(Options(8.0, 3));
  // clean, clean, clean (grow), inf (back off), clean x3 (grow), inf, inf.
  const std::vector<bool> found_inf = {false, false, false, true, false,
                                       false, false, true,  true};
  const std::vector<double> scale = {8, 8, 16, 8, 8, 8, 16, 8, 4};
  const std::vector<int64_t> tracker = {1, 2, 0, 0, 1, 2, 0, 0, 0};
  for (size_t i = 0; i < found_inf.size(); ++i) {
    scaler->Update(found_inf[i]);
    EXPECT_EQ(scaler->scale(), scale[i]) << "after update " << i;
    EXPECT_EQ(scaler->growth_tracker(), tracker[i]) << "after update " << i;
  }
}

TEST(LossScalerTest, AnInfRestartsTheCountOfCleanSteps) {
  std::unique_ptr<LossScaler> scaler = MustCreate(Options(8.0, 2));
  scaler->Update(false);
  scaler->Update(true);  // 4
  scaler->Update(false);
  EXPECT_EQ(scaler->scale(), 4.0);
  scaler->Update(false);
  EXPECT_EQ(scaler->scale(), 8.0);
}

LossScalerOptions DeepSpeedOptions(double init_scale, int64_t window,
                                   int64_t hysteresis, double min_scale) {
  LossScalerOptions options = Options(init_scale, window);
  options.hysteresis = hysteresis;
  options.min_scale = min_scale;
  return options;
}

TEST(LossScalerTest, HysteresisAbsorbsTheFirstInfsUntilAGrowth) {
  // DeepSpeed's DynamicLossScaler with delayed_shift 2, scale_window 2:
  // inf (absorbed), inf (back off), inf (back off again: the allowance is
  // only restored by a growth), clean x2 (grow, restore), inf (absorbed),
  // inf (back off).
  std::unique_ptr<LossScaler> scaler =
      MustCreate(DeepSpeedOptions(64.0, 2, 2, 0.0));
  const std::vector<bool> found_inf = {true,  true, true, false,
                                       false, true, true};
  const std::vector<double> scale = {64, 32, 16, 16, 32, 32, 16};
  const std::vector<int64_t> left = {1, 1, 1, 1, 2, 1, 1};
  for (size_t i = 0; i < found_inf.size(); ++i) {
    scaler->Update(found_inf[i]);
    EXPECT_EQ(scaler->scale(), scale[i]) << "after update " << i;
    EXPECT_EQ(scaler->hysteresis_left(), left[i]) << "after update " << i;
  }
}

TEST(LossScalerTest, AnAbsorbedInfStillRestartsTheCountOfCleanSteps) {
  // DeepSpeed grows scale_window steps after the last overflow, absorbed or
  // not.
  std::unique_ptr<LossScaler> scaler =
      MustCreate(DeepSpeedOptions(64.0, 2, 2, 0.0));
  scaler->Update(false);
  scaler->Update(true);  // Absorbed.
  scaler->Update(false);
  EXPECT_EQ(scaler->scale(), 64.0);
  scaler->Update(false);
  EXPECT_EQ(scaler->scale(), 128.0);
}

TEST(LossScalerTest, BackOffStopsAtMinScale) {
  std::unique_ptr<LossScaler> scaler =
      MustCreate(DeepSpeedOptions(4.0, 1000, 1, 1.0));
  for (double expected : {2.0, 1.0, 1.0, 1.0}) {
    scaler->Update(true);
    EXPECT_EQ(scaler->scale(), expected);
  }
}

TEST(LossScalerTest, StateRoundTripKeepsTheHysteresisLeft) {
  std::unique_ptr<LossScaler> a = MustCreate(DeepSpeedOptions(64.0, 3, 3, 2.0));
  a->Update(true);
  std::unique_ptr<LossScaler> b = MustCreate(LossScalerOptions());
  ASSERT_THAT(b->LoadState(a->State()), IsOk());
  EXPECT_EQ(b->hysteresis_left(), 2);
  EXPECT_EQ(b->options().hysteresis, 3);
  EXPECT_EQ(b->options().min_scale, 2.0);
  for (bool found_inf : {true, true, true, true, true}) {
    a->Update(found_inf);
    b->Update(found_inf);
    EXPECT_EQ(a->scale(), b->scale());
    EXPECT_EQ(a->hysteresis_left(), b->hysteresis_left());
  }
}

TEST(LossScalerTest, RejectsAZeroHysteresis) {
  LossScalerOptions options;
  options.hysteresis = 0;
  EXPECT_THAT(ValidateLossScalerOptions(options).ToString(),
              HasSubstr("loss scaler hysteresis must be >= 1, got 0"));
}

TEST(LossScalerTest, RejectsANegativeMinScale) {
  LossScalerOptions options;
  options.min_scale = -1;
  EXPECT_THAT(ValidateLossScalerOptions(options).ToString(),
              HasSubstr("loss scaler min_scale must be >= 0"));
}

TEST(LossScalerTest, DoesNotGrowPastFloatRange) {
  std::unique_ptr<LossScaler> scaler =
      MustCreate(Options(std::ldexp(1.0, 127), 1));
  scaler->Update(false);
  EXPECT_EQ(scaler->scale(), std::ldexp(1.0, 127));
  EXPECT_EQ(scaler->growth_tracker(), 0);
}

TEST(LossScalerTest, ScaleHoldsFloatValues) {
  LossScalerOptions options = Options(1.0, 1);
  options.growth_factor = 1.1;
  std::unique_ptr<LossScaler> scaler = MustCreate(options);
  scaler->Update(false);
  EXPECT_EQ(scaler->scale(), static_cast<double>(1.1f));
}

TEST(LossScalerTest, UnscaleDividesByTheScale) {
  std::unique_ptr<LossScaler> scaler = MustCreate(Options(4.0, 10));
  at::Tensor grads = at::tensor({2.0f, 4.0f, -8.0f, 0.0f});
  EXPECT_TRUE(scaler->UnscaleAndCheck(grads));
  EXPECT_TRUE(at::equal(grads, at::tensor({0.5f, 1.0f, -2.0f, 0.0f})));
}

TEST(LossScalerTest, UnscaleReportsAnInf) {
  std::unique_ptr<LossScaler> scaler = MustCreate(Options(4.0, 10));
  at::Tensor grads = at::tensor({2.0f, kInf, -8.0f});
  EXPECT_FALSE(scaler->UnscaleAndCheck(grads));
  // Everything is unscaled all the same.
  EXPECT_EQ(grads[2].item<float>(), -2.0f);
}

TEST(LossScalerTest, UnscaleReportsANaN) {
  std::unique_ptr<LossScaler> scaler = MustCreate(Options(4.0, 10));
  at::Tensor grads = at::tensor({2.0f, -8.0f, kNaN});
  EXPECT_FALSE(scaler->UnscaleAndCheck(grads));
}

TEST(LossScalerTest, UnscaleFindsAnInfDeepInALargeBuffer) {
  std::unique_ptr<LossScaler> scaler = MustCreate(Options(2.0, 10));
  at::Tensor grads = at::ones({300001});
  grads[250007] = -kInf;
  EXPECT_FALSE(scaler->UnscaleAndCheck(grads));
  EXPECT_EQ(grads[300000].item<float>(), 0.5f);
}

TEST(LossScalerTest, UnscaleReportsAValueThatOverflowsWhenUnscaled) {
  LossScalerOptions options = Options(0.25, 10);
  std::unique_ptr<LossScaler> scaler = MustCreate(options);
  at::Tensor grads = at::tensor({std::numeric_limits<float>::max()});
  EXPECT_FALSE(scaler->UnscaleAndCheck(grads));
}

TEST(LossScalerTest, UnscaleHalfGradients) {
  std::unique_ptr<LossScaler> scaler = MustCreate(Options(4.0, 10));
  at::Tensor grads = at::tensor({2.0f, 4.0f}).to(at::kHalf);
  EXPECT_TRUE(scaler->UnscaleAndCheck(grads));
  EXPECT_TRUE(at::equal(grads, at::tensor({0.5f, 1.0f}).to(at::kHalf)));
}

TEST(LossScalerTest, TheHookCombinesFoundInfAcrossShards) {
  std::unique_ptr<LossScaler> scaler = MustCreate(Options(4.0, 10));
  at::Tensor clean_shard = at::ones({8});
  bool seen = true;
  // Another rank found an inf: every rank must skip the step.
  EXPECT_FALSE(scaler->UnscaleAndCheck(clean_shard, [&](bool local) {
    seen = local;
    return true;
  }));
  EXPECT_FALSE(seen);
}

TEST(LossScalerTest, TheHookCanReportAllClean) {
  std::unique_ptr<LossScaler> scaler = MustCreate(Options(4.0, 10));
  at::Tensor grads = at::ones({8});
  EXPECT_TRUE(scaler->UnscaleAndCheck(grads, [](bool local) { return local; }));
}

TEST(LossScalerTest, StateRoundTripContinuesIdentically) {
  std::unique_ptr<LossScaler> a = MustCreate(Options(1024.0, 3));
  a->Update(true);
  a->Update(false);
  a->Update(false);
  std::unique_ptr<LossScaler> b = MustCreate(LossScalerOptions());
  ASSERT_THAT(b->LoadState(a->State()), IsOk());
  EXPECT_EQ(b->scale(), 512.0);
  EXPECT_EQ(b->growth_tracker(), 2);
  EXPECT_EQ(b->options().growth_interval, 3);
  for (bool found_inf : {false, false, true, false}) {
    a->Update(found_inf);
    b->Update(found_inf);
    EXPECT_EQ(a->scale(), b->scale());
    EXPECT_EQ(a->growth_tracker(), b->growth_tracker());
  }
}

TEST(LossScalerTest, StateHasGradScalersKeys) {
  std::unique_ptr<LossScaler> scaler = MustCreate(Options(8.0, 5));
  scaler->Update(false);
  const std::vector<std::pair<std::string, double>> expected = {
      {"scale", 8.0},          {"growth_factor", 2.0},
      {"backoff_factor", 0.5}, {"growth_interval", 5.0},
      {"growth_tracker", 1.0}, {"hysteresis", 1.0},
      {"min_scale", 0.0},      {"hysteresis_left", 1.0}};
  EXPECT_EQ(scaler->State(), expected);
}

std::string LoadStateError(std::vector<std::pair<std::string, double>> state) {
  std::unique_ptr<LossScaler> scaler = MustCreate(Options(8.0, 5));
  const absl::Status status = scaler->LoadState(state);
  EXPECT_FALSE(status.ok());
  // Nothing changed.
  EXPECT_EQ(scaler->scale(), 8.0);
  EXPECT_EQ(scaler->options().growth_interval, 5);
  return status.ToString();
}

std::vector<std::pair<std::string, double>> ValidState() {
  return MustCreate(Options(64.0, 4))->State();
}

TEST(LossScalerTest, LoadStateRejectsAMissingKey) {
  std::vector<std::pair<std::string, double>> state = ValidState();
  state.pop_back();
  EXPECT_THAT(LoadStateError(state),
              HasSubstr("loss scaler state is missing key 'hysteresis_left'"));
}

TEST(LossScalerTest, LoadStateRejectsHysteresisLeftPastTheHysteresis) {
  std::vector<std::pair<std::string, double>> state = ValidState();
  for (auto& [key, value] : state) {
    if (key == "hysteresis_left") value = 2.0;
  }
  EXPECT_THAT(LoadStateError(state),
              HasSubstr("'hysteresis_left' must be in [1, hysteresis = 1], "
                        "got 2"));
}

TEST(LossScalerTest, LoadStateRejectsAnUnexpectedKey) {
  std::vector<std::pair<std::string, double>> state = ValidState();
  state.emplace_back("_scale", 1.0);
  EXPECT_THAT(LoadStateError(state),
              HasSubstr("loss scaler state has unexpected key '_scale'"));
}

TEST(LossScalerTest, LoadStateRejectsATrackerPastTheInterval) {
  std::vector<std::pair<std::string, double>> state = ValidState();
  state[4].second = 4;
  EXPECT_THAT(LoadStateError(state),
              HasSubstr("'growth_tracker' must be in [0, growth_interval = "
                        "4), got 4"));
}

TEST(LossScalerTest, LoadStateRejectsANonIntegerInterval) {
  std::vector<std::pair<std::string, double>> state = ValidState();
  state[3].second = 2.5;
  EXPECT_THAT(LoadStateError(state),
              HasSubstr("'growth_interval' must be an integer, got 2.5"));
}

TEST(LossScalerTest, LoadStateRejectsANonPositiveScale) {
  std::vector<std::pair<std::string, double>> state = ValidState();
  state[0].second = 0.0;
  EXPECT_THAT(LoadStateError(state),
              HasSubstr("loss scaler state 'scale' must be > 0"));
}

TEST(LossScalerTest, LoadStateValidatesTheFactors) {
  std::vector<std::pair<std::string, double>> state = ValidState();
  state[2].second = 1.5;
  EXPECT_THAT(LoadStateError(state),
              HasSubstr("backoff_factor must be in (0, 1], got 1.5"));
}

std::string CreateError(const LossScalerOptions& options) {
  auto scaler = LossScaler::Create(options);
  EXPECT_FALSE(scaler.ok());
  return scaler.status().ToString();
}

TEST(LossScalerTest, RejectsANonPositiveInitScale) {
  EXPECT_THAT(CreateError(Options(0.0, 10)),
              HasSubstr("loss scaler init_scale must be > 0"));
}

TEST(LossScalerTest, RejectsAGrowthFactorBelowOne) {
  LossScalerOptions options;
  options.growth_factor = 0.5;
  EXPECT_THAT(CreateError(options),
              HasSubstr("loss scaler growth_factor must be >= 1, got 0.5"));
}

TEST(LossScalerTest, RejectsAZeroBackoffFactor) {
  LossScalerOptions options;
  options.backoff_factor = 0.0;
  EXPECT_THAT(CreateError(options),
              HasSubstr("loss scaler backoff_factor must be in (0, 1], got 0"));
}

TEST(LossScalerTest, RejectsAZeroGrowthInterval) {
  EXPECT_THAT(CreateError(Options(8.0, 0)),
              HasSubstr("loss scaler growth_interval must be >= 1, got 0"));
}

}  // namespace
}  // namespace strata::optim
