#include "optim/lr_schedule_state.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <variant>

#include "absl/status/status.h"
#include "base/testing/status_matchers.h"

namespace strata::optim {
namespace {

using ::strata::testing::StatusIs;
using ::testing::HasSubstr;

LrScheduleOptions Cosine() {
  LrScheduleOptions o;
  o.kind = LrScheduleKind::kCosine;
  o.base_lr = 3e-4;
  o.warmup_steps = 10;
  o.total_steps = 100;
  o.min_lr = 3e-5;
  return o;
}

const StateValue* Find(const NamedValues& fields, const std::string& key) {
  for (const auto& [k, v] : fields) {
    if (k == key) return &v;
  }
  return nullptr;
}

TEST(LrScheduleStateTest, KindIsANameAndCountsAreIntegers) {
  const NamedValues fields = LrScheduleFields(Cosine(), 41);
  ASSERT_NE(Find(fields, "kind"), nullptr);
  EXPECT_EQ(std::get<std::string>(*Find(fields, "kind")), "cosine");
  EXPECT_EQ(std::get<int64_t>(*Find(fields, "warmup_steps")), 10);
  EXPECT_EQ(std::get<int64_t>(*Find(fields, "last_step")), 41);
  EXPECT_EQ(std::get<double>(*Find(fields, "base_lr")), 3e-4);
}

TEST(LrScheduleStateTest, RoundTripsTheScheduleAndLastStep) {
  auto restored = LrScheduleFromFields(LrScheduleFields(Cosine(), 41));
  ASSERT_TRUE(restored.ok()) << restored.status();
  EXPECT_EQ(restored->last_step, 41);
  auto original = LrSchedule::Create(Cosine());
  ASSERT_TRUE(original.ok());
  for (int64_t step : {0, 5, 10, 50, 99, 120}) {
    EXPECT_EQ(restored->schedule->LrAt(step), (*original)->LrAt(step)) << step;
  }
}

TEST(LrScheduleStateTest, ReadsTheEarlierAllDoublesLayout) {
  auto original = LrSchedule::Create(Cosine());
  ASSERT_TRUE(original.ok());
  NamedValues legacy;
  for (const auto& [key, value] : (*original)->State(7)) {
    legacy.emplace_back(key, value);
  }
  auto restored = LrScheduleFromFields(legacy);
  ASSERT_TRUE(restored.ok()) << restored.status();
  EXPECT_EQ(restored->last_step, 7);
  EXPECT_EQ(restored->schedule->options().kind, LrScheduleKind::kCosine);
}

TEST(LrScheduleStateTest, RoundTripsADeepSpeedSchedule) {
  LrScheduleOptions o;
  o.kind = LrScheduleKind::kWarmupCosineLr;
  o.base_lr = 1e-3;
  o.warmup_steps = 5;
  o.total_steps = 50;
  o.warmup_type = "linear";
  o.warmup_min_ratio = 0.2;
  o.min_ratio = 0.05;
  const NamedValues fields = LrScheduleFields(o, 7);
  EXPECT_EQ(std::get<std::string>(*Find(fields, "warmup_type")), "linear");
  EXPECT_EQ(std::get<double>(*Find(fields, "min_ratio")), 0.05);
  auto restored = LrScheduleFromFields(fields);
  ASSERT_TRUE(restored.ok()) << restored.status();
  auto original = LrSchedule::Create(o);
  ASSERT_TRUE(original.ok());
  EXPECT_EQ(restored->schedule->State(7), (*original)->State(7));
}

TEST(LrScheduleStateTest, ReadsFieldsWrittenBeforeDeepSpeedsSchedules) {
  NamedValues fields = LrScheduleFields(Cosine(), 3);
  fields.resize(8);  // No warmup_type, warmup_min_ratio, min_ratio.
  auto restored = LrScheduleFromFields(fields);
  ASSERT_TRUE(restored.ok()) << restored.status();
  EXPECT_EQ(restored->schedule->options().warmup_type, "linear");
  EXPECT_EQ(restored->schedule->options().min_ratio, 0.0);
}

TEST(LrScheduleStateTest, AnUnknownKindIsNamed) {
  NamedValues fields = LrScheduleFields(Cosine(), 1);
  for (auto& [key, value] : fields) {
    if (key == "kind") value = std::string("exponential");
  }
  const absl::Status status = LrScheduleFromFields(fields).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(),
            "param_scheduler: field 'kind': must be constant, cosine, linear, "
            "step, warmup_lr, warmup_decay_lr or warmup_cosine_lr, got "
            "'exponential'");
}

TEST(LrScheduleStateTest, AWronglyTypedFieldIsNamed) {
  NamedValues fields = LrScheduleFields(Cosine(), 1);
  for (auto& [key, value] : fields) {
    if (key == "total_steps") value = 100.5;
  }
  EXPECT_THAT(LrScheduleFromFields(fields).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("'total_steps' must be an integer")));
}

TEST(LrScheduleStateTest, MissingAndUnknownFieldsAreNamed) {
  NamedValues fields = LrScheduleFields(Cosine(), 1);
  fields.erase(std::find_if(fields.begin(), fields.end(), [](const auto& kv) {
    return kv.first == "last_step";
  }));
  EXPECT_THAT(LrScheduleFromFields(fields).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("missing field 'last_step'")));
  fields = LrScheduleFields(Cosine(), 1);
  fields.emplace_back("momentum", 0.9);
  EXPECT_THAT(LrScheduleFromFields(fields).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("unknown field 'momentum'")));
}

TEST(LrScheduleStateTest, AnUnknownKindIsRejected) {
  NamedValues fields = LrScheduleFields(Cosine(), 1);
  fields[0].second = std::string("exponential");
  EXPECT_THAT(
      LrScheduleFromFields(fields).status(),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("exponential")));
}

}  // namespace
}  // namespace strata::optim
