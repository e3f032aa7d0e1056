#include "text/hf_tokenizer_json.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "base/testing/status_matchers.h"

namespace strata::text {
namespace {

using ::strata::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::StartsWith;

// A byte-level vocabulary of the 256 bytes (ids 0..255 in byte order,
// spelled in GPT-2's alphabet), plus "Ġa" (" a", 256) and "ab" (257).
std::string Vocab() {
  std::string v = "{";
  // GPT-2's alphabet: printable Latin-1 as itself, the rest from U+0100.
  int next = 0x100;
  for (int b = 0; b < 256; ++b) {
    const bool self = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) ||
                      (b >= 0xAE && b <= 0xFF);
    const int cp = self ? b : next++;
    std::string spelled = cp == '"'    ? "\\\""
                          : cp == '\\' ? "\\\\"
                                       : absl::StrFormat("\\u%04x", cp);
    absl::StrAppend(&v, "\"", spelled, "\": ", b, ", ");
  }
  absl::StrAppend(&v, "\"\\u0120a\": 256, \"ab\": 257}");
  return v;
}

// GPT-2's layout: ByteLevel with its regex, one added token.
std::string Gpt2Like(const std::string& merges = R"(["Ġ a", "a b"])") {
  return absl::StrCat(R"({"version": "1.0", "normalizer": null,
    "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false,
                      "trim_offsets": true, "use_regex": true},
    "post_processor": {"type": "ByteLevel"}, "decoder": {"type": "ByteLevel"},
    "added_tokens": [{"id": 258, "content": "<|endoftext|>", "special": true,
                      "lstrip": false, "rstrip": false, "single_word": false,
                      "normalized": true}],
    "model": {"type": "BPE", "dropout": null, "continuing_subword_prefix": "",
              "end_of_word_suffix": "", "vocab": )",
                      Vocab(), R"(, "merges": )", merges, "}}");
}

// Llama 3's layout: Split (cl100k) + ByteLevel, ignore_merges, a template.
std::string Llama3Like() {
  return absl::StrCat(
      R"({"normalizer": null,
    "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
      {"type": "Split", "pattern": {"Regex": )",
      R"("(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},)",
      R"( "behavior": "Isolated", "invert": false},
      {"type": "ByteLevel", "add_prefix_space": false, "use_regex": false}]},
    "post_processor": {"type": "Sequence", "processors": [
      {"type": "ByteLevel"},
      {"type": "TemplateProcessing",
       "single": [{"SpecialToken": {"id": "<|begin_of_text|>", "type_id": 0}},
                  {"Sequence": {"id": "A", "type_id": 0}}],
       "special_tokens": {"<|begin_of_text|>": {"id": "<|begin_of_text|>",
                                                "ids": [258]}}}]},
    "decoder": {"type": "ByteLevel"},
    "added_tokens": [{"id": 258, "content": "<|begin_of_text|>"},
                     {"id": 259, "content": "<|end_of_text|>"}],
    "model": {"type": "BPE", "ignore_merges": true, "vocab": )",
      Vocab(), R"(, "merges": [["Ġ", "a"]]}})");
}

TEST(HfTokenizerJsonTest, ReadsGpt2sLayout) {
  absl::StatusOr<std::unique_ptr<BpeTokenizer>> t =
      ParseHfTokenizerJson(Gpt2Like(), "gpt2.json");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ((*t)->pattern(), SplitPattern::kGpt2);
  EXPECT_EQ((*t)->vocab_size(), 259);
  EXPECT_THAT((*t)->Encode("ab a<|endoftext|>"), ElementsAre(257, 256, 258));
  EXPECT_EQ((*t)->end_of_text_id(), 258);
  EXPECT_THAT((*t)->Describe(), HasSubstr("tokenizer.json gpt2.json"));
}

TEST(HfTokenizerJsonTest, ReadsMergesAsPairs) {
  absl::StatusOr<std::unique_ptr<BpeTokenizer>> t = ParseHfTokenizerJson(
      Gpt2Like(R"([["Ġ", "a"], ["a", "b"]])"), "pairs.json");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_THAT((*t)->Encode(" ab"), ElementsAre(256, 'b'));
}

TEST(HfTokenizerJsonTest, ReadsLlama3sLayout) {
  absl::StatusOr<std::unique_ptr<BpeTokenizer>> t =
      ParseHfTokenizerJson(Llama3Like(), "llama3.json");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ((*t)->pattern(), SplitPattern::kCl100k);
  // ignore_merges: "ab" is a token without a merge.
  EXPECT_THAT((*t)->Encode("ab a"), ElementsAre(257, 256));
  EncodeOptions with_template;
  with_template.add_template_tokens = true;
  EXPECT_THAT((*t)->Encode("ab", with_template), ElementsAre(258, 257));
  EXPECT_EQ((*t)->end_of_text_id(), 259);
}

