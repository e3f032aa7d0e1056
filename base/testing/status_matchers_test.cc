#include "base/testing/status_matchers.h"

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace strata::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TEST(StatusMatchersTest, IsOkMatchesOkStatusAndStatusOrWithValue) {
  EXPECT_THAT(absl::OkStatus(), IsOk());
  EXPECT_THAT(absl::StatusOr<int>(3), IsOk());
  EXPECT_THAT(absl::InternalError("x"), Not(IsOk()));
  EXPECT_THAT(absl::StatusOr<int>(absl::NotFoundError("x")), Not(IsOk()));
}

TEST(StatusMatchersTest, StatusIsChecksCodeAndMessage) {
  const absl::Status s = absl::InvalidArgumentError("--steps must be > 0");
  EXPECT_THAT(
      s, StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--steps")));
  EXPECT_THAT(
      s, StatusIs(absl::StatusCode::kInvalidArgument, "--steps must be > 0"));
  EXPECT_THAT(s, Not(StatusIs(absl::StatusCode::kNotFound, HasSubstr("--"))));
  EXPECT_THAT(
      s, Not(StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--lr"))));
}

TEST(StatusMatchersTest, AssertOkAndAssignTakesTheValue) {
  ASSERT_OK_AND_ASSIGN(const int v, absl::StatusOr<int>(7));
  EXPECT_EQ(v, 7);
}

}  // namespace
}  // namespace strata::testing
