#include "launch/config/option_kinds.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "base/testing/status_matchers.h"

namespace strata::launch {
namespace {

using ::strata::testing::StatusIs;
using ::testing::HasSubstr;

TEST(DataKindTest, NamesRoundTrip) {
  for (DataKind kind : {DataKind::kMarkov, DataKind::kBytes, DataKind::kUint16,
                        DataKind::kUint32, DataKind::kText}) {
    ASSERT_OK_AND_ASSIGN(const DataKind parsed,
                         ParseDataKind(DataKindName(kind)));
    EXPECT_EQ(parsed, kind) << DataKindName(kind);
  }
}

TEST(DataKindTest, Names) {
  EXPECT_EQ(DataKindName(DataKind::kMarkov), "markov");
  EXPECT_EQ(DataKindName(DataKind::kBytes), "bytes");
  EXPECT_EQ(DataKindName(DataKind::kUint16), "uint16");
  EXPECT_EQ(DataKindName(DataKind::kUint32), "uint32");
  EXPECT_EQ(DataKindName(DataKind::kText), "text");
}

TEST(DataKindTest, UnknownNameNamesTheFlagAndTheChoices) {
  EXPECT_THAT(ParseDataKind("parquet"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "--data: must be markov, bytes, uint16, uint32 or text, "
                       "got 'parquet'"));
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

TEST(CheckpointFormatTest, NamesRoundTrip) {
  for (CheckpointFormat format :
       {CheckpointFormat::kFull, CheckpointFormat::kLocal,
        CheckpointFormat::kSharded}) {
    ASSERT_OK_AND_ASSIGN(const CheckpointFormat parsed,
                         ParseCheckpointFormat(CheckpointFormatName(format)));
    EXPECT_EQ(parsed, format) << CheckpointFormatName(format);
  }
}

TEST(CheckpointFormatTest, Names) {
  EXPECT_EQ(CheckpointFormatName(CheckpointFormat::kFull), "full");
  EXPECT_EQ(CheckpointFormatName(CheckpointFormat::kLocal), "local");
  EXPECT_EQ(CheckpointFormatName(CheckpointFormat::kSharded), "sharded");
}

// Moved from trainer_test (BadCheckpointFlagsNameTheFlag): the message the
// checkpoint package gave before the format became an enum.
TEST(CheckpointFormatTest, UnknownNameNamesTheFlagAndTheChoices) {
  EXPECT_THAT(ParseCheckpointFormat("zip"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("--ckpt_format must be full, local or "
                                 "sharded, got 'zip'")));
}

TEST(PrecisionTest, NamesRoundTrip) {
  for (Precision precision :
       {Precision::kFp32, Precision::kBf16, Precision::kFp16}) {
    ASSERT_OK_AND_ASSIGN(const Precision parsed,
                         ParsePrecision(PrecisionName(precision)));
    EXPECT_EQ(parsed, precision) << PrecisionName(precision);
  }
}

TEST(PrecisionTest, Names) {
  EXPECT_EQ(PrecisionName(Precision::kFp32), "fp32");
  EXPECT_EQ(PrecisionName(Precision::kBf16), "bf16");
  EXPECT_EQ(PrecisionName(Precision::kFp16), "fp16");
}

TEST(PrecisionTest, UnknownNameNamesTheFlagAndTheChoices) {
  EXPECT_THAT(ParsePrecision("fp8"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "--precision: must be fp32, bf16 or fp16, got 'fp8'"));
}

}  // namespace
}  // namespace strata::launch
