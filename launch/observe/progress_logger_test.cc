#include "launch/observe/progress_logger.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <sstream>
#include <string>

#include "base/testing/status_matchers.h"

namespace strata::launch {
namespace {

using ::strata::testing::StatusIs;
using ::testing::HasSubstr;

ProgressRecord Record() {
  ProgressRecord r;
  r.step = 100;
  r.total_steps = 1000;
  r.loss = 2.5;
  r.lr = 0.003;
  r.grad_norm = 0.5;
  r.tokens_per_s = 12345.4;
  r.mfu = 0.123;
  r.elapsed_s = 10;
  r.eta_s = 90;
  return r;
}

TEST(FormatEtaTest, RoundsToWholeSeconds) {
  EXPECT_EQ(FormatEta(89.6), "1m30s");
}

TEST(FormatEtaTest, UnknownIsAQuestionMark) {
  EXPECT_EQ(FormatEta(-1), "?");
  EXPECT_EQ(FormatEta(INFINITY), "?");
  EXPECT_EQ(FormatEta(NAN), "?");
}

TEST(FormatProgressLineTest, WithoutFloorOrEval) {
  EXPECT_EQ(FormatProgressLine(Record()),
            "step 100/1000 | loss 2.5000 | lr 0.003 | grad norm 0.500 | "
            "12345 tok/s | MFU 12.3% | ETA 1m30s");
}

TEST(FormatProgressLineTest, WithFloorAndEval) {
  ProgressRecord r = Record();
  r.entropy_floor = 2.25;
  r.eval_loss = 2.75;
  EXPECT_EQ(FormatProgressLine(r),
            "step 100/1000 | loss 2.5000 (floor 2.2500, +0.2500) | eval "
            "2.7500 | lr 0.003 | grad norm 0.500 | 12345 tok/s | MFU 12.3% | "
            "ETA 1m30s");
}

TEST(FormatMetricsRecordTest, MissingValuesAreNull) {
  EXPECT_EQ(FormatMetricsRecord(Record()),
            "{\"step\": 100, \"loss\": 2.5, \"eval_loss\": null, "
            "\"entropy_floor\": null, \"lr\": 0.003, \"grad_norm\": 0.5, "
            "\"tokens_per_s\": 12345.4, \"mfu\": 0.123, \"elapsed_s\": 10}");
}

TEST(FormatMetricsRecordTest, EvalAndFloorAreWritten) {
  ProgressRecord r = Record();
  r.entropy_floor = 2.25;
  r.eval_loss = 2.75;
  EXPECT_THAT(FormatMetricsRecord(r),
              HasSubstr("\"eval_loss\": 2.75, \"entropy_floor\": 2.25,"));
}

PhaseTimes Phases() {
  PhaseTimes p;
  p.forward_backward_s = 0.0412;
  p.step_s = 0.0031;
  p.comm_wait_s = 0.0008;
  p.data_s = 0.0001;
  p.checkpoint_s = 0;
  return p;
}

TEST(FormatProgressLineTest, PhaseTimesEndTheLineInMilliseconds) {
  ProgressRecord r = Record();
  r.phases = Phases();
  EXPECT_EQ(FormatProgressLine(r),
            "step 100/1000 | loss 2.5000 | lr 0.003 | grad norm 0.500 | "
            "12345 tok/s | MFU 12.3% | ETA 1m30s | per step: fwd+bwd 41.2ms, "
            "step 3.1ms (comm wait 0.8ms), data 0.1ms, ckpt 0.0ms");
}

TEST(FormatProgressLineTest, LossScaleFollowsTheGradNorm) {
  ProgressRecord r = Record();
  r.loss_scale = 32768;
  r.skipped_steps = 3;
  EXPECT_EQ(FormatProgressLine(r),
            "step 100/1000 | loss 2.5000 | lr 0.003 | grad norm 0.500 | "
            "loss scale 32768 (skipped 3) | 12345 tok/s | MFU 12.3% | ETA "
            "1m30s");
}

TEST(FormatMetricsRecordTest, LossScaleAndSkippedStepsAreWritten) {
  ProgressRecord r = Record();
  r.loss_scale = 32768;
  r.skipped_steps = 3;
  EXPECT_THAT(FormatMetricsRecord(r),
              HasSubstr("\"elapsed_s\": 10, \"loss_scale\": 32768, "
                        "\"skipped_steps\": 3}"));
  EXPECT_THAT(FormatMetricsRecord(Record()),
              ::testing::Not(HasSubstr("loss_scale")));
}

TEST(FormatMetricsRecordTest, TensorPeakIsWrittenInBytesWhenTracked) {
  ProgressRecord r = Record();
  r.tensor_peak_bytes = 5545984;
  EXPECT_THAT(FormatMetricsRecord(r),
              HasSubstr("\"elapsed_s\": 10, \"tensor_peak_bytes\": 5545984}"));
  EXPECT_THAT(FormatMetricsRecord(Record()),
              ::testing::Not(HasSubstr("tensor_peak_bytes")));
}

TEST(FormatMetricsRecordTest, PhaseTimesAreWrittenInSeconds) {
  ProgressRecord r = Record();
  r.phases = Phases();
  EXPECT_THAT(FormatMetricsRecord(r),
              HasSubstr("\"elapsed_s\": 10, \"forward_backward_s\": 0.0412, "
                        "\"step_s\": 0.0031, \"comm_wait_s\": 0.0008, "
                        "\"data_s\": 0.0001, \"checkpoint_s\": 0}"));
}

TEST(ProgressLoggerTest, WritesOneRecordPerLine) {
  const std::string path =
      std::string(std::getenv("TEST_TMPDIR")) + "/metrics.jsonl";
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<ProgressLogger> logger,
                       ProgressLogger::Open(path));
  EXPECT_EQ(logger->metrics_path(), path);
  ProgressRecord second = Record();
  second.step = 200;
  logger->Log(Record());
  logger->Log(second);
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_EQ(text.str(), FormatMetricsRecord(Record()) + "\n" +
                            FormatMetricsRecord(second) + "\n");
}

TEST(ProgressLoggerTest, UnwritablePathIsAnError) {
  EXPECT_THAT(ProgressLogger::Open("/nonexistent_dir/metrics.jsonl"),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       "cannot write /nonexistent_dir/metrics.jsonl"));
}

}  // namespace
}  // namespace strata::launch
