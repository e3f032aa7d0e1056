// comm::Group on NCCL and NcclCommunicator, on a GPU (tag gpu: never run on
// machines without one; tools/gpu/run_gpu_tests.sh runs it). NCCL refuses two
// ranks on one GPU, so the NCCL collectives run at world size 1, checked
// against closed forms written for any world size n; two ranks (threads) on
// one GPU check the fallback to host staging and the error under kNccl.
//
// Every expected value is a small integer times an exact fp32 value
// (sums of at most n(n+1)/2 * 1000 < 2^24), so results compare exactly.
#include "comm/nccl_communicator.h"

#include <ATen/TensorOperators.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/full.h>
#include <cuda_runtime_api.h>

#include <memory>
#include <string>
#include <torch/csrc/distributed/c10d/HashStore.hpp>
#include <vector>

#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "base/testing/status_matchers.h"
#include "comm/group.h"
#include "comm/testing/multi_rank.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace strata::comm {
namespace {

using ::strata::comm::testing::RunOnRanks;
using ::strata::comm::testing::TestGroupOptions;
using ::strata::testing::IsOk;
using ::strata::testing::StatusIs;
using ::testing::AllOf;
using ::testing::HasSubstr;

const at::Device kGpu(at::kCUDA, 0);

GroupOptions NcclOptions() {
  GroupOptions options = TestGroupOptions();
  options.cuda_backend = CudaBackend::kNccl;
  return options;
}

at::Tensor Arange(int64_t n) {
  return at::arange(n, at::TensorOptions().dtype(at::kFloat).device(kGpu));
}

// All-reduce of a tensor filled with rank + 1 over n ranks.
void ExpectAllReduceOfRankPlusOne(ReduceOp op, double expected_per_n(int)) {
  ASSERT_THAT(RunOnRanks(
                  1,
                  [&](Group& group) {
                    at::Tensor t = at::full({1000}, group.rank() + 1.0,
                                            at::TensorOptions().device(kGpu));
                    ASSERT_THAT(group.AllReduce(t, op), IsOk());
                    EXPECT_EQ(group.cuda_backend(), CudaBackend::kNccl);
                    const at::Tensor expected =
                        at::full({1000}, expected_per_n(group.size()));
                    EXPECT_TRUE(t.cpu().equal(expected)) << ReduceOpName(op);
                  },
                  NcclOptions()),
              IsOk());
}

TEST(NcclGroupTest, AllReduceSum) {
  ExpectAllReduceOfRankPlusOne(ReduceOp::kSum,
                               [](int n) { return n * (n + 1) / 2.0; });
}

TEST(NcclGroupTest, AllReduceAverage) {
  ExpectAllReduceOfRankPlusOne(ReduceOp::kAverage,
                               [](int n) { return (n + 1) / 2.0; });
}

TEST(NcclGroupTest, AllReduceMax) {
  ExpectAllReduceOfRankPlusOne(ReduceOp::kMax,
                               [](int n) { return static_cast<double>(n); });
}

TEST(NcclGroupTest, AllReduceMin) {
  ExpectAllReduceOfRankPlusOne(ReduceOp::kMin, [](int) { return 1.0; });
}

TEST(NcclGroupTest, AutoChoosesNcclWhenEveryRankHasItsOwnGpu) {
  GroupOptions options = TestGroupOptions();
  options.cuda_backend = CudaBackend::kAuto;
  ASSERT_THAT(RunOnRanks(
                  1,
                  [&](Group& group) {
                    at::Tensor t = Arange(10);
                    ASSERT_THAT(group.AllReduce(t), IsOk());
                    EXPECT_EQ(group.cuda_backend(), CudaBackend::kNccl);
                  },
                  options),
              IsOk());
}

TEST(NcclGroupTest, BroadcastGivesRootsTensor) {
  ASSERT_THAT(RunOnRanks(
                  1,
                  [&](Group& group) {
                    at::Tensor t = Arange(100) * (group.rank() + 1);
                    ASSERT_THAT(group.Broadcast(t, /*root=*/0), IsOk());
                    EXPECT_TRUE(t.cpu().equal(at::arange(100, at::kFloat)));
                  },
                  NcclOptions()),
              IsOk());
}

TEST(NcclGroupTest, AllGatherPlacesRankBlocksInOrder) {
  constexpr int64_t kBlock = 64;
  ASSERT_THAT(RunOnRanks(
                  1,
                  [&](Group& group) {
                    at::Tensor input = Arange(kBlock) + 100.0 * group.rank();
                    at::Tensor output =
                        at::empty({group.size() * kBlock}, input.options());
                    ASSERT_THAT(group.AllGather(input, output), IsOk());
                    at::Tensor got = output.cpu();
                    for (int r = 0; r < group.size(); ++r) {
                      EXPECT_TRUE(got.slice(0, r * kBlock, (r + 1) * kBlock)
                                      .equal(at::arange(kBlock, at::kFloat) +
                                             100.0 * r))
                          << "block " << r;
                    }
                  },
                  NcclOptions()),
              IsOk());
}

TEST(NcclGroupTest, AllGatherVPlacesUnevenBlocksAtTheirOffsets) {
  ASSERT_THAT(RunOnRanks(
                  1,
                  [&](Group& group) {
                    std::vector<int64_t> counts;  // Rank r: r + 3 elements.
                    for (int r = 0; r < group.size(); ++r)
                      counts.push_back(r + 3);
                    at::Tensor input =
                        at::full({counts[group.rank()]}, group.rank() + 1.0,
                                 at::TensorOptions().device(kGpu));
                    int64_t total = 0;
                    for (int64_t c : counts) total += c;
                    at::Tensor output = at::empty({total}, input.options());
                    ASSERT_THAT(group.AllGatherV(input, output, counts),
                                IsOk());
                    at::Tensor got = output.cpu();
                    int64_t offset = 0;
                    for (int r = 0; r < group.size(); ++r) {
                      EXPECT_TRUE(got.slice(0, offset, offset + counts[r])
                                      .equal(at::full({counts[r]}, r + 1.0)))
                          << "block " << r;
                      offset += counts[r];
                    }
                  },
                  NcclOptions()),
              IsOk());
}

// Rank r's input block b is (r + 1) * (b * k + arange(k)): rank b receives
// n(n + 1)/2 * (b * k + arange(k)).
TEST(NcclGroupTest, ReduceScatterSumsThisRanksBlock) {
  constexpr int64_t kBlock = 32;
  ASSERT_THAT(
      RunOnRanks(
          1,
          [&](Group& group) {
            const int n = group.size();
            at::Tensor input = Arange(n * kBlock) * (group.rank() + 1.0);
            at::Tensor output = at::empty({kBlock}, input.options());
            ASSERT_THAT(group.ReduceScatter(input, output), IsOk());
            const at::Tensor expected =
                (at::arange(kBlock, at::kFloat) + group.rank() * kBlock) *
                (n * (n + 1) / 2.0);
            EXPECT_TRUE(output.cpu().equal(expected));
          },
          NcclOptions()),
      IsOk());
}

TEST(NcclGroupTest, ReduceScatterVAveragesUnevenBlocks) {
  ASSERT_THAT(
      RunOnRanks(
          1,
          [&](Group& group) {
            const int n = group.size();
            std::vector<int64_t> counts;  // Rank r: 2r + 5 elements.
            int64_t total = 0;
            for (int r = 0; r < n; ++r) {
              counts.push_back(2 * r + 5);
              total += counts.back();
            }
            at::Tensor input = Arange(total) * (group.rank() + 1.0);
            at::Tensor output =
                at::empty({counts[group.rank()]}, input.options());
            ASSERT_THAT(
                group.ReduceScatterV(input, output, counts, ReduceOp::kAverage),
                IsOk());
            int64_t offset = 0;
            for (int r = 0; r < group.rank(); ++r) offset += counts[r];
            // The mean of (r + 1) over ranks is (n + 1) / 2.
            const at::Tensor expected =
                (at::arange(counts[group.rank()], at::kFloat) + offset) *
                ((n + 1) / 2.0);
            EXPECT_TRUE(output.cpu().equal(expected));
          },
          NcclOptions()),
      IsOk());
}

TEST(NcclGroupTest, StreamWaitOrdersTheCallersStreamAfterTheCollective) {
  GroupOptions options = NcclOptions();
  options.nccl_host_wait = false;
  ASSERT_THAT(RunOnRanks(
                  1,
                  [&](Group& group) {
                    at::Tensor t = Arange(1 << 20);
                    ASSERT_THAT(group.AllReduce(t), IsOk());
                    // .cpu() runs on the caller's (default) stream.
                    EXPECT_TRUE(t.cpu().equal(at::arange(1 << 20, at::kFloat) *
                                              group.size()));
                  },
                  options),
              IsOk());
}

TEST(NcclGroupTest, TwoRanksOnOneGpuFallBackToHostStagingUnderAuto) {
  GroupOptions options = TestGroupOptions();
  options.cuda_backend = CudaBackend::kAuto;
  ASSERT_THAT(RunOnRanks(
                  2,
                  [&](Group& group) {
                    at::Tensor t = at::full({100}, group.rank() + 1.0,
                                            at::TensorOptions().device(kGpu));
                    ASSERT_THAT(group.AllReduce(t), IsOk());
                    EXPECT_EQ(group.cuda_backend(), CudaBackend::kHostStaging);
                    EXPECT_TRUE(t.cpu().equal(at::full({100}, 3.0)));
                  },
                  options),
              IsOk());
}

TEST(NcclGroupTest, TwoRanksOnOneGpuAreAnErrorUnderNccl) {
  ASSERT_THAT(RunOnRanks(
                  2,
                  [&](Group& group) {
                    at::Tensor t =
                        at::full({100}, 1.0, at::TensorOptions().device(kGpu));
                    EXPECT_THAT(group.AllReduce(t),
                                StatusIs(absl::StatusCode::kFailedPrecondition,
                                         AllOf(HasSubstr("ranks 0 and 1"),
                                               HasSubstr("same GPU"))));
                  },
                  NcclOptions()),
              IsOk());
}

void CUDART_CB BlockUntilNotified(void* notification) {
  static_cast<absl::Notification*>(notification)->WaitForNotification();
}

// Kept last in the file (gtest runs tests in order): it aborts a
// communicator with a collective queued behind a blocked stream.
TEST(NcclCommunicatorTest, HostWaitTimesOutAndAbortsInsteadOfHanging) {
  // World size 1 has no peer to wait for, so the caller's stream is blocked
  // instead: a host function that returns only when notified holds back the
  // event the collective waits for.
  absl::Notification release;
  auto unblock = [&] {  // Everything below runs on this thread.
    if (!release.HasBeenNotified()) release.Notify();
  };
  auto store = c10::make_intrusive<c10d::HashStore>();
  NcclCommunicatorOptions options;
  options.name = "timeout_test";
  options.timeout = absl::Seconds(2);
  // The stream is released as the abort begins: ncclCommAbort may wait for
  // the device, which would otherwise wait for the blocked host function.
  options.on_abort = [&](const absl::Status&) { unblock(); };
  absl::StatusOr<std::unique_ptr<NcclCommunicator>> communicator =
      NcclCommunicator::Create(store, options);
  ASSERT_THAT(communicator.status(), IsOk());
  cudaStream_t caller = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&caller, cudaStreamNonBlocking),
            cudaSuccess);
  ASSERT_EQ(cudaLaunchHostFunc(caller, BlockUntilNotified, &release),
            cudaSuccess);
  at::Tensor t = Arange(16);
  NcclCommunicator::Launched work =
      (*communicator)->AllReduce(t, ncclSum, caller);
  if (!work.ok()) {
    unblock();
    FAIL() << work.status();
  }
  EXPECT_THAT(
      (*work)->WaitOnHost(),
      StatusIs(absl::StatusCode::kDeadlineExceeded,
               AllOf(HasSubstr("all_reduce(sum) #1 of 64 bytes"),
                     HasSubstr("group 'timeout_test'"), HasSubstr("aborted"))));
  EXPECT_TRUE((*communicator)->aborted());
  unblock();  // Only if it did not abort: a failure reported above.
  EXPECT_EQ(cudaStreamSynchronize(caller), cudaSuccess);
  cudaStreamDestroy(caller);
}

}  // namespace
}  // namespace strata::comm
