#include "base/process_memory.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <memory>

#include "base/testing/status_matchers.h"

namespace strata {
namespace {

using ::strata::testing::IsOk;
using ::strata::testing::StatusIs;
using ::testing::HasSubstr;

TEST(ProcessMemoryTest, PeakGrowsByWhatIsTouched) {
  const absl::StatusOr<int64_t> before = PeakResidentBytes();
  ASSERT_THAT(before, IsOk());
  // 256 MiB touched page by page: the peak resident set must grow by about
  // that much (it cannot have been reached before: the test is small).
  constexpr size_t kBytes = size_t{256} << 20;
  std::unique_ptr<char[]> block(new char[kBytes]);
  std::memset(block.get(), 1, kBytes);
  const absl::StatusOr<int64_t> after = PeakResidentBytes();
  ASSERT_THAT(after, IsOk());
  EXPECT_GE(*after - *before, static_cast<int64_t>(kBytes) * 9 / 10);
  EXPECT_EQ(block[kBytes - 1], 1);
}

TEST(ProcessMemoryTest, ResidentIsAtMostThePeak) {
  const absl::StatusOr<int64_t> rss = ProcStatusBytes("VmRSS");
  const absl::StatusOr<int64_t> peak = PeakResidentBytes();
  ASSERT_THAT(rss, IsOk());
  ASSERT_THAT(peak, IsOk());
  EXPECT_GT(*rss, 0);
  EXPECT_LE(*rss, *peak);
}

TEST(ProcessMemoryTest, ResetPeakBringsThePeakDownToTheResidentSet) {
  // 64 MiB touched and freed (with an mmap threshold of 1 MiB: unmapped at
  // once), then the reset: the peak is the resident set again, below the
  // peak that included the block by at least half of it (other threads of
  // the test binary allocate little).
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "AddressSanitizer's allocator does not support mallopt, "
                  "so freed blocks are not unmapped at once";
#endif
  ASSERT_THAT(SetMallocMmapThreshold(1 << 20), IsOk());
  constexpr size_t kBytes = size_t{64} << 20;
  {
    std::unique_ptr<char[]> block(new char[kBytes]);
    std::memset(block.get(), 1, kBytes);
    EXPECT_EQ(block[kBytes - 1], 1);
  }
  const absl::StatusOr<int64_t> with_block = PeakResidentBytes();
  ASSERT_THAT(with_block, IsOk());
  ASSERT_THAT(ResetPeakResident(), IsOk());
  const absl::StatusOr<int64_t> peak = PeakResidentBytes();
  ASSERT_THAT(peak, IsOk());
  EXPECT_LE(*peak, *with_block - static_cast<int64_t>(kBytes) / 2);
}

TEST(ProcessMemoryTest, MmapThresholdOutsideGlibcsRangeIsRefused) {
  EXPECT_THAT(SetMallocMmapThreshold(-1),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("-1")));
  EXPECT_THAT(
      SetMallocMmapThreshold(int64_t{64} << 20),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("67108864")));
}

TEST(ProcessMemoryTest, UnknownFieldIsNotFoundNamingIt) {
  EXPECT_THAT(
      ProcStatusBytes("VmNoSuchField"),
      StatusIs(absl::StatusCode::kNotFound, HasSubstr("VmNoSuchField")));
}

}  // namespace
}  // namespace strata
