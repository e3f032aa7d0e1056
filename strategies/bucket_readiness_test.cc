#include "strategies/bucket_readiness.h"

#include <ATen/ATen.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <vector>

#include "absl/strings/str_cat.h"
#include "base/testing/status_matchers.h"

namespace strata::strategies {
namespace {

using ::strata::testing::IsOk;

using ::testing::ElementsAre;
using ::testing::IsEmpty;

TEST(BucketReadinessTest, LaunchesInBucketOrderWhenEntriesCompleteOutOfOrder) {
  // Buckets {0, 1}, {2}, {3, 4}.
  BucketReadiness readiness({{0, 1}, {2}, {3, 4}},
                            {true, true, true, true, true});
  std::vector<size_t> launched;
  const BucketReadiness::LaunchFn launch = [&](size_t k) {
    launched.push_back(k);
  };
  readiness.Arm();
  readiness.MarkReady(3, launch);
  readiness.MarkReady(4, launch);  // Bucket 2 complete, but 0 is not.
  readiness.MarkReady(2, launch);  // Bucket 1 complete, but 0 is not.
  EXPECT_THAT(launched, IsEmpty());
  readiness.MarkReady(1, launch);
  EXPECT_THAT(launched, IsEmpty());
  readiness.MarkReady(0, launch);  // Everything, in order.
  EXPECT_THAT(launched, ElementsAre(0, 1, 2));
  readiness.MarkReady(0, launch);  // A second mark changes nothing.
  EXPECT_THAT(launched, ElementsAre(0, 1, 2));
  EXPECT_THAT(readiness.UnreadyEntries(), IsEmpty());
}

TEST(BucketReadinessTest, EntryInTwoBucketsCountsForBoth) {
  // Entry 1 straddles buckets 0 and 1.
  BucketReadiness readiness({{0, 1}, {1, 2}}, {true, true, true});
  std::vector<size_t> launched;
  const BucketReadiness::LaunchFn launch = [&](size_t k) {
    launched.push_back(k);
  };
  readiness.Arm();
  readiness.MarkReady(0, launch);
  readiness.MarkReady(2, launch);
  EXPECT_THAT(launched, IsEmpty());
  EXPECT_THAT(readiness.UnreadyEntries(), ElementsAre(1));
  readiness.MarkReady(1, launch);
  EXPECT_THAT(launched, ElementsAre(0, 1));
}

TEST(BucketReadinessTest, EntriesWithoutGradientAreNotWaitedFor) {
  BucketReadiness readiness({{0, 1}, {2}}, {true, false, false});
  std::vector<size_t> launched;
  const BucketReadiness::LaunchFn launch = [&](size_t k) {
    launched.push_back(k);
  };
  readiness.Arm();
  EXPECT_THAT(readiness.UnreadyEntries(), ElementsAre(0));
  readiness.MarkReady(0, launch);
  // Bucket 1 has no requires_grad entry: it completes with bucket 0.
  EXPECT_THAT(launched, ElementsAre(0, 1));
}

TEST(BucketReadinessTest, RearmingResets) {
  BucketReadiness readiness({{0}, {1}}, {true, true});
  std::vector<size_t> launched;
  const BucketReadiness::LaunchFn launch = [&](size_t k) {
    launched.push_back(k);
  };
  readiness.Arm();
  readiness.MarkReady(0, launch);
  EXPECT_THAT(launched, ElementsAre(0));
  readiness.Arm();
  EXPECT_THAT(readiness.UnreadyEntries(), ElementsAre(0, 1));
  readiness.MarkReady(1, launch);
  EXPECT_THAT(launched, ElementsAre(0));  // Bucket 0 is pending again.
  readiness.MarkReady(0, launch);
  EXPECT_THAT(launched, ElementsAre(0, 0, 1));
}

TEST(BucketReadinessTest, NoLaunchesWhenNotArmed) {
  BucketReadiness readiness({{0}, {1}}, {true, true});
  std::vector<size_t> launched;
  const BucketReadiness::LaunchFn launch = [&](size_t k) {
    launched.push_back(k);
  };
  readiness.MarkReady(0, launch);  // Never armed.
  EXPECT_THAT(launched, IsEmpty());
  readiness.Arm();
  readiness.Disarm();
  readiness.MarkReady(0, launch);
  readiness.MarkReady(1, launch);
  EXPECT_THAT(launched, IsEmpty());
  EXPECT_FALSE(readiness.armed());
}

TEST(BucketReadinessTest, LaunchRemainingLaunchesTheRestInOrder) {
  BucketReadiness readiness({{0}, {1}, {2}}, {true, true, true});
  std::vector<size_t> launched;
  const BucketReadiness::LaunchFn launch = [&](size_t k) {
    launched.push_back(k);
  };
  readiness.Arm();
  readiness.MarkReady(0, launch);
  readiness.LaunchRemaining(launch);
  EXPECT_THAT(launched, ElementsAre(0, 1, 2));
  EXPECT_THAT(readiness.UnreadyEntries(), ElementsAre(1, 2));
}

std::string EntryName(size_t entry) { return absl::StrCat("p", entry); }

TEST(BucketReadinessTest, CompleteStepNeedsACompletedLastMicroBatch) {
  BucketReadiness readiness({{0}}, {true});
  ASSERT_THAT(readiness.BeforeMicroBatch("owner", true), IsOk());
  std::vector<size_t> launched;
  absl::Status status = readiness.CompleteStep(
      "owner", false, EntryName, [&](size_t k) { launched.push_back(k); });
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(status.message().substr(0, 7), "owner: ");
  EXPECT_THAT(launched, IsEmpty());
}

TEST(BucketReadinessTest, CompleteStepNamesUnusedEntriesUnlessAllowed) {
  BucketReadiness readiness({{0}, {1, 2}}, {true, true, true});
  std::vector<size_t> launched;
  const BucketReadiness::LaunchFn launch = [&](size_t k) {
    launched.push_back(k);
  };
  ASSERT_THAT(readiness.BeforeMicroBatch("owner", true), IsOk());
  readiness.MarkReady(0, launch);
  readiness.AfterBackward(true);
  absl::Status status =
      readiness.CompleteStep("owner", false, EntryName, launch);
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(status.message().find("p1, p2"), absl::string_view::npos)
      << status.message();
  EXPECT_THAT(launched, ElementsAre(0));
  EXPECT_THAT(readiness.CompleteStep("owner", true, EntryName, launch), IsOk());
  EXPECT_THAT(launched, ElementsAre(0, 1));
}

TEST(BucketReadinessTest, StepLifecycle) {
  BucketReadiness readiness({{0}}, {true});
  EXPECT_THAT(readiness.BeforeMicroBatch("owner", false), IsOk());
  EXPECT_FALSE(readiness.armed());
  readiness.AfterBackward(false);
  EXPECT_FALSE(readiness.complete());
  EXPECT_THAT(readiness.BeforeMicroBatch("owner", true), IsOk());
  EXPECT_TRUE(readiness.armed());
  absl::Status again = readiness.BeforeMicroBatch("owner", true);
  EXPECT_EQ(again.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(again.message().substr(0, 7), "owner: ");
  readiness.AfterBackward(true);
  EXPECT_FALSE(readiness.armed());
  EXPECT_TRUE(readiness.complete());
  EXPECT_FALSE(readiness.BeforeMicroBatch("owner", false).ok());
  readiness.ResetStep();
  EXPECT_FALSE(readiness.complete());
  EXPECT_THAT(readiness.BeforeMicroBatch("owner", true), IsOk());
}

TEST(BucketReadinessTest, HooksMarkEntriesReadyDuringBackwardAndAreRemoved) {
  at::Tensor a = at::ones({2}).set_requires_grad(true);
  at::Tensor b = at::ones({3}).set_requires_grad(true);
  at::Tensor frozen = at::ones({1});
  std::vector<size_t> launched;
  {
    BucketReadiness readiness({{0}, {1, 2}}, {true, true, false});
    readiness.AddHooks({a, b, frozen},
                       [&](size_t k) { launched.push_back(k); });
    (a.sum() + b.sum()).backward();  // Not armed: nothing.
    EXPECT_THAT(launched, IsEmpty());
    readiness.Arm();
    (a.sum() + b.sum()).backward();
    EXPECT_THAT(launched, ElementsAre(0, 1));
  }
  // Destroyed: the hooks are gone.
  (a.sum() + b.sum()).backward();
  EXPECT_THAT(launched, ElementsAre(0, 1));
}

}  // namespace
}  // namespace strata::strategies
