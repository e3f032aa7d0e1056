// End-to-end tests with real processes: ranks formed through the launcher,
// torchrun, and Slurm/Open MPI environments; failures of a rank (killed,
// stalled), unreachable masters and bad environments.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/types.h>
#include <time.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "base/regex.h"
#include "base/testing/subprocess.h"

namespace strata::launch {
namespace {

using ::strata::testing::FreePort;
using ::strata::testing::RunfilePath;
using ::strata::testing::RunResult;
using ::strata::testing::Subprocess;
using ::strata::testing::TorchrunEnv;
using ::testing::ContainsRegex;
using ::testing::HasSubstr;
using ::testing::Not;
using Env = std::vector<std::pair<std::string, std::string>>;

std::string Launcher() { return RunfilePath("launch/launch"); }
std::string Worker() { return RunfilePath("comm/testing/collective_worker"); }

TEST(MultiProcessTest, LauncherFormsWorldOverTcpStore) {
  RunResult r =
      ::strata::testing::Run({Launcher(), "--nproc_per_node=3",
                              "--master_port=0", Worker(), "iterations=10"},
                             {}, absl::Seconds(60));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  for (int rank = 0; rank < 3; ++rank) {
    EXPECT_THAT(r.err, HasSubstr(absl::StrCat(
                           "rank ", rank,
                           " of 3 (torchrun): all 10 collectives correct")));
  }
}

TEST(MultiProcessTest, KilledRankMakesPeerFailNamingTheCollective) {
  const int port = FreePort();
  const std::vector<std::string> args = {
      Worker(), "iterations=50", "die_rank=1", "die_at=5", "timeout_s=10"};
  Subprocess rank0(args, TorchrunEnv(0, 2, port), absl::Seconds(30));
  Subprocess rank1(args, TorchrunEnv(1, 2, port), absl::Seconds(30));
  RunResult r1 = rank1.Finish();
  RunResult r0 = rank0.Finish();
  EXPECT_EQ(r1.exit_code, -1);  // Killed by SIGKILL.
  EXPECT_EQ(r0.exit_code, 1) << r0.err;
  EXPECT_THAT(r0.err, HasSubstr("iteration 5: all_reduce(sum) of 65536 x "
                                "Float on group 'world' (rank 0 of 2)"));
  // Within the timeout plus 5 s of the peer's death (which ended rank1's run).
  EXPECT_LT(r0.elapsed, r1.elapsed + absl::Seconds(10 + 5));
}

TEST(MultiProcessTest, StalledRankMakesPeerTimeOutNamingTheCollective) {
  const int port = FreePort();
  const std::vector<std::string> args = {
      Worker(), "iterations=50", "stall_rank=1", "stall_at=3", "timeout_s=3"};
  Subprocess rank0(args, TorchrunEnv(0, 2, port), absl::Seconds(30));
  Subprocess rank1(args, TorchrunEnv(1, 2, port), absl::Seconds(30));
  RunResult r0 = rank0.Finish();
  rank1.Signal(SIGKILL);
  EXPECT_EQ(r0.exit_code, 1) << r0.err;
  EXPECT_THAT(r0.err, HasSubstr("iteration 3: all_reduce(sum) of 65536 x "
                                "Float on group 'world' (rank 0 of 2)"));
  EXPECT_THAT(r0.err, HasSubstr("Timed out"));
  EXPECT_LT(r0.elapsed, absl::Seconds(3 + 5 + 3));  // +3 s for start-up.
}

// CLOCK_MONOTONIC in milliseconds: comparable with the worker's
// "stopping itself at monotonic_ms=<ms>" line (one clock for all processes).
int64_t MonotonicMs() {
  timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return now.tv_sec * 1000 + now.tv_nsec / 1000000;
}

// The moment the worker logged before its SIGSTOP, or -1.
int64_t StoppedAtMs(const std::string& err) {
  static const std::regex kLine("stopping itself at monotonic_ms=([0-9]+)");
  std::smatch match;
  if (!std::regex_search(err, match, kLine)) return -1;
  return std::stoll(match[1]);
}

TEST(MultiProcessTest, StoppedRankIsNamedWithItsLastOperationByItsPeer) {
  // Rank 1 stops (SIGSTOP) before iteration 5: it last entered all-reduce #5
  // (iteration 4); rank 0's call #6 times out. 150 ms between iterations
  // let every record reach the store (published at most every 20 ms).
  const RunResult r = ::strata::testing::Run(
      {Launcher(), "--nproc_per_node=2", "--master_port=0", Worker(),
       "iterations=1000", "interval_ms=150", "stop_rank=1", "stop_at=5",
       "timeout_s=3"},
      {}, absl::Seconds(60));
  const int64_t exited_ms = MonotonicMs();
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_THAT(
      r.err,
      HasSubstr("iteration 5: all_reduce(sum) of 65536 x Float on group "
                "'world' (rank 0 of 2): all_reduce #6 timed out after 3s: "
                "rank 1 never arrived (last entered all_reduce #5 on group "
                "'world' at step 4, "));
  // The launcher names the stopped rank, and did not wait out the 10 s
  // SIGTERM grace for it.
  EXPECT_THAT(r.err, HasSubstr("rank 0 (local rank 0, pid "));
  EXPECT_THAT(r.err, HasSubstr("exited with status 1"));
  EXPECT_THAT(r.err, HasSubstr("rank 1 (local rank 1, pid "));
  EXPECT_THAT(r.err, HasSubstr("it was T (stopped) and could not react to "
                               "SIGTERM, so it got SIGKILL at once"));
  const int64_t stopped_ms = StoppedAtMs(r.err);
  ASSERT_GT(stopped_ms, 0) << r.err;
  EXPECT_LT(exited_ms - stopped_ms, (3 + 5) * 1000);
}

TEST(MultiProcessTest, ARankStoppedInsideACollectiveIsNamedByItsStaleRecord) {
  // Rank 1 enters all-reduce #6 (iteration 5) and stops inside it; rank 0
  // enters it 1 s later, so every rank entered it when it times out after
  // 5 s. Rank 1's record has not been refreshed since it stopped (more than
  // the 3 s that count as stale: refreshes come every second).
  const RunResult r = ::strata::testing::Run(
      {Launcher(), "--nproc_per_node=2", "--master_port=0", Worker(),
       "iterations=1000", "stop_inside_rank=1", "stop_inside_at=5",
       "timeout_s=5"},
      {}, absl::Seconds(60));
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_THAT(r.err, ContainsRegex("all_reduce #6 timed out after 5s: every "
                                   "rank entered it; rank 1 \\(node 0, host "
                                   "[^)]+\\) has not refreshed its progress "
                                   "record for [5-9]\\.[0-9] s: that node is "
                                   "unreachable, or the process is stopped"));
}

TEST(MultiProcessTest, HeartbeatFindsAStoppedRankBeforeTheCollectiveTimeout) {
  // The collective timeout (30 s) is far away: the heartbeat (2 s) finds it.
  const RunResult r = ::strata::testing::Run(
      {Launcher(), "--nproc_per_node=2", "--master_port=0",
       "--heartbeat_timeout_s=2", Worker(), "iterations=1000", "interval_ms=50",
       "stop_rank=1", "stop_at=5", "timeout_s=30"},
      {}, absl::Seconds(60));
  const int64_t exited_ms = MonotonicMs();
  EXPECT_EQ(r.exit_code, 128 + SIGKILL) << r.err;
  EXPECT_THAT(r.err, HasSubstr("rank 1 (local rank 1, pid "));
  EXPECT_THAT(r.err, HasSubstr("it sent no heartbeat for 2"));
  EXPECT_THAT(r.err, HasSubstr("(--heartbeat_timeout_s), process state T "
                               "(stopped)"));
  // Rank 0 beat all along: it is not the one reported.
  EXPECT_THAT(r.err, Not(ContainsRegex("rank 0 \\(local rank 0, pid "
                                       "[0-9]+\\): it sent no heartbeat")));
  const int64_t stopped_ms = StoppedAtMs(r.err);
  ASSERT_GT(stopped_ms, 0) << r.err;
  EXPECT_LT(exited_ms - stopped_ms, (2 + 5) * 1000);
}

TEST(MultiProcessTest, LauncherNamesKilledRankAndStopsTheOthers) {
  RunResult r = ::strata::testing::Run(
      {Launcher(), "--nproc_per_node=2", "--master_port=0", Worker(),
       "iterations=1000", "interval_ms=5", "die_rank=1", "die_at=3"},
      {}, absl::Seconds(60));
  EXPECT_EQ(r.exit_code, 128 + SIGKILL) << r.err;
  EXPECT_THAT(r.err, HasSubstr("rank 1 (local rank 1, pid "));
  EXPECT_THAT(r.err, HasSubstr("killed by signal 9"));
  EXPECT_LT(r.elapsed, absl::Seconds(20));
}

TEST(MultiProcessTest, UnreachableMasterFailsClearlyWithinTimeout) {
  const int port = FreePort();  // Nobody serves the store there.
  RunResult r = ::strata::testing::Run(
      {Worker(), "timeout_s=2"}, TorchrunEnv(1, 2, port), absl::Seconds(30));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr(absl::StrCat(
                         "connecting to the rendezvous store at 127.0.0.1:",
                         port, " (rank 1 of 2, from torchrun variables")));
  EXPECT_THAT(r.err, HasSubstr("Is rank 0 running"));
  EXPECT_LT(r.elapsed, absl::Seconds(2 + 5));
}

TEST(MultiProcessTest, BadEnvironmentsNameTheVariable) {
  struct Case {
    Env env;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {{{"RANK", "0"}, {"WORLD_SIZE", "0"}}, "WORLD_SIZE=0 is out of range"},
      {{{"RANK", "2"}, {"WORLD_SIZE", "2"}}, "RANK=2 but WORLD_SIZE=2"},
      {{{"RANK", "one"}, {"WORLD_SIZE", "2"}}, "RANK='one' is not an integer"},
      {{{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_PORT", "99999"}},
       "MASTER_PORT=99999 is out of range"},
  };
  for (const Case& c : cases) {
    RunResult r = ::strata::testing::Run({Worker()}, c.env, absl::Seconds(20));
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_THAT(r.err, HasSubstr(c.expected));
  }
}

TEST(MultiProcessTest, TrainWithSingleStrategyRefusesSeveralRanks) {
  RunResult r =
      ::strata::testing::Run({RunfilePath("launch/train/train"), "--steps=1"},
                             TorchrunEnv(0, 2, FreePort()), absl::Seconds(30));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("rank 0 of 2 (torchrun variables)"));
  EXPECT_THAT(r.err, HasSubstr("use --strategy=ddp"));
}

TEST(MultiProcessTest, TrainsWithDdpOnTwoRanksThroughTheLauncher) {
  const char* tmp = getenv("TEST_TMPDIR");
  const std::string out = absl::StrCat(tmp != nullptr ? tmp : "/tmp", "/ddp");
  RunResult r = ::strata::testing::Run(
      {Launcher(), "--nproc_per_node=2", "--master_port=0",
       RunfilePath("launch/train/train"), "--strategy=ddp", "--steps=20",
       "--warmup_steps=2", "--global_batch=8", "--seq_len=32",
       "--markov_tokens=20000", "--log_interval=10", "--eval_interval=0",
       "--first_bucket_bytes=4096", "--bucket_bytes=65536",
       absl::StrCat("--output_dir=", out)},
      {}, absl::Seconds(120));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.err, HasSubstr("[rank0]: "));
  EXPECT_THAT(r.err, HasSubstr("strategy ddp on 2 rank(s)"));
  EXPECT_THAT(r.err, HasSubstr("step 20/20 | loss"));
  std::ifstream metrics(out + "/metrics.jsonl");
  int lines = 0;
  for (std::string line; std::getline(metrics, line);) ++lines;
  EXPECT_EQ(lines, 2);  // Written by rank 0 only: steps 10 and 20.
}

TEST(MultiProcessTest, TrainNprocRunsFsdpOnTwoRanksThroughTheLauncher) {
  // The README's training command, shortened: train re-launches itself.
  const char* tmp = getenv("TEST_TMPDIR");
  const std::string out = absl::StrCat(tmp != nullptr ? tmp : "/tmp", "/fsdp");
  RunResult r = ::strata::testing::Run(
      {RunfilePath("launch/train/train"), "--nproc=2", "--strategy=fsdp",
       "--fsdp_forward_prefetch", "--fsdp_deferred_init", "--steps=20",
       "--warmup_steps=2", "--global_batch=8", "--seq_len=32",
       "--markov_tokens=20000", "--log_interval=10", "--eval_interval=10",
       absl::StrCat("--output_dir=", out)},
      {}, absl::Seconds(120));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.err, HasSubstr("starting 2 ranks through the launcher"));
  EXPECT_THAT(r.err, HasSubstr("[rank0]: "));
  EXPECT_THAT(r.err, HasSubstr("strategy fsdp on 2 rank(s)"));
  EXPECT_THAT(r.err, HasSubstr("fsdp: full_shard"));
  EXPECT_THAT(r.err, HasSubstr("step 20/20 | loss"));
  std::ifstream model(out + "/model.pt");
  EXPECT_TRUE(model.good()) << "no " << out << "/model.pt";
}

