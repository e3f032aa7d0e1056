#include "launch/config/train_gflags.h"

#include <gflags/gflags.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "base/testing/status_matchers.h"
#include "launch/config/option_kinds.h"

namespace {
const bool kRegistered = [] {
  strata::launch::RegisterTrainFlags(__FILE__);
  return true;
}();
}  // namespace

namespace strata::launch {
namespace {

using ::strata::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

void SetFlag(const char* name, const char* value) {
  ASSERT_FALSE(gflags::SetCommandLineOption(name, value).empty()) << name;
}

TEST(TrainGflagsTest, FlagsAreDefinedInTheGivenFile) {
  gflags::CommandLineFlagInfo info;
  ASSERT_TRUE(gflags::GetCommandLineFlagInfo("fsdp_backward_prefetch", &info));
  EXPECT_THAT(info.filename, HasSubstr("launch/config/train_gflags_test.cc"));
  EXPECT_EQ(info.type, "string");
  ASSERT_TRUE(gflags::GetCommandLineFlagInfo("seed", &info));
  EXPECT_EQ(info.type, "uint64");
  ASSERT_TRUE(gflags::GetCommandLineFlagInfo("keep_last", &info));
  EXPECT_EQ(info.type, "int32");
}

TEST(TrainGflagsTest, UntouchedFlagsReadBackAsTheFlagDefaults) {
  gflags::FlagSaver saver;
  ASSERT_OK_AND_ASSIGN(const TrainOptions o, TrainOptionsFromRegisteredFlags());
  const TrainOptions defaults;
  EXPECT_EQ(o.model, defaults.model);
  EXPECT_EQ(o.steps, defaults.steps);
  EXPECT_EQ(o.schedule.base_lr, defaults.schedule.base_lr);
  EXPECT_EQ(o.seed, defaults.seed);
  EXPECT_EQ(o.strategy.kind, defaults.strategy.kind);
  EXPECT_TRUE(o.output_dir.empty());  // Resolved by the binary.
}

TEST(TrainGflagsTest, ParsedValuesReachTheirFields) {
  gflags::FlagSaver saver;
  SetFlag("strategy", "fsdp");
  SetFlag("global_batch", "12");
  SetFlag("keep_last", "3");
  SetFlag("seed", "18446744073709551615");
  SetFlag("lr", "0.5");
  SetFlag("fsdp_cpu_offload", "true");
  SetFlag("checkpoint_units", "GPTBlock, blocks.3");
  SetFlag("checkpoint_every", "2");
  SetFlag("precision", "bf16");
  SetFlag("test_kill_at", "save:3");
  ASSERT_OK_AND_ASSIGN(const TrainOptions o, TrainOptionsFromRegisteredFlags());
  EXPECT_EQ(o.strategy.kind, strategies::StrategyKind::kFsdp);
  EXPECT_EQ(o.global_batch, 12);
  EXPECT_EQ(o.checkpoint.keep_last, 3);
  EXPECT_EQ(o.seed, 18446744073709551615u);
  EXPECT_EQ(o.schedule.base_lr, 0.5);
  EXPECT_TRUE(o.strategy.fsdp.cpu_offload);
  EXPECT_THAT(o.strategy.checkpoint_units, ElementsAre("GPTBlock", "blocks.3"));
  EXPECT_EQ(o.strategy.checkpoint_every, 2);
  EXPECT_EQ(o.precision, Precision::kBf16);
  EXPECT_EQ(o.test_hooks.test_kill_at, "save:3");
}

TEST(TrainGflagsTest, ABadEnumeratedValueNamesTheFlag) {
  gflags::FlagSaver saver;
  SetFlag("optimizer", "lamb");
  EXPECT_THAT(
      TrainOptionsFromRegisteredFlags(),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--optimizer")));
}

TEST(TrainGflagsTest, AnOutOfRangeNumberIsRefusedByGflags) {
  EXPECT_TRUE(gflags::SetCommandLineOption("keep_last", "99999999999").empty());
  EXPECT_TRUE(gflags::SetCommandLineOption("steps", "many").empty());
}

TEST(TrainGflagsDeathTest, RegisteringTwiceIsAnError) {
  EXPECT_DEATH(RegisterTrainFlags("elsewhere.cc"), "registered twice");
}

}  // namespace
}  // namespace strata::launch
