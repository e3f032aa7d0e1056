#include "text/sentencepiece_tokenizer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/file_io.h"
#include "base/testing/status_matchers.h"
#include "base/testing/temp_dir.h"
#include "text/sentencepiece_model.h"

namespace strata::text {
namespace {

using ::strata::testing::FreshTempDir;
using ::strata::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// A BPE model with Llama 2's settings (byte fallback, identity
// normalization, digits split, ids unk 0, bos 1, eos 2), trained once on a
// small English corpus without the euro sign.
const std::string& ModelPath() {
  static const std::string* path = [] {
    const std::string dir = FreshTempDir("sentencepiece_model");
    std::string corpus;
    for (int i = 0; i < 200; ++i) {
      absl::StrAppend(&corpus, "the quick brown fox jumps over the lazy dog ",
                      i, "\nso she sells sea shells by the sea shore\n");
    }
    EXPECT_TRUE(WriteFileAtomic(dir + "/corpus.txt", corpus).ok());
    std::string error;
    EXPECT_TRUE(internal::TrainSentencePiece(
        absl::StrCat("--input=", dir, "/corpus.txt --model_prefix=", dir,
                     "/m --model_type=bpe --vocab_size=320 --byte_fallback=true"
                     " --normalization_rule_name=identity"
                     " --remove_extra_whitespaces=false --split_digits=true"
                     " --unk_id=0 --bos_id=1 --eos_id=2 --pad_id=-1"
                     " --minloglevel=2"),
        &error))
        << error;
    return new std::string(dir + "/m.model");
  }();
  return *path;
}

std::unique_ptr<SentencePieceTokenizer> Load() {
  absl::StatusOr<std::unique_ptr<SentencePieceTokenizer>> t =
      SentencePieceTokenizer::Load(ModelPath());
  EXPECT_TRUE(t.ok()) << t.status();
  return *std::move(t);
}

TEST(SentencePieceTokenizerTest, DescribesTheModel) {
  const auto t = Load();
  EXPECT_EQ(t->vocab_size(), 320);
  EXPECT_EQ(t->end_of_text_id(), 2);
  EXPECT_EQ(t->TokenId("<s>"), 1);
  EXPECT_EQ(t->TokenId("no such piece"), std::nullopt);
  EXPECT_THAT(t->Describe(), HasSubstr("SentencePiece model"));
}

TEST(SentencePieceTokenizerTest, RoundTripsTextWithUnseenCharacters) {
  const auto t = Load();
  for (const std::string text :
       {"the quick brown fox", "  two leading spaces", "digits 12345",
        "Grüße € 😀 中文", "tab\tand\nnewline"}) {
    EXPECT_EQ(*t->Decode(t->Encode(text)), text);
  }
}

TEST(SentencePieceTokenizerTest, UnseenCharactersFallBackToBytes) {
  const auto t = Load();
  const std::vector<int32_t> ids = t->Encode("€");
  // "▁" (the dummy prefix, a piece of its own) and the three UTF-8 bytes.
  ASSERT_EQ(ids.size(), 4u);
  EXPECT_THAT(std::vector<int32_t>(ids.begin() + 1, ids.end()),
              ElementsAre(*t->TokenId("<0xE2>"), *t->TokenId("<0x82>"),
                          *t->TokenId("<0xAC>")));
}

TEST(SentencePieceTokenizerTest, DigitsAreSplit) {
  const auto t = Load();
  const std::vector<int32_t> ids = t->Encode("123");
  EXPECT_EQ(ids.size(), 4u);  // ▁ 1 2 3
}

TEST(SentencePieceTokenizerTest, TemplatePutsBosFirst) {
  const auto t = Load();
  EncodeOptions options;
  options.add_template_tokens = true;
  const std::vector<int32_t> ids = t->Encode("the fox", options);
  ASSERT_FALSE(ids.empty());
  EXPECT_EQ(ids[0], 1);
  EXPECT_EQ(std::vector<int32_t>(ids.begin() + 1, ids.end()),
            t->Encode("the fox"));
}

TEST(SentencePieceTokenizerTest, DecodeRefusesUnknownIds) {
  EXPECT_THAT(Load()->Decode({5, 320}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("token id 320 at position 1 is not in the "
                                 "vocabulary of SentencePiece model")));
}

TEST(SentencePieceTokenizerTest, LoadErrorsNameTheFile) {
  const std::string dir = FreshTempDir("sentencepiece_bad");
  EXPECT_THAT(SentencePieceTokenizer::Load(dir + "/none.model"),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("none.model")));
  ASSERT_TRUE(WriteFileAtomic(dir + "/junk.model", "not a model").ok());
  EXPECT_THAT(SentencePieceTokenizer::Load(dir + "/junk.model"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("junk.model: not a SentencePiece model")));
}

}  // namespace
}  // namespace strata::text
