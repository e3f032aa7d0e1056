#include "comm/environment.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "base/testing/status_matchers.h"

namespace strata::comm {
namespace {

using ::strata::testing::IsOk;

using ::testing::HasSubstr;

EnvLookup FakeEnv(std::map<std::string, std::string> vars) {
  return [vars](const std::string& name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

std::string ErrorOf(std::map<std::string, std::string> vars) {
  auto info = RendezvousInfoFromEnv(FakeEnv(std::move(vars)));
  EXPECT_FALSE(info.ok());
  EXPECT_EQ(info.status().code(), absl::StatusCode::kInvalidArgument);
  return std::string(info.status().message());
}

TEST(RendezvousInfoFromEnvTest, EmptyEnvironmentIsSingleProcess) {
  auto info = RendezvousInfoFromEnv(FakeEnv({}));
  ASSERT_THAT(info, IsOk());
  EXPECT_EQ(info->source, "single-process");
  EXPECT_EQ(info->rank, 0);
  EXPECT_EQ(info->world_size, 1);
}

TEST(RendezvousInfoFromEnvTest, ReadsTorchrunVariables) {
  auto info = RendezvousInfoFromEnv(FakeEnv({{"RANK", "5"},
                                             {"WORLD_SIZE", "8"},
                                             {"LOCAL_RANK", "1"},
                                             {"LOCAL_WORLD_SIZE", "4"},
                                             {"MASTER_ADDR", "node7"},
                                             {"MASTER_PORT", "1234"},
                                             {"GLOO_SOCKET_IFNAME", "eth1"}}));
  ASSERT_THAT(info, IsOk());
  EXPECT_EQ(info->source, "torchrun");
  EXPECT_EQ(info->rank, 5);
  EXPECT_EQ(info->world_size, 8);
  EXPECT_EQ(info->local_rank, 1);
  EXPECT_EQ(info->local_world_size, 4);
  EXPECT_EQ(info->master_addr, "node7");
  EXPECT_EQ(info->master_port, 1234);
  EXPECT_EQ(info->gloo_interface, "eth1");
}

TEST(RendezvousInfoFromEnvTest, SingleNodeTorchrunDefaultsToLoopback) {
  auto info =
      RendezvousInfoFromEnv(FakeEnv({{"RANK", "1"}, {"WORLD_SIZE", "2"}}));
  ASSERT_THAT(info, IsOk());
  EXPECT_EQ(info->master_addr, "127.0.0.1");
  EXPECT_EQ(info->master_port, 29500);
  EXPECT_EQ(info->local_rank, 1);
  EXPECT_EQ(info->local_world_size, 2);
}

TEST(RendezvousInfoFromEnvTest, TorchrunAgentStoreMakesRankZeroAClient) {
  auto info = RendezvousInfoFromEnv(
      FakeEnv({{"RANK", "0"},
               {"WORLD_SIZE", "2"},
               {"TORCHELASTIC_USE_AGENT_STORE", "True"}}));
  ASSERT_THAT(info, IsOk());
  EXPECT_TRUE(info->store_served_externally);
  info = RendezvousInfoFromEnv(FakeEnv({{"RANK", "0"}, {"WORLD_SIZE", "2"}}));
  ASSERT_THAT(info, IsOk());
  EXPECT_FALSE(info->store_served_externally);
}

TEST(RendezvousInfoFromEnvTest, TorchrunRestartCountIsTheRound) {
  auto info =
      RendezvousInfoFromEnv(FakeEnv({{"RANK", "1"},
                                     {"WORLD_SIZE", "2"},
                                     {"TORCHELASTIC_RESTART_COUNT", "2"}}));
  ASSERT_THAT(info, IsOk());
  EXPECT_EQ(info->restart_count, 2);
  info = RendezvousInfoFromEnv(FakeEnv({{"RANK", "1"}, {"WORLD_SIZE", "2"}}));
  ASSERT_THAT(info, IsOk());
  EXPECT_EQ(info->restart_count, 0);
  EXPECT_THAT(ErrorOf({{"RANK", "0"},
                       {"WORLD_SIZE", "2"},
                       {"TORCHELASTIC_RESTART_COUNT", "-1"}}),
              HasSubstr("TORCHELASTIC_RESTART_COUNT=-1 is out of range"));
}

TEST(RendezvousInfoFromEnvTest, TorchrunGroupRankIsTheNode) {
  auto info = RendezvousInfoFromEnv(FakeEnv({{"RANK", "3"},
                                             {"WORLD_SIZE", "4"},
                                             {"LOCAL_WORLD_SIZE", "2"},
                                             {"GROUP_RANK", "1"},
                                             {"MASTER_ADDR", "n0"}}));
  ASSERT_THAT(info, IsOk());
  EXPECT_EQ(info->node_rank, 1);
}

TEST(RendezvousInfoFromEnvTest, NoGroupRankMeansAnUnknownNode) {
  auto info =
      RendezvousInfoFromEnv(FakeEnv({{"RANK", "1"}, {"WORLD_SIZE", "2"}}));
  ASSERT_THAT(info, IsOk());
  EXPECT_EQ(info->node_rank, -1);
  EXPECT_THAT(
      ErrorOf({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"GROUP_RANK", "x"}}),
      HasSubstr("GROUP_RANK"));
}

TEST(RendezvousInfoFromEnvTest, WorldSizeZeroIsRejected) {
  EXPECT_THAT(ErrorOf({{"RANK", "0"}, {"WORLD_SIZE", "0"}}),
              HasSubstr("WORLD_SIZE=0 is out of range"));
}

TEST(RendezvousInfoFromEnvTest, RankAtOrAboveWorldSizeIsRejected) {
  EXPECT_THAT(ErrorOf({{"RANK", "2"}, {"WORLD_SIZE", "2"}}),
              HasSubstr("RANK=2 but WORLD_SIZE=2"));
}

TEST(RendezvousInfoFromEnvTest, NonNumericValueNamesTheVariable) {
  EXPECT_THAT(ErrorOf({{"RANK", "zero"}, {"WORLD_SIZE", "2"}}),
              HasSubstr("RANK='zero' is not an integer"));
  EXPECT_THAT(
      ErrorOf({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_PORT", "http"}}),
      HasSubstr("MASTER_PORT='http' is not an integer"));
}

TEST(RendezvousInfoFromEnvTest, PortOutOfRangeIsRejected) {
  EXPECT_THAT(
      ErrorOf({{"RANK", "0"}, {"WORLD_SIZE", "1"}, {"MASTER_PORT", "70000"}}),
      HasSubstr("MASTER_PORT=70000 is out of range"));
}

TEST(RendezvousInfoFromEnvTest, RankWithoutWorldSizeIsRejected) {
  EXPECT_THAT(ErrorOf({{"RANK", "0"}}), HasSubstr("WORLD_SIZE is not"));
  EXPECT_THAT(ErrorOf({{"WORLD_SIZE", "2"}}), HasSubstr("RANK is not"));
}

TEST(RendezvousInfoFromEnvTest, LocalRankAboveLocalWorldSizeIsRejected) {
  EXPECT_THAT(ErrorOf({{"RANK", "3"},
                       {"WORLD_SIZE", "4"},
                       {"LOCAL_RANK", "2"},
                       {"LOCAL_WORLD_SIZE", "2"},
                       {"MASTER_ADDR", "h"}}),
              HasSubstr("LOCAL_RANK=2 but LOCAL_WORLD_SIZE=2"));
}

TEST(RendezvousInfoFromEnvTest, MultiNodeTorchrunNeedsMasterAddr) {
  EXPECT_THAT(ErrorOf({{"RANK", "3"},
                       {"WORLD_SIZE", "4"},
                       {"LOCAL_RANK", "1"},
                       {"LOCAL_WORLD_SIZE", "2"}}),
              HasSubstr("MASTER_ADDR is not set"));
}

TEST(RendezvousInfoFromEnvTest, ReadsSlurmWithNodelist) {
  auto info =
      RendezvousInfoFromEnv(FakeEnv({{"SLURM_PROCID", "3"},
                                     {"SLURM_NTASKS", "4"},
                                     {"SLURM_LOCALID", "1"},
                                     {"SLURM_NTASKS_PER_NODE", "2"},
                                     {"SLURM_NODEID", "1"},
                                     {"SLURM_JOB_ID", "123456"},
                                     {"SLURM_JOB_NODELIST", "gpu[07-08]"}}));
  ASSERT_THAT(info, IsOk());
  EXPECT_EQ(info->source, "slurm");
  EXPECT_EQ(info->rank, 3);
  EXPECT_EQ(info->world_size, 4);
  EXPECT_EQ(info->local_rank, 1);
  EXPECT_EQ(info->local_world_size, 2);
  EXPECT_EQ(info->master_addr, "gpu07");
  EXPECT_EQ(info->master_port, 20000 + 123456 % 20000);
  EXPECT_EQ(info->node_rank, 1);
}

TEST(RendezvousInfoFromEnvTest, SlurmMasterAddrOverridesNodelist) {
  auto info = RendezvousInfoFromEnv(FakeEnv({{"SLURM_PROCID", "0"},
                                             {"SLURM_NTASKS", "2"},
                                             {"SLURM_JOB_NODELIST", "a,b"},
                                             {"MASTER_ADDR", "login1"},
                                             {"MASTER_PORT", "4000"}}));
  ASSERT_THAT(info, IsOk());
  EXPECT_EQ(info->master_addr, "login1");
  EXPECT_EQ(info->master_port, 4000);
}

TEST(RendezvousInfoFromEnvTest, SlurmWithoutAnyMasterIsRejected) {
  EXPECT_THAT(ErrorOf({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}}),
              HasSubstr("SLURM_JOB_NODELIST"));
}

TEST(RendezvousInfoFromEnvTest, ReadsOpenMpi) {
  auto info =
      RendezvousInfoFromEnv(FakeEnv({{"OMPI_COMM_WORLD_RANK", "1"},
                                     {"OMPI_COMM_WORLD_SIZE", "2"},
                                     {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                                     {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}}));
  ASSERT_THAT(info, IsOk());
  EXPECT_EQ(info->source, "openmpi");
  EXPECT_EQ(info->rank, 1);
  EXPECT_EQ(info->world_size, 2);
  EXPECT_EQ(info->master_addr, "127.0.0.1");
  EXPECT_EQ(info->node_rank, -1);  // Open MPI's variables name no node.
}

TEST(RendezvousInfoFromEnvTest, OpenMpiMissingSizeNamesIt) {
  EXPECT_THAT(ErrorOf({{"OMPI_COMM_WORLD_RANK", "1"}}),
              HasSubstr("OMPI_COMM_WORLD_SIZE is not set"));
}

TEST(FirstSlurmHostTest, ParsesCompressedLists) {
  EXPECT_EQ(*FirstSlurmHost("node1"), "node1");
  EXPECT_EQ(*FirstSlurmHost("node1,node2"), "node1");
  EXPECT_EQ(*FirstSlurmHost("gpu[03-05,9],cpu1"), "gpu03");
  EXPECT_EQ(*FirstSlurmHost("a1,gpu[3-4]"), "a1");
  EXPECT_EQ(*FirstSlurmHost("rack[2]-ib"), "rack2-ib");
}

TEST(FirstSlurmHostTest, RejectsMalformedLists) {
  EXPECT_FALSE(FirstSlurmHost("").ok());
  EXPECT_FALSE(FirstSlurmHost("gpu[03-05").ok());
  EXPECT_FALSE(FirstSlurmHost("gpu[x-y]").ok());
}

TEST(RendezvousInfoFromEnvTest, ReadsTheLaunchersHeartbeatPipe) {
  auto info =
      RendezvousInfoFromEnv(FakeEnv({{"RANK", "0"},
                                     {"WORLD_SIZE", "2"},
                                     {"STRATA_HEARTBEAT_FD", "7"},
                                     {"STRATA_HEARTBEAT_INTERVAL_MS", "250"}}));
  ASSERT_THAT(info, IsOk());
  EXPECT_EQ(info->heartbeat_fd, 7);
  EXPECT_EQ(info->heartbeat_interval_ms, 250);
}

TEST(RendezvousInfoFromEnvTest, NoHeartbeatWithoutItsVariables) {
  auto info =
      RendezvousInfoFromEnv(FakeEnv({{"RANK", "0"}, {"WORLD_SIZE", "2"}}));
  ASSERT_THAT(info, IsOk());
  EXPECT_EQ(info->heartbeat_fd, -1);
  EXPECT_EQ(info->heartbeat_interval_ms, 0);
}

TEST(RendezvousInfoFromEnvTest, AHeartbeatFdWithoutItsIntervalIsAnError) {
  auto info = RendezvousInfoFromEnv(FakeEnv({{"STRATA_HEARTBEAT_FD", "7"}}));
  ASSERT_FALSE(info.ok());
  EXPECT_THAT(std::string(info.status().message()),
              HasSubstr("STRATA_HEARTBEAT_INTERVAL_MS is not set"));
}

TEST(RendezvousInfoFromEnvTest, AZeroHeartbeatIntervalIsAnError) {
  auto info = RendezvousInfoFromEnv(FakeEnv(
      {{"STRATA_HEARTBEAT_FD", "7"}, {"STRATA_HEARTBEAT_INTERVAL_MS", "0"}}));
  ASSERT_FALSE(info.ok());
  EXPECT_THAT(std::string(info.status().message()),
              HasSubstr("STRATA_HEARTBEAT_INTERVAL_MS=0 is out of range"));
}

}  // namespace
}  // namespace strata::comm
