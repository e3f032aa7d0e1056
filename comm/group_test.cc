#include "comm/group.h"

#include <ATen/ATen.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <numeric>
#include <string>
#include <thread>
#include <torch/csrc/distributed/c10d/HashStore.hpp>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "base/testing/status_matchers.h"
#include "comm/testing/multi_rank.h"
#include "comm/wait_clock.h"

namespace strata::comm {
namespace {

using ::strata::testing::IsOk;

using ::strata::comm::testing::RunOnRanks;
using ::strata::comm::testing::TestGroupOptions;
using ::testing::HasSubstr;

// Small integers: every partial sum is exact in bf16 (|sum| <= 4 * 7 < 256),
// so results compare bitwise against a reference whatever the summation order.
at::Tensor RankData(int rank, int64_t numel, at::ScalarType dtype) {
  at::Tensor i = at::arange(numel, at::kLong);
  return ((i * 3 + (rank + 1) * 7) % 15 - 7).to(dtype);
}

at::Tensor ReferenceReduce(int world_size, int64_t numel, at::ScalarType dtype,
                           ReduceOp op) {
  at::Tensor acc = RankData(0, numel, at::kDouble);
  for (int r = 1; r < world_size; ++r) {
    at::Tensor d = RankData(r, numel, at::kDouble);
    switch (op) {
      case ReduceOp::kSum:
      case ReduceOp::kAverage:
        acc = acc + d;
        break;
      case ReduceOp::kMax:
        acc = at::maximum(acc, d);
        break;
      case ReduceOp::kMin:
        acc = at::minimum(acc, d);
        break;
    }
  }
  if (op == ReduceOp::kAverage) return (acc.to(dtype) / world_size);
  return acc.to(dtype);
}

std::vector<int64_t> UnevenCounts(int world_size, int64_t base) {
  std::vector<int64_t> counts;
  for (int r = 0; r < world_size; ++r) counts.push_back(base + 3 * r);
  if (world_size > 2) counts[1] = 0;  // An empty block must work too.
  return counts;
}

std::string DtypeName(at::ScalarType t) { return c10::toString(t); }

// (world size, dtype, element count)
class CollectiveTest : public ::testing::TestWithParam<
                           std::tuple<int, at::ScalarType, int64_t>> {
 protected:
  int world_size() const { return std::get<0>(GetParam()); }
  at::ScalarType dtype() const { return std::get<1>(GetParam()); }
  int64_t numel() const { return std::get<2>(GetParam()); }
  GroupOptions Options() const {
    GroupOptions options = TestGroupOptions();
    // Small segments so that multi-segment pipelining is exercised.
    options.ring_segment_bytes = 1024;
    return options;
  }
};

TEST_P(CollectiveTest, AllReduceMatchesReferenceForEveryOp) {
  for (ReduceOp op :
       {ReduceOp::kSum, ReduceOp::kAverage, ReduceOp::kMax, ReduceOp::kMin}) {
    at::Tensor expected = ReferenceReduce(world_size(), numel(), dtype(), op);
    ASSERT_TRUE(RunOnRanks(
                    world_size(),
                    [&](Group& group) {
                      at::Tensor t = RankData(group.rank(), numel(), dtype());
                      ASSERT_THAT(group.AllReduce(t, op), IsOk());
                      EXPECT_TRUE(at::equal(t, expected))
                          << ReduceOpName(op) << " rank " << group.rank();
                    },
                    Options())
                    .ok());
  }
}

TEST_P(CollectiveTest, BroadcastCopiesRootFromEveryRoot) {
  ASSERT_TRUE(RunOnRanks(
                  world_size(),
                  [&](Group& group) {
                    for (int root = 0; root < group.size(); ++root) {
                      at::Tensor t = RankData(group.rank(), numel(), dtype());
                      ASSERT_THAT(group.Broadcast(t, root), IsOk());
                      EXPECT_TRUE(
                          at::equal(t, RankData(root, numel(), dtype())));
                    }
                  },
                  Options())
                  .ok());
}

TEST_P(CollectiveTest, AllGatherConcatenatesRanksInOrder) {
  std::vector<at::Tensor> parts;
  for (int r = 0; r < world_size(); ++r) {
    parts.push_back(RankData(r, numel(), dtype()));
  }
  at::Tensor expected = at::cat(parts);
  ASSERT_TRUE(
      RunOnRanks(
          world_size(),
          [&](Group& group) {
            at::Tensor out = at::full({numel() * group.size()}, 99, dtype());
            ASSERT_THAT(
                group.AllGather(RankData(group.rank(), numel(), dtype()), out),
                IsOk());
            EXPECT_TRUE(at::equal(out, expected));
          },
          Options())
          .ok());
}

TEST_P(CollectiveTest, AllGatherVHandlesUnevenAndEmptyBlocks) {
  std::vector<int64_t> counts = UnevenCounts(world_size(), numel());
  std::vector<at::Tensor> parts;
  for (int r = 0; r < world_size(); ++r) {
    parts.push_back(RankData(r, counts[r], dtype()));
  }
  at::Tensor expected = at::cat(parts);
  ASSERT_TRUE(RunOnRanks(
                  world_size(),
                  [&](Group& group) {
                    at::Tensor out = at::full({expected.numel()}, 99, dtype());
                    at::Tensor in =
                        RankData(group.rank(), counts[group.rank()], dtype());
                    ASSERT_THAT(group.AllGatherV(in, out, counts), IsOk());
                    EXPECT_TRUE(at::equal(out, expected));
                  },
                  Options())
                  .ok());
}

TEST_P(CollectiveTest, ReduceScatterGivesEachRankItsReducedBlock) {
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAverage, ReduceOp::kMax}) {
    const int64_t total = numel() * world_size();
    at::Tensor expected = ReferenceReduce(world_size(), total, dtype(), op);
    ASSERT_TRUE(
        RunOnRanks(
            world_size(),
            [&](Group& group) {
              at::Tensor in = RankData(group.rank(), total, dtype());
              at::Tensor out = at::full({numel()}, 99, dtype());
              ASSERT_THAT(group.ReduceScatter(in, out, op), IsOk());
              EXPECT_TRUE(at::equal(
                  out, expected.narrow(0, numel() * group.rank(), numel())))
                  << ReduceOpName(op) << " rank " << group.rank();
            },
            Options())
            .ok());
  }
}

