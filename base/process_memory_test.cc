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

TEST(ProcessMemoryTest, UnknownFieldIsNotFoundNamingIt) {
  EXPECT_THAT(
      ProcStatusBytes("VmNoSuchField"),
      StatusIs(absl::StatusCode::kNotFound, HasSubstr("VmNoSuchField")));
}

}  // namespace
}  // namespace strata
