#include "base/regex.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "base/testing/status_matchers.h"

namespace strata {
namespace {

using ::strata::testing::IsOk;
using ::strata::testing::StatusIs;

// The header gives std::regex whole: matching, capture groups, search.
TEST(RegexTest, MatchesAndCaptures) {
  const std::regex line(R"(\[rank([0-9]+)\]: ([A-Z_]+)=(.*))");
  std::smatch match;
  const std::string text = "[rank12]: WORLD_SIZE=4";
  ASSERT_TRUE(std::regex_match(text, match, line));
  EXPECT_EQ(match[1].str(), "12");
  EXPECT_EQ(match[2].str(), "WORLD_SIZE");
  EXPECT_EQ(match[3].str(), "4");
  EXPECT_FALSE(std::regex_match(std::string("rank1: X=1"), line));
}

TEST(RegexTest, SearchFindsTheFirstOccurrence) {
  const std::regex pid(R"(pid ([0-9]+))");
  std::smatch match;
  const std::string text = "started pid 31 then pid 32";
  ASSERT_TRUE(std::regex_search(text, match, pid));
  EXPECT_EQ(match[1].str(), "31");
}

TEST(CompileRegexTest, CompilesAValidPattern) {
  auto re = CompileRegex("^blocks\\.[0-9]+\\.");
  ASSERT_THAT(re, IsOk());
  EXPECT_TRUE(std::regex_search(std::string("blocks.3.attn.weight"), *re));
  EXPECT_FALSE(std::regex_search(std::string("head.weight"), *re));
}

TEST(CompileRegexTest, NamesTheInvalidPattern) {
  auto re = CompileRegex("blocks.(");
  EXPECT_THAT(
      re, StatusIs(absl::StatusCode::kInvalidArgument,
                   ::testing::HasSubstr("'blocks.(' is not a valid regex: ")));
}

}  // namespace
}  // namespace strata
