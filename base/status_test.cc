#include "base/status.h"

#include <c10/util/Exception.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <stdexcept>

#include "base/testing/status_matchers.h"

namespace strata {
namespace {

using ::strata::testing::IsOk;

using ::testing::HasSubstr;
using ::testing::Not;

TEST(StatusFromCallTest, ReturnsOkWhenNothingThrows) {
  int calls = 0;
  EXPECT_THAT(StatusFromCall("ctx", [&] { ++calls; }), IsOk());
  EXPECT_EQ(calls, 1);
}

TEST(StatusFromCallTest, ConvertsStdExceptionWithContext) {
  absl::Status s =
      StatusFromCall("loading x", [] { throw std::runtime_error("boom\n"); });
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal);
  EXPECT_EQ(s.message(), "loading x: boom");
}

TEST(StatusFromCallTest, DropsC10Backtrace) {
  absl::Status s =
      StatusFromCall("ctx", [] { TORCH_CHECK(false, "bad size"); });
  EXPECT_THAT(std::string(s.message()), HasSubstr("ctx: bad size"));
  EXPECT_THAT(std::string(s.message()),
              Not(HasSubstr("Exception raised from")));
}

TEST(AnnotateTest, PrefixesMessageAndKeepsCode) {
  absl::Status s = Annotate(absl::NotFoundError("no file"), "reading /a");
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(s.message(), "reading /a: no file");
  EXPECT_THAT(Annotate(absl::OkStatus(), "x"), IsOk());
}

absl::StatusOr<int> Half(int x) {
  if (x % 2 != 0) return absl::InvalidArgumentError("odd");
  return x / 2;
}

absl::Status Quarter(int x, int* out) {
  STRATA_ASSIGN_OR_RETURN(int half, Half(x));
  STRATA_ASSIGN_OR_RETURN(*out, Half(half));
  return absl::OkStatus();
}

TEST(MacrosTest, AssignOrReturnPropagatesErrors) {
  int out = 0;
  EXPECT_THAT(Quarter(8, &out), IsOk());
  EXPECT_EQ(out, 2);
  EXPECT_EQ(Quarter(6, &out).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace strata
