#include "launch/train/schedule_fields.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <variant>

#include "absl/status/status.h"
#include "base/testing/status_matchers.h"

namespace strata::launch {
namespace {

using ::strata::testing::StatusIs;
using ::testing::HasSubstr;

optim::LrScheduleOptions Cosine() {
  optim::LrScheduleOptions o;
  o.kind = optim::LrScheduleKind::kCosine;
  o.base_lr = 3e-4;
  o.warmup_steps = 10;
  o.total_steps = 100;
  o.min_lr = 3e-5;
  return o;
}

const checkpoint::Value* Find(const checkpoint::NamedValues& fields,
                              const std::string& key) {
  for (const auto& [k, v] : fields) {
    if (k == key) return &v;
  }
  return nullptr;
}

TEST(ScheduleFieldsTest, KindIsANameAndCountsAreIntegers) {
  const checkpoint::NamedValues fields = ScheduleFields(Cosine(), 41);
  ASSERT_NE(Find(fields, "kind"), nullptr);
  EXPECT_EQ(std::get<std::string>(*Find(fields, "kind")), "cosine");
  EXPECT_EQ(std::get<int64_t>(*Find(fields, "warmup_steps")), 10);
  EXPECT_EQ(std::get<int64_t>(*Find(fields, "last_step")), 41);
  EXPECT_EQ(std::get<double>(*Find(fields, "base_lr")), 3e-4);
}

TEST(ScheduleFieldsTest, RoundTripsTheScheduleAndLastStep) {
  auto restored = ScheduleFromFields(ScheduleFields(Cosine(), 41));
  ASSERT_TRUE(restored.ok()) << restored.status();
  EXPECT_EQ(restored->last_step, 41);
  auto original = optim::LrSchedule::Create(Cosine());
  ASSERT_TRUE(original.ok());
  for (int64_t step : {0, 5, 10, 50, 99, 120}) {
    EXPECT_EQ(restored->schedule->LrAt(step), (*original)->LrAt(step)) << step;
  }
}

TEST(ScheduleFieldsTest, ReadsTheEarlierAllDoublesLayout) {
  auto original = optim::LrSchedule::Create(Cosine());
  ASSERT_TRUE(original.ok());
  checkpoint::NamedValues legacy;
  for (const auto& [key, value] : (*original)->State(7)) {
    legacy.emplace_back(key, value);
  }
  auto restored = ScheduleFromFields(legacy);
  ASSERT_TRUE(restored.ok()) << restored.status();
  EXPECT_EQ(restored->last_step, 7);
  EXPECT_EQ(restored->schedule->options().kind, optim::LrScheduleKind::kCosine);
}

TEST(ScheduleFieldsTest, RoundTripsADeepSpeedSchedule) {
  optim::LrScheduleOptions o;
  o.kind = optim::LrScheduleKind::kWarmupCosineLr;
  o.base_lr = 1e-3;
  o.warmup_steps = 5;
  o.total_steps = 50;
  o.warmup_type = "linear";
  o.warmup_min_ratio = 0.2;
  o.min_ratio = 0.05;
  const checkpoint::NamedValues fields = ScheduleFields(o, 7);
  EXPECT_EQ(std::get<std::string>(*Find(fields, "warmup_type")), "linear");
  EXPECT_EQ(std::get<double>(*Find(fields, "min_ratio")), 0.05);
  auto restored = ScheduleFromFields(fields);
  ASSERT_TRUE(restored.ok()) << restored.status();
  auto original = optim::LrSchedule::Create(o);
  ASSERT_TRUE(original.ok());
  EXPECT_EQ(restored->schedule->State(7), (*original)->State(7));
}

TEST(ScheduleFieldsTest, ReadsFieldsWrittenBeforeDeepSpeedsSchedules) {
  checkpoint::NamedValues fields = ScheduleFields(Cosine(), 3);
  fields.resize(8);  // No warmup_type, warmup_min_ratio, min_ratio.
  auto restored = ScheduleFromFields(fields);
  ASSERT_TRUE(restored.ok()) << restored.status();
  EXPECT_EQ(restored->schedule->options().warmup_type, "linear");
  EXPECT_EQ(restored->schedule->options().min_ratio, 0.0);
}

TEST(ScheduleFieldsTest, AnUnknownKindIsNamed) {
  checkpoint::NamedValues fields = ScheduleFields(Cosine(), 1);
  for (auto& [key, value] : fields) {
    if (key == "kind") value = std::string("exponential");
  }
  const absl::Status status = ScheduleFromFields(fields).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(),
            "param_scheduler: field 'kind': must be constant, cosine, linear, "
            "step, warmup_lr, warmup_decay_lr or warmup_cosine_lr, got "
            "'exponential'");
}

TEST(ScheduleFieldsTest, AWronglyTypedFieldIsNamed) {
  checkpoint::NamedValues fields = ScheduleFields(Cosine(), 1);
  for (auto& [key, value] : fields) {
    if (key == "total_steps") value = 100.5;
  }
  EXPECT_THAT(ScheduleFromFields(fields).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("'total_steps' must be an integer")));
}

TEST(ScheduleFieldsTest, MissingAndUnknownFieldsAreNamed) {
  checkpoint::NamedValues fields = ScheduleFields(Cosine(), 1);
  fields.erase(std::find_if(fields.begin(), fields.end(), [](const auto& kv) {
    return kv.first == "last_step";
  }));
  EXPECT_THAT(ScheduleFromFields(fields).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("missing field 'last_step'")));
  fields = ScheduleFields(Cosine(), 1);
  fields.emplace_back("momentum", 0.9);
  EXPECT_THAT(ScheduleFromFields(fields).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("unknown field 'momentum'")));
}

TEST(ScheduleFieldsTest, AnUnknownKindIsRejected) {
  checkpoint::NamedValues fields = ScheduleFields(Cosine(), 1);
  fields[0].second = std::string("exponential");
  EXPECT_THAT(
      ScheduleFromFields(fields).status(),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("exponential")));
}

}  // namespace
}  // namespace strata::launch