TEST_P(CollectiveTest, ReduceScatterVHandlesUnevenAndEmptyBlocks) {
  std::vector<int64_t> counts = UnevenCounts(world_size(), numel());
  const int64_t total =
      std::accumulate(counts.begin(), counts.end(), int64_t{0});
  at::Tensor expected =
      ReferenceReduce(world_size(), total, dtype(), ReduceOp::kSum);
  ASSERT_TRUE(
      RunOnRanks(
          world_size(),
          [&](Group& group) {
            const int r = group.rank();
            const int64_t offset =
                std::accumulate(counts.begin(), counts.begin() + r, int64_t{0});
            at::Tensor in = RankData(r, total, dtype());
            at::Tensor out = at::full({counts[r]}, 99, dtype());
            ASSERT_THAT(group.ReduceScatterV(in, out, counts), IsOk());
            EXPECT_TRUE(at::equal(out, expected.narrow(0, offset, counts[r])));
          },
          Options())
          .ok());
}

INSTANTIATE_TEST_SUITE_P(
    WorldSizesDtypesAndCounts, CollectiveTest,
    ::testing::Combine(::testing::Values(1, 2, 3, 4),
                       ::testing::Values(at::kFloat, at::kBFloat16,
                                         at::kDouble),
                       // 1 element, a count no world size divides, and one
                       // spanning several 1 KiB ring segments.
                       ::testing::Values(int64_t{1}, int64_t{1001})),
    [](const auto& info) {
      return absl::StrCat("world", std::get<0>(info.param), "_",
                          DtypeName(std::get<1>(info.param)), "_n",
                          std::get<2>(info.param));
    });

TEST(GroupTest, AsyncCollectivesCompleteInOrder) {
  ASSERT_TRUE(RunOnRanks(3, [](Group& group) {
                const int n = group.size();
                at::Tensor a = at::full({4096}, group.rank() + 1.0, at::kFloat);
                at::Tensor rs_in = at::ones({3 * 1000}, at::kFloat);
                at::Tensor rs_out = at::empty({1000}, at::kFloat);
                at::Tensor ag_out = at::empty({3 * 5}, at::kFloat);
                auto w1 = group.AllReduceAsync(a);
                auto w2 = group.ReduceScatterAsync(rs_in, rs_out);
                auto w3 = group.AllGatherAsync(
                    at::full({5}, group.rank(), at::kFloat), ag_out);
                ASSERT_THAT(w3->Wait(), IsOk());
                ASSERT_THAT(w1->Wait(), IsOk());
                ASSERT_THAT(w2->Wait(), IsOk());
                EXPECT_TRUE(at::equal(a, at::full({4096}, 6.0, at::kFloat)));
                EXPECT_TRUE(at::equal(rs_out, at::full({1000}, n * 1.0)));
                EXPECT_TRUE(at::equal(
                    ag_out, at::arange(3).repeat_interleave(5).to(at::kFloat)));
              }).ok());
}

