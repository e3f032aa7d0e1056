// Against ids from independent implementations: text/testdata/
// expected_ids.json holds samples encoded by the npm packages tiktoken
// (gpt2 = r50k_base and cl100k_base, Rust compiled to WebAssembly),
// gpt-3-encoder and @huggingface/tokenizers (text/testing/make_fixtures.js).
#include "text/openai_files.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/file_io.h"
#include "base/testing/status_matchers.h"
#include "base/testing/temp_dir.h"
#include "text/hf_tokenizer_json.h"

namespace strata::text {
namespace {

using ::strata::testing::FreshTempDir;
using ::strata::testing::StatusIs;
using ::testing::HasSubstr;

std::string TestData(const std::string& name) {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  return absl::StrCat(srcdir != nullptr ? srcdir : ".",
                      "/strata/text/testdata/", name);
}

nlohmann::json Samples() {
  absl::StatusOr<std::string> text =
      ReadWholeFile(TestData("expected_ids.json"));
  EXPECT_TRUE(text.ok()) << text.status();
  return nlohmann::json::parse(*text)["samples"];
}

std::vector<int32_t> Ids(const nlohmann::json& j) {
  return j.get<std::vector<int32_t>>();
}

EncodeOptions Ordinary() {
  EncodeOptions o;
  o.special_tokens_in_text = false;
  return o;
}

void ExpectGpt2Ids(const Tokenizer& t) {
  const nlohmann::json samples = Samples();
  ASSERT_EQ(samples.size(), 18u);
  for (const nlohmann::json& s : samples) {
    const std::string text = s["text"].get<std::string>();
    EXPECT_EQ(t.Encode(text, Ordinary()), Ids(s["gpt2_ordinary"])) << text;
    EXPECT_EQ(t.Encode(text), Ids(s["hf_gpt2"])) << text;
    EXPECT_EQ(*t.Decode(t.Encode(text)), text);
  }
}

TEST(OpenAiFilesTest, Gpt2EncoderFilesMatchTiktokenAndTokenizersJs) {
  absl::StatusOr<std::unique_ptr<BpeTokenizer>> t = LoadGpt2EncoderFiles(
      TestData("gpt2/encoder.json"), TestData("gpt2/vocab.bpe"));
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ((*t)->vocab_size(), 50257);
  EXPECT_EQ((*t)->end_of_text_id(), 50256);
  ExpectGpt2Ids(**t);
}

TEST(OpenAiFilesTest, Gpt2TokenizerJsonMatchesTiktokenAndTokenizersJs) {
  absl::StatusOr<std::unique_ptr<BpeTokenizer>> t =
      LoadHfTokenizerJson(TestData("gpt2/tokenizer.json"));
  ASSERT_TRUE(t.ok()) << t.status();
  ExpectGpt2Ids(**t);
}

TEST(OpenAiFilesTest, Cl100kRanksMatchTiktoken) {
  absl::StatusOr<std::unique_ptr<BpeTokenizer>> t =
      LoadTiktokenFile(TestData("cl100k_base.tiktoken"));
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ((*t)->vocab_size(), 100277);
  EXPECT_EQ((*t)->TokenId("<|endofprompt|>"), 100276);
  for (const nlohmann::json& s : Samples()) {
    const std::string text = s["text"].get<std::string>();
    EXPECT_EQ((*t)->Encode(text, Ordinary()), Ids(s["cl100k_ordinary"]))
        << text;
    EXPECT_EQ(*(*t)->Decode((*t)->Encode(text)), text);
  }
}

TEST(OpenAiFilesTest, TiktokenErrorsNameTheFileAndLine) {
  EXPECT_THAT(
      ParseTiktokenRanks("IQ== 0\nnot base64! 1\n", "x.tiktoken", "r50k_base"),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("x.tiktoken:2: expected \"<base64 token> "
                         "<rank>\"")));
  EXPECT_THAT(ParseTiktokenRanks("IQ== 0\n", "o.tiktoken", "o200k_base"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("unknown tiktoken encoding 'o200k_base'")));
  // A file of one token lacks the other 255 bytes.
  EXPECT_THAT(ParseTiktokenRanks("IQ== 0\n", "y.tiktoken", "r50k_base"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("y.tiktoken: the vocabulary has no token for "
                                 "the byte 0x00")));
}

TEST(OpenAiFilesTest, VocabBpeErrorsNameTheLine) {
  const std::string dir = FreshTempDir("vocab_bpe_errors");
  const std::string bpe = dir + "/vocab.bpe";
  ASSERT_TRUE(WriteFileAtomic(bpe, "#version: 0.2\nĠ t\nbad\n").ok());
  EXPECT_THAT(LoadGpt2EncoderFiles(TestData("gpt2/encoder.json"), bpe),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("vocab.bpe:3: expected a merge")));
  EXPECT_THAT(LoadGpt2EncoderFiles(dir + "/none.json", bpe),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("none.json")));
}

}  // namespace
}  // namespace strata::text
