#include "text/chunked_encode.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "text/hf_tokenizer_json.h"

namespace strata::text {
namespace {

std::unique_ptr<Tokenizer> Gpt2() {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  absl::StatusOr<std::unique_ptr<BpeTokenizer>> t = LoadHfTokenizerJson(
      absl::StrCat(srcdir != nullptr ? srcdir : ".",
                   "/strata/text/testdata/gpt2/tokenizer.json"));
  EXPECT_TRUE(t.ok()) << t.status();
  return *std::move(t);
}

// Lines of words, punctuation, blank lines and indentation.
std::string Text(int lines, unsigned seed) {
  std::mt19937 rng(seed);
  const std::vector<std::string> parts = {"word", " the", "  x", ".",  "\n",
                                          "\n\n", "42",   " é",  "\t", "'s"};
  std::string text;
  for (int i = 0; i < lines * 6; ++i) text += parts[rng() % parts.size()];
  return text;
}

TEST(ChunkedEncodeTest, AnyThreadCountGivesTheIdsOfWholeDocuments) {
  const auto t = Gpt2();
  const std::string a = Text(400, 1);
  const std::string b = Text(300, 2);
  std::vector<int32_t> expected = t->Encode(a, {false, false});
  expected.push_back(50256);
  const std::vector<int32_t> b_ids = t->Encode(b, {false, false});
  expected.insert(expected.end(), b_ids.begin(), b_ids.end());
  expected.push_back(50256);
  const std::vector<absl::string_view> docs = {a, b};
  for (const int threads : {1, 3}) {
    ChunkedEncodeOptions options;
    options.num_threads = threads;
    options.chunk_bytes = 97;  // Many chunks.
    options.end_of_text_after_documents = true;
    EXPECT_EQ(EncodeDocuments(*t, docs, options), expected) << threads;
  }
}

TEST(ChunkedEncodeTest, ChunksEndAtCutsAndCoverTheText) {
  const auto t = Gpt2();
  const std::string text = Text(200, 3);
  const std::vector<size_t> ends = ChunkEnds(*t, text, 64);
  ASSERT_GT(ends.size(), 5u);
  EXPECT_EQ(ends.back(), text.size());
  size_t start = 0;
  for (size_t i = 0; i + 1 < ends.size(); ++i) {
    EXPECT_GE(ends[i], start + 64);
    EXPECT_EQ(t->NextCut(text, start + 64), ends[i]);
    EXPECT_EQ(text[ends[i] - 1], '\n');
    start = ends[i];
  }
}

TEST(ChunkedEncodeTest, EmptyDocumentsGiveOnlyTheirEndOfText) {
  const auto t = Gpt2();
  ChunkedEncodeOptions options;
  options.end_of_text_after_documents = true;
  const std::vector<absl::string_view> docs = {"", "a", ""};
  EXPECT_EQ(EncodeDocuments(*t, docs, options),
            (std::vector<int32_t>{50256, 64, 50256, 50256}));
}

}  // namespace
}  // namespace strata::text
