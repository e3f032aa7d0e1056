#include "text/bpe.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "base/testing/status_matchers.h"

namespace strata::text {
namespace {

using ::strata::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// The 256 bytes as ids 0..255, then `extra` tokens from 256 on.
std::vector<std::pair<std::string, int32_t>> Tokens(
    const std::vector<std::string>& extra) {
  std::vector<std::pair<std::string, int32_t>> tokens;
  for (int b = 0; b < 256; ++b) tokens.emplace_back(std::string(1, b), b);
  for (size_t i = 0; i < extra.size(); ++i) {
    tokens.emplace_back(extra[i], 256 + static_cast<int32_t>(i));
  }
  return tokens;
}

std::vector<int32_t> Encode(const BytePairEncoder& e, const std::string& s) {
  std::vector<int32_t> ids;
  e.Encode(s, &ids);
  return ids;
}

TEST(BytePairEncoderTest, MergesLowestRankFirst) {
  // ab=256, bc=257, abc=258. Ranks: (b, c) before (a, b), so "abc" is
  // a + bc, and a + bc has no merge.
  const BytePairEncoder e = *BytePairEncoder::Create(
      Tokens({"ab", "bc", "abc"}), {{'b', 'c'}, {'a', 'b'}, {256, 'c'}},
      /*ignore_merges=*/false);
  EXPECT_THAT(Encode(e, "abc"), ElementsAre('a', 257));
  EXPECT_THAT(Encode(e, "abd"), ElementsAre(256, 'd'));
}

TEST(BytePairEncoderTest, EqualRanksMergeLeftmostFirst) {
  // (a, a) -> aa: "aaa" is aa + a, not a + aa.
  const BytePairEncoder e = *BytePairEncoder::Create(
      Tokens({"aa"}), {{'a', 'a'}}, /*ignore_merges=*/false);
  EXPECT_THAT(Encode(e, "aaa"), ElementsAre(256, 'a'));
  EXPECT_THAT(Encode(e, "aaaa"), ElementsAre(256, 256));
}

TEST(BytePairEncoderTest, IgnoreMergesTakesAWholeTokenPiece) {
  // "abc" is a token that the merges would not reach.
  const auto tokens = Tokens({"bc", "abc"});
  const BytePairEncoder merging =
      *BytePairEncoder::Create(tokens, {{'b', 'c'}}, false);
  const BytePairEncoder whole =
      *BytePairEncoder::Create(tokens, {{'b', 'c'}}, true);
  EXPECT_THAT(Encode(merging, "abc"), ElementsAre('a', 256));
  EXPECT_THAT(Encode(whole, "abc"), ElementsAre(257));
}

TEST(BytePairEncoderTest, LongPiecesMergeLikeShortOnes) {
  // Ranks: (a, b) < (ab, ab); pieces above 48 bytes take the queue path.
  // Each "ababababab" is five ab, then abab abab ab (leftmost first).
  const BytePairEncoder e = *BytePairEncoder::Create(
      Tokens({"ab", "abab"}), {{'a', 'b'}, {256, 256}}, false);
  std::string text;
  std::vector<int32_t> expected;
  for (int i = 0; i < 50; ++i) {
    text +=
        "ababababab"
        "c";
    expected.insert(expected.end(), {257, 257, 256, 'c'});
  }
  ASSERT_GT(text.size(), 48u);
  EXPECT_EQ(Encode(e, text), expected);
  EXPECT_THAT(Encode(e, "ababab"), ElementsAre(257, 256));
}

TEST(BytePairEncoderTest, FromRanksMergesByTheRankOfTheResult) {
  // Ranks as ids: ab=256 < bc=257 < abc=258: "abc" is whole (a token);
  // "abcd": ab (256) merges before bc (257), then ab + c forms abc.
  const BytePairEncoder e =
      *BytePairEncoder::FromRanks(Tokens({"ab", "bc", "abc"}));
  EXPECT_THAT(Encode(e, "abc"), ElementsAre(258));
  EXPECT_THAT(Encode(e, "abcd"), ElementsAre(258, 'd'));
  EXPECT_THAT(Encode(e, "xbcab"), ElementsAre('x', 257, 256));
}

TEST(BytePairEncoderTest, RefusesAVocabularyWithoutEveryByte) {
  auto tokens = Tokens({});
  tokens.erase(tokens.begin() + 0x41);
  EXPECT_THAT(BytePairEncoder::Create(tokens, {}, false),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("no token for the byte 0x41")));
}

TEST(BytePairEncoderTest, RefusesAMergeThatFormsNoToken) {
  EXPECT_THAT(BytePairEncoder::Create(Tokens({}), {{'x', 'y'}}, false),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("merge 0 ('x' + 'y') forms 'xy', which is "
                                 "not in the vocabulary")));
}

TEST(BytePairEncoderTest, RefusesDuplicateTokensAndIds) {
  auto twice = Tokens({"ab"});
  twice.emplace_back("ab", 300);
  EXPECT_THAT(BytePairEncoder::Create(twice, {}, false),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("'ab' appears twice (ids 256 and 300)")));
  auto shared_id = Tokens({"ab"});
  shared_id.emplace_back("cd", 256);
  EXPECT_THAT(BytePairEncoder::Create(shared_id, {}, false),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("token id 256 is given to two tokens")));
}

}  // namespace
}  // namespace strata::text
