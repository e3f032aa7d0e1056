// Two `launch` processes on 127.0.0.1 as node 0 and node 1 of one job
// (--nnodes=2 --max_restarts > 0): they agree on restart rounds through the
// agent store node 0 serves (--rdzv_endpoint). A rank failing on one node
// stops the ranks of both at once and restarts them all; the restarts are
// counted for the job; a node that never joins is named.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "base/regex.h"
#include "base/testing/subprocess.h"
#include "launch/agent_store.h"

namespace strata::launch {
namespace {

using ::strata::testing::FreePort;
using ::strata::testing::RunfilePath;
using ::strata::testing::RunResult;
using ::strata::testing::Subprocess;
using ::testing::HasSubstr;
using ::testing::MatchesRegex;
using ::testing::Not;

// Every run must end well within this; the sleeping ranks sleep 60 s.
constexpr absl::Duration kRunTimeout = absl::Seconds(30);
// "Promptly": far below the ranks' 60 s sleep (what stopping them only on a
// collective timeout would take).
constexpr absl::Duration kPromptly = absl::Seconds(10);

// Two distinct free ports: the ranks' master port and the agent store's.
struct Ports {
  int master = 0;
  int rdzv = 0;
};

Ports TwoFreePorts() {
  Ports ports;
  ports.master = FreePort();
  do {
    ports.rdzv = FreePort();
  } while (ports.rdzv == ports.master);
  return ports;
}

// The `launch` command line of node `node_rank` of a 2-node job with 2 ranks
// a node, then `more` flags and the command.
std::vector<std::string> NodeArgs(int node_rank, const Ports& ports,
                                  const std::vector<std::string>& more) {
  std::vector<std::string> args = {
      RunfilePath("launch/launch"),
      "--nnodes=2",
      absl::StrCat("--node_rank=", node_rank),
      "--nproc_per_node=2",
      "--master_addr=127.0.0.1",
      absl::StrCat("--master_port=", ports.master),
      absl::StrCat("--rdzv_endpoint=127.0.0.1:", ports.rdzv),
      "--stop_grace_s=5"};
  args.insert(args.end(), more.begin(), more.end());
  return args;
}

// Runs node 0 and node 1 with `more` and waits for both.
std::vector<RunResult> RunTwoNodes(const std::vector<std::string>& more) {
  const Ports ports = TwoFreePorts();
  Subprocess node0(NodeArgs(0, ports, more), {}, kRunTimeout);
  Subprocess node1(NodeArgs(1, ports, more), {}, kRunTimeout);
  RunResult result1 = node1.Finish();
  RunResult result0 = node0.Finish();
  return {result0, result1};
}

// Whether a client connects to the agent store on `port` within kPromptly
// and it counts (node 0's launcher serves it before it waits for node 1).
bool AgentStoreAnswers(int port) {
  absl::StatusOr<std::unique_ptr<AgentStoreClient>> client =
      AgentStoreClient::Connect("127.0.0.1", port, kPromptly);
  return client.ok() && (*client)->Add("probe", 1).ok();
}

// The line of `text` that contains `needle`, or "" if none does.
std::string LineWith(const std::string& text, const std::string& needle) {
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (absl::StrContains(line, needle)) return std::string(line);
  }
  return "";
}

// The part of a glog line after "] ".
std::string Message(const std::string& line) {
  const size_t end = line.find("] ");
  return end == std::string::npos ? line : line.substr(end + 2);
}

// Rank 3 (node 1's local rank 1) kills itself in round 0; the other three
// ranks sleep 60 s in round 0, and every rank exits 0 in round 1.
const std::vector<std::string> kRank3DiesInRound0 = {
    "--max_restarts=2", "sh", "-c",
    "echo round=$TORCHELASTIC_RESTART_COUNT; "
    "if [ $TORCHELASTIC_RESTART_COUNT -ge 1 ]; then exit 0; fi; "
    "if [ $RANK = 3 ]; then kill -9 $$; fi; exec sleep 60"};

TEST(LauncherMultiNodeTest, ARankFailingOnNodeOneRestartsTheRanksOfBoth) {
  const std::vector<RunResult> nodes = RunTwoNodes(kRank3DiesInRound0);
  static const std::regex kRestart(
      "restart 1/2: node 1 rank 3 \\(pid [0-9]+\\) was killed by signal 9 "
      "\\(Killed\\); restarting all 4 ranks on 2 nodes");
  std::string restart_lines[2];
  for (int node : {0, 1}) {
    const RunResult& result = nodes[node];
    EXPECT_EQ(result.exit_code, 0) << "node " << node << ": " << result.err;
    restart_lines[node] = Message(LineWith(result.err, "restart 1/2: "));
    EXPECT_TRUE(std::regex_match(restart_lines[node], kRestart))
        << "node " << node << ": " << result.err;
    EXPECT_THAT(result.err, Not(HasSubstr("restart 2/2")));
    // Both of the node's ranks ran round 1. (A round-0 rank may have been
    // stopped before its echo ran.)
    const int first_rank = 2 * node;
    for (int rank : {first_rank, first_rank + 1}) {
      EXPECT_THAT(result.out,
                  HasSubstr(absl::StrCat("[rank", rank, "]: round=1\n")))
          << "node " << node;
    }
    // Node 0's sleeping ranks were stopped by the agent store, not by
    // their 60 s sleep ending.
    EXPECT_LT(result.elapsed, kPromptly) << "node " << node;
  }
  // The same text, pid included, on both nodes: the store's.
  EXPECT_EQ(restart_lines[0], restart_lines[1]);
  EXPECT_THAT(nodes[0].err,
              HasSubstr("restart round 0 failed: node 1 rank 3 (pid "));
}

TEST(LauncherMultiNodeTest, MasterPortZeroIsNodeZerosPickForEveryRank) {
  const Ports ports = TwoFreePorts();
  const std::vector<std::string> more = {
      "--max_restarts=1", "--master_port=0", "sh", "-c",
      "echo round=$TORCHELASTIC_RESTART_COUNT port=$MASTER_PORT; "
      "if [ $TORCHELASTIC_RESTART_COUNT = 0 ] && [ $RANK = 1 ]; then "
      "exit 5; fi; if [ $TORCHELASTIC_RESTART_COUNT = 0 ]; then "
      "exec sleep 60; fi"};
  // --master_port=0 comes after NodeArgs' port and wins.
  Subprocess node0(NodeArgs(0, ports, more), {}, kRunTimeout);
  Subprocess node1(NodeArgs(1, ports, more), {}, kRunTimeout);
  const RunResult result1 = node1.Finish();
  const RunResult result0 = node0.Finish();
  ASSERT_EQ(result0.exit_code, 0) << result0.err;
  ASSERT_EQ(result1.exit_code, 0) << result1.err;
  static const std::regex kLine(
      R"(\[rank([0-3])\]: round=([01]) port=([0-9]+))");
  std::map<std::string, std::set<std::string>> ports_by_round;
  std::map<std::string, int> num_lines;
  for (const std::string* out : {&result0.out, &result1.out}) {
    for (const std::string& line : std::vector<std::string>(
             absl::StrSplit(*out, '\n', absl::SkipEmpty()))) {
      std::smatch match;
      ASSERT_TRUE(std::regex_match(line, match, kLine)) << line;
      ports_by_round[match[2]].insert(match[3]);
      ++num_lines[match[2]];
    }
  }
  // Round 1: every rank. Round 0: at least rank 1, which failed after its
  // echo (the others may have been stopped before theirs).
  EXPECT_EQ(num_lines["1"], 4);
  EXPECT_GE(num_lines["0"], 1);
  ASSERT_EQ(ports_by_round.size(), 2u);
  for (const auto& [round, round_ports] : ports_by_round) {
    EXPECT_EQ(round_ports.size(), 1u) << "round " << round;
    EXPECT_NE(*round_ports.begin(), "0");
  }
}

TEST(LauncherMultiNodeTest, ExhaustedRestartsEndBothNodesWithTheSameError) {
  const std::vector<RunResult> nodes =
      RunTwoNodes({"--max_restarts=1", "sh", "-c",
                   "if [ $RANK = 3 ]; then exit 3; fi; exec sleep 60"});
  static const std::regex kFinal(
      "restarts exhausted \\(--max_restarts=1, counted for all 2 nodes\\): "
      "restart round 1 failed: node 1 rank 3 \\(pid [0-9]+\\) exited with "
      "status 3");
  std::string final_lines[2];
  for (int node : {0, 1}) {
    const RunResult& result = nodes[node];
    // The failing rank's exit status, on every node.
    EXPECT_EQ(result.exit_code, 3) << "node " << node << ": " << result.err;
    EXPECT_THAT(result.err, HasSubstr("restart 1/1: node 1 rank 3 (pid "));
    EXPECT_THAT(result.err, Not(HasSubstr("restart 2/1")));
    final_lines[node] =
        Message(LineWith(result.err, "restarts exhausted (--max_restarts=1, "));
    EXPECT_TRUE(std::regex_match(final_lines[node], kFinal))
        << "node " << node << ": " << result.err;
    EXPECT_LT(result.elapsed, kPromptly) << "node " << node;
  }
  EXPECT_EQ(final_lines[0], final_lines[1]);
}

TEST(LauncherMultiNodeTest, ANodeThatNeverJoinsIsNamedWithinTheDeadline) {
  const Ports ports = TwoFreePorts();
  Subprocess node0(NodeArgs(0, ports,
                            {"--max_restarts=1", "--rdzv_join_timeout_s=2",
                             "sh", "-c", "exec sleep 60"}),
                   {}, kRunTimeout);
  const RunResult result = node0.Finish();
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_THAT(result.err, HasSubstr("node 1 did not join restart round 0 "
                                    "within 2s (--rdzv_join_timeout_s"));
  // No rank started: nothing ran before every node joined.
  EXPECT_EQ(result.out, "");
  // The 2 s deadline plus start-up; far below the ranks' 60 s sleep.
  EXPECT_LT(result.elapsed, kPromptly);
}

TEST(LauncherMultiNodeTest, ANodeThatCannotReachTheAgentStoreNamesIt) {
  const Ports ports = TwoFreePorts();
  Subprocess node1(NodeArgs(1, ports,
                            {"--max_restarts=1", "--rdzv_join_timeout_s=1",
                             "sh", "-c", "exec sleep 60"}),
                   {}, kRunTimeout);
  const RunResult result = node1.Finish();
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_THAT(result.err,
              HasSubstr(absl::StrCat("node 1: connecting failed at the agent "
                                     "store 127.0.0.1:",
                                     ports.rdzv, " (--rdzv_endpoint")));
  EXPECT_LT(result.elapsed, kPromptly);
}

TEST(LauncherMultiNodeTest, NodeZeroGoneStopsTheOtherNodesRanks) {
  const Ports ports = TwoFreePorts();
  const std::vector<std::string> more = {"--max_restarts=1", "sh", "-c",
                                         "echo ready; exec sleep 60"};
  Subprocess node0(NodeArgs(0, ports, more), {}, kRunTimeout);
  Subprocess node1(NodeArgs(1, ports, more), {}, kRunTimeout);
  ASSERT_TRUE(node1.WaitForStdout(
      [](const std::string& out) {
        return absl::StrContains(out, "[rank2]: ready\n") &&
               absl::StrContains(out, "[rank3]: ready\n");
      },
      kPromptly))
      << node1.out();
  node0.Signal(SIGKILL);  // The agent store goes with it.
  const RunResult result = node1.Finish();
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_THAT(result.err,
              HasSubstr(absl::StrCat("failed at the agent store 127.0.0.1:",
                                     ports.rdzv)));
  EXPECT_LT(result.elapsed, kPromptly);
}

TEST(LauncherMultiNodeTest, SigtermWhileWaitingForANodeEndsTheWait) {
  const Ports ports = TwoFreePorts();
  Subprocess node0(NodeArgs(0, ports,
                            {"--max_restarts=1", "--rdzv_join_timeout_s=60",
                             "sh", "-c", "exec sleep 60"}),
                   {}, kRunTimeout);
  // The agent store answers once node 0's launcher is waiting for node 1.
  ASSERT_TRUE(AgentStoreAnswers(ports.rdzv));
  node0.Signal(SIGTERM);
  const RunResult result = node0.Finish();
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_THAT(result.err,
              HasSubstr("node 0's launcher received SIGINT/SIGTERM while "
                        "waiting for the other nodes to join restart round 0"));
  // Far below the 60 s join deadline.
  EXPECT_LT(result.elapsed, kPromptly);
}

}  // namespace
}  // namespace strata::launch