// The pid of a child of `parent` whose environment holds RANK=<rank>, or -1.
pid_t ChildWithRank(pid_t parent, int rank) {
  const std::string wanted = absl::StrCat("RANK=", rank);
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/proc", ec)) {
    const std::string name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream stat(entry.path() / "stat");
    std::string line;
    std::getline(stat, line);
    // pid (comm) state ppid ...: comm may hold spaces, so parse after ')'.
    const size_t close = line.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream rest(line.substr(close + 1));
    std::string state;
    pid_t ppid = -1;
    rest >> state >> ppid;
    if (ppid != parent) continue;
    std::ifstream environ(entry.path() / "environ");
    for (std::string var; std::getline(environ, var, '\0');) {
      if (var == wanted) return std::stoi(name);
    }
  }
  return -1;
}

TEST(MultiProcessTest, TrainNprocHeartbeatFindsAStoppedRank) {
  // train starts its ranks itself; rank 1 is stopped once training runs.
  // The collective timeout (120 s) is far away: the heartbeat (3 s) finds
  // it, and the job ends within the timeout + 5 s.
  const char* tmp = getenv("TEST_TMPDIR");
  const std::string out =
      absl::StrCat(tmp != nullptr ? tmp : "/tmp", "/heartbeat");
  ::strata::testing::Subprocess train(
      {RunfilePath("launch/train/train"), "--nproc=2", "--strategy=ddp",
       "--heartbeat_timeout_s=3", "--collective_timeout_s=120",
       "--steps=1000000", "--warmup_steps=1", "--global_batch=4",
       "--seq_len=16", "--markov_tokens=20000", "--log_interval=1",
       "--eval_interval=0", "--threads=1", absl::StrCat("--output_dir=", out)},
      {}, absl::Seconds(120));
  // Training runs once rank 0 has written a progress record.
  pid_t rank1 = -1;
  const absl::Time deadline = absl::Now() + absl::Seconds(90);
  while (absl::Now() < deadline) {
    std::ifstream metrics(out + "/metrics.jsonl");
    std::string line;
    if (std::getline(metrics, line) && !line.empty()) {
      rank1 = ChildWithRank(train.pid(), 1);
      if (rank1 > 0) break;
    }
    absl::SleepFor(absl::Milliseconds(50));  // Polling, bounded above.
  }
  ASSERT_GT(rank1, 0) << "training did not start within 90 s";
  ASSERT_EQ(kill(rank1, SIGSTOP), 0);
  const int64_t stopped_ms = MonotonicMs();
  const RunResult r = train.Finish();
  const int64_t exited_ms = MonotonicMs();
  EXPECT_NE(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.err, HasSubstr(absl::StrCat("rank 1 (local rank 1, pid ", rank1,
                                            "): it sent no heartbeat "
                                            "for 3")));
  EXPECT_THAT(r.err, HasSubstr("process state T (stopped)"));
  EXPECT_LT(exited_ms - stopped_ms, (3 + 5) * 1000);
}

