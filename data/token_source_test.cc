#include "data/token_source.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <vector>

#include "base/testing/status_matchers.h"

namespace strata::data {
namespace {

using ::strata::testing::IsOk;

using ::testing::HasSubstr;

TEST(InMemoryTokenSourceTest, ReadsARange) {
  auto source = InMemoryTokenSource::Create({5, 6, 7, 8, 9}, 10, "digits");
  ASSERT_THAT(source, IsOk());
  EXPECT_EQ((*source)->num_tokens(), 5);
  EXPECT_EQ((*source)->vocab_size(), 10);
  std::vector<int64_t> out(3, -1);
  (*source)->Read(1, 3, out.data());
  EXPECT_EQ(out, (std::vector<int64_t>{6, 7, 8}));
}

TEST(InMemoryTokenSourceTest, EmptyReadAtEndIsAllowed) {
  auto source = InMemoryTokenSource::Create({1, 2}, 3, "t");
  ASSERT_THAT(source, IsOk());
  (*source)->Read(2, 0, nullptr);
}

TEST(InMemoryTokenSourceTest, DescribeNamesTheSourceAndCount) {
  auto source = InMemoryTokenSource::Create({1, 2, 0}, 3, "unit");
  ASSERT_THAT(source, IsOk());
  EXPECT_EQ((*source)->Describe(), "memory(unit, 3 tokens)");
}

TEST(InMemoryTokenSourceTest, TokenOutsideVocabularyIsRejected) {
  auto source = InMemoryTokenSource::Create({1, 2, 3, 7}, 5, "bad");
  ASSERT_FALSE(source.ok());
  EXPECT_EQ(source.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(source.status().message()),
              HasSubstr("'bad': token at offset 3 is 7, expected an id in "
                        "[0, 5)"));
}

TEST(InMemoryTokenSourceTest, NegativeTokenIsRejected) {
  auto source = InMemoryTokenSource::Create({0, -1}, 5, "neg");
  ASSERT_FALSE(source.ok());
  EXPECT_THAT(std::string(source.status().message()),
              HasSubstr("offset 1 is -1"));
}

TEST(InMemoryTokenSourceTest, VocabularyBelowOneIsRejected) {
  auto source = InMemoryTokenSource::Create({}, 0, "v");
  ASSERT_FALSE(source.ok());
  EXPECT_THAT(std::string(source.status().message()),
              HasSubstr("vocab_size is 0, expected at least 1"));
}

TEST(TokenSourceDeathTest, ReadPastTheEndNamesTheRangeAndSource) {
  auto source = InMemoryTokenSource::Create({1, 2, 3}, 4, "short");
  ASSERT_THAT(source, IsOk());
  std::vector<int64_t> out(4);
  EXPECT_DEATH((*source)->Read(1, 3, out.data()),
               "Read of tokens \\[1, 4\\) from memory\\(short, 3 tokens\\), "
               "which has 3 tokens");
}

TEST(TokenSourceDeathTest, NegativeStartFails) {
  auto source = InMemoryTokenSource::Create({1, 2, 3}, 4, "s");
  ASSERT_THAT(source, IsOk());
  std::vector<int64_t> out(1);
  EXPECT_DEATH((*source)->Read(-1, 1, out.data()),
               "Read of tokens \\[-1, 0\\)");
}

}  // namespace
}  // namespace strata::data
