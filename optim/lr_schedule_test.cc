#include "optim/lr_schedule.h"

#include <glog/logging.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "base/testing/status_matchers.h"

namespace strata::optim {
namespace {

using ::strata::testing::IsOk;
using ::strata::testing::StatusIs;

using ::testing::HasSubstr;

// Options of the kind named `kind` (ParseLrScheduleKind's spelling).
LrScheduleOptions Options(const std::string& kind) {
  LrScheduleOptions options;
  absl::StatusOr<LrScheduleKind> parsed = ParseLrScheduleKind(kind);
  CHECK(parsed.ok()) << parsed.status();
  options.kind = *parsed;
  options.base_lr = 1.0;
  return options;
}

std::unique_ptr<LrSchedule> MustCreate(const LrScheduleOptions& options) {
  auto schedule = LrSchedule::Create(options);
  EXPECT_THAT(schedule, IsOk());
  return *std::move(schedule);
}

TEST(LrScheduleTest, WarmupRisesLinearlyToBaseLr) {
  LrScheduleOptions options = Options("constant");
  options.warmup_steps = 4;
  std::unique_ptr<LrSchedule> schedule = MustCreate(options);
  EXPECT_DOUBLE_EQ(schedule->LrAt(0), 0.25);
  EXPECT_DOUBLE_EQ(schedule->LrAt(1), 0.5);
  EXPECT_DOUBLE_EQ(schedule->LrAt(2), 0.75);
  EXPECT_DOUBLE_EQ(schedule->LrAt(3), 1.0);
  EXPECT_DOUBLE_EQ(schedule->LrAt(4), 1.0);
}

TEST(LrScheduleTest, ConstantStaysAtBaseLr) {
  std::unique_ptr<LrSchedule> schedule = MustCreate(Options("constant"));
  EXPECT_DOUBLE_EQ(schedule->LrAt(0), 1.0);
  EXPECT_DOUBLE_EQ(schedule->LrAt(1000000), 1.0);
}

TEST(LrScheduleTest, CosineFallsFromBaseLrToMinLr) {
  LrScheduleOptions options = Options("cosine");
  options.total_steps = 10;
  options.min_lr = 0.1;
  std::unique_ptr<LrSchedule> schedule = MustCreate(options);
  EXPECT_DOUBLE_EQ(schedule->LrAt(0), 1.0);
  // cos(pi / 2) = 0: half-way between base_lr and min_lr.
  EXPECT_NEAR(schedule->LrAt(5), 0.55, 1e-15);
  // cos(pi / 5): 0.1 + 0.9 * (1 + 0.80901699437494745) / 2.
  EXPECT_NEAR(schedule->LrAt(2), 0.1 + 0.45 * (1 + 0.80901699437494745), 1e-15);
  EXPECT_DOUBLE_EQ(schedule->LrAt(10), 0.1);
  EXPECT_DOUBLE_EQ(schedule->LrAt(25), 0.1);
}

TEST(LrScheduleTest, CosineStartsAfterWarmup) {
  LrScheduleOptions options = Options("cosine");
  options.warmup_steps = 2;
  options.total_steps = 12;
  std::unique_ptr<LrSchedule> schedule = MustCreate(options);
  EXPECT_DOUBLE_EQ(schedule->LrAt(0), 0.5);
  EXPECT_DOUBLE_EQ(schedule->LrAt(2), 1.0);
  EXPECT_NEAR(schedule->LrAt(7), 0.5, 1e-15);
  EXPECT_DOUBLE_EQ(schedule->LrAt(12), 0.0);
}

TEST(LrScheduleTest, LinearFallsToMinLr) {
  LrScheduleOptions options = Options("linear");
  options.warmup_steps = 2;
  options.total_steps = 6;
  std::unique_ptr<LrSchedule> schedule = MustCreate(options);
  EXPECT_DOUBLE_EQ(schedule->LrAt(1), 1.0);
  EXPECT_DOUBLE_EQ(schedule->LrAt(2), 1.0);
  EXPECT_DOUBLE_EQ(schedule->LrAt(3), 0.75);
  EXPECT_DOUBLE_EQ(schedule->LrAt(4), 0.5);
  EXPECT_DOUBLE_EQ(schedule->LrAt(5), 0.25);
  EXPECT_DOUBLE_EQ(schedule->LrAt(6), 0.0);
  EXPECT_DOUBLE_EQ(schedule->LrAt(100), 0.0);
}

TEST(LrScheduleTest, LinearStopsAtANonZeroMinLr) {
  LrScheduleOptions options = Options("linear");
  options.total_steps = 4;
  options.min_lr = 0.2;
  std::unique_ptr<LrSchedule> schedule = MustCreate(options);
  EXPECT_DOUBLE_EQ(schedule->LrAt(2), 0.6);
  EXPECT_DOUBLE_EQ(schedule->LrAt(4), 0.2);
}

TEST(LrScheduleTest, StepMultipliesByGammaEveryStepSizeSteps) {
  LrScheduleOptions options = Options("step");
  options.warmup_steps = 1;
  options.step_size = 3;
  options.gamma = 0.5;
  std::unique_ptr<LrSchedule> schedule = MustCreate(options);
  EXPECT_DOUBLE_EQ(schedule->LrAt(0), 1.0);
  EXPECT_DOUBLE_EQ(schedule->LrAt(1), 1.0);
  EXPECT_DOUBLE_EQ(schedule->LrAt(3), 1.0);
  EXPECT_DOUBLE_EQ(schedule->LrAt(4), 0.5);
  EXPECT_DOUBLE_EQ(schedule->LrAt(6), 0.5);
  EXPECT_DOUBLE_EQ(schedule->LrAt(7), 0.25);
  EXPECT_DOUBLE_EQ(schedule->LrAt(31), std::pow(0.5, 10));
}

std::string ValidationError(const LrScheduleOptions& options) {
  const absl::Status status = ValidateLrScheduleOptions(options);
  EXPECT_FALSE(status.ok());
  EXPECT_FALSE(LrSchedule::Create(options).ok());
  return status.ToString();
}

TEST(LrScheduleTest, RejectsAKindOutsideTheEnum) {
  LrScheduleOptions options = Options("constant");
  options.kind = static_cast<LrScheduleKind>(7);
  EXPECT_THAT(ValidationError(options),
              HasSubstr("lr_schedule kind must be an LrScheduleKind, got "
                        "code 7"));
}

TEST(LrScheduleKindTest, UnknownNameNamesTheGivenField) {
  EXPECT_THAT(ParseLrScheduleKind("exponential", "lr_schedule field 'kind'"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("lr_schedule field 'kind': must be "
                                 "constant, cosine, linear, step, warmup_lr, "
                                 "warmup_decay_lr or warmup_cosine_lr, got "
                                 "'exponential'")));
}

TEST(LrScheduleKindTest, SavedCodesAreTheEnumValues) {
  EXPECT_EQ(static_cast<int>(LrScheduleKind::kConstant), 0);
  EXPECT_EQ(static_cast<int>(LrScheduleKind::kStep), 3);
  EXPECT_EQ(static_cast<int>(LrScheduleKind::kWarmupCosineLr), 6);
}

TEST(LrScheduleKindTest, NamesRoundTrip) {
  for (LrScheduleKind kind :
       {LrScheduleKind::kConstant, LrScheduleKind::kCosine,
        LrScheduleKind::kLinear, LrScheduleKind::kStep,
        LrScheduleKind::kWarmupLr, LrScheduleKind::kWarmupDecayLr,
        LrScheduleKind::kWarmupCosineLr}) {
    ASSERT_OK_AND_ASSIGN(const LrScheduleKind parsed,
                         ParseLrScheduleKind(LrScheduleKindName(kind)));
    EXPECT_EQ(parsed, kind) << LrScheduleKindName(kind);
  }
}

TEST(LrScheduleKindTest, Names) {
  EXPECT_EQ(LrScheduleKindName(LrScheduleKind::kConstant), "constant");
  EXPECT_EQ(LrScheduleKindName(LrScheduleKind::kCosine), "cosine");
  EXPECT_EQ(LrScheduleKindName(LrScheduleKind::kLinear), "linear");
  EXPECT_EQ(LrScheduleKindName(LrScheduleKind::kStep), "step");
  EXPECT_EQ(LrScheduleKindName(LrScheduleKind::kWarmupLr), "warmup_lr");
  EXPECT_EQ(LrScheduleKindName(LrScheduleKind::kWarmupDecayLr),
            "warmup_decay_lr");
  EXPECT_EQ(LrScheduleKindName(LrScheduleKind::kWarmupCosineLr),
            "warmup_cosine_lr");
}

TEST(LrScheduleKindTest, DeepSpeedSchedulesAreTheWarmupKinds) {
  EXPECT_TRUE(IsDeepSpeedSchedule(LrScheduleKind::kWarmupLr));
  EXPECT_TRUE(IsDeepSpeedSchedule(LrScheduleKind::kWarmupCosineLr));
  EXPECT_FALSE(IsDeepSpeedSchedule(LrScheduleKind::kCosine));
}

TEST(LrScheduleKindTest, UnknownNameNamesTheFlagAndTheChoices) {
  EXPECT_THAT(ParseLrScheduleKind("Cosine"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "--lr_schedule: must be constant, cosine, linear, "
                       "step, warmup_lr, warmup_decay_lr or "
                       "warmup_cosine_lr, got 'Cosine'"));
}

TEST(LrScheduleTest, RejectsCosineWithoutStepsAfterWarmup) {
  LrScheduleOptions options = Options("cosine");
  options.warmup_steps = 10;
  options.total_steps = 10;
  EXPECT_THAT(ValidationError(options),
              HasSubstr("lr_schedule 'cosine' needs total_steps > "
                        "warmup_steps, got total_steps 10 and warmup_steps "
                        "10"));
}

TEST(LrScheduleTest, RejectsLinearWithoutTotalSteps) {
  EXPECT_THAT(ValidationError(Options("linear")),
              HasSubstr("lr_schedule 'linear' needs total_steps > "
                        "warmup_steps, got total_steps 0"));
}

TEST(LrScheduleTest, RejectsMinLrAboveBaseLr) {
  LrScheduleOptions options = Options("cosine");
  options.total_steps = 10;
  options.min_lr = 2.0;
  EXPECT_THAT(ValidationError(options),
              HasSubstr("needs 0 <= min_lr <= base_lr, got min_lr 2 and "
                        "base_lr 1"));
}

TEST(LrScheduleTest, RejectsNegativeBaseLr) {
  LrScheduleOptions options = Options("constant");
  options.base_lr = -1e-3;
  EXPECT_THAT(ValidationError(options),
              HasSubstr("lr_schedule 'constant' needs base_lr >= 0, got "
                        "-0.001"));
}

TEST(LrScheduleTest, RejectsNegativeWarmupSteps) {
  LrScheduleOptions options = Options("constant");
  options.warmup_steps = -1;
  EXPECT_THAT(ValidationError(options),
              HasSubstr("needs warmup_steps >= 0, got -1"));
}

TEST(LrScheduleTest, RejectsStepWithoutStepSize) {
  EXPECT_THAT(ValidationError(Options("step")),
              HasSubstr("lr_schedule 'step' needs step_size > 0, got 0"));
}

TEST(LrScheduleTest, RejectsNonPositiveGamma) {
  LrScheduleOptions options = Options("step");
  options.step_size = 2;
  options.gamma = 0.0;
  EXPECT_THAT(ValidationError(options),
              HasSubstr("lr_schedule 'step' needs gamma > 0, got 0"));
}

TEST(LrScheduleTest, StateRoundTripGivesTheSameSchedule) {
  LrScheduleOptions options = Options("cosine");
  options.base_lr = 3e-4;
  options.warmup_steps = 5;
  options.total_steps = 50;
  options.min_lr = 1e-5;
  std::unique_ptr<LrSchedule> schedule = MustCreate(options);
  auto restored = LrSchedule::FromState(schedule->State(41));
  ASSERT_THAT(restored, IsOk());
  EXPECT_EQ(restored->last_step, 41);
  EXPECT_EQ(restored->schedule->options().kind, LrScheduleKind::kCosine);
  for (int64_t step = 0; step < 60; ++step) {
    EXPECT_EQ(restored->schedule->LrAt(step), schedule->LrAt(step)) << step;
  }
}

TEST(LrScheduleTest, StateHasNamedValues) {
  LrScheduleOptions options = Options("step");
  options.step_size = 7;
  const std::vector<std::pair<std::string, double>> state =
      MustCreate(options)->State(-1);
  const std::vector<std::pair<std::string, double>> expected = {
      {"kind", 3.0},         {"base_lr", 1.0},
      {"warmup_steps", 0.0}, {"total_steps", 0.0},
      {"min_lr", 0.0},       {"step_size", 7.0},
      {"gamma", 0.1},        {"last_step", -1.0},
      {"warmup_type", 0.0},  {"warmup_min_ratio", 0.0},
      {"min_ratio", 0.0}};
  EXPECT_EQ(state, expected);
}

// A state saved before DeepSpeed's kinds has 8 keys; the later 3 take their
// defaults.
TEST(LrScheduleTest, FromStateReadsAStateWithoutTheLaterKeys) {
  LrScheduleOptions options = Options("linear");
  options.total_steps = 100;
  std::vector<std::pair<std::string, double>> state =
      MustCreate(options)->State(9);
  state.resize(8);
  auto restored = LrSchedule::FromState(state);
  ASSERT_THAT(restored, IsOk());
  EXPECT_EQ(restored->last_step, 9);
  EXPECT_EQ(restored->schedule->options().kind, LrScheduleKind::kLinear);
  EXPECT_EQ(restored->schedule->options().warmup_type, "linear");
  EXPECT_EQ(restored->schedule->LrAt(50), MustCreate(options)->LrAt(50));
}

TEST(LrScheduleTest, StateRoundTripKeepsTheDeepSpeedOptions) {
  LrScheduleOptions options = Options("warmup_cosine_lr");
  options.warmup_steps = 4;
  options.total_steps = 14;
  options.warmup_type = "log";
  options.warmup_min_ratio = 0.1;
  options.min_ratio = 0.01;
  std::unique_ptr<LrSchedule> schedule = MustCreate(options);
  auto restored = LrSchedule::FromState(schedule->State(3));
  ASSERT_THAT(restored, IsOk());
  EXPECT_EQ(restored->schedule->State(3), schedule->State(3));
  for (int64_t step = 0; step < 20; ++step) {
    EXPECT_EQ(restored->schedule->LrAt(step), schedule->LrAt(step)) << step;
  }
}

std::vector<std::pair<std::string, double>> ValidState() {
  LrScheduleOptions options = Options("linear");
  options.total_steps = 100;
  return MustCreate(options)->State(9);
}

std::string FromStateError(
    const std::vector<std::pair<std::string, double>>& state) {
  auto restored = LrSchedule::FromState(state);
  EXPECT_FALSE(restored.ok());
  return restored.status().ToString();
}

TEST(LrScheduleTest, FromStateRejectsAMissingKey) {
  std::vector<std::pair<std::string, double>> state = ValidState();
  state.erase(state.begin() + 3);
  EXPECT_THAT(FromStateError(state),
              HasSubstr("lr_schedule state is missing key 'total_steps'"));
}

TEST(LrScheduleTest, FromStateRejectsAnUnexpectedKey) {
  std::vector<std::pair<std::string, double>> state = ValidState();
  state.emplace_back("eta_min", 0.0);
  EXPECT_THAT(FromStateError(state),
              HasSubstr("lr_schedule state has unexpected key 'eta_min'"));
}

TEST(LrScheduleTest, FromStateRejectsANonIntegerStepCount) {
  std::vector<std::pair<std::string, double>> state = ValidState();
  state[2].second = 2.5;
  EXPECT_THAT(FromStateError(state),
              HasSubstr("lr_schedule state 'warmup_steps' must be an integer, "
                        "got 2.5"));
}

TEST(LrScheduleTest, FromStateRejectsAnUnknownKind) {
  std::vector<std::pair<std::string, double>> state = ValidState();
  state[0].second = 7;
  EXPECT_THAT(FromStateError(state),
              HasSubstr("lr_schedule state 'kind' must be 0 (constant)"));
}

TEST(LrScheduleTest, FromStateValidatesTheOptions) {
  std::vector<std::pair<std::string, double>> state = ValidState();
  state[3].second = 0;  // total_steps
  EXPECT_THAT(FromStateError(state),
              HasSubstr("lr_schedule state: lr_schedule 'linear' needs "
                        "total_steps > warmup_steps"));
}

TEST(LrScheduleTest, FromStateRejectsALastStepBelowMinusOne) {
  std::vector<std::pair<std::string, double>> state = ValidState();
  state[7].second = -2;
  EXPECT_THAT(FromStateError(state),
              HasSubstr("'last_step' must be >= -1, got -2"));
}

// DeepSpeed's schedules, against values of DeepSpeed's formulas
// (deepspeed/runtime/lr_schedules.py) evaluated in Python's doubles: step s
// runs at DeepSpeed's value for last_batch_iteration s - 1, step 0 at the lr
// the scheduler set when it was built.
LrScheduleOptions DeepSpeed(const std::string& kind, double base_lr,
                            double min_lr, int64_t warmup, int64_t total,
                            const std::string& warmup_type) {
  LrScheduleOptions options = Options(kind);
  options.base_lr = base_lr;
  options.min_lr = min_lr;
  options.warmup_steps = warmup;
  options.total_steps = total;
  options.warmup_type = warmup_type;
  return options;
}

TEST(DeepSpeedLrScheduleTest, WarmupLrLogRisesFromMinToMaxLr) {
  // WarmupLR(warmup_min_lr=1e-5, warmup_max_lr=1e-3, warmup_num_steps=10).
  std::unique_ptr<LrSchedule> s =
      MustCreate(DeepSpeed("warmup_lr", 1e-3, 1e-5, 10, 0, "log"));
  EXPECT_DOUBLE_EQ(s->LrAt(0), 1e-5);  // Set when DeepSpeed builds it.
  EXPECT_DOUBLE_EQ(s->LrAt(1), 1e-5);  // ln(1) = 0.
  EXPECT_DOUBLE_EQ(s->LrAt(2), 0.0003080196957073414);
  EXPECT_DOUBLE_EQ(s->LrAt(5), 0.0007019803042926585);
  EXPECT_DOUBLE_EQ(s->LrAt(10), 0.0009999999999999998);
  EXPECT_DOUBLE_EQ(s->LrAt(11), 1e-3);
  EXPECT_DOUBLE_EQ(s->LrAt(1000), 1e-3);
}

TEST(DeepSpeedLrScheduleTest, WarmupLrLinearRisesByEqualSteps) {
  std::unique_ptr<LrSchedule> s =
      MustCreate(DeepSpeed("warmup_lr", 1e-3, 1e-5, 10, 0, "linear"));
  EXPECT_DOUBLE_EQ(s->LrAt(0), 1e-5);
  EXPECT_DOUBLE_EQ(s->LrAt(1), 1e-5);
  EXPECT_DOUBLE_EQ(s->LrAt(2), 0.000109);
  EXPECT_DOUBLE_EQ(s->LrAt(5), 0.00040600000000000006);
  EXPECT_DOUBLE_EQ(s->LrAt(10), 0.000901);
  EXPECT_DOUBLE_EQ(s->LrAt(11), 1e-3);
}

TEST(DeepSpeedLrScheduleTest, WarmupTakesAtLeastTwoSteps) {
  // warmup_num_steps 0: DeepSpeed uses max(2, 0) = 2.
  std::unique_ptr<LrSchedule> s =
      MustCreate(DeepSpeed("warmup_lr", 1.0, 0.0, 0, 0, "log"));
  EXPECT_DOUBLE_EQ(s->LrAt(0), 0.0);
  EXPECT_DOUBLE_EQ(s->LrAt(1), 0.0);
  EXPECT_DOUBLE_EQ(s->LrAt(2), 1.0);
}

TEST(DeepSpeedLrScheduleTest, WarmupDecayLrFallsLinearlyToMinLr) {
  // WarmupDecayLR(total_num_steps=20, 1e-5, 1e-3, warmup_num_steps=4).
  std::unique_ptr<LrSchedule> s =
      MustCreate(DeepSpeed("warmup_decay_lr", 1e-3, 1e-5, 4, 20, "log"));
  EXPECT_DOUBLE_EQ(s->LrAt(0), 1e-5);
  EXPECT_DOUBLE_EQ(s->LrAt(1), 1e-5);
  EXPECT_DOUBLE_EQ(s->LrAt(4), 1e-3);
  EXPECT_DOUBLE_EQ(s->LrAt(5), 1e-3);
  EXPECT_DOUBLE_EQ(s->LrAt(6), 0.000938125);
  EXPECT_DOUBLE_EQ(s->LrAt(10), 0.000690625);
  EXPECT_DOUBLE_EQ(s->LrAt(20), 7.1875e-05);
  EXPECT_DOUBLE_EQ(s->LrAt(21), 1e-5);
  EXPECT_DOUBLE_EQ(s->LrAt(30), 1e-5);
}

TEST(DeepSpeedLrScheduleTest, WarmupCosineLrScalesTheOptimizersLr) {
  // WarmupCosineLR(total_num_steps=14, warmup_min_ratio=0.1,
  // warmup_num_steps=4, cos_min_ratio=0.01, warmup_type="linear") over an
  // optimizer lr of 2e-3.
  LrScheduleOptions options =
      DeepSpeed("warmup_cosine_lr", 2e-3, 0.0, 4, 14, "linear");
  options.warmup_min_ratio = 0.1;
  options.min_ratio = 0.01;
  std::unique_ptr<LrSchedule> s = MustCreate(options);
  EXPECT_DOUBLE_EQ(s->LrAt(0), 0.0);  // DeepSpeed's first step.
  EXPECT_DOUBLE_EQ(s->LrAt(1), 0.0002);
  EXPECT_DOUBLE_EQ(s->LrAt(3), 0.0011);
  EXPECT_DOUBLE_EQ(s->LrAt(4), 0.0015500000000000002);
  EXPECT_DOUBLE_EQ(s->LrAt(5), 0.0019515459511322021);
  EXPECT_DOUBLE_EQ(s->LrAt(6), 0.001810926824431198);
  EXPECT_DOUBLE_EQ(s->LrAt(12), 0.0002090731755688021);
  EXPECT_DOUBLE_EQ(s->LrAt(14), 2e-05);
  // Not clamped after total_num_steps, as DeepSpeed's.
  EXPECT_DOUBLE_EQ(s->LrAt(20), 0.0013159268244311976);
}

TEST(DeepSpeedLrScheduleTest, RejectsALogWarmupForStratasOwnKinds) {
  LrScheduleOptions options = Options("constant");
  options.warmup_type = "log";
  EXPECT_THAT(ValidationError(options),
              HasSubstr("lr_schedule 'constant' warms up linearly; "
                        "warmup_type 'log' is for warmup_lr"));
  options.warmup_type = "exp";
  EXPECT_THAT(ValidationError(options),
              HasSubstr("needs warmup_type linear or log, got 'exp'"));
}

TEST(DeepSpeedLrScheduleTest, RejectsACosineWithoutStepsAfterTheWarmup) {
  EXPECT_THAT(
      ValidationError(DeepSpeed("warmup_cosine_lr", 1.0, 0.0, 1, 2, "log")),
      HasSubstr("needs total_steps != max(2, warmup_steps)"));
}

TEST(DeepSpeedLrScheduleTest, RejectsRatiosOutsideZeroToOne) {
  LrScheduleOptions options =
      DeepSpeed("warmup_cosine_lr", 1.0, 0.0, 4, 10, "log");
  options.min_ratio = 1.5;
  EXPECT_THAT(ValidationError(options),
              HasSubstr("needs min_ratio in [0, 1], got 1.5"));
}

}  // namespace
}  // namespace strata::optim
