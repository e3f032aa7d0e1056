#include "text/openai_files.h"

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "base/file_io.h"
#include "base/json.h"
#include "text/byte_level_vocab.h"
#include "text/pretokenize.h"

namespace strata::text {
namespace {

struct Encoding {
  absl::string_view name;
  SplitPattern pattern;
  std::vector<SpecialToken> special_tokens;
};

// tiktoken's registry (tiktoken_ext/openai_public.py).
const std::vector<Encoding>& Encodings() {
  static const auto* encodings = new std::vector<Encoding>{
      {"r50k_base", SplitPattern::kGpt2, {{"<|endoftext|>", 50256}}},
      {"p50k_base", SplitPattern::kGpt2, {{"<|endoftext|>", 50256}}},
      {"cl100k_base",
       SplitPattern::kCl100k,
       {{"<|endoftext|>", 100257},
        {"<|fim_prefix|>", 100258},
        {"<|fim_middle|>", 100259},
        {"<|fim_suffix|>", 100260},
        {"<|endofprompt|>", 100276}}},
  };
  return *encodings;
}

}  // namespace

absl::StatusOr<std::unique_ptr<BpeTokenizer>> LoadGpt2EncoderFiles(
    const std::string& encoder_json_path, const std::string& vocab_bpe_path) {
  absl::StatusOr<std::string> encoder_text = ReadWholeFile(encoder_json_path);
  if (!encoder_text.ok()) return encoder_text.status();
  absl::StatusOr<nlohmann::json> encoder =
      ParseJson(*encoder_text, encoder_json_path);
  if (!encoder.ok()) return encoder.status();
  absl::StatusOr<ByteLevelVocab> vocab =
      ReadByteLevelVocab(*encoder, encoder_json_path);
  if (!vocab.ok()) return vocab.status();
  absl::StatusOr<std::string> bpe_text = ReadWholeFile(vocab_bpe_path);
  if (!bpe_text.ok()) return bpe_text.status();
  std::vector<std::pair<std::string, std::string>> merges;
  int line_number = 0;
  for (const absl::string_view line : absl::StrSplit(*bpe_text, '\n')) {
    ++line_number;
    if (line.empty() || (line_number == 1 && absl::StartsWith(line, "#"))) {
      continue;
    }
    const std::vector<absl::string_view> parts = absl::StrSplit(line, ' ');
    if (parts.size() != 2 || parts[0].empty() || parts[1].empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(vocab_bpe_path, ":", line_number,
                       ": expected a merge \"left right\", got '",
                       absl::CHexEscape(line), "'"));
    }
    merges.emplace_back(parts[0], parts[1]);
  }
  absl::StatusOr<std::vector<BpeMerge>> ids =
      ByteLevelMergeIds(merges, *vocab, vocab_bpe_path);
  if (!ids.ok()) return ids.status();
  BpeTokenizerSpec spec;
  spec.source = absl::StrCat("encoder.json ", encoder_json_path,
                             " + vocab.bpe ", vocab_bpe_path);
  spec.pattern = SplitPattern::kGpt2;
  spec.tokens = std::move(vocab->tokens);
  spec.merges = *std::move(ids);
  if (const auto it = vocab->ids.find("<|endoftext|>");
      it != vocab->ids.end()) {
    spec.special_tokens.push_back({"<|endoftext|>", it->second});
  }
  return BpeTokenizer::CreateFrom(
      absl::StrCat(encoder_json_path, " + ", vocab_bpe_path), std::move(spec));
}

absl::StatusOr<std::unique_ptr<BpeTokenizer>> ParseTiktokenRanks(
    absl::string_view text, absl::string_view source,
    absl::string_view encoding) {
  const Encoding* found = nullptr;
  for (const Encoding& e : Encodings()) {
    if (e.name == encoding) found = &e;
  }
  if (found == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        source, ": unknown tiktoken encoding '", encoding,
        "' (the file's name less .tiktoken); known: r50k_base, p50k_base, "
        "cl100k_base"));
  }
  BpeTokenizerSpec spec;
  spec.source = absl::StrCat("tiktoken ", encoding, " ranks ", source);
  spec.pattern = found->pattern;
  spec.merges_from_ranks = true;
  spec.special_tokens = found->special_tokens;
  int line_number = 0;
  for (const absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_number;
    if (line.empty()) continue;
    const std::vector<absl::string_view> parts = absl::StrSplit(line, ' ');
    std::string bytes;
    int32_t rank;
    if (parts.size() != 2 || !absl::Base64Unescape(parts[0], &bytes) ||
        !absl::SimpleAtoi(parts[1], &rank) || rank < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(source, ":", line_number,
                       ": expected \"<base64 token> <rank>\", got '",
                       absl::CHexEscape(line.substr(0, 80)), "'"));
    }
    spec.tokens.emplace_back(std::move(bytes), rank);
  }
  return BpeTokenizer::CreateFrom(source, std::move(spec));
}

absl::StatusOr<std::unique_ptr<BpeTokenizer>> LoadTiktokenFile(
    const std::string& path) {
  absl::StatusOr<std::string> text = ReadWholeFile(path);
  if (!text.ok()) return text.status();
  absl::string_view name = path;
  if (const size_t slash = name.rfind('/'); slash != absl::string_view::npos) {
    name.remove_prefix(slash + 1);
  }
  absl::ConsumeSuffix(&name, ".tiktoken");
  return ParseTiktokenRanks(*text, path, name);
}

}  // namespace strata::text
