#include "launch/self_launch.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "base/testing/status_matchers.h"

namespace strata::launch {
namespace {

using ::strata::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::EndsWith;
using ::testing::HasSubstr;

comm::RendezvousInfo World(const std::string& source, int world_size) {
  comm::RendezvousInfo world;
  world.source = source;
  world.world_size = world_size;
  return world;
}

TEST(ShouldSelfLaunchTest, AloneWithOneRankRunsInProcess) {
  EXPECT_FALSE(ShouldSelfLaunch(World("single-process", 1), 1));
}

TEST(ShouldSelfLaunchTest, AloneWithSeveralRanksLaunches) {
  EXPECT_TRUE(ShouldSelfLaunch(World("single-process", 1), 2));
}

TEST(ShouldSelfLaunchTest, ARankOfALaunchedWorldRuns) {
  EXPECT_FALSE(ShouldSelfLaunch(World("torchrun", 2), 2));
}

TEST(ShouldSelfLaunchTest, AOneRankLaunchedWorldDoesNotLaunchAgain) {
  EXPECT_FALSE(ShouldSelfLaunch(World("torchrun", 1), 2));
}

TEST(SelfLaunchOptionsTest, RunsThisBinaryWithItsArgumentsOnAFreePort) {
  ASSERT_OK_AND_ASSIGN(const LauncherOptions options,
                       SelfLaunchOptions(3, {"--a=1", "b"}));
  EXPECT_EQ(options.nproc_per_node, 3);
  EXPECT_EQ(options.master_port, 0);
  ASSERT_EQ(options.command.size(), 3u);
  EXPECT_THAT(options.command[0], EndsWith("self_launch_test"));
  EXPECT_EQ(options.command[1], "--a=1");
  EXPECT_EQ(options.command[2], "b");
}

TEST(SelfLaunchOptionsTest, NprocBelowOneNamesTheFlag) {
  EXPECT_THAT(SelfLaunchOptions(0, {}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "--nproc must be >= 1, got 0"));
}

TEST(RunSelfLaunchedOrRankTest, ARankRunsRankMainWithItsWorld) {
  SelfLaunchSpec spec;
  spec.nproc = 2;
  std::vector<int> seen;
  const int code = RunSelfLaunchedOrRank(
      World("torchrun", 2), spec, [&](const comm::RendezvousInfo& world) {
        seen.push_back(world.world_size);
        return 7;
      });
  EXPECT_EQ(code, 7);
  EXPECT_THAT(seen, ElementsAre(2));
}

TEST(RunSelfLaunchedOrRankTest, OneProcessRunsRankMainInProcess) {
  SelfLaunchSpec spec;
  spec.nproc = 1;
  int calls = 0;
  EXPECT_EQ(RunSelfLaunchedOrRank(World("single-process", 1), spec,
                                  [&](const comm::RendezvousInfo&) {
                                    ++calls;
                                    return 0;
                                  }),
            0);
  EXPECT_EQ(calls, 1);
}

}  // namespace
}  // namespace strata::launch
