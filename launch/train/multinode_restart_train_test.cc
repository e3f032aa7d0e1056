// The train binary as a 2-node job (two `launch` processes on 127.0.0.1,
// one rank each, --max_restarts=2, --resume=auto): node 1's rank SIGKILLs
// itself after step 6 (the hidden --test_kill_at=step_end:5 hook). Both
// launchers start round 1 within seconds of the kill — through the agent
// store, not after the 60 s collective timeout — and the run ends bitwise as
// the uninterrupted one (metrics of the last round and model.pt bytes).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "base/regex.h"
#include "base/testing/subprocess.h"
#include "launch/testing/run_output.h"
#include "launch/testing/train_runs.h"

namespace strata::launch {
namespace {

using ::strata::launch::testing::DropoutRunArgs;
using ::strata::launch::testing::ExpectSameEnd;
using ::strata::launch::testing::TempDir;
using ::strata::testing::FreePort;
using ::strata::testing::RunfilePath;
using ::strata::testing::RunResult;
using ::strata::testing::Subprocess;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr absl::Duration kRunTimeout = absl::Seconds(150);
// Far below the collective timeout (60 s): a restart this soon after the
// kill was not a timed-out collective. Covers the launchers' 100 ms store
// polls, the 5 s stop grace at worst, and scheduling on a loaded machine.
constexpr double kSoonAfterKillS = 15;

// The train flags shared by both runs: 8 steps, checkpoints at 4 and 8,
// dropout off, ddp, a 60 s collective timeout.
std::vector<std::string> TrainFlags() {
  return {"--dropout=0", "--strategy=ddp", "--collective_timeout_s=60"};
}

// Seconds since midnight of the glog line of `text` containing `needle`
// ("W20261126 07:40:01.123456 ..." after any "[rankN]: " prefix); -1 if no
// such line.
double GlogSecondsOf(const std::string& text, const std::string& needle) {
  static const std::regex kTime(
      R"([IWEF][0-9]{8} ([0-9]{2}):([0-9]{2}):([0-9]{2}\.[0-9]+))");
  for (const std::string& line :
       std::vector<std::string>(absl::StrSplit(text, '\n'))) {
    if (!absl::StrContains(line, needle)) continue;
    std::smatch match;
    if (!std::regex_search(line, match, kTime)) continue;
    double seconds = 0;
    EXPECT_TRUE(absl::SimpleAtod(match[3].str(), &seconds)) << line;
    return std::stoi(match[1]) * 3600 + std::stoi(match[2]) * 60 + seconds;
  }
  return -1;
}

TEST(MultiNodeRestartTrainTest, NodeOneRankKilledRestartsBothNodesBitwise) {
  const std::string whole = TempDir("multinode_whole");
  std::vector<std::string> whole_flags = TrainFlags();
  whole_flags.push_back("--nproc=2");
  const RunResult whole_run = ::strata::testing::Run(
      DropoutRunArgs(whole, whole_flags), {}, kRunTimeout);
  ASSERT_EQ(whole_run.exit_code, 0) << whole_run.err;

  const std::string out = TempDir("multinode_restarted");
  std::vector<std::string> flags = TrainFlags();
  for (const char* flag :
       {"--resume=auto", "--test_kill_at=step_end:5", "--test_kill_rank=1"}) {
    flags.push_back(flag);
  }
  const std::vector<std::string> train = DropoutRunArgs(out, flags);
  const int master_port = FreePort();
  int rdzv_port = FreePort();
  while (rdzv_port == master_port) rdzv_port = FreePort();
  auto node_args = [&](int node_rank) {
    std::vector<std::string> args = {
        RunfilePath("launch/launch"),
        "--nnodes=2",
        absl::StrCat("--node_rank=", node_rank),
        "--nproc_per_node=1",
        "--threads_per_rank=1",
        "--max_restarts=2",
        "--stop_grace_s=5",
        "--master_addr=127.0.0.1",
        absl::StrCat("--master_port=", master_port),
        absl::StrCat("--rdzv_endpoint=127.0.0.1:", rdzv_port),
        "--"};
    args.insert(args.end(), train.begin(), train.end());
    return args;
  };
  Subprocess node0(node_args(0), {}, kRunTimeout);
  Subprocess node1(node_args(1), {}, kRunTimeout);
  const RunResult run1 = node1.Finish();
  const RunResult run0 = node0.Finish();
  ASSERT_EQ(run0.exit_code, 0) << run0.err;
  ASSERT_EQ(run1.exit_code, 0) << run1.err;

  const double killed_s =
      GlogSecondsOf(run1.err, "--test_kill_at=step_end:5:1: killing this rank");
  ASSERT_GE(killed_s, 0) << run1.err;
  int node = 0;
  for (const RunResult* run : {&run0, &run1}) {
    const double restart_s = GlogSecondsOf(run->err, "restart 1/2: ");
    ASSERT_GE(restart_s, 0) << "node " << node << ": " << run->err;
    EXPECT_LT(restart_s - killed_s, kSoonAfterKillS) << "node " << node;
    std::printf("node %d: restart 1/2 logged %.2f s after the kill\n", node,
                restart_s - killed_s);
    EXPECT_THAT(run->err, HasSubstr("; restarting all 2 ranks on 2 nodes"));
    EXPECT_THAT(run->err, Not(HasSubstr("restart 2/2")));
    ++node;
  }
  // Round 1 resumed the step-4 checkpoint.
  EXPECT_THAT(run0.err, HasSubstr("resumed from " + out +
                                  "/checkpoints/step_00000004 at step 4"));
  ExpectSameEnd(whole, out, 8);
}

}  // namespace
}  // namespace strata::launch
