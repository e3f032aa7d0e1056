// LibTorchCurrentStream and Group's NCCL path on a side stream (tag gpu: needs
// a GPU and a CUDA LibTorch; tools/gpu/run_gpu_tests.sh runs it).
#include "comm/cuda_current_stream.h"

#include <ATen/TensorOperators.h>
#include <ATen/ops/arange.h>
// Debian's c10/cuda headers lack the generated cuda_cmake_macros.h (see
// cuda_current_stream.cc); only for compiling this test there.
#if !__has_include(<c10/cuda/impl/cuda_cmake_macros.h>)
#define C10_USING_CUSTOM_GENERATED_MACROS
#endif
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include "base/testing/status_matchers.h"
#include "comm/group.h"
#include "comm/testing/multi_rank.h"
#include "gtest/gtest.h"

namespace strata::comm {
namespace {

using ::strata::comm::testing::RunOnRanks;
using ::strata::comm::testing::TestGroupOptions;
using ::strata::testing::IsOk;

TEST(LibTorchCurrentStreamTest, FollowsTheStreamGuard) {
  c10::cuda::CUDAStream side = c10::cuda::getStreamFromPool(false, 0);
  c10::cuda::CUDAStreamGuard guard(side);
  EXPECT_EQ(LibTorchCurrentStream()(0), static_cast<void*>(side.stream()));
}

// The tensor is written on a side stream and read back on it right after a
// device-side Wait: correct only if the all-reduce ran after the write and
// the read after the all-reduce.
TEST(LibTorchCurrentStreamTest, NcclAllReduceIsOrderedOnTheCurrentStream) {
  GroupOptions options = TestGroupOptions();
  options.cuda_backend = CudaBackend::kNccl;
  options.cuda_stream = LibTorchCurrentStream();
  options.nccl_host_wait = false;
  ASSERT_THAT(
      RunOnRanks(
          1,
          [&](Group& group) {
            c10::cuda::CUDAStream side = c10::cuda::getStreamFromPool(false, 0);
            c10::cuda::CUDAStreamGuard guard(side);
            constexpr int64_t kCount = int64_t{1} << 22;
            at::Tensor t = at::arange(
                kCount,
                at::TensorOptions().dtype(at::kFloat).device(at::kCUDA));
            t.mul_(group.rank() + 1);
            ASSERT_THAT(group.AllReduce(t), IsOk());
            // Sum over n ranks of (r + 1) * i = n(n + 1)/2 * i (exact: < 2^24
            // for n = 1, i < 2^22).
            const int n = group.size();
            EXPECT_TRUE(t.cpu().equal(at::arange(kCount, at::kFloat) *
                                      (n * (n + 1) / 2.0)));
          },
          options),
      IsOk());
}

}  // namespace
}  // namespace strata::comm