// The wait counter: time inside Wait counts (so it is positive and at most
// the wall time around the call), on the waiting thread only.
TEST(GroupTest, WaitingCountsOnTheWaitingThread) {
  ASSERT_TRUE(RunOnRanks(2, [](Group& group) {
                at::Tensor t = at::ones({1000}, at::kFloat);
                const double before = ThreadCollectiveWaitSeconds();
                const auto start = std::chrono::steady_clock::now();
                ASSERT_THAT(group.AllReduce(t), IsOk());
                const double wall =
                    std::chrono::duration<double>(
                        std::chrono::steady_clock::now() - start)
                        .count();
                const double waited = ThreadCollectiveWaitSeconds() - before;
                EXPECT_GT(waited, 0.0);
                EXPECT_LE(waited, wall);
              }).ok());
}

TEST(GroupTest, WaitingOnAnotherThreadDoesNotCountHere) {
  ASSERT_TRUE(RunOnRanks(2, [](Group& group) {
                at::Tensor t = at::ones({1000}, at::kFloat);
                // (Launching waits for check_collectives' exchange.)
                std::unique_ptr<Work> work = group.AllReduceAsync(t);
                const double before = ThreadCollectiveWaitSeconds();
                double helper_waited = 0;
                std::thread helper([&] {
                  const double helper_before = ThreadCollectiveWaitSeconds();
                  EXPECT_THAT(work->Wait(), IsOk());
                  helper_waited = ThreadCollectiveWaitSeconds() - helper_before;
                });
                helper.join();
                EXPECT_EQ(ThreadCollectiveWaitSeconds(), before);
                EXPECT_GT(helper_waited, 0.0);
              }).ok());
}

TEST(GroupTest, SendRecvMovesTensorBetweenRanks) {
  ASSERT_TRUE(RunOnRanks(2, [](Group& group) {
                if (group.rank() == 0) {
                  EXPECT_THAT(group.Send(at::arange(10).to(at::kFloat), 1, 7),
                              IsOk());
                } else {
                  at::Tensor t = at::zeros({10}, at::kFloat);
                  EXPECT_THAT(group.Recv(t, 0, 7), IsOk());
                  EXPECT_TRUE(at::equal(t, at::arange(10).to(at::kFloat)));
                }
              }).ok());
}

TEST(GroupTest, BarrierSucceeds) {
  ASSERT_THAT(
      RunOnRanks(3, [](Group& group) { EXPECT_THAT(group.Barrier(), IsOk()); }),
      IsOk());
}

TEST(GroupTest, SplitFormsHybridShardAndReplicateGroups) {
  // 4 ranks as 2 nodes x 2: shard groups {0,1},{2,3}; replicate {0,2},{1,3}.
  ASSERT_TRUE(
      RunOnRanks(4, [](Group& group) {
        const int r = group.rank();
        auto shard = group.Split(r / 2, "shard");
        ASSERT_THAT(shard, IsOk());
        auto replicate = group.Split(r % 2, "replicate");
        ASSERT_THAT(replicate, IsOk());
        EXPECT_EQ((*shard)->size(), 2);
        EXPECT_EQ((*shard)->rank(), r % 2);
        EXPECT_EQ((*shard)->name(), absl::StrCat("world/shard", r / 2));
        EXPECT_EQ((*replicate)->rank(), r / 2);
        at::Tensor t = at::full({3}, static_cast<double>(r), at::kDouble);
        ASSERT_THAT((*shard)->AllReduce(t), IsOk());
        const double shard_sum = r / 2 == 0 ? 0 + 1 : 2 + 3;
        EXPECT_TRUE(at::equal(t, at::full({3}, shard_sum, at::kDouble)));
        at::Tensor u = at::full({3}, static_cast<double>(r), at::kDouble);
        ASSERT_THAT((*replicate)->AllReduce(u), IsOk());
        const double replicate_sum = r % 2 == 0 ? 0 + 2 : 1 + 3;
        EXPECT_TRUE(at::equal(u, at::full({3}, replicate_sum, at::kDouble)));
      }).ok());
}

