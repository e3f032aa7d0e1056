#include "data/tokenized_text.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/file_io.h"
#include "base/testing/status_matchers.h"
#include "base/testing/temp_dir.h"
#include "text/hf_tokenizer_json.h"

namespace strata::data {
namespace {

using ::strata::testing::FreshTempDir;
using ::strata::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::unique_ptr<text::Tokenizer> Gpt2() {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  auto t = text::LoadHfTokenizerJson(
      absl::StrCat(srcdir != nullptr ? srcdir : ".",
                   "/strata/text/testdata/gpt2/tokenizer.json"));
  EXPECT_TRUE(t.ok()) << t.status();
  return *std::move(t);
}

TEST(TokenizedTextTest, FilesAreDocumentsEndedByEndOfText) {
  const std::string dir = FreshTempDir("tokenized_files");
  ASSERT_TRUE(WriteFileAtomic(dir + "/a.txt", "Hello world").ok());
  ASSERT_TRUE(WriteFileAtomic(dir + "/b.txt", "Hello").ok());
  const auto t = Gpt2();
  TokenizeOptions options;
  options.num_threads = 2;
  // GPT-2: Hello 15496, " world" 995, <|endoftext|> 50256.
  EXPECT_THAT(*TokenizeTextFiles({dir + "/a.txt", dir + "/b.txt"}, *t, options),
              ElementsAre(15496, 995, 50256, 15496, 50256));
}

TEST(TokenizedTextTest, TokenSourceHasTheTokenizersVocabulary) {
  const std::string dir = FreshTempDir("tokenized_source");
  ASSERT_TRUE(WriteFileAtomic(dir + "/a.txt", "Hello world").ok());
  TokenizeOptions options;
  options.end_of_text_after_documents = false;
  auto source = OpenTokenizedText(dir + "/a.txt", *Gpt2(), options);
  ASSERT_TRUE(source.ok()) << source.status();
  EXPECT_EQ((*source)->vocab_size(), 50257);
  EXPECT_EQ((*source)->num_tokens(), 2);
  EXPECT_THAT((*source)->Describe(), HasSubstr("tokenized " + dir + "/a.txt"));
}

TEST(TokenizedTextTest, TokenBinRoundTrips) {
  const std::string dir = FreshTempDir("tokenized_bin");
  ASSERT_TRUE(WriteFileAtomic(dir + "/a.txt", "Hello world").ok());
  ASSERT_TRUE(TextFilesToTokenBin({dir + "/a.txt"}, dir + "/a.bin",
                                  TokenBinDtype::kUint16, *Gpt2(), {})
                  .ok());
  auto bin = OpenTokenBin(dir + "/a.bin", TokenBinDtype::kUint16, 50257);
  ASSERT_TRUE(bin.ok()) << bin.status();
  std::vector<int64_t> ids(3);
  ASSERT_EQ((*bin)->num_tokens(), 3);
  (*bin)->Read(0, 3, ids.data());
  EXPECT_THAT(ids, ElementsAre(15496, 995, 50256));
}

TEST(TokenizedTextTest, ErrorsNameTheFile) {
  const std::string dir = FreshTempDir("tokenized_errors");
  EXPECT_THAT(TokenizeTextFiles({dir + "/none.txt"}, *Gpt2(), {}),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("none.txt")));
  ASSERT_TRUE(WriteFileAtomic(dir + "/empty.txt", "").ok());
  TokenizeOptions no_end;
  no_end.end_of_text_after_documents = false;
  EXPECT_THAT(TokenizeTextFiles({dir + "/empty.txt"}, *Gpt2(), no_end),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("empty.txt) give no tokens")));
}

}  // namespace
}  // namespace strata::data
