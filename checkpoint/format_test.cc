#include "checkpoint/format.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/status/status.h"
#include "base/testing/status_matchers.h"

namespace strata::checkpoint {
namespace {

using ::strata::testing::StatusIs;

TEST(FormatTest, NamesRoundTrip) {
  for (Format format :
       {Format::kFull, Format::kLocal, Format::kSharded, Format::kDcp}) {
    ASSERT_OK_AND_ASSIGN(const Format parsed, ParseFormat(FormatName(format)));
    EXPECT_EQ(parsed, format) << FormatName(format);
  }
}

TEST(FormatTest, Names) {
  EXPECT_EQ(FormatName(Format::kFull), "full");
  EXPECT_EQ(FormatName(Format::kLocal), "local");
  EXPECT_EQ(FormatName(Format::kSharded), "sharded");
  EXPECT_EQ(FormatName(Format::kDcp), "dcp");
}

TEST(FormatTest, UnknownNameNamesTheFlagAndTheChoices) {
  EXPECT_THAT(ParseFormat("zip"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "--ckpt_format must be full, local, sharded or dcp, got "
                       "'zip'"));
}

TEST(FormatTest, UnknownNameNamesTheGivenField) {
  EXPECT_THAT(ParseFormat("Full", "target format"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "target format must be full, local, sharded or dcp, got "
                       "'Full'"));
}

}  // namespace
}  // namespace strata::checkpoint