TEST(MultiProcessTest, TrainNprocWithSingleStrategyIsRefused) {
  RunResult r = ::strata::testing::Run(
      {RunfilePath("launch/train/train"), "--nproc=2"}, {}, absl::Seconds(30));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("--nproc=2 needs a data-parallel --strategy"));
}

TEST(MultiProcessTest, RunsUnmodifiedUnderPythonTorchrun) {
  // Debian's torchrun (python3-torch 1.13 on Python 3.11) crashes with its
  // default --redirects 0 (IntFlag iteration changed in 3.11); 1 works.
  // torchrun_classic_store.py is torchrun with its rendezvous store on the
  // classic TCPStore backend: Debian 13's PyTorch 2.6 has no libuv, which
  // plain torchrun asks for (pytorch/pytorch#148283); on 1.13 it is plain
  // torchrun.
  const char* tmp = getenv("TEST_TMPDIR");
  RunResult r = ::strata::testing::Run(
      {"/usr/bin/python3", RunfilePath("launch/torchrun_classic_store.py"),
       "--redirects", "1", "--tee", "1", "--log_dir",
       absl::StrCat(tmp != nullptr ? tmp : "/tmp", "/torchrun_logs"),
       "--no_python", "--nproc_per_node=2",
       absl::StrCat("--master_port=", FreePort()), Worker(), "iterations=5"},
      {}, absl::Seconds(90));
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_THAT(r.err, HasSubstr("rank 0 of 2 (torchrun): all 5 collectives"));
  EXPECT_THAT(r.err, HasSubstr("rank 1 of 2 (torchrun): all 5 collectives"));
}