TEST(GroupTest, CheckCollectivesReportsSizeMismatchOnEveryRank) {
  ASSERT_TRUE(RunOnRanks(2, [](Group& group) {
                at::Tensor t = at::ones({group.rank() == 0 ? 10 : 20});
                absl::Status s = group.AllReduce(t);
                EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
                EXPECT_THAT(std::string(s.message()),
                            HasSubstr("collective mismatch at call #1"));
                EXPECT_THAT(std::string(s.message()),
                            HasSubstr(group.rank() == 0 ? "rank 1 calls "
                                                        : "rank 0 calls "));
                EXPECT_THAT(std::string(s.message()), HasSubstr("20 elements"));
              }).ok());
}

TEST(GroupTest, CheckCollectivesReportsDifferentOperations) {
  ASSERT_TRUE(RunOnRanks(2, [](Group& group) {
                at::Tensor t = at::ones({8});
                at::Tensor out = at::empty({16});
                absl::Status s = group.rank() == 0 ? group.AllReduce(t)
                                                   : group.AllGather(t, out);
                EXPECT_THAT(std::string(s.message()), HasSubstr("all_gather"));
                EXPECT_THAT(std::string(s.message()), HasSubstr("all_reduce"));
              }).ok());
}

TEST(GroupTest, InvalidArgumentsOnOneRankFailEveryRankWithoutHanging) {
  ASSERT_TRUE(RunOnRanks(2, [](Group& group) {
                at::Tensor in = at::ones({8});
                // Rank 1 passes an output of the wrong size.
                at::Tensor out = at::empty({group.rank() == 0 ? 4 : 5});
                absl::Status s = group.ReduceScatter(in, out);
                if (group.rank() == 1) {
                  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
                  EXPECT_THAT(std::string(s.message()),
                              HasSubstr("reduce_scatter(sum) of 8 x Float on "
                                        "group 'world' (rank 1 of 2)"));
                  EXPECT_THAT(
                      std::string(s.message()),
                      HasSubstr("input has 8 elements; expected the sum "
                                "of counts, 10"));
                } else {
                  EXPECT_THAT(std::string(s.message()),
                              HasSubstr("rank 1 passed invalid arguments"));
                }
              }).ok());
}

TEST(GroupTest, LocalValidationRejectsNonContiguousAndIntegerAverage) {
  ASSERT_TRUE(RunOnRanks(1, [](Group& group) {
                at::Tensor t = at::ones({4, 4}).t();
                EXPECT_THAT(std::string(group.AllReduce(t).message()),
                            HasSubstr("not contiguous"));
              }).ok());
  ASSERT_TRUE(
      RunOnRanks(1, [](Group& group) {
        at::Tensor t = at::ones({4}, at::kLong);
        EXPECT_THAT(
            std::string(group.AllReduce(t, ReduceOp::kAverage).message()),
            HasSubstr("average needs a floating dtype"));
      }).ok());
}

TEST(GroupTest, MissingPeerTimesOutNamingTheCollective) {
  GroupOptions options = TestGroupOptions();
  options.timeout = absl::Seconds(2);
  options.check_collectives = false;
  ASSERT_TRUE(
      RunOnRanks(
          2,
          [](Group& group) {
            if (group.rank() == 1) {
              // Alive (sockets open) but never calls the collective.
              std::this_thread::sleep_for(std::chrono::seconds(4));
              return;
            }
            at::Tensor in = at::ones({64});
            at::Tensor out = at::empty({32});
            auto start = std::chrono::steady_clock::now();
            absl::Status s = group.ReduceScatter(in, out);
            auto elapsed = std::chrono::steady_clock::now() - start;
            EXPECT_FALSE(s.ok());
            EXPECT_THAT(std::string(s.message()),
                        HasSubstr("reduce_scatter(sum) of 64 x Float on "
                                  "group 'world' (rank 0 of 2)"));
            EXPECT_GE(elapsed, std::chrono::milliseconds(1900));
            EXPECT_LT(elapsed, std::chrono::seconds(2 + 5));
            EXPECT_THAT(std::string(s.message()), HasSubstr("Timed out"));
            // The group is now unusable and says so at once.
            at::Tensor t = at::ones({1});
            EXPECT_THAT(std::string(group.AllReduce(t).message()),
                        HasSubstr("earlier collective on it failed"));
          },
          options)
          .ok());
}

