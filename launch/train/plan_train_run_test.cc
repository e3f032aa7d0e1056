// The end-of-run "plan:" line of the train binary (launch/plan/plan_train.h
// PlanEndLine) on 2 ranks of gpt-tiny, DDP and FSDP over the blocks: the
// tracking allocator's measured peak of tensor storage (train installs it by
// default, --track_tensor_memory) is within 10 % of the planner's prediction,
// the bound (launch/plan/plan_validation_test.cc checks the same model
// in-process), and metrics.jsonl records rank 0's peak.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/time/time.h"
#include "base/testing/subprocess.h"
#include "launch/config/train_options.h"
#include "launch/plan/plan.h"
#include "launch/plan/plan_train.h"
#include "launch/testing/run_output.h"

namespace strata::launch {
namespace {

using ::testing::HasSubstr;

// 3 steps of gpt-tiny, 4 sequences of 64 tokens per rank, on 2 ranks.
::strata::testing::RunResult TrainTwoRanks(
    const std::string& out, const std::vector<std::string>& more) {
  std::vector<std::string> args = {
      ::strata::testing::RunfilePath("launch/train/train"),
      "--nproc=2",
      "--steps=3",
      "--warmup_steps=1",
      "--global_batch=8",
      "--seq_len=64",
      "--markov_tokens=5000",
      "--eval_batches=1",
      "--log_interval=1",
      "--output_dir=" + out};
  args.insert(args.end(), more.begin(), more.end());
  return ::strata::testing::Run(args, {}, absl::Seconds(120));
}

struct EndLine {
  double predicted_mib = 0;
  double measured_mib = 0;
};

// The number in `log` between `before` and `after` (searched from `*pos`,
// which moves past it).
bool NumberBetween(const std::string& log, const std::string& before,
                   const std::string& after, size_t* pos, double* value) {
  const size_t start = log.find(before, *pos);
  if (start == std::string::npos) return false;
  const size_t begin = start + before.size();
  const size_t end = log.find(after, begin);
  if (end == std::string::npos) return false;
  *pos = end;
  return absl::SimpleAtod(log.substr(begin, end - begin), value);
}

// The predicted and measured figures of the end-of-run line in `log`
// ("plan: predicted peak X MiB, measured Y MiB (tensor storage, ...").
bool ParseEndLine(const std::string& log, EndLine* line) {
  const size_t at = log.find("MiB (tensor storage, tracking allocator");
  if (at == std::string::npos) return false;
  size_t pos = log.rfind("plan: predicted peak ", at);
  if (pos == std::string::npos) return false;
  return NumberBetween(log, "plan: predicted peak ", " MiB, measured ", &pos,
                       &line->predicted_mib) &&
         NumberBetween(log, " MiB, measured ", " MiB (tensor storage", &pos,
                       &line->measured_mib);
}

class PlanTrainRunTest : public ::testing::TestWithParam<std::string> {};

TEST_P(PlanTrainRunTest, MeasuredPeakWithinTenPercentOfPrediction) {
  const std::string out = testing::TempDir("plan_run_" + GetParam());
  const ::strata::testing::RunResult run = TrainTwoRanks(
      out, {"--strategy=" + GetParam(), "--fsdp_wrap_unit_types=GPTBlock"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EndLine line;
  ASSERT_TRUE(ParseEndLine(run.err, &line)) << run.err;
  ASSERT_GT(line.measured_mib, 0);
  EXPECT_LE(std::abs(line.predicted_mib - line.measured_mib),
            0.10 * line.measured_mib)
      << "predicted " << line.predicted_mib << " MiB, measured "
      << line.measured_mib << " MiB";
  // metrics.jsonl: rank 0's peak so far at each record, never falling, and
  // at the last record (after the final evaluation, as the line's) at most
  // the largest rank's, to the line's 0.01 MiB rounding.
  const std::vector<double> peaks =
      testing::MetricsColumn(out + "/metrics.jsonl", "tensor_peak_bytes");
  ASSERT_EQ(peaks.size(), 3u);
  for (size_t i = 1; i < peaks.size(); ++i) EXPECT_GE(peaks[i], peaks[i - 1]);
  EXPECT_GT(peaks.back(), 0);
  EXPECT_LE(peaks.back() / 1048576.0, line.measured_mib + 0.005);
}

INSTANTIATE_TEST_SUITE_P(DdpAndFsdp, PlanTrainRunTest,
                         ::testing::Values("ddp", "fsdp"));

TEST(PlanTrainRunTest, WithoutTrackingTheLineSaysSo) {
  const std::string out = testing::TempDir("plan_run_untracked");
  const ::strata::testing::RunResult run =
      TrainTwoRanks(out, {"--strategy=ddp", "--track_tensor_memory=false"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_THAT(run.err, HasSubstr("measured: not tracked"));
  EXPECT_THAT(testing::ReadFile(out + "/metrics.jsonl"),
              ::testing::Not(HasSubstr("tensor_peak_bytes")));
}

TEST(TrainPlanOnlyTest, PrintsThePlanOfItsFlagsAndExits) {
  // No rendezvous variables and --nproc=4: were a group formed, the run
  // would start four ranks; --plan_only prints and exits at once.
  const ::strata::testing::RunResult r = ::strata::testing::Run(
      {::strata::testing::RunfilePath("launch/train/train"), "--plan_only",
       "--model=gpt-small50m", "--strategy=fsdp", "--nproc=4",
       "--global_batch=16", "--micro_batch=2", "--seq_len=128",
       "--checkpoint_units=GPTBlock"},
      {}, absl::Seconds(30));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  TrainOptions o;
  o.model = "gpt-small50m";
  o.strategy.kind = strategies::StrategyKind::kFsdp;
  o.global_batch = 16;
  o.micro_batch = 2;
  o.seq_len = 128;
  o.strategy.checkpoint_units = {"GPTBlock"};
  auto input = PlanInputOf(o, 4);
  ASSERT_TRUE(input.ok()) << input.status();
  EXPECT_EQ(r.out, FormatMemoryPlan(*input, PlanMemory(*input)));
}

// strata_plan takes train's flags: the same flags (a CPU run, 4 ranks) give
// the same plan as train --plan_only, byte for byte.
TEST(TrainPlanOnlyTest, StrataPlanGivesTheSamePlanForTheSameFlags) {
  const std::vector<std::string> flags = {
      "--device=cpu",          "--model=gpt-small50m", "--strategy=fsdp",
      "--global_batch=16",     "--micro_batch=2",      "--seq_len=128",
      "--param_dtype=bf16",    "--precision=bf16",     "--fsdp_cpu_offload",
      "--loss_chunk_tokens=64"};
  std::vector<std::string> train = {
      ::strata::testing::RunfilePath("launch/train/train"), "--plan_only",
      "--nproc=4"};
  train.insert(train.end(), flags.begin(), flags.end());
  std::vector<std::string> plan = {
      ::strata::testing::RunfilePath("launch/plan/strata_plan"),
      "--world_size=4"};
  plan.insert(plan.end(), flags.begin(), flags.end());
  const ::strata::testing::RunResult from_train =
      ::strata::testing::Run(train, {}, absl::Seconds(30));
  const ::strata::testing::RunResult from_plan =
      ::strata::testing::Run(plan, {}, absl::Seconds(30));
  ASSERT_EQ(from_train.exit_code, 0) << from_train.err;
  ASSERT_EQ(from_plan.exit_code, 0) << from_plan.err;
  EXPECT_THAT(from_plan.out, HasSubstr("fsdp"));
  EXPECT_EQ(from_plan.out, from_train.out);
}

}  // namespace
}  // namespace strata::launch
