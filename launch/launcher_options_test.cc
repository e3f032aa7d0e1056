#include "launch/launcher_options.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include "base/testing/status_matchers.h"

namespace strata::launch {
namespace {

using ::strata::testing::IsOk;
using ::strata::testing::StatusIs;
using ::testing::HasSubstr;

// Invalid options: rejected before anything is spawned, naming the flag.
// (Moved from launcher_test.)

LauncherOptions ValidOptions() {
  LauncherOptions options;
  options.command = {"true"};
  return options;
}

TEST(LauncherOptionsTest, DefaultsWithACommandAreValid) {
  EXPECT_THAT(ValidateLauncherOptions(ValidOptions()), IsOk());
}

TEST(LauncherOptionsTest, RejectsZeroNprocPerNode) {
  LauncherOptions options = ValidOptions();
  options.nproc_per_node = 0;
  EXPECT_THAT(ValidateLauncherOptions(options),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "--nproc_per_node must be >= 1, got 0"));
}

TEST(LauncherOptionsTest, RejectsNodeRankNotBelowNnodes) {
  LauncherOptions options = ValidOptions();
  options.nnodes = 2;
  options.node_rank = 2;
  EXPECT_THAT(ValidateLauncherOptions(options),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "--node_rank must be in [0, --nnodes=2), got 2"));
}

TEST(LauncherOptionsTest, RejectsMasterPortOutOfRange) {
  LauncherOptions options = ValidOptions();
  options.master_port = 65536;
  EXPECT_THAT(ValidateLauncherOptions(options),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "--master_port must be in [0, 65535] (0: pick a free "
                       "port), got 65536"));
}

TEST(LauncherOptionsTest, RejectsMasterPortZeroOnSeveralNodes) {
  LauncherOptions options = ValidOptions();
  options.nnodes = 2;
  options.master_port = 0;
  EXPECT_THAT(
      ValidateLauncherOptions(options),
      StatusIs(
          absl::StatusCode::kInvalidArgument,
          HasSubstr("--master_port=0 (pick a free port) needs --nnodes=1")));
}

TEST(LauncherOptionsTest, RejectsNegativeThreadsPerRank) {
  LauncherOptions options = ValidOptions();
  options.num_threads_per_rank = -1;
  EXPECT_THAT(ValidateLauncherOptions(options),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("--threads_per_rank must be >= 0")));
}

TEST(LauncherOptionsTest, RejectsNegativeMaxRestarts) {
  LauncherOptions options = ValidOptions();
  options.max_restarts = -1;
  EXPECT_THAT(ValidateLauncherOptions(options),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("--max_restarts must be >= 0")));
}

TEST(LauncherOptionsTest, RejectsExtraEnvSettingTheRestartCount) {
  LauncherOptions options = ValidOptions();
  options.extra_env = {{"TORCHELASTIC_RESTART_COUNT", "1"}};
  EXPECT_THAT(ValidateLauncherOptions(options),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("may not set TORCHELASTIC_RESTART_COUNT")));
}

TEST(LauncherOptionsTest, RejectsEmptyCommand) {
  LauncherOptions options = ValidOptions();
  options.command.clear();
  EXPECT_THAT(ValidateLauncherOptions(options),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("no program given")));
}

TEST(LauncherOptionsTest, RejectsExtraEnvSettingARendezvousVariable) {
  LauncherOptions options = ValidOptions();
  options.extra_env = {{"RANK", "5"}};
  EXPECT_THAT(ValidateLauncherOptions(options),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "extra_env may not set RANK: the launcher sets it per "
                       "rank"));
}

TEST(HeartbeatFlagsTest, SetsBothTimeouts) {
  LauncherOptions options;
  ASSERT_THAT(SetHeartbeatFromFlags(2.5, 30, &options), IsOk());
  EXPECT_EQ(options.heartbeat_timeout, absl::Milliseconds(2500));
  EXPECT_EQ(options.heartbeat_startup_timeout, absl::Seconds(30));
}

TEST(HeartbeatFlagsTest, NegativeOrNotFiniteTimeoutNamesTheFlag) {
  LauncherOptions options;
  for (double bad : {-1.0, std::nan(""), HUGE_VAL}) {
    EXPECT_THAT(SetHeartbeatFromFlags(bad, 120, &options),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         HasSubstr("--heartbeat_timeout_s must be a finite "
                                   "number >= 0")))
        << bad;
  }
}

TEST(HeartbeatFlagsTest, ZeroStartupTimeoutNamesTheFlag) {
  LauncherOptions options;
  EXPECT_THAT(SetHeartbeatFromFlags(2, 0, &options),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("--heartbeat_startup_timeout_s must be a "
                                 "finite number > 0, got 0")));
}

// The agent store (--nnodes > 1 with --max_restarts > 0).

TEST(AgentStoreOptionsTest, UsedOnlyWithSeveralNodesAndRestarts) {
  LauncherOptions options = ValidOptions();
  options.max_restarts = 1;
  EXPECT_FALSE(UsesAgentStore(options));
  options.nnodes = 2;
  EXPECT_TRUE(UsesAgentStore(options));
  options.max_restarts = 0;
  EXPECT_FALSE(UsesAgentStore(options));
}

TEST(AgentStoreOptionsTest, DefaultsToTheMasterAddressAndTheNextPort) {
  LauncherOptions options = ValidOptions();
  options.master_addr = "10.0.0.1";
  options.master_port = 29500;
  EXPECT_EQ(AgentStoreHost(options), "10.0.0.1");
  EXPECT_EQ(AgentStorePort(options), 29501);
  ASSERT_THAT(SetRdzvEndpointFromFlag("node0.example:4000", &options), IsOk());
  EXPECT_EQ(AgentStoreHost(options), "node0.example");
  EXPECT_EQ(AgentStorePort(options), 4000);
}

TEST(AgentStoreOptionsTest, RejectsAnEndpointWithoutAPort) {
  LauncherOptions options = ValidOptions();
  for (const char* endpoint : {"node0", "node0:", ":80", "node0:70000"}) {
    EXPECT_THAT(SetRdzvEndpointFromFlag(endpoint, &options),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         HasSubstr("--rdzv_endpoint must be host:port")))
        << endpoint;
  }
}

TEST(AgentStoreOptionsTest, MasterPortZeroOnSeveralNodesNeedsAnEndpointPort) {
  LauncherOptions options = ValidOptions();
  options.nnodes = 2;
  options.max_restarts = 1;
  options.master_port = 0;
  EXPECT_THAT(ValidateLauncherOptions(options),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("--rdzv_endpoint must name a port")));
  options.rdzv_port = 4000;
  EXPECT_THAT(ValidateLauncherOptions(options), IsOk());
}

TEST(AgentStoreOptionsTest, RejectsTheMastersOwnEndpoint) {
  LauncherOptions options = ValidOptions();
  options.nnodes = 2;
  options.max_restarts = 1;
  options.rdzv_port = options.master_port;
  EXPECT_THAT(ValidateLauncherOptions(options),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("--rdzv_endpoint must differ")));
}

}  // namespace
}  // namespace strata::launch
