// Byte-level BPE tokenizers (GPT-2, Llama 3, tiktoken's encodings): special
// tokens are cut out of the text first (leftmost, longest first), the rest
// is split into pieces by the model's pattern (text/pretokenize.h) and each
// piece byte-pair encoded (text/bpe.h). Decoding concatenates the tokens'
// bytes (special tokens: their content), so decode(encode(x)) == x for any
// bytes x.
//
// The loaders build one from files: text/hf_tokenizer_json.h
// (tokenizer.json) and text/openai_files.h (encoder.json + vocab.bpe,
// tiktoken rank files).
#ifndef STRATA_TEXT_BPE_TOKENIZER_H_
#define STRATA_TEXT_BPE_TOKENIZER_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "text/bpe.h"
#include "text/pretokenize.h"
#include "text/tokenizer.h"

namespace strata::text {

struct SpecialToken {
  std::string content;
  int32_t id = 0;
};

// Everything a BpeTokenizer is made of.
struct BpeTokenizerSpec {
  // For Describe(): "tokenizer.json /path/tokenizer.json".
  std::string source;
  SplitPattern pattern = SplitPattern::kGpt2;
  // Hugging Face's ByteLevel add_prefix_space: a space before each stretch
  // of text between special tokens that does not start with one.
  bool add_prefix_space = false;
  // Every token's raw bytes and id; the same as BytePairEncoder's.
  std::vector<std::pair<std::string, int32_t>> tokens;
  std::vector<BpeMerge> merges;  // Lowest rank first.
  bool ignore_merges = false;
  // tiktoken's semantics: merges are derived from the ranks (ids)
  // (BytePairEncoder::FromRanks); `merges` must be empty.
  bool merges_from_ranks = false;
  // Matched in the text before pre-tokenization; may share ids with
  // `tokens` (GPT-2's <|endoftext|>).
  std::vector<SpecialToken> special_tokens;
  // EncodeOptions::add_template_tokens: ids before and after the text.
  std::vector<int32_t> template_prefix;
  std::vector<int32_t> template_suffix;
};

class BpeTokenizer : public Tokenizer {
 public:
  // InvalidArgument (from BytePairEncoder, or a special token that is empty
  // or whose id another special token has) naming the token.
  static absl::StatusOr<std::unique_ptr<BpeTokenizer>> Create(
      BpeTokenizerSpec spec);
  // Create for a spec read from files: an error is InvalidArgument prefixed
  // with `where` (the files, as the reader names them).
  static absl::StatusOr<std::unique_ptr<BpeTokenizer>> CreateFrom(
      absl::string_view where, BpeTokenizerSpec spec);

  using Tokenizer::Encode;
  void Encode(absl::string_view text, const EncodeOptions& options,
              std::vector<int32_t>* ids) const override;
  absl::StatusOr<std::string> Decode(
      absl::Span<const int32_t> ids) const override;
  int64_t vocab_size() const override {
    return static_cast<int64_t>(bytes_.size());
  }
  std::optional<int32_t> TokenId(absl::string_view token) const override;
  std::optional<int32_t> end_of_text_id() const override {
    return end_of_text_;
  }
  size_t NextCut(absl::string_view text, size_t from) const override;
  std::string Describe() const override;

  SplitPattern pattern() const { return pattern_; }

 private:
  BpeTokenizer(BytePairEncoder encoder) : encoder_(std::move(encoder)) {}
  // Pre-tokenizes and encodes text that holds no special token.
  void EncodeOrdinary(absl::string_view text, std::vector<int32_t>* ids) const;
  // The special token at `pos` (longest first), or nullptr.
  const SpecialToken* SpecialAt(absl::string_view text, size_t pos) const;

  BytePairEncoder encoder_;
  std::string source_;
  SplitPattern pattern_ = SplitPattern::kGpt2;
  bool add_prefix_space_ = false;
  int64_t num_merges_ = 0;
  // By id: the bytes Decode gives; `known_[id]` false for unused ids.
  std::vector<std::string> bytes_;
  std::vector<bool> known_;
  std::vector<SpecialToken> specials_;
  // Special tokens by their first byte, longest first (indices into
  // specials_).
  std::array<std::vector<int>, 256> specials_by_byte_;
  bool special_has_newline_ = false;
  std::vector<int32_t> template_prefix_;
  std::vector<int32_t> template_suffix_;
  std::optional<int32_t> end_of_text_;
};

}  // namespace strata::text

#endif  // STRATA_TEXT_BPE_TOKENIZER_H_
