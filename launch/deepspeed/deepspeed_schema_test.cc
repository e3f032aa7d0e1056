#include "launch/deepspeed/deepspeed_schema.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

#include "absl/strings/str_split.h"

namespace strata::launch {
namespace {

TEST(DeepSpeedSchemaTest, PathsAreUnique) {
  std::set<std::string> seen;
  for (const DeepSpeedKeySpec& spec : DeepSpeedKeySchema()) {
    EXPECT_TRUE(seen.insert(spec.path).second) << spec.path;
  }
}

TEST(DeepSpeedSchemaTest, EveryNestedKeyHasItsSectionBeforeIt) {
  std::set<std::string> sections;
  for (const DeepSpeedKeySpec& spec : DeepSpeedKeySchema()) {
    const size_t dot = spec.path.rfind('.');
    if (dot != std::string::npos) {
      EXPECT_EQ(sections.count(spec.path.substr(0, dot)), 1u) << spec.path;
    }
    if (spec.kind == DeepSpeedKind::kSection) sections.insert(spec.path);
  }
}

// A default that its own range or accepted values reject would make every
// config without the key invalid.
TEST(DeepSpeedSchemaTest, EveryDefaultIsInItsOwnRange) {
  for (const DeepSpeedKeySpec& spec : DeepSpeedKeySchema()) {
    double x = 0;
    if (const auto* i = std::get_if<int64_t>(&spec.fallback)) {
      x = static_cast<double>(*i);
    } else if (const auto* d = std::get_if<double>(&spec.fallback)) {
      x = *d;
    } else {
      continue;
    }
    if (spec.min) {
      EXPECT_TRUE(spec.min_exclusive ? x > *spec.min : x >= *spec.min)
          << spec.path;
    }
    if (spec.max) {
      EXPECT_TRUE(spec.max_exclusive ? x < *spec.max : x <= *spec.max)
          << spec.path;
    }
  }
}

TEST(DeepSpeedSchemaTest, DefaultsAreDeepSpeeds) {
  const DeepSpeedKeySpec* stage = FindDeepSpeedKey("zero_optimization.stage");
  ASSERT_NE(stage, nullptr);
  EXPECT_EQ(std::get<int64_t>(stage->fallback), 0);
  const DeepSpeedKeySpec* bucket =
      FindDeepSpeedKey("zero_optimization.reduce_bucket_size");
  ASSERT_NE(bucket, nullptr);
  EXPECT_EQ(std::get<int64_t>(bucket->fallback), 500000000);
  const DeepSpeedKeySpec* power = FindDeepSpeedKey("fp16.initial_scale_power");
  ASSERT_NE(power, nullptr);
  EXPECT_EQ(std::get<int64_t>(power->fallback), 16);
  const DeepSpeedKeySpec* warmup =
      FindDeepSpeedKey("scheduler.params.warmup_type");
  ASSERT_NE(warmup, nullptr);
  EXPECT_EQ(std::get<std::string>(warmup->fallback), "log");
}

TEST(DeepSpeedSchemaTest, UnknownPathsAreNotFound) {
  EXPECT_EQ(FindDeepSpeedKey("zero_optimization.stages"), nullptr);
  EXPECT_EQ(FindDeepSpeedKey(""), nullptr);
}

TEST(DeepSpeedSchemaTest, OptimizerParametersFollowTheType) {
  const auto& adam = OptimizerParamKeys("adam");
  EXPECT_NE(std::find(adam.begin(), adam.end(), "betas"), adam.end());
  EXPECT_EQ(std::find(adam.begin(), adam.end(), "momentum"), adam.end());
  const auto& sgd = OptimizerParamKeys("sgd");
  EXPECT_NE(std::find(sgd.begin(), sgd.end(), "nesterov"), sgd.end());
  EXPECT_TRUE(OptimizerParamKeys("lamb").empty());
}

TEST(DeepSpeedSchemaTest, EveryTypedParameterIsASchemaKey) {
  for (const char* type : {"adam", "adamw", "sgd"}) {
    for (const std::string& key : OptimizerParamKeys(type)) {
      EXPECT_NE(FindDeepSpeedKey("optimizer.params." + key), nullptr) << key;
    }
  }
  for (const char* type : {"WarmupLR", "WarmupDecayLR", "WarmupCosineLR"}) {
    for (const std::string& key : SchedulerParamKeys(type)) {
      EXPECT_NE(FindDeepSpeedKey("scheduler.params." + key), nullptr) << key;
    }
  }
}

TEST(DeepSpeedSchemaTest, ValueTextIsJson) {
  EXPECT_EQ(DeepSpeedValueText(DeepSpeedValue{}), "null");
  EXPECT_EQ(DeepSpeedValueText(DeepSpeedValue{true}), "true");
  EXPECT_EQ(DeepSpeedValueText(DeepSpeedValue{int64_t{500000000}}),
            "500000000");
  EXPECT_EQ(DeepSpeedValueText(DeepSpeedValue{std::string("log")}), "\"log\"");
  EXPECT_EQ(
      DeepSpeedValueText(DeepSpeedValue{std::array<double, 2>{0.9, 0.95}}),
      "[0.9, 0.95]");
}

}  // namespace
}  // namespace strata::launch
