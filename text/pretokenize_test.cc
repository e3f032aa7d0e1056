#include "text/pretokenize.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace strata::text {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::vector<std::string> Split(SplitPattern pattern, const std::string& text) {
  std::vector<std::string> pieces;
  SplitText(pattern, text,
            [&](absl::string_view p) { pieces.emplace_back(p); });
  return pieces;
}

constexpr SplitPattern kGpt2 = SplitPattern::kGpt2;
constexpr SplitPattern kCl100k = SplitPattern::kCl100k;

TEST(Gpt2PatternTest, WordsTakeOneLeadingSpace) {
  EXPECT_THAT(Split(kGpt2, "Hello world  again"),
              ElementsAre("Hello", " world", " ", " again"));
}

TEST(Gpt2PatternTest, ContractionsAreCaseSensitive) {
  EXPECT_THAT(Split(kGpt2, "it's I'LL we've"),
              ElementsAre("it", "'s", " I", "'", "LL", " we", "'ve"));
}

TEST(Gpt2PatternTest, NumbersAndPunctuationRuns) {
  EXPECT_THAT(Split(kGpt2, "x=12345!? ..."),
              ElementsAre("x", "=", "12345", "!?", " ..."));
}

TEST(Gpt2PatternTest, WhiteSpaceRunLeavesItsLastCharacterToTheNextPiece) {
  EXPECT_THAT(Split(kGpt2, "a\n\n  b"), ElementsAre("a", "\n\n ", " b"));
  EXPECT_THAT(Split(kGpt2, "a\n\nb"), ElementsAre("a", "\n", "\n", "b"));
  EXPECT_THAT(Split(kGpt2, "end  \n"), ElementsAre("end", "  \n"));
}

TEST(Gpt2PatternTest, UnicodeLettersNumbersAndInvalidBytes) {
  // é is a letter, ½ a number, 😀 neither; \xFF joins the punctuation run.
  EXPECT_THAT(Split(kGpt2, "café ½😀\xFF!"),
              ElementsAre("café", " ½", "😀\xFF!"));
}

TEST(Cl100kPatternTest, ContractionsIgnoreCase) {
  EXPECT_THAT(Split(kCl100k, "I'LL it'S x'ſ"),
              ElementsAre("I", "'LL", " it", "'S", " x", "'ſ"));
}

TEST(Cl100kPatternTest, NumbersGoInThrees) {
  EXPECT_THAT(Split(kCl100k, "1234567"), ElementsAre("123", "456", "7"));
}

TEST(Cl100kPatternTest, OnePunctuationCharacterJoinsTheWordAfterIt) {
  EXPECT_THAT(Split(kCl100k, "(hello) 'world"),
              ElementsAre("(hello", ")", " '", "world"));
}

TEST(Cl100kPatternTest, PunctuationTakesTrailingNewlines) {
  EXPECT_THAT(Split(kCl100k, "end.\n\nNext"),
              ElementsAre("end", ".\n\n", "Next"));
}

TEST(Cl100kPatternTest, WhiteSpaceUpToTheLastNewline) {
  EXPECT_THAT(Split(kCl100k, "a \n \n  b"),
              ElementsAre("a", " \n \n", " ", " b"));
  EXPECT_THAT(Split(kCl100k, "a\tb"), ElementsAre("a", "\tb"));
  EXPECT_THAT(Split(kCl100k, "a   "), ElementsAre("a", "   "));
}

TEST(SplitPatternTest, PiecesCoverAnyBytes) {
  std::string bytes;
  for (int b = 0; b < 256; ++b) bytes.push_back(static_cast<char>(b));
  for (const SplitPattern p : {kGpt2, kCl100k}) {
    std::string joined;
    for (const std::string& piece : Split(p, bytes + bytes)) {
      EXPECT_FALSE(piece.empty());
      joined += piece;
    }
    EXPECT_EQ(joined, bytes + bytes);
  }
}

TEST(SplitPatternTest, KnowsBothRegexesAndRefusesOthers) {
  EXPECT_EQ(*SplitPatternFromRegex(SplitPatternRegex(kGpt2)), kGpt2);
  EXPECT_EQ(*SplitPatternFromRegex(SplitPatternRegex(kCl100k)), kCl100k);
  const absl::StatusOr<SplitPattern> other = SplitPatternFromRegex("\\w+");
  ASSERT_FALSE(other.ok());
  EXPECT_THAT(other.status().message(), HasSubstr("unsupported"));
  EXPECT_THAT(other.status().message(), HasSubstr("'\\w+'"));
}

}  // namespace
}  // namespace strata::text
