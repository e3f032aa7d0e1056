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

}  // namespace
}  // namespace strata::launch
