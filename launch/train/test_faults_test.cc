#include "launch/train/test_faults.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <cstdlib>
#include <optional>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "base/fault_point.h"
#include "base/testing/status_matchers.h"

namespace strata::launch {
namespace {

using ::strata::testing::IsOk;
using ::strata::testing::StatusIs;
using ::testing::HasSubstr;

TEST(KillScheduleTest, ParsesEntriesWithOneRankEach) {
  ASSERT_OK_AND_ASSIGN(
      const std::vector<KillPoint> points,
      ParseKillSchedule("forward:3,collective:7:2,async_save:9,step_end:4",
                        "1,0,1,0"));
  ASSERT_EQ(points.size(), 4u);
  EXPECT_EQ(points[0].site, FaultSite::kForward);
  EXPECT_EQ(points[0].step, 3);
  EXPECT_EQ(points[0].nth, 1);
  EXPECT_EQ(points[0].rank, 1);
  EXPECT_EQ(points[1].site, FaultSite::kCollective);
  EXPECT_EQ(points[1].step, 7);
  EXPECT_EQ(points[1].nth, 2);
  EXPECT_EQ(points[1].rank, 0);
  EXPECT_EQ(points[2].site, FaultSite::kAsyncSave);
  EXPECT_EQ(points[2].rank, 1);
  EXPECT_EQ(points[3].site, FaultSite::kStepEnd);
  EXPECT_EQ(points[3].step, 4);
}

TEST(KillScheduleTest, OneRankAppliesToEveryEntry) {
  ASSERT_OK_AND_ASSIGN(const std::vector<KillPoint> points,
                       ParseKillSchedule("backward:1:4,save:5", "2"));
  ASSERT_EQ(points.size(), 2u);
  EXPECT_EQ(points[0].rank, 2);
  EXPECT_EQ(points[1].rank, 2);
}

// (Matching .status(): a StatusOr of KillPoints has no printer.)
TEST(KillScheduleTest, BadEntriesNameTheFlag) {
  for (const char* at : {"optimizer:3", "forward", "forward:-1", "forward:2:0",
                         "forward:x", "save:1:1:1"}) {
    EXPECT_THAT(ParseKillSchedule(at, "0").status(),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         HasSubstr("--test_kill_at: entry")))
        << at;
  }
  EXPECT_THAT(
      ParseKillSchedule("forward:1,forward:2,forward:3", "0,1").status(),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("--test_kill_rank: names 2 ranks")));
  EXPECT_THAT(ParseKillSchedule("forward:1", "-1").status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("--test_kill_rank")));
}

TEST(KillScheduleTest, KillsAtTheNthReachOfItsStepOnly) {
  KillPoint point;
  point.site = FaultSite::kCollective;
  point.step = 4;
  point.nth = 2;
  // Other sites, other steps and the first reach leave the process alive.
  EXPECT_EXIT(
      {
        TestFaultInjector faults(point, /*save_pause_ms=*/0, /*rank=*/0);
        SetFaultStep(3);
        ReachFaultPoint(FaultSite::kCollective);
        ReachFaultPoint(FaultSite::kCollective);
        SetFaultStep(4);
        ReachFaultPoint(FaultSite::kForward);
        ReachFaultPoint(FaultSite::kCollective);
        ReachFaultPoint(FaultSite::kSave, 4);
        std::exit(3);
      },
      ::testing::ExitedWithCode(3), "");
  EXPECT_EXIT(
      {
        TestFaultInjector faults(point, /*save_pause_ms=*/0, /*rank=*/0);
        SetFaultStep(4);
        ReachFaultPoint(FaultSite::kCollective);
        ReachFaultPoint(FaultSite::kCollective);
        std::exit(3);
      },
      ::testing::KilledBySignal(SIGKILL), "");
}

// A model without units: the interceptor count is what the tests read.
class NoUnits final : public models::UnitModel {
  at::Tensor Forward(const at::Tensor& tokens) override { return tokens; }
};

TestFaultOptions Options(const char* at) {
  TestFaultOptions options;
  options.at = at;
  options.ranks = "0";
  options.world_size = 2;
  options.save_every = 2;
  options.ckpt_format = checkpoint::Format::kSharded;
  return options;
}

