// Strategy's first-error rule, for every data-parallel strategy: the error that
// ends a run is the first one (a collective that timed out inside a hook), not
// a follow-on thrown by forward/backward after it.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "absl/synchronization/notification.h"
#include "base/testing/status_matchers.h"
#include "comm/group.h"
#include "comm/testing/multi_rank.h"
#include "strategies/factory.h"
#include "strategies/strategy.h"
#include "strategies/testing/parity.h"

namespace strata::strategies {
namespace {

using ::strata::testing::IsOk;

// Test groups whose collectives time out after 2 s.
comm::GroupOptions ShortTimeout() {
  comm::GroupOptions options = comm::testing::TestGroupOptions();
  options.timeout = absl::Seconds(2);
  options.check_collectives = false;
  return options;
}

absl::StatusOr<std::unique_ptr<Strategy>> CreateGptTiny(const std::string& kind,
                                                        comm::Group& group) {
  return CreateStrategy(testing::Kind(kind),
                        testing::Build(testing::Config("gpt-tiny"), 7), &group,
                        testing::Optimizer(), testing::Schedule());
}

class FirstErrorTest : public ::testing::TestWithParam<std::string> {};

TEST_P(FirstErrorTest, ATimedOutCollectiveIsTheErrorNotItsFollowOn) {
  absl::Notification rank0_done;
  ASSERT_THAT(
      comm::testing::RunOnRanks(
          2,
          [&](comm::Group& group) {
            auto created = CreateGptTiny(GetParam(), group);
            ASSERT_THAT(created, IsOk());
            if (group.rank() == 1) {  // Alive, but never runs forward.
              rank0_done.WaitForNotification();
              return;
            }
            at::Tensor tokens = at::randint(256, {2, 17}, at::kLong);
            // ddp and zero wait for their reductions in Step, fsdp for its
            // all-gathers in forward: the first error of the two counts.
            absl::Status status =
                (*created)
                    ->ForwardBackward(tokens.narrow(1, 0, 16),
                                      tokens.narrow(1, 1, 16), 1.0, true)
                    .status();
            if (status.ok()) status = (*created)->Step(0).status();
            rank0_done.Notify();
            ASSERT_FALSE(status.ok());
            const std::string message(status.message());
            EXPECT_NE(message.find("timed out after 2s: rank 1 never arrived"),
                      std::string::npos)
                << message;
            EXPECT_EQ(message.find("not allocated"), std::string::npos)
                << message;
          },
          ShortTimeout()),
      IsOk());
}

TEST(FirstErrorTest, FsdpStopsBackwardAfterAFailedGatherInsteadOfCrashing) {
  absl::Notification rank0_done;
  ASSERT_THAT(
      comm::testing::RunOnRanks(
          2,
          [&](comm::Group& group) {
            auto created = CreateGptTiny("fsdp", group);
            ASSERT_THAT(created, IsOk());
            at::Tensor tokens = at::randint(256, {2, 17}, at::kLong);
            if (group.rank() == 1) {
              // Takes part in forward's all-gathers, never in backward's.
              at::Tensor logits =
                  (*created)->model().Forward(tokens.narrow(1, 0, 16));
              rank0_done.WaitForNotification();
              return;
            }
            absl::Status status =
                (*created)
                    ->ForwardBackward(tokens.narrow(1, 0, 16),
                                      tokens.narrow(1, 1, 16), 1.0, true)
                    .status();
            rank0_done.Notify();
            EXPECT_NE(std::string(status.message())
                          .find("timed out after 2s: rank 1 never arrived"),
                      std::string::npos)
                << status;
          },
          ShortTimeout()),
      IsOk());
}

INSTANTIATE_TEST_SUITE_P(DataParallel, FirstErrorTest,
                         ::testing::Values("ddp", "zero2", "fsdp"));

}  // namespace
}  // namespace strata::strategies
