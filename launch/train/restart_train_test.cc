// Fault tolerance through the train binary in fresh processes (2 ranks,
// dropout off): a run whose rank 1 is SIGKILLed once mid-run, restarted by
// `train --nproc=2 --max_restarts=2 --resume=auto`, ends bitwise as the
// uninterrupted run (the metrics of the steps after the restart and
// model.pt), under ddp and fsdp; and --resume=auto skips a truncated newest
// checkpoint with a warning on every rank and continues exactly as a run
// resumed explicitly from the previous one; and Python's torchrun restarts
// the same binary with its own --max_restarts just as exactly. (Restarts
// exhausted and the launcher's log lines: launcher_test.)
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "base/testing/subprocess.h"
#include "launch/testing/run_output.h"
#include "launch/testing/train_runs.h"

namespace strata::launch {
namespace {

using ::strata::launch::testing::DropoutRunArgs;
using ::strata::launch::testing::MetricsColumn;
using ::strata::launch::testing::ReadFile;
using ::strata::launch::testing::TempDir;
using ::strata::testing::FreePort;
using ::strata::testing::Run;
using ::strata::testing::RunfilePath;
using ::strata::testing::RunResult;
using ::testing::HasSubstr;
using ::testing::MatchesRegex;
using ::testing::Not;

// 8 steps, a checkpoint every 4, one metrics line per step
// (DropoutRunArgs), with dropout off, as 2 ranks of `strategy`; then `more`.
RunResult TrainRun(const std::string& out, const std::string& strategy,
                   const std::vector<std::string>& more) {
  std::vector<std::string> flags = {"--dropout=0", "--nproc=2",
                                    "--strategy=" + strategy,
                                    "--collective_timeout_s=60"};
  flags.insert(flags.end(), more.begin(), more.end());
  return Run(DropoutRunArgs(out, flags), {}, absl::Seconds(150));
}

// The output directory of the uninterrupted run of `strategy`, trained on
// first use (once per test process).
std::string Uninterrupted(const std::string& strategy) {
  static auto* done = new std::map<std::string, std::string>;
  auto it = done->find(strategy);
  if (it != done->end()) return it->second;
  const std::string dir = TempDir("whole_" + strategy);
  const RunResult run = TrainRun(dir, strategy, {});
  EXPECT_EQ(run.exit_code, 0) << strategy << ": " << run.err;
  (*done)[strategy] = dir;
  return dir;
}

// `continued` trained steps 5..8 of the run `whole` trained 1..8: its
// metrics lines are whole's last 4, bitwise, and so is model.pt.
void ExpectBitwiseLastFourSteps(const std::string& whole,
                                const std::string& continued,
                                const std::string& what) {
  for (const std::string key : {"loss", "lr", "grad_norm"}) {
    const std::vector<double> want =
        MetricsColumn(whole + "/metrics.jsonl", key);
    const std::vector<double> got =
        MetricsColumn(continued + "/metrics.jsonl", key);
    ASSERT_EQ(want.size(), 8u) << what << " " << key;
    ASSERT_EQ(got.size(), 4u) << what << " " << key;
    for (int i = 0; i < 4; ++i) {
      EXPECT_EQ(got[i], want[4 + i]) << what << " " << key << " step " << 5 + i;
    }
  }
  const std::string model = ReadFile(whole + "/model.pt");
  EXPECT_FALSE(model.empty()) << what;
  EXPECT_EQ(ReadFile(continued + "/model.pt"), model) << what;
}

class RestartTrainTest : public ::testing::TestWithParam<std::string> {};

// Rank 1 SIGKILLs itself after step 6 in round 0 (the test hook); the
// launcher stops rank 0 and restarts both, which resume from the step-4
// checkpoint and finish. The restarted round's metrics (steps 5..8: the
// file restarts with the round) and model.pt are the uninterrupted run's.
TEST_P(RestartTrainTest, RankKilledMidRunRestartsAndEndsBitwiseExact) {
  const std::string& strategy = GetParam();
  const std::string whole = Uninterrupted(strategy);
  const std::string out = TempDir("restarted_" + strategy);
  const RunResult run =
      TrainRun(out, strategy,
               {"--resume=auto", "--max_restarts=2",
                "--test_kill_at=step_end:5", "--test_kill_rank=1"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_THAT(run.err,
              HasSubstr("--test_kill_at=step_end:5:1: killing this rank"));
  EXPECT_THAT(run.err,
              MatchesRegex(".*rank 1 \\(local rank 1, pid [0-9]+\\) was "
                           "killed by signal 9 \\(Killed\\) in restart round "
                           "0\n.*"));
  // The restart names the first rank the launcher saw fail: rank 1, unless
  // rank 0 (whose collective failed) exited first, which is rare.
  EXPECT_THAT(run.err, MatchesRegex(".*restart 1/2: rank [01] \\(pid [0-9]+\\) "
                                    "[^\n]*; restarting all 2 ranks\n.*"));
  EXPECT_THAT(run.err, Not(HasSubstr("restart 2/2")));
  // Round 0 started with nothing to resume; round 1 resumed step 4.
  EXPECT_THAT(run.err, HasSubstr("--resume=auto: no checkpoint to resume"));
  EXPECT_THAT(run.err, HasSubstr("resumed from " + out +
                                 "/checkpoints/step_00000004 at step 4"));
  ExpectBitwiseLastFourSteps(whole, out, strategy);
}

INSTANTIATE_TEST_SUITE_P(Strategies, RestartTrainTest,
                         ::testing::Values("ddp", "fsdp"));

// Truncates the largest data file of the sharded checkpoint `dir` to half
// its size; returns its path.
std::string TruncateLargestDataFile(const std::string& dir) {
  std::string largest;
  uintmax_t largest_bytes = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".data") continue;
    if (entry.file_size() > largest_bytes) {
      largest_bytes = entry.file_size();
      largest = entry.path().string();
    }
  }
  EXPECT_GT(largest_bytes, 0u) << "no data file under " << dir;
  if (largest_bytes > 0)
    std::filesystem::resize_file(largest, largest_bytes / 2);
  return largest;
}

// The uninterrupted ddp run's checkpoints (steps 4 and 8), copied, with the
// newest one's largest data file truncated: --resume=auto warns on both
// ranks naming step 8 and why, resumes step 4, and continues exactly as a
// run resumed explicitly from step 4.
TEST(ResumeFallbackTest, TruncatedNewestCheckpointFallsBackToThePrevious) {
  const std::string whole = Uninterrupted("ddp");
  const std::string ckpt = TempDir("fallback_ckpt");
  std::filesystem::remove_all(ckpt);
  std::filesystem::copy(whole + "/checkpoints", ckpt,
                        std::filesystem::copy_options::recursive);
  ASSERT_EQ(ReadFile(ckpt + "/latest"), "step_00000008\n");
  const std::string truncated =
      TruncateLargestDataFile(ckpt + "/step_00000008");

  const std::string out = TempDir("fallback_auto");
  const RunResult run =
      TrainRun(out, "ddp", {"--resume=auto", "--ckpt_dir=" + ckpt});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  for (int rank : {0, 1}) {
    EXPECT_THAT(run.err,
                HasSubstr(absl::StrCat(
                    "rank ", rank, ": resume auto: skipping checkpoint ", ckpt,
                    "/step_00000008, it is corrupt (")))
        << "rank " << rank;
  }
  EXPECT_THAT(run.err, HasSubstr("file '" + truncated + "' is truncated"));
  EXPECT_THAT(run.err,
              HasSubstr("resumed from " + ckpt + "/step_00000004 at step 4"));

  const std::string explicit_out = TempDir("fallback_explicit");
  const RunResult explicit_run =
      TrainRun(explicit_out, "ddp",
               {"--resume=" + whole + "/checkpoints/step_00000004",
                "--ckpt_dir=" + TempDir("fallback_explicit_ckpt")});
  ASSERT_EQ(explicit_run.exit_code, 0) << explicit_run.err;
  for (const std::string key : {"loss", "lr", "grad_norm"}) {
    const std::vector<double> want =
        MetricsColumn(explicit_out + "/metrics.jsonl", key);
    ASSERT_EQ(want.size(), 4u) << key;
    EXPECT_EQ(MetricsColumn(out + "/metrics.jsonl", key), want) << key;
  }
  const std::string model = ReadFile(explicit_out + "/model.pt");
  EXPECT_FALSE(model.empty());
  EXPECT_EQ(ReadFile(out + "/model.pt"), model);
  // Both equal the uninterrupted run's last steps too.
  ExpectBitwiseLastFourSteps(whole, out, "fallback");
}

// Every checkpoint corrupt: --resume=auto warns and starts from scratch;
// the same checkpoint named explicitly is an error.
TEST(ResumeFallbackTest, AllCorruptStartsFromScratchButAnExplicitPathFails) {
  const std::string whole = Uninterrupted("ddp");
  const std::string ckpt = TempDir("all_corrupt_ckpt");
  std::filesystem::remove_all(ckpt);
  std::filesystem::copy(whole + "/checkpoints", ckpt,
                        std::filesystem::copy_options::recursive);
  TruncateLargestDataFile(ckpt + "/step_00000004");
  TruncateLargestDataFile(ckpt + "/step_00000008");

  const RunResult explicit_run =
      TrainRun(TempDir("all_corrupt_explicit"), "ddp",
               {"--resume=" + ckpt + "/step_00000004",
                "--ckpt_dir=" + TempDir("all_corrupt_explicit_ckpt")});
  EXPECT_NE(explicit_run.exit_code, 0);
  EXPECT_THAT(explicit_run.err, HasSubstr("is truncated"));

  const std::string out = TempDir("all_corrupt_auto");
  const RunResult run =
      TrainRun(out, "ddp", {"--resume=auto", "--ckpt_dir=" + ckpt});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_THAT(run.err,
              HasSubstr("no valid checkpoint to resume under '" + ckpt +
                        "' (2 checkpoint(s), all corrupt); "
                        "starting from scratch at step 0"));
  // From scratch: all 8 steps, as the uninterrupted run.
  EXPECT_EQ(MetricsColumn(out + "/metrics.jsonl", "loss"),
            MetricsColumn(whole + "/metrics.jsonl", "loss"));
  EXPECT_EQ(ReadFile(out + "/model.pt"), ReadFile(whole + "/model.pt"));
}

// 2 ranks of ddp (dropout off) under Python's torchrun with its own
// --max_restarts=2, Strata's `train` as the worker, then `more`.
RunResult TorchrunRun(const std::string& out,
                      const std::vector<std::string>& more) {
  // --redirects 1 --tee 1: Debian's torchrun (1.13 on Python 3.11) crashes
  // with the defaults 0 (see multiprocess_test). --monitor_interval: the agent
  // checks its workers every 0.5 s instead of every 5 s.
  std::vector<std::string> args = {
      "/usr/bin/python3",
      RunfilePath("launch/torchrun_classic_store.py"),
      "--redirects",
      "1",
      "--tee",
      "1",
      "--log_dir",
      out + "_torchrun_logs",
      "--monitor_interval=0.5",
      "--max_restarts=2",
      "--no_python",
      "--nproc_per_node=2",
      absl::StrCat("--master_port=", FreePort())};
  const std::vector<std::string> train = DropoutRunArgs(
      out, {"--dropout=0", "--strategy=ddp", "--collective_timeout_s=60",
            "--threads=1", "--resume=auto"});
  args.insert(args.end(), train.begin(), train.end());
  args.insert(args.end(), more.begin(), more.end());
  return Run(args, {}, absl::Seconds(200));
}

// Rank 1 SIGKILLs itself after step 6 in round 0 (TORCHELASTIC_RESTART_COUNT
// is 0 only there); torchrun's agent stops rank 0 and starts both again,
// which resume the step-4 checkpoint and end as torchrun's uninterrupted run.
TEST(TorchrunRestartTest, TorchrunsOwnRestartsResumeBitwiseExact) {
  const std::string whole = TempDir("torchrun_whole");
  const RunResult uninterrupted = TorchrunRun(whole, {});
  ASSERT_EQ(uninterrupted.exit_code, 0) << uninterrupted.err;
  const std::string out = TempDir("torchrun_restarted");
  const RunResult run =
      TorchrunRun(out, {"--test_kill_at=step_end:5", "--test_kill_rank=1"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_THAT(run.err,
              HasSubstr("--test_kill_at=step_end:5:1: killing this rank"));
  EXPECT_THAT(run.err, HasSubstr("resumed from " + out +
                                 "/checkpoints/step_00000004 at step 4"));
  ExpectBitwiseLastFourSteps(whole, out, "torchrun");
}

}  // namespace
}  // namespace strata::launch
