#include "launch/observe/trace_window.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "base/testing/status_matchers.h"

namespace strata::launch {
namespace {

using ::strata::testing::IsOk;
using ::strata::testing::StatusIs;
using ::testing::HasSubstr;

TEST(TraceWindowTest, EmptyIsNoWindow) {
  auto w = ParseTraceSteps("");
  ASSERT_THAT(w, IsOk());
  EXPECT_FALSE(w->has_value());
}

TEST(TraceWindowTest, ParsesAnInclusiveRange) {
  auto w = ParseTraceSteps("3:7");
  ASSERT_THAT(w, IsOk());
  ASSERT_TRUE(w->has_value());
  EXPECT_EQ((*w)->first_step, 3);
  EXPECT_EQ((*w)->last_step, 7);
}

TEST(TraceWindowTest, OneStepWindow) {
  auto w = ParseTraceSteps("5:5");
  ASSERT_THAT(w, IsOk());
  EXPECT_EQ((*w)->first_step, 5);
  EXPECT_EQ((*w)->last_step, 5);
}

TEST(TraceWindowTest, RejectsMalformedValuesNamingTheFlag) {
  for (const char* bad : {"3", "3:", ":4", "a:b", "1:2:3", "1-2"}) {
    EXPECT_THAT(ParseTraceSteps(bad),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         HasSubstr("--trace_steps: expected FIRST:LAST")))
        << bad;
  }
}

TEST(TraceWindowTest, RejectsStepZero) {
  EXPECT_THAT(ParseTraceSteps("0:2"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("FIRST must be >= 1")));
}

TEST(TraceWindowTest, RejectsAReversedRange) {
  EXPECT_THAT(ParseTraceSteps("4:2"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("LAST is before FIRST")));
}

TEST(TraceWindowTest, StepsNeedADirectory) {
  EXPECT_THAT(ValidateTraceFlags("1:2", ""),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("--trace_dir: required")));
}

TEST(TraceWindowTest, ADirectoryNeedsSteps) {
  EXPECT_THAT(ValidateTraceFlags("", "/tmp/t"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("--trace_steps: required")));
}

TEST(TraceWindowTest, BothOrNeitherIsValid) {
  EXPECT_THAT(ValidateTraceFlags("", ""), IsOk());
  EXPECT_THAT(ValidateTraceFlags("2:3", "/tmp/t"), IsOk());
}

}  // namespace
}  // namespace strata::launch