TEST(KillScheduleTest, SaveEntriesMustNameASaveOfTheRun) {
  NoUnits model;
  // The save after step 3 (4 steps done) is due with --save_every=2.
  EXPECT_THAT(InstallTestFaults(Options("save:3"), model).status(), IsOk());
  EXPECT_THAT(
      InstallTestFaults(Options("save:2"), model).status(),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("names no save")));
  EXPECT_THAT(InstallTestFaults(Options("async_save:3"), model).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("needs --async_save=true")));
  // The staged formats only: a full file has no staging directory.
  TestFaultOptions dcp = Options("save:3");
  dcp.ckpt_format = checkpoint::Format::kDcp;
  EXPECT_THAT(InstallTestFaults(dcp, model).status(), IsOk());
  TestFaultOptions full = Options("save:3");
  full.ckpt_format = checkpoint::Format::kFull;
  EXPECT_THAT(
      InstallTestFaults(full, model).status(),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("needs --ckpt_format=sharded or dcp, got full")));
  TestFaultOptions far = Options("forward:1");
  far.ranks = "2";
  EXPECT_THAT(InstallTestFaults(far, model).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("--test_kill_rank: rank 2")));
}

TEST(KillScheduleTest, OnlyThisRoundsEntryForThisRankInstalls) {
  NoUnits model;
  TestFaultOptions options = Options("forward:1,backward:5");
  options.ranks = "0,1";
  options.rank = 1;
  ASSERT_OK_AND_ASSIGN(auto killer, InstallTestFaults(options, model));
  EXPECT_EQ(killer, nullptr);  // Round 0 kills rank 0.
  EXPECT_EQ(model.num_interceptors(), 0);
  options.restart_round = 1;
  ASSERT_OK_AND_ASSIGN(killer, InstallTestFaults(options, model));
  EXPECT_NE(killer, nullptr);
  EXPECT_EQ(model.num_interceptors(), 1);
  killer.reset();
  options.restart_round = 2;  // Past the schedule: none.
  ASSERT_OK_AND_ASSIGN(killer, InstallTestFaults(options, model));
  EXPECT_EQ(killer, nullptr);
}

TEST(KillScheduleTest, StepEndEntriesComeOnceAStep) {
  NoUnits model;
  ASSERT_OK_AND_ASSIGN(auto faults,
                       InstallTestFaults(Options("step_end:5"), model));
  EXPECT_NE(faults, nullptr);
  EXPECT_EQ(model.num_interceptors(), 0);  // The trainer reaches step ends.
  faults.reset();
  EXPECT_THAT(InstallTestFaults(Options("step_end:5:2"), model).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("step_end:5:2 names no moment")));
}

TEST(SavePauseTest, InstallsOnEveryRankWithoutAKill) {
  NoUnits model;
  TestFaultOptions options = Options("");
  options.rank = 1;
  options.save_pause_ms = 250;
  ASSERT_OK_AND_ASSIGN(auto faults, InstallTestFaults(options, model));
  EXPECT_NE(faults, nullptr);
  EXPECT_EQ(model.num_interceptors(), 0);
  faults.reset();
  options.save_pause_ms = -1;
  EXPECT_THAT(InstallTestFaults(options, model).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("--ckpt_test_pause_ms: must be >= 0")));
}

// The pause holds save and async_save points only, for its full length.
TEST(SavePauseTest, PausesAtSavePointsOnly) {
  TestFaultInjector faults(std::nullopt, /*save_pause_ms=*/200, /*rank=*/0);
  const absl::Time start = absl::Now();
  ReachFaultPoint(FaultSite::kForward, 1);
  ReachFaultPoint(FaultSite::kCollective, 1);
  ReachFaultPoint(FaultSite::kStepEnd, 1);
  EXPECT_LT(absl::Now() - start, absl::Milliseconds(150));
  ReachFaultPoint(FaultSite::kSave, 1);
  ReachFaultPoint(FaultSite::kAsyncSave, 3);
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(400));
}

}  // namespace
}  // namespace strata::launch