struct BadCase {
  std::string from;
  std::string to;
  std::string message;
};

TEST(HfTokenizerJsonTest, ErrorsNameTheFileAndKey) {
  const std::vector<BadCase> cases = {
      {R"("model": {"type": "BPE")", R"("model_": {"type": "BPE")",
       "bad.json: model: missing"},
      {R"("type": "BPE")", R"("type": "Unigram")",
       "bad.json: model.type: 'Unigram' is not supported"},
      {R"(, "merges": )", R"(, "merges_": )",
       "bad.json: model.merges: missing"},
      {R"("vocab": )", R"("vocab_": )", "bad.json: model.vocab: missing"},
      {R"("Ġ a")", R"("Ġa")", "bad.json: model.merges[0]: expected"},
      {R"("Ġ a")", R"("Ġ q9")",
       "bad.json: model.merges[0]: 'Ġ q9' names 'q9', which is not in"},
      {R"("normalizer": null)", R"("normalizer": {"type": "NFC"})",
       "bad.json: normalizer.type: 'NFC' is not supported"},
      {R"({"type": "ByteLevel", "add_prefix_space": false,)",
       R"({"type": "Metaspace", "add_prefix_space": false,)",
       "bad.json: pre_tokenizer.type: 'Metaspace' is not supported"},
      {R"("use_regex": true)", R"("use_regex": 1)",
       "bad.json: pre_tokenizer.use_regex: expected true or false"},
      {R"("decoder": {"type": "ByteLevel"})",
       R"("decoder": {"type": "ByteFallback"})",
       "bad.json: decoder.type: 'ByteFallback' is not supported"},
      {R"("lstrip": false)", R"("lstrip": true)",
       "bad.json: added_tokens[0].lstrip: true is not supported"},
      {R"("id": 258)", R"("id": "x")",
       "bad.json: added_tokens[0].id: missing or not an integer"},
      {R"("dropout": null)", R"("dropout": 0.1)",
       "bad.json: model.dropout: 0.1 is not supported"},
      {R"("\u0120a": 256)", R"("\u0120a": -4)",
       "bad.json: model.vocab: token 'Ġa' has id -4"},
      {R"("ab": 257)", R"("€": 257)",
       "bad.json: model.vocab: token '\\xe2\\x82\\xac' has U+20AC"},
  };
  for (const BadCase& c : cases) {
    const std::string json = Gpt2Like();
    ASSERT_NE(json.find(c.from), std::string::npos) << c.from;
    const std::string bad = absl::StrReplaceAll(json, {{c.from, c.to}});
    EXPECT_THAT(
        ParseHfTokenizerJson(bad, "bad.json"),
        StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(c.message)))
        << c.from << " -> " << c.to;
  }
}

TEST(HfTokenizerJsonTest, RefusesUnknownSplitRegexAndSplitBehaviour) {
  const std::string json = Llama3Like();
  EXPECT_THAT(
      ParseHfTokenizerJson(
          absl::StrReplaceAll(json, {{R"(\\p{N}{1,3})", R"(\\p{N}{1,4})"}}),
          "l.json"),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("l.json: pre_tokenizer.pretokenizers[0].pattern."
                         "Regex: unsupported pre-tokenization regex")));
  EXPECT_THAT(ParseHfTokenizerJson(
                  absl::StrReplaceAll(json, {{"Isolated", "MergedWithNext"}}),
                  "l.json"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("pre_tokenizer.pretokenizers[0].behavior: "
                                 "'MergedWithNext' is not supported")));
}

TEST(HfTokenizerJsonTest, SyntaxErrorsNameTheLine) {
  EXPECT_THAT(
      ParseHfTokenizerJson("{\n\"model\": }", "s.json"),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("s.json:2:")));
}

// Truncations and byte flips of a valid file: each parses or fails with a
// message naming the file, and never crashes.
TEST(HfTokenizerJsonTest, DamagedFilesFailCleanly) {
  const std::string json = Gpt2Like();
  std::mt19937 rng(7);
  int failures = 0;
  for (int i = 0; i < 300; ++i) {
    std::string damaged = json;
    if (i % 2 == 0) {
      damaged.resize(rng() % json.size());
    } else {
      for (int k = 0; k < 3; ++k) {
        damaged[rng() % damaged.size()] = static_cast<char>(rng() % 256);
      }
    }
    absl::StatusOr<std::unique_ptr<BpeTokenizer>> t =
        ParseHfTokenizerJson(damaged, "damaged.json");
    if (!t.ok()) {
      ++failures;
      EXPECT_THAT(std::string(t.status().message()),
                  StartsWith("damaged.json"));
    } else {
      // Whatever parsed still round-trips.
      EXPECT_EQ(*(*t)->Decode((*t)->Encode("some text, 123")),
                "some text, 123");
    }
  }
  EXPECT_GE(failures, 150);  // Every truncation fails.
}

}  // namespace
}  // namespace strata::text