TEST(GroupTest, TimeoutNamesTheRankThatNeverArrivedAndItsLastOperation) {
  GroupOptions options = TestGroupOptions();
  options.timeout = absl::Seconds(2);
  options.check_collectives = false;
  absl::Notification rank0_done;
  ASSERT_THAT(
      RunOnRanks(
          2,
          [&](Group& group) {
            group.SetTrainingStep(17);
            at::Tensor t = at::ones({8});
            ASSERT_THAT(group.AllReduce(t), IsOk());  // Call #1.
            if (group.rank() == 1) {
              // Alive (sockets open) but never enters call #2.
              rank0_done.WaitForNotification();
              return;
            }
            group.SetTrainingStep(18);
            at::Tensor in = at::ones({16});
            at::Tensor out = at::empty({32});
            absl::Status s = group.AllGather(in, out);
            rank0_done.Notify();
            EXPECT_THAT(
                std::string(s.message()),
                HasSubstr("all_gather of 16 x Float on group 'world' (rank 0 "
                          "of 2): all_gather #2 timed out after 2s: rank 1 "
                          "never arrived (last entered all_reduce #1 on "
                          "group 'world' at step 17, "));
            EXPECT_THAT(std::string(s.message()), HasSubstr("Cause: "));
          },
          options),
      IsOk());
}

TEST(GroupTest, TimeoutInASplitGroupNamesTheMissingRankByItsWorldRank) {
  GroupOptions options = TestGroupOptions();
  options.timeout = absl::Seconds(2);
  options.check_collectives = false;
  absl::Notification rank2_done;
  ASSERT_THAT(RunOnRanks(
                  4,
                  [&](Group& group) {
                    auto shard = group.Split(group.rank() / 2, "shard");
                    ASSERT_THAT(shard.status(), IsOk());
                    if (group.rank() < 2) return;
                    if (group.rank() == 3) {
                      rank2_done.WaitForNotification();
                      return;
                    }
                    at::Tensor t = at::ones({8});
                    absl::Status s = (*shard)->AllReduce(t);
                    rank2_done.Notify();
                    EXPECT_THAT(
                        std::string(s.message()),
                        HasSubstr("all_reduce #1 timed out after 2s: rank 3 "
                                  "never arrived (last entered all_gather #1 "
                                  "on group 'world', "));
                  },
                  options),
              IsOk());
}

TEST(GroupTest, GroupNamesWithSeparatorsAreRejected) {
  GroupOptions options;
  options.name = "my group";
  EXPECT_THAT(std::string(ValidateGroupOptions(options).message()),
              HasSubstr("GroupOptions.name must not contain whitespace, ',', "
                        "':' or '=', got 'my group'"));
}

TEST(GroupTest, HostNamesWithWhitespaceAreRejected) {
  GroupOptions options;
  options.host = "my host";
  EXPECT_THAT(std::string(ValidateGroupOptions(options).message()),
              HasSubstr("GroupOptions.host must not contain whitespace, got "
                        "'my host'"));
}

TEST(GroupTest, ANonPositiveProgressRefreshIsRejected) {
  GroupOptions options;
  options.progress_refresh_interval = absl::ZeroDuration();
  EXPECT_THAT(std::string(ValidateGroupOptions(options).message()),
              HasSubstr("GroupOptions.progress_refresh_interval must be "
                        "positive"));
}

TEST(GroupTest, CreateFailsWhenAPeerNeverJoins) {
  GroupOptions options = TestGroupOptions();
  options.world_size = 2;
  options.rank = 0;
  options.timeout = absl::Seconds(1);
  auto start = std::chrono::steady_clock::now();
  auto group = Group::Create(c10::make_intrusive<c10d::HashStore>(), options);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(6));
  ASSERT_FALSE(group.ok());
  EXPECT_EQ(group.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(group.status().message()),
              HasSubstr("forming group 'world' (rank 0 of 2"));
  EXPECT_THAT(std::string(group.status().message()),
              HasSubstr("did not start or crashed"));
}

TEST(GroupTest, InvalidOptionsAreRejectedNamingTheField) {
  GroupOptions options;
  options.world_size = 2;
  options.rank = 2;
  EXPECT_THAT(std::string(ValidateGroupOptions(options).message()),
              HasSubstr("GroupOptions.rank must be in [0, 2), got 2"));
  options.rank = 0;
  options.timeout = absl::ZeroDuration();
  EXPECT_THAT(std::string(ValidateGroupOptions(options).message()),
              HasSubstr("GroupOptions.timeout must be positive"));
}

}  // namespace
}  // namespace strata::comm
