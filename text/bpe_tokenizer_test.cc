#include "text/bpe_tokenizer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "base/testing/status_matchers.h"

namespace strata::text {
namespace {

using ::strata::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// Bytes are ids 0..255; " a" 256 (merge ' ' + 'a'); specials <s> 300 and
// <|eot|> 301; template: 300 before the text, 301 after.
std::unique_ptr<BpeTokenizer> Tiny() {
  BpeTokenizerSpec spec;
  spec.source = "tiny";
  for (int b = 0; b < 256; ++b) spec.tokens.emplace_back(std::string(1, b), b);
  spec.tokens.emplace_back(" a", 256);
  spec.merges = {{' ', 'a'}};
  spec.special_tokens = {{"<s>", 300}, {"<|endoftext|>", 301}};
  spec.template_prefix = {300};
  spec.template_suffix = {301};
  absl::StatusOr<std::unique_ptr<BpeTokenizer>> t =
      BpeTokenizer::Create(std::move(spec));
  EXPECT_TRUE(t.ok()) << t.status();
  return *std::move(t);
}

TEST(BpeTokenizerTest, SpecialTokensInTextBecomeTheirIds) {
  const auto t = Tiny();
  EXPECT_THAT(t->Encode("x<s> a<|endoftext|>"),
              ElementsAre('x', 300, 256, 301));
  EncodeOptions ordinary;
  ordinary.special_tokens_in_text = false;
  EXPECT_THAT(t->Encode("<s>", ordinary), ElementsAre('<', 's', '>'));
}

TEST(BpeTokenizerTest, TemplateTokensSurroundTheText) {
  EncodeOptions options;
  options.add_template_tokens = true;
  EXPECT_THAT(Tiny()->Encode(" a", options), ElementsAre(300, 256, 301));
}

TEST(BpeTokenizerTest, DecodeGivesBackBytesAndSpecialContent) {
  const auto t = Tiny();
  EXPECT_EQ(*t->Decode({'x', 300, 256, 0xFF}), "x<s> a\xFF");
}

TEST(BpeTokenizerTest, DecodeRefusesUnknownIds) {
  const auto t = Tiny();
  EXPECT_THAT(t->Decode({'x', 299}),  // 257..299 are unused.
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("token id 299 at position 1 is not in the "
                                 "vocabulary of tiny (ids 0 to 301)")));
  EXPECT_THAT(t->Decode({-1}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("token id -1 at position 0")));
  EXPECT_THAT(t->Decode({302}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("token id 302 at position 0")));
}

TEST(BpeTokenizerTest, VocabularyAndNamedTokens) {
  const auto t = Tiny();
  EXPECT_EQ(t->vocab_size(), 302);
  EXPECT_EQ(t->TokenId("<s>"), 300);
  EXPECT_EQ(t->TokenId(" a"), 256);
  EXPECT_EQ(t->TokenId("zz"), std::nullopt);
  EXPECT_EQ(t->end_of_text_id(), 301);
}

TEST(BpeTokenizerTest, CutsAfterANewlineBetweenPrintableCharacters) {
  const auto t = Tiny();
  const std::string text = "ab\n\ncd\nef \ngh";
  // 3: "\n\n" is a run; 7: "d\ne"; 11: " \n" is preceded by a space.
  EXPECT_EQ(t->NextCut(text, 0), 7u);
  EXPECT_EQ(t->NextCut(text, 8), text.size());
}

TEST(BpeTokenizerTest, PrefixSpaceGoesBeforeEachStretchOfText) {
  BpeTokenizerSpec spec;
  for (int b = 0; b < 256; ++b) spec.tokens.emplace_back(std::string(1, b), b);
  spec.tokens.emplace_back(" a", 256);
  spec.merges = {{' ', 'a'}};
  spec.special_tokens = {{"<s>", 300}};
  spec.add_prefix_space = true;
  const auto t = *BpeTokenizer::Create(std::move(spec));
  // As Hugging Face's ByteLevel pre-tokenizer: " a" for both stretches, and
  // none added to " a" itself.
  EXPECT_THAT(t->Encode("a<s>a"), ElementsAre(256, 300, 256));
  EXPECT_THAT(t->Encode(" a"), ElementsAre(256));
  // Prefix spaces move the cuts: there are none.
  EXPECT_EQ(t->NextCut("ab\ncd", 0), 5u);
}

TEST(BpeTokenizerTest, RefusesSpecialTokensSharingAnId) {
  BpeTokenizerSpec spec;
  for (int b = 0; b < 256; ++b) spec.tokens.emplace_back(std::string(1, b), b);
  spec.special_tokens = {{"<a>", 256}, {"<b>", 256}};
  EXPECT_THAT(BpeTokenizer::Create(std::move(spec)),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("'<a>' and '<b>' have the same id 256")));
}

}  // namespace
}  // namespace strata::text