TEST(MultiProcessTest, RunsFromSlurmEnvironment) {
  // What srun sets for a 2-task job on one node (no Slurm on this machine).
  const std::string port = absl::StrCat(FreePort());
  std::vector<std::unique_ptr<Subprocess>> ranks;
  for (int rank = 0; rank < 2; ++rank) {
    ranks.push_back(std::make_unique<Subprocess>(
        std::vector<std::string>{Worker(), "iterations=5"},
        Env{{"SLURM_PROCID", absl::StrCat(rank)},
            {"SLURM_LOCALID", absl::StrCat(rank)},
            {"SLURM_NTASKS", "2"},
            {"SLURM_NTASKS_PER_NODE", "2"},
            {"SLURM_NODEID", "0"},
            {"SLURM_JOB_ID", "4242"},
            {"SLURM_JOB_NODELIST", "localhost"},
            {"MASTER_PORT", port}},
        absl::Seconds(30)));
  }
  for (int rank = 0; rank < 2; ++rank) {
    RunResult r = ranks[rank]->Finish();
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_THAT(r.err, HasSubstr(absl::StrCat(
                           "rank ", rank, " of 2 (slurm): all 5 collectives")));
  }
}

TEST(MultiProcessTest, RunsFromOpenMpiEnvironment) {
  const std::string port = absl::StrCat(FreePort());
  std::vector<std::unique_ptr<Subprocess>> ranks;
  for (int rank = 0; rank < 2; ++rank) {
    ranks.push_back(std::make_unique<Subprocess>(
        std::vector<std::string>{Worker(), "iterations=5"},
        Env{{"OMPI_COMM_WORLD_RANK", absl::StrCat(rank)},
            {"OMPI_COMM_WORLD_SIZE", "2"},
            {"OMPI_COMM_WORLD_LOCAL_RANK", absl::StrCat(rank)},
            {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"},
            {"MASTER_PORT", port}},
        absl::Seconds(30)));
  }
  for (int rank = 0; rank < 2; ++rank) {
    RunResult r = ranks[rank]->Finish();
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_THAT(r.err,
                HasSubstr(absl::StrCat("rank ", rank,
                                       " of 2 (openmpi): all 5 collectives")));
  }
}

}  // namespace
}  // namespace strata::launch
