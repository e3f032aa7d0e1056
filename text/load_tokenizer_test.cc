#include "text/load_tokenizer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "base/file_io.h"
#include "base/testing/status_matchers.h"
#include "base/testing/temp_dir.h"
#include "text/sentencepiece_model.h"

namespace strata::text {
namespace {

using ::strata::testing::FreshTempDir;
using ::strata::testing::StatusIs;
using ::testing::HasSubstr;
using ::testing::StartsWith;

std::string TestData(const std::string& name) {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  return absl::StrCat(srcdir != nullptr ? srcdir : ".",
                      "/strata/text/testdata/", name);
}

std::string DescribeLoaded(const std::string& path) {
  absl::StatusOr<std::unique_ptr<Tokenizer>> t = LoadTokenizer(path);
  EXPECT_TRUE(t.ok()) << t.status();
  return t.ok() ? (*t)->Describe() : "";
}

TEST(LoadTokenizerTest, PicksTheFormatByName) {
  EXPECT_THAT(DescribeLoaded(TestData("gpt2/tokenizer.json")),
              StartsWith("byte-level BPE from tokenizer.json"));
  EXPECT_THAT(DescribeLoaded(TestData("gpt2/encoder.json")),
              StartsWith("byte-level BPE from encoder.json"));
  EXPECT_THAT(DescribeLoaded(TestData("cl100k_base.tiktoken")),
              StartsWith("byte-level BPE from tiktoken cl100k_base"));
  // A directory: its tokenizer.json first.
  EXPECT_THAT(DescribeLoaded(TestData("gpt2")),
              StartsWith("byte-level BPE from tokenizer.json"));
}

TEST(LoadTokenizerTest, ReadsSentencePieceModels) {
  const std::string dir = FreshTempDir("load_tokenizer_spm");
  std::string corpus;
  for (int i = 0; i < 100; ++i)
    absl::StrAppend(&corpus, "a small corpus ", i, "\n");
  ASSERT_TRUE(WriteFileAtomic(dir + "/corpus.txt", corpus).ok());
  std::string error;
  ASSERT_TRUE(internal::TrainSentencePiece(
      absl::StrCat("--input=", dir, "/corpus.txt --model_prefix=", dir,
                   "/tokenizer --vocab_size=24 --minloglevel=2"),
      &error))
      << error;
  EXPECT_THAT(DescribeLoaded(dir + "/tokenizer.model"),
              StartsWith("SentencePiece model"));
  // A directory with only tokenizer.model.
  EXPECT_THAT(DescribeLoaded(dir), StartsWith("SentencePiece model"));
}

TEST(LoadTokenizerTest, RefusesUnknownNamesAndMissingPaths) {
  const std::string dir = FreshTempDir("load_tokenizer");
  ASSERT_TRUE(WriteFileAtomic(dir + "/vocab.txt", "a\nb\n").ok());
  EXPECT_THAT(LoadTokenizer(dir + "/vocab.txt"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("vocab.txt: not a tokenizer file")));
  EXPECT_THAT(LoadTokenizer(dir + "/none.json"),
              StatusIs(absl::StatusCode::kNotFound,
                       HasSubstr("none.json: no such tokenizer file")));
  EXPECT_THAT(LoadTokenizer(dir),
              StatusIs(absl::StatusCode::kNotFound,
                       HasSubstr("holds no tokenizer.json")));
}

}  // namespace
}  // namespace strata::text
