#include "launch/config/checkpoint_options.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "absl/status/status.h"

namespace strata::launch {
namespace {

using ::testing::HasSubstr;

// The message of ValidateTrainingCheckpointOptions(o), which must fail.
std::string ErrorOf(const TrainingCheckpointOptions& o) {
  const absl::Status status = ValidateTrainingCheckpointOptions(o);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  return std::string(status.message());
}

TEST(CheckpointOptionsTest, DefaultsAreValid) {
  EXPECT_TRUE(ValidateTrainingCheckpointOptions({}).ok());
}

TEST(CheckpointOptionsTest, EveryFormatIsValid) {
  for (checkpoint::Format format :
       {checkpoint::Format::kFull, checkpoint::Format::kLocal,
        checkpoint::Format::kSharded}) {
    TrainingCheckpointOptions o;
    o.format = format;
    EXPECT_TRUE(ValidateTrainingCheckpointOptions(o).ok())
        << checkpoint::FormatName(format);
  }
}

TEST(CheckpointOptionsTest, NegativeSaveEveryNamesTheFlag) {
  TrainingCheckpointOptions o;
  o.save_every = -1;
  o.dir = "/tmp/ckpt";
  EXPECT_THAT(ErrorOf(o), HasSubstr("--save_every must be >= 0"));
}

TEST(CheckpointOptionsTest, NegativeKeepLastNamesTheFlag) {
  TrainingCheckpointOptions o;
  o.keep_last = -2;
  EXPECT_THAT(ErrorOf(o), HasSubstr("--keep_last must be >= 0"));
}

TEST(CheckpointOptionsTest, ResumeAndLoadWeightsAreExclusive) {
  TrainingCheckpointOptions o;
  o.resume = "a";
  o.load_weights = "b";
  const std::string error = ErrorOf(o);
  EXPECT_THAT(error, HasSubstr("--resume=a"));
  EXPECT_THAT(error, HasSubstr("--load_weights=b"));
}

TEST(CheckpointOptionsTest, SavingNeedsADirectory) {
  TrainingCheckpointOptions o;
  o.save_every = 10;
  EXPECT_THAT(ErrorOf(o), HasSubstr("need a directory"));
}

TEST(CheckpointOptionsTest, ResumeAutoNeedsADirectory) {
  TrainingCheckpointOptions o;
  o.resume = "auto";
  EXPECT_THAT(ErrorOf(o), HasSubstr("need a directory"));
  o.dir = "/tmp/ckpt";
  EXPECT_TRUE(ValidateTrainingCheckpointOptions(o).ok());
}

TEST(CheckpointOptionsTest, LoadWeightsMatchingFlagsNeedLoadWeights) {
  TrainingCheckpointOptions o;
  o.load_weights_strict = false;
  EXPECT_THAT(ErrorOf(o), HasSubstr("apply to --load_weights, which is not "
                                    "set"));
  o = TrainingCheckpointOptions();
  o.load_weights_revise_keys = "^module\\.=";
  EXPECT_THAT(ErrorOf(o), HasSubstr("--load_weights_revise_keys"));
  o.load_weights = "w.pt";
  EXPECT_TRUE(ValidateTrainingCheckpointOptions(o).ok());
}

TEST(ParseReviseKeysTest, RulesSplitAtSemicolonsAndTheirLastEquals) {
  auto rules = ParseReviseKeys("^module\\.=;^(?=x)backbone=encoder");
  ASSERT_TRUE(rules.ok()) << rules.status();
  ASSERT_EQ(rules->size(), 2u);
  EXPECT_EQ((*rules)[0].first, "^module\\.");
  EXPECT_EQ((*rules)[0].second, "");
  EXPECT_EQ((*rules)[1].first, "^(?=x)backbone");
  EXPECT_EQ((*rules)[1].second, "encoder");
  EXPECT_TRUE(ParseReviseKeys("")->empty());
}

TEST(ParseReviseKeysTest, RuleWithoutEqualsIsNamed) {
  const auto rules = ParseReviseKeys("^module\\.=;prefix");
  ASSERT_FALSE(rules.ok());
  EXPECT_THAT(rules.status().message(),
              HasSubstr("--load_weights_revise_keys: rule 'prefix' is not "
                        "REGEX=REPLACEMENT"));
}

TEST(ParseReviseKeysTest, InvalidRegexIsNamed) {
  TrainingCheckpointOptions o;
  o.load_weights = "w.pt";
  o.load_weights_revise_keys = "(=x";
  EXPECT_THAT(ErrorOf(o), HasSubstr("--load_weights_revise_keys: '(' is not "
                                    "a valid regex"));
}

}  // namespace
}  // namespace strata::launch
