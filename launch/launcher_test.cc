#include "launch/launcher.h"

#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "base/regex.h"
#include "base/testing/status_matchers.h"
#include "base/testing/subprocess.h"
#include "launch/process_state.h"

extern char** environ;

namespace strata::launch {
namespace {

using ::strata::testing::IsOk;

using ::strata::testing::RunfilePath;
using ::strata::testing::RunResult;
using ::strata::testing::Subprocess;

using ::testing::HasSubstr;
using ::testing::MatchesRegex;
using ::testing::Not;

// Every run must end well within this; the sleeping test ranks sleep 60 s.
constexpr absl::Duration kRunTimeout = absl::Seconds(15);
// "Promptly": far below the ranks' 60 s sleep and the default 10 s grace.
constexpr absl::Duration kPromptly = absl::Seconds(5);

std::string LauncherBinary() { return RunfilePath("launch/launch"); }
std::string TestProgram() { return RunfilePath("launch/launch_test_program"); }

// Runs the `launch` binary with `args` (flags, then the command).
RunResult RunLauncher(std::vector<std::string> args) {
  args.insert(args.begin(), LauncherBinary());
  Subprocess launcher(args);
  return launcher.Finish();
}

std::vector<std::string> Lines(absl::string_view text) {
  return absl::StrSplit(text, '\n', absl::SkipEmpty());
}

// Parses "[rank<R>]: KEY=VALUE" lines (print_env output) by rank.
std::map<int, std::map<std::string, std::string>> EnvByRank(
    const std::string& out) {
  static const std::regex kLine(R"(\[rank([0-9]+)\]: ([A-Z_]+)=(.*))");
  std::map<int, std::map<std::string, std::string>> env;
  for (const std::string& line : Lines(out)) {
    std::smatch match;
    EXPECT_TRUE(std::regex_match(line, match, kLine)) << line;
    if (!match.empty()) env[std::stoi(match[1])][match[2]] = match[3];
  }
  return env;
}

int NumCpus() {
  cpu_set_t cpus;
  CPU_ZERO(&cpus);
  EXPECT_EQ(sched_getaffinity(0, sizeof(cpus), &cpus), 0);
  return CPU_COUNT(&cpus);
}

// Waits up to 2 s for process `pid` (not a child of the test) to end: gone,
// or a zombie waiting for its new parent to reap it.
bool ProcessEnds(absl::string_view pid) {
  const std::string stat_path = absl::StrCat("/proc/", pid, "/stat");
  const absl::Time deadline = absl::Now() + absl::Seconds(2);
  while (absl::Now() < deadline) {
    std::ifstream stat(stat_path);
    std::string stat_pid, name, state;
    if (!(stat >> stat_pid >> name >> state) || state == "Z") return true;
    absl::SleepFor(absl::Milliseconds(20));
  }
  return false;
}

// ---------------------------------------------------------------------------
// The environment of the ranks.

TEST(LauncherEnvironmentTest, ExportsTorchrunAndThreadVariablesToEveryRank) {
  const RunResult result = RunLauncher(
      {"--nproc_per_node=3", "--master_addr=10.1.2.3", "--master_port=12345",
       "--threads_per_rank=2", TestProgram(), "print_env"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const auto env = EnvByRank(result.out);
  ASSERT_EQ(env.size(), 3u) << result.out;
  for (int rank = 0; rank < 3; ++rank) {
    const std::map<std::string, std::string> expected = {
        {"MASTER_ADDR", "10.1.2.3"},
        {"MASTER_PORT", "12345"},
        {"RANK", absl::StrCat(rank)},
        {"WORLD_SIZE", "3"},
        {"LOCAL_RANK", absl::StrCat(rank)},
        {"LOCAL_WORLD_SIZE", "3"},
        {"GROUP_RANK", "0"},
        {"GROUP_WORLD_SIZE", "1"},
        {"OMP_NUM_THREADS", "2"},
        {"OPENBLAS_NUM_THREADS", "2"},
        {"MKL_NUM_THREADS", "2"}};
    EXPECT_EQ(env.at(rank), expected) << "rank " << rank;
  }
}

TEST(LauncherEnvironmentTest, RanksOfALaterNodeFollowThoseOfEarlierNodes) {
  const RunResult result =
      RunLauncher({"--nnodes=2", "--node_rank=1", "--nproc_per_node=2",
                   "--master_port=12345", "--threads_per_rank=1", TestProgram(),
                   "print_env"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const auto env = EnvByRank(result.out);
  ASSERT_EQ(env.size(), 2u) << result.out;
  for (int local_rank = 0; local_rank < 2; ++local_rank) {
    const auto& vars = env.at(2 + local_rank);
    EXPECT_EQ(vars.at("RANK"), absl::StrCat(2 + local_rank));
    EXPECT_EQ(vars.at("LOCAL_RANK"), absl::StrCat(local_rank));
    EXPECT_EQ(vars.at("WORLD_SIZE"), "4");
    EXPECT_EQ(vars.at("LOCAL_WORLD_SIZE"), "2");
    EXPECT_EQ(vars.at("GROUP_RANK"), "1");
    EXPECT_EQ(vars.at("GROUP_WORLD_SIZE"), "2");
  }
}

TEST(LauncherEnvironmentTest, DefaultThreadsAreAnEvenShareOfTheCpus) {
  const RunResult result =
      RunLauncher({"--nproc_per_node=2", TestProgram(), "print_env"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const std::string expected = absl::StrCat(std::max(1, NumCpus() / 2));
  for (const auto& [rank, vars] : EnvByRank(result.out)) {
    EXPECT_EQ(vars.at("OMP_NUM_THREADS"), expected);
    EXPECT_EQ(vars.at("OPENBLAS_NUM_THREADS"), expected);
    EXPECT_EQ(vars.at("MKL_NUM_THREADS"), expected);
  }
}

TEST(LauncherEnvironmentTest, MasterPortZeroPicksOneRealPortForAllRanks) {
  const RunResult result = RunLauncher(
      {"--nproc_per_node=2", "--master_port=0", TestProgram(), "print_env"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const auto env = EnvByRank(result.out);
  ASSERT_EQ(env.size(), 2u) << result.out;
  int port = 0;
  ASSERT_TRUE(absl::SimpleAtoi(env.at(0).at("MASTER_PORT"), &port));
  EXPECT_GT(port, 0);
  EXPECT_LE(port, 65535);
  EXPECT_EQ(env.at(1).at("MASTER_PORT"), env.at(0).at("MASTER_PORT"));
}

TEST(LauncherEnvironmentTest, ExtraEnvReachesEveryRank) {
  LauncherOptions options;
  options.nproc_per_node = 2;
  options.extra_env = {{"STRATA_LAUNCH_TEST", "hello world"}};
  options.command = {TestProgram(), "check_env", "STRATA_LAUNCH_TEST",
                     "hello world"};
  EXPECT_THAT(Launch(options), IsOk());
}

TEST(LauncherEnvironmentTest, ExtraEnvOverridesTheThreadLimit) {
  LauncherOptions options;
  options.num_threads_per_rank = 1;
  options.extra_env = {{"OMP_NUM_THREADS", "7"}};
  options.command = {TestProgram(), "check_env", "OMP_NUM_THREADS", "7"};
  EXPECT_THAT(Launch(options), IsOk());
}

// ---------------------------------------------------------------------------
// Output forwarding.

TEST(LauncherOutputTest, PrefixesEveryLineWithItsRankWithoutInterleaving) {
  constexpr int kNumLines = 300;
  const RunResult result =
      RunLauncher({"--nproc_per_node=3", TestProgram(), "write_lines",
                   absl::StrCat(kNumLines)});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  static const std::regex kLine(
      R"(\[rank([0-9])\]: rank \1 line ([0-9]+) x{300})");
  std::map<int, int> next_line_by_rank;
  for (const std::string& line : Lines(result.out)) {
    std::smatch match;
    ASSERT_TRUE(std::regex_match(line, match, kLine)) << line;
    // Each rank's lines arrive complete and in order.
    int& next_line = next_line_by_rank[std::stoi(match[1])];
    EXPECT_EQ(std::stoi(match[2]), next_line);
    ++next_line;
  }
  EXPECT_EQ(
      next_line_by_rank,
      (std::map<int, int>{{0, kNumLines}, {1, kNumLines}, {2, kNumLines}}));
}

TEST(LauncherOutputTest, StdoutAndStderrGoToTheirOwnStreams) {
  const RunResult result =
      RunLauncher({"--nproc_per_node=1", TestProgram(), "both_streams"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(result.out, "[rank0]: to stdout\n");
  EXPECT_THAT(result.err, HasSubstr("[rank0]: to stderr\n"));
  EXPECT_THAT(result.err, Not(HasSubstr("to stdout")));
}

TEST(LauncherOutputTest, FlushesATrailingPartialLineAtExit) {
  const RunResult result = RunLauncher({TestProgram(), "partial_line"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(result.out,
            "[rank0]: complete line\n[rank0]: no newline at the end\n");
}

TEST(LauncherOutputTest, PrefixOutputFalseForwardsLinesUnchanged) {
  const RunResult result =
      RunLauncher({"--prefix_output=false", TestProgram(), "partial_line"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(result.out, "complete line\nno newline at the end\n");
}

TEST(LauncherCommandTest, FindsTheProgramOnPathAndPassesItsFlagsThrough) {
  // No "--": everything from the program on belongs to the ranks.
  const RunResult result =
      RunLauncher({"--nproc_per_node=2", "sh", "-c", "echo \"rank $RANK: $*\"",
                   "sh", "--nproc_per_node=5", "-v"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  std::vector<std::string> lines = Lines(result.out);
  std::sort(lines.begin(), lines.end());
  EXPECT_EQ(lines, (std::vector<std::string>{
                       "[rank0]: rank 0: --nproc_per_node=5 -v",
                       "[rank1]: rank 1: --nproc_per_node=5 -v"}));
}

TEST(LauncherCommandTest, RanksReadStdinFromDevNull) {
  // The launcher's stdin is a pipe the test keeps open: a rank inheriting it
  // would wait in `cat` until the run times out.
  const RunResult result = RunLauncher({"sh", "-c", "cat; echo done"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(result.out, "[rank0]: done\n");
}

TEST(LauncherCommandTest, DoubleDashSeparatesTheCommand) {
  const RunResult result =
      RunLauncher({"--master_port", "23456", "--", TestProgram(), "print_env"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(EnvByRank(result.out).at(0).at("MASTER_PORT"), "23456");
}

// ---------------------------------------------------------------------------
// Failures.

TEST(LauncherFailureTest, FailingRankIsNamedAndTheOthersAreStoppedPromptly) {
  const RunResult result = RunLauncher(
      {"--nproc_per_node=3", TestProgram(), "exit_on_rank", "1", "3"});
  EXPECT_EQ(result.exit_code, 3);
  EXPECT_THAT(
      result.err,
      MatchesRegex(".*rank 1 \\(local rank 1, pid [0-9]+\\) exited with status "
                   "3\n.*"));
  EXPECT_LT(result.elapsed, kPromptly);
}

TEST(LauncherFailureTest, RankKilledBySignalIsNamedWithTheSignal) {
  const RunResult result = RunLauncher(
      {"--nproc_per_node=2", TestProgram(), "kill_on_rank", "1", "9"});
  EXPECT_EQ(result.exit_code, 128 + 9);
  EXPECT_THAT(result.err,
              MatchesRegex(".*rank 1 \\(local rank 1, pid [0-9]+\\) was killed "
                           "by signal 9 \\(Killed\\)\n.*"));
  EXPECT_LT(result.elapsed, kPromptly);
}

TEST(LauncherFailureTest, RanksIgnoringSigtermAreKilledAfterTheGrace) {
  const RunResult result =
      RunLauncher({"--nproc_per_node=2", "--stop_grace_s=0.5", TestProgram(),
                   "exit_on_rank", "0", "3", "ignore_sigterm"});
  EXPECT_EQ(result.exit_code, 3);
  EXPECT_THAT(result.err, HasSubstr("rank 0 (local rank 0, pid "));
  EXPECT_THAT(result.err, HasSubstr("was killed by signal 9 (Killed)"));
  // 0.5 s before rank 0 exits, then the 0.5 s grace.
  EXPECT_GE(result.elapsed, absl::Seconds(1));
  EXPECT_LT(result.elapsed, kPromptly);
}

TEST(LauncherFailureTest, StoppingReachesTheChildrenOfRanks) {
  const RunResult result =
      RunLauncher({"--nproc_per_node=2", TestProgram(), "exit_on_rank", "0",
                   "3", "with_grandchild"});
  EXPECT_EQ(result.exit_code, 3);
  static const std::regex kLine(R"(\[rank1\]: grandchild pid ([0-9]+))");
  std::smatch match;
  ASSERT_TRUE(std::regex_search(result.out, match, kLine)) << result.out;
  EXPECT_TRUE(ProcessEnds(match[1].str()))
      << "grandchild " << match[1] << " still running";
}

TEST(LauncherFailureTest, MissingProgramIsNamed) {
  const RunResult result =
      RunLauncher({"--nproc_per_node=2", "strata_no_such_program", "arg"});
  EXPECT_EQ(result.exit_code, 127);
  EXPECT_THAT(result.err,
              HasSubstr("[rank0]: cannot execute 'strata_no_such_program': No "
                        "such file or directory\n"));
  EXPECT_THAT(
      result.err,
      MatchesRegex(".*rank 0 \\(local rank 0, pid [0-9]+\\) exited with "
                   "status 127: cannot execute "
                   "'strata_no_such_program': No such file or "
                   "directory\n.*"));
}

TEST(LauncherFailureTest, SigtermToTheLauncherIsForwardedToTheRanks) {
  Subprocess launcher({LauncherBinary(), "--nproc_per_node=2", TestProgram(),
                       "ready_then_sleep"});
  ASSERT_TRUE(launcher.WaitForStdout(
      [](const std::string& out) {
        return absl::StrContains(out, "[rank0]: ready\n") &&
               absl::StrContains(out, "[rank1]: ready\n");
      },
      absl::Seconds(10)))
      << launcher.out();
  const absl::Time signalled = absl::Now();
  launcher.Signal(SIGTERM);
  const RunResult result = launcher.Finish();
  EXPECT_EQ(result.exit_code, 128 + SIGTERM);
  EXPECT_THAT(result.err, HasSubstr("was killed by signal 15 (Terminated)"));
  EXPECT_LT(absl::Now() - signalled, kPromptly);
}

// ---------------------------------------------------------------------------
// Restarts (--max_restarts).

// Rank 1 kills itself with SIGKILL in rounds 0 and 1 (rank 0 sleeps until it
// is stopped); in round 2 both exit 0. Every rank of every round prints its
// round, the limit and its port. Rank 1 dies only once rank 0 has printed
// (a marker file per round), so a slow rank 0 is not stopped before its line.
TEST(LauncherRestartTest, RestartsAllRanksWithTheRoundAndAFreshPort) {
  const std::string marker =
      absl::StrCat(::testing::TempDir(), "/restart_marker_", getpid(), "_");
  const RunResult result = RunLauncher(
      {"--nproc_per_node=2", "--max_restarts=3", "--master_port=0", "sh", "-c",
       absl::StrCat(
           "echo round=$TORCHELASTIC_RESTART_COUNT "
           "max=$TORCHELASTIC_MAX_RESTARTS port=$MASTER_PORT; "
           "if [ $TORCHELASTIC_RESTART_COUNT -ge 2 ]; then exit 0; fi; "
           "m='",
           marker,
           "'$TORCHELASTIC_RESTART_COUNT; "
           "if [ $RANK = 0 ]; then : > \"$m\"; exec sleep 60; fi; "
           "while [ ! -e \"$m\" ]; do sleep 0.01; done; kill -9 $$")});
  EXPECT_EQ(result.exit_code, 0) << result.err;
  std::vector<std::string> rounds[2];
  std::set<std::string> ports;
  static const std::regex kLine(
      R"(\[rank([01])\]: round=([0-9]+) max=3 port=([0-9]+))");
  for (const std::string& line : Lines(result.out)) {
    std::smatch match;
    ASSERT_TRUE(std::regex_match(line, match, kLine)) << line;
    rounds[std::stoi(match[1])].push_back(match[2]);
    ports.insert(match[3]);
  }
  const std::vector<std::string> want = {"0", "1", "2"};
  EXPECT_EQ(rounds[0], want) << result.out;
  EXPECT_EQ(rounds[1], want) << result.out;
  // --master_port=0 picks a port per round (two picks may collide by
  // chance, three hardly).
  EXPECT_GE(ports.size(), 2u) << result.out;
  for (int restart : {1, 2}) {
    EXPECT_THAT(result.err,
                MatchesRegex(absl::StrCat(
                    ".*restart ", restart,
                    "/3: rank 1 \\(pid [0-9]+\\) was killed by signal 9 "
                    "\\(Killed\\); restarting all 2 ranks\n.*")));
    EXPECT_THAT(result.err,
                HasSubstr(absl::StrCat("was killed by signal 9 (Killed) in "
                                       "restart round ",
                                       restart - 1)));
  }
  EXPECT_THAT(result.err, Not(HasSubstr("restart 3/3")));
  EXPECT_LT(result.elapsed, kPromptly);
}

TEST(LauncherRestartTest, GivesUpAfterMaxRestartsWithTheLastFailure) {
  const RunResult result =
      RunLauncher({"--nproc_per_node=2", "--max_restarts=2", TestProgram(),
                   "exit_on_rank", "1", "3"});
  EXPECT_EQ(result.exit_code, 3);
  EXPECT_THAT(result.err,
              MatchesRegex(".*restart 1/2: rank 1 \\(pid [0-9]+\\) exited "
                           "with status 3; restarting all 2 ranks\n.*"));
  EXPECT_THAT(result.err,
              MatchesRegex(".*restart 2/2: rank 1 \\(pid [0-9]+\\) exited "
                           "with status 3; restarting all 2 ranks\n.*"));
  EXPECT_THAT(result.err, Not(HasSubstr("restart 3/2")));
  EXPECT_THAT(
      result.err,
      MatchesRegex(".*restarts exhausted \\(--max_restarts=2\\): rank 1 "
                   "\\(pid [0-9]+\\) exited with status 3; giving up\n.*"));
  // The final error names the last round.
  EXPECT_THAT(result.err,
              MatchesRegex(".*rank 1 \\(local rank 1, pid [0-9]+\\) exited "
                           "with status 3 in restart round 2\n.*"));
  EXPECT_LT(result.elapsed, kPromptly);
}

TEST(LauncherRestartTest, AProgramThatCannotStartIsNotRestarted) {
  const RunResult result = RunLauncher(
      {"--nproc_per_node=2", "--max_restarts=2", "strata_no_such_program"});
  EXPECT_EQ(result.exit_code, 127);
  EXPECT_THAT(result.err, Not(HasSubstr("restart 1/2")));
}

TEST(LauncherRestartTest, SigtermToTheLauncherIsNotRestarted) {
  Subprocess launcher({LauncherBinary(), "--nproc_per_node=2",
                       "--max_restarts=2", TestProgram(), "ready_then_sleep"});
  ASSERT_TRUE(launcher.WaitForStdout(
      [](const std::string& out) {
        return absl::StrContains(out, "[rank0]: ready\n") &&
               absl::StrContains(out, "[rank1]: ready\n");
      },
      absl::Seconds(10)))
      << launcher.out();
  launcher.Signal(SIGTERM);
  const RunResult result = launcher.Finish();
  EXPECT_EQ(result.exit_code, 128 + SIGTERM);
  EXPECT_THAT(result.err, Not(HasSubstr("restart 1/2")));
  EXPECT_EQ(Lines(result.out).size(), 2u) << "no new round: " << result.out;
}

TEST(LauncherRestartTest, LaunchRestartsUntilARoundSucceeds) {
  LauncherOptions options;
  options.nproc_per_node = 2;
  options.max_restarts = 1;
  options.command = {"sh", "-c",
                     "[ $TORCHELASTIC_RESTART_COUNT = 1 ] || "
                     "[ $RANK = 0 ] || exit 7; exec sleep 0"};
  EXPECT_THAT(Launch(options), IsOk());
  options.max_restarts = 0;
  const absl::Status status = Launch(options);
  EXPECT_EQ(ExitCodeFromStatus(status), 7) << status;
}

TEST(LauncherFailureTest, RanksEndWhenTheLauncherIsKilled) {
  Subprocess launcher(
      {LauncherBinary(), "sh", "-c", "echo pid $$; exec sleep 60"});
  static const std::regex kLine(R"(\[rank0\]: pid ([0-9]+)\n)");
  std::smatch match;
  ASSERT_TRUE(launcher.WaitForStdout(
      [&match](const std::string& out) {
        return std::regex_search(out, match, kLine);
      },
      absl::Seconds(10)))
      << launcher.out();
  const std::string rank_pid = match[1].str();
  launcher.Signal(SIGKILL);
  launcher.Finish();
  EXPECT_TRUE(ProcessEnds(rank_pid)) << "rank " << rank_pid << " still running";
}

TEST(LauncherFailureTest, LaunchReturnsTheFirstFailureAndItsExitCode) {
  LauncherOptions options;
  options.nproc_per_node = 2;
  options.command = {TestProgram(), "exit_on_rank", "1", "3"};
  const absl::Status status = Launch(options);
  EXPECT_EQ(status.code(), absl::StatusCode::kAborted);
  EXPECT_THAT(std::string(status.message()),
              MatchesRegex("rank 1 \\(local rank 1, pid [0-9]+\\) exited with "
                           "status 3"));
  EXPECT_EQ(ExitCodeFromStatus(status), 3);
}

TEST(LauncherFailureTest, LaunchReturnsOkWhenEveryRankExitsZero) {
  LauncherOptions options;
  options.nproc_per_node = 2;
  options.command = {TestProgram(), "exit", "0"};
  const absl::Status status = Launch(options);
  EXPECT_THAT(status, IsOk());
  EXPECT_EQ(ExitCodeFromStatus(status), 0);
}

TEST(LauncherFailureTest, ExitCodeOfOtherErrorsIsOne) {
  EXPECT_EQ(ExitCodeFromStatus(absl::InternalError("fork failed")), 1);
}

// The binary rejects bad flags before starting any rank (print_env would
// print to stdout).
TEST(LauncherFlagsTest, ZeroNprocPerNodeFailsNamingTheFlag) {
  const RunResult result =
      RunLauncher({"--nproc_per_node=0", TestProgram(), "print_env"});
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_THAT(result.err, HasSubstr("--nproc_per_node must be >= 1, got 0"));
  EXPECT_EQ(result.out, "");
}

TEST(LauncherFlagsTest, NodeRankNotBelowNnodesFailsNamingTheFlag) {
  const RunResult result =
      RunLauncher({"--nnodes=2", "--node_rank=2", TestProgram(), "print_env"});
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_THAT(result.err,
              HasSubstr("--node_rank must be in [0, --nnodes=2), got 2"));
  EXPECT_EQ(result.out, "");
}

TEST(LauncherFlagsTest, MasterPortOutOfRangeFailsNamingTheFlag) {
  const RunResult result =
      RunLauncher({"--master_port=70000", TestProgram(), "print_env"});
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_THAT(result.err, HasSubstr("--master_port must be in [0, 65535]"));
  EXPECT_EQ(result.out, "");
}

TEST(LauncherFlagsTest, NegativeStopGraceFailsNamingTheFlag) {
  const RunResult result =
      RunLauncher({"--stop_grace_s=-1", TestProgram(), "print_env"});
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_THAT(result.err, HasSubstr("--stop_grace_s must be >= 0, got -1"));
  EXPECT_EQ(result.out, "");
}

TEST(LauncherFlagsTest, NoProgramIsAUsageError) {
  const RunResult result = RunLauncher({"--nproc_per_node=2"});
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_THAT(result.err,
              HasSubstr("no program given; usage: launch [flags] [--] program "
                        "[args...]"));
}

// ---------------------------------------------------------------------------
// Stopped ranks and heartbeats.

// The pid a pid_then_sleep rank printed ("[rank<R>]: pid=<pid>"), or -1.
pid_t PrintedPid(const std::string& out, int rank) {
  const std::regex line(absl::StrCat(R"(\[rank)", rank, R"(\]: pid=([0-9]+))"));
  std::smatch match;
  if (!std::regex_search(out, match, line)) return -1;
  return static_cast<pid_t>(std::stoi(match[1]));
}

TEST(LauncherStoppedRankTest, AStoppedRankGetsSigkillWithoutTheGrace) {
  // A grace far beyond the run timeout: only an immediate SIGKILL of the
  // stopped rank lets the launcher finish in time.
  Subprocess launcher({LauncherBinary(), "--nproc_per_node=2",
                       "--stop_grace_s=60", TestProgram(), "pid_then_sleep"},
                      {}, kRunTimeout);
  ASSERT_TRUE(launcher.WaitForStdout(
      [](const std::string& out) {
        return PrintedPid(out, 0) > 0 && PrintedPid(out, 1) > 0;
      },
      kRunTimeout));
  const pid_t rank0 = PrintedPid(launcher.out(), 0);
  const pid_t rank1 = PrintedPid(launcher.out(), 1);
  ASSERT_EQ(kill(rank1, SIGSTOP), 0);
  // SIGSTOP takes effect asynchronously: wait until /proc says so.
  const absl::Time deadline = absl::Now() + absl::Seconds(5);
  absl::StatusOr<char> state;
  do {
    state = ProcessState(rank1);
  } while (state.ok() && !IsStoppedState(*state) && absl::Now() < deadline);
  ASSERT_THAT(state, IsOk());
  ASSERT_TRUE(IsStoppedState(*state));
  const absl::Time failed = absl::Now();
  ASSERT_EQ(kill(rank0, SIGKILL), 0);  // The first failure.
  const RunResult result = launcher.Finish();
  EXPECT_LT(absl::Now() - failed, kPromptly);
  EXPECT_EQ(result.exit_code, 128 + 9);
  EXPECT_THAT(result.err,
              HasSubstr(absl::StrCat("rank 0 (local rank 0, pid ", rank0,
                                     ") was killed by signal 9 (Killed)")));
  EXPECT_THAT(result.err,
              HasSubstr(absl::StrCat(
                  "rank 1 (local rank 1, pid ", rank1,
                  "): it was T (stopped) and could not react to SIGTERM, so "
                  "it got SIGKILL at once")));
}

TEST(LauncherHeartbeatTest, RanksGetThePipeAndAQuarterOfTheTimeout) {
  const RunResult result = RunLauncher(
      {"--nproc_per_node=2", "--heartbeat_timeout_s=2", TestProgram(),
       "check_env", "STRATA_HEARTBEAT_INTERVAL_MS", "500"});
  EXPECT_EQ(result.exit_code, 0) << result.err;
}

TEST(LauncherHeartbeatTest, NoPipeWithoutTheFlag) {
  const RunResult result =
      RunLauncher({TestProgram(), "check_env", "STRATA_HEARTBEAT_FD", ""});
  EXPECT_EQ(result.exit_code, 4);
  EXPECT_THAT(result.err, HasSubstr("STRATA_HEARTBEAT_FD is '<unset>'"));
}

TEST(LauncherHeartbeatTest, ARankThatNeverBeatsIsNamedAndKilled) {
  const auto start = absl::Now();
  const RunResult result = RunLauncher(
      {"--nproc_per_node=2", "--heartbeat_timeout_s=0.5",
       "--heartbeat_startup_timeout_s=1", TestProgram(), "ready_then_sleep"});
  EXPECT_EQ(result.exit_code, 128 + 9);
  EXPECT_THAT(result.err,
              MatchesRegex(".*rank 0 \\(local rank 0, pid [0-9]+\\): it sent "
                           "no heartbeat in the 1s since it started "
                           "\\(--heartbeat_startup_timeout_s; does the "
                           "program beat\\? see launch/README.md\\), process "
                           "state S \\(sleeping\\).*"));
  EXPECT_LT(absl::Now() - start, absl::Seconds(1) + kPromptly);
}

TEST(LauncherFlagsTest, NegativeHeartbeatTimeoutFailsNamingTheFlag) {
  const RunResult result =
      RunLauncher({"--heartbeat_timeout_s=-1", TestProgram(), "print_env"});
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_THAT(result.err,
              HasSubstr("--heartbeat_timeout_s must be a finite number >= 0, "
                        "got -1"));
}

}  // namespace
}  // namespace strata::launch
