#include "comm/cuda_backend.h"

#include <string>
#include <vector>

#include "base/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace strata::comm {
namespace {

using ::strata::testing::IsOk;
using ::strata::testing::StatusIs;
using ::testing::AllOf;
using ::testing::HasSubstr;

TEST(ChooseCudaBackendTest, HostStagingWhenRequested) {
  const std::vector<std::string> ids = {"GPU-a", "GPU-b"};
  absl::StatusOr<CudaBackendChoice> choice =
      ChooseCudaBackend(CudaBackend::kHostStaging, true, ids, "world");
  ASSERT_THAT(choice.status(), IsOk());
  EXPECT_EQ(choice->backend, CudaBackend::kHostStaging);
}

TEST(ChooseCudaBackendTest, AutoIsNcclWhenEveryRankHasItsOwnGpu) {
  const std::vector<std::string> ids = {"GPU-a", "GPU-b", "GPU-c"};
  absl::StatusOr<CudaBackendChoice> choice =
      ChooseCudaBackend(CudaBackend::kAuto, true, ids, "world");
  ASSERT_THAT(choice.status(), IsOk());
  EXPECT_EQ(choice->backend, CudaBackend::kNccl);
}

TEST(ChooseCudaBackendTest, AutoFallsBackToHostStagingWhenRanksShareAGpu) {
  const std::vector<std::string> ids = {"GPU-a", "GPU-b", "GPU-a"};
  absl::StatusOr<CudaBackendChoice> choice =
      ChooseCudaBackend(CudaBackend::kAuto, true, ids, "world/shard0");
  ASSERT_THAT(choice.status(), IsOk());
  EXPECT_EQ(choice->backend, CudaBackend::kHostStaging);
  EXPECT_THAT(choice->reason,
              AllOf(HasSubstr("ranks 0 and 2"), HasSubstr("'world/shard0'"),
                    HasSubstr("GPU-a")));
}

TEST(ChooseCudaBackendTest, NcclRequestedOnASharedGpuIsAnError) {
  const std::vector<std::string> ids = {"GPU-a", "GPU-a"};
  EXPECT_THAT(
      ChooseCudaBackend(CudaBackend::kNccl, true, ids, "world"),
      StatusIs(absl::StatusCode::kFailedPrecondition,
               AllOf(HasSubstr("ranks 0 and 1"), HasSubstr("cuda_backend"))));
}

TEST(ChooseCudaBackendTest, AutoIsHostStagingWithoutNccl) {
  absl::StatusOr<CudaBackendChoice> choice =
      ChooseCudaBackend(CudaBackend::kAuto, false, {}, "world");
  ASSERT_THAT(choice.status(), IsOk());
  EXPECT_EQ(choice->backend, CudaBackend::kHostStaging);
  EXPECT_THAT(choice->reason, HasSubstr("no NCCL"));
}

TEST(ChooseCudaBackendTest, NcclRequestedWithoutNcclNamesTheBuildFlag) {
  EXPECT_THAT(
      ChooseCudaBackend(CudaBackend::kNccl, false, {}, "world"),
      StatusIs(absl::StatusCode::kFailedPrecondition,
               AllOf(HasSubstr("--config=cuda"), HasSubstr("STRATA_CUDA=ON"))));
}

TEST(NcclErrorMessageTest, NamesGroupRankAndNcclText) {
  EXPECT_EQ(NcclErrorMessage("ncclAllReduce", "world", 1, 2,
                             "unhandled system error", "socket closed"),
            "ncclAllReduce on group 'world' (rank 1 of 2): NCCL error "
            "'unhandled system error': socket closed");
}

TEST(NcclErrorMessageTest, OmitsAnEmptyLastError) {
  EXPECT_EQ(NcclErrorMessage("ncclCommInitRankConfig", "world", 0, 1,
                             "invalid usage", ""),
            "ncclCommInitRankConfig on group 'world' (rank 0 of 1): NCCL "
            "error 'invalid usage'");
}

}  // namespace
}  // namespace strata::comm
