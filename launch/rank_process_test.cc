#include "launch/rank_process.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <string>
#include <vector>

namespace strata::launch {
namespace {

// The wait status of a child that runs `body`.
template <typename Body>
int WaitStatusOfChild(Body body) {
  const pid_t pid = fork();
  if (pid == 0) body();
  int status = 0;
  EXPECT_EQ(waitpid(pid, &status, 0), pid);
  return status;
}

TEST(RankProcessTest, AnExitIsDescribedWithItsStatus) {
  RankProcess process;
  process.rank = 3;
  process.local_rank = 1;
  process.pid = 4242;
  process.wait_status = WaitStatusOfChild([] { _exit(3); });
  EXPECT_FALSE(Succeeded(process));
  EXPECT_EQ(Outcome(process), " exited with status 3");
  EXPECT_EQ(RankName(process), "rank 3 (local rank 1, pid 4242)");
  EXPECT_EQ(ExitCodeOf(process), 3);
}

TEST(RankProcessTest, ASignalIsDescribedAndGivesOneHundredTwentyEightPlusIt) {
  RankProcess process;
  process.wait_status = WaitStatusOfChild([] {
    raise(SIGKILL);
    _exit(0);
  });
  EXPECT_FALSE(Succeeded(process));
  EXPECT_EQ(Outcome(process), " was killed by signal 9 (Killed)");
  EXPECT_EQ(ExitCodeOf(process), 128 + SIGKILL);
}

TEST(RankProcessTest, ExitZeroSucceeds) {
  RankProcess process;
  process.wait_status = WaitStatusOfChild([] { _exit(0); });
  EXPECT_TRUE(Succeeded(process));
}

TEST(RankEnvironmentTest, SetsTheRankOfALaterNodeAndTheRound) {
  LauncherOptions options;
  options.nnodes = 2;
  options.node_rank = 1;
  options.nproc_per_node = 2;
  options.max_restarts = 3;
  const std::vector<std::string> env = RankEnvironment(
      options, /*master_port=*/1234, /*restart_round=*/2,
      /*num_threads_per_rank=*/1, /*local_rank=*/1, /*heartbeat_fd=*/-1);
  for (const char* expected :
       {"RANK=3", "WORLD_SIZE=4", "GROUP_RANK=1", "MASTER_PORT=1234",
        "TORCHELASTIC_RESTART_COUNT=2", "TORCHELASTIC_MAX_RESTARTS=3",
        "OMP_NUM_THREADS=1"}) {
    EXPECT_NE(std::find(env.begin(), env.end(), expected), env.end())
        << expected;
  }
}

}  // namespace
}  // namespace strata::launch
