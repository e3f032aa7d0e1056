#include "text/bpe_tokenizer.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "text/bpe.h"
#include "text/pretokenize.h"

namespace strata::text {
namespace {

// Special tokens taken as the end of text, in order of preference.
constexpr absl::string_view kEndOfTextNames[] = {"<|endoftext|>",
                                                 "<|end_of_text|>", "</s>"};

bool IsAsciiGraphic(char c) { return c >= '!' && c <= '~'; }

}  // namespace

absl::StatusOr<std::unique_ptr<BpeTokenizer>> BpeTokenizer::CreateFrom(
    absl::string_view where, BpeTokenizerSpec spec) {
  absl::StatusOr<std::unique_ptr<BpeTokenizer>> t = Create(std::move(spec));
  if (!t.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": ", t.status().message()));
  }
  return t;
}

absl::StatusOr<std::unique_ptr<BpeTokenizer>> BpeTokenizer::Create(
    BpeTokenizerSpec spec) {
  absl::StatusOr<BytePairEncoder> encoder =
      spec.merges_from_ranks ? BytePairEncoder::FromRanks(spec.tokens)
                             : BytePairEncoder::Create(spec.tokens, spec.merges,
                                                       spec.ignore_merges);
  if (!encoder.ok()) return encoder.status();
  std::unique_ptr<BpeTokenizer> t(new BpeTokenizer(*std::move(encoder)));
  t->source_ = std::move(spec.source);
  t->pattern_ = spec.pattern;
  t->add_prefix_space_ = spec.add_prefix_space;
  t->num_merges_ = t->encoder_.num_merges();
  int32_t max_id = -1;
  for (const auto& [bytes, id] : spec.tokens) max_id = std::max(max_id, id);
  for (const SpecialToken& s : spec.special_tokens) {
    if (s.content.empty() || s.id < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "special token id ", s.id, " has empty content or a negative id"));
    }
    max_id = std::max(max_id, s.id);
  }
  t->bytes_.resize(max_id + 1);
  t->known_.resize(max_id + 1);
  for (auto& [bytes, id] : spec.tokens) {
    t->bytes_[id] = std::move(bytes);
    t->known_[id] = true;
  }
  absl::flat_hash_map<int32_t, absl::string_view> special_ids;
  for (const SpecialToken& s : spec.special_tokens) {
    if (!special_ids.emplace(s.id, s.content).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("special tokens '", special_ids[s.id], "' and '",
                       s.content, "' have the same id ", s.id));
    }
    t->bytes_[s.id] = s.content;
    t->known_[s.id] = true;
    if (s.content.find('\n') != std::string::npos) {
      t->special_has_newline_ = true;
    }
  }
  t->specials_ = std::move(spec.special_tokens);
  for (int i = 0; i < static_cast<int>(t->specials_.size()); ++i) {
    t->specials_by_byte_[static_cast<unsigned char>(t->specials_[i].content[0])]
        .push_back(i);
  }
  for (auto& bucket : t->specials_by_byte_) {
    std::stable_sort(bucket.begin(), bucket.end(), [&](int a, int b) {
      return t->specials_[a].content.size() > t->specials_[b].content.size();
    });
  }
  t->template_prefix_ = std::move(spec.template_prefix);
  t->template_suffix_ = std::move(spec.template_suffix);
  for (const int32_t id : t->template_prefix_) {
    if (id < 0 || id >= t->vocab_size() || !t->known_[id]) {
      return absl::InvalidArgumentError(
          absl::StrCat("template token id ", id, " is not in the vocabulary"));
    }
  }
  for (const int32_t id : t->template_suffix_) {
    if (id < 0 || id >= t->vocab_size() || !t->known_[id]) {
      return absl::InvalidArgumentError(
          absl::StrCat("template token id ", id, " is not in the vocabulary"));
    }
  }
  for (const absl::string_view name : kEndOfTextNames) {
    if (const std::optional<int32_t> id = t->TokenId(name)) {
      t->end_of_text_ = id;
      break;
    }
  }
  return t;
}

const SpecialToken* BpeTokenizer::SpecialAt(absl::string_view text,
                                            size_t pos) const {
  for (const int i : specials_by_byte_[static_cast<unsigned char>(text[pos])]) {
    const std::string& c = specials_[i].content;
    if (c.size() <= text.size() - pos &&
        std::memcmp(text.data() + pos, c.data(), c.size()) == 0) {
      return &specials_[i];
    }
  }
  return nullptr;
}

void BpeTokenizer::EncodeOrdinary(absl::string_view text,
                                  std::vector<int32_t>* ids) const {
  // Hugging Face's ByteLevel add_prefix_space applies to every stretch of
  // text between special tokens.
  std::string prefixed;
  if (add_prefix_space_ && !text.empty() && text[0] != ' ') {
    prefixed = absl::StrCat(" ", text);
    text = prefixed;
  }
  SplitText(pattern_, text,
            [&](absl::string_view piece) { encoder_.Encode(piece, ids); });
}

void BpeTokenizer::Encode(absl::string_view text, const EncodeOptions& options,
                          std::vector<int32_t>* ids) const {
  if (options.add_template_tokens) {
    ids->insert(ids->end(), template_prefix_.begin(), template_prefix_.end());
  }
  if (!options.special_tokens_in_text || specials_.empty()) {
    EncodeOrdinary(text, ids);
  } else {
    size_t start = 0;
    for (size_t pos = 0; pos < text.size(); ++pos) {
      if (specials_by_byte_[static_cast<unsigned char>(text[pos])].empty()) {
        continue;
      }
      const SpecialToken* special = SpecialAt(text, pos);
      if (special == nullptr) continue;
      EncodeOrdinary(text.substr(start, pos - start), ids);
      ids->push_back(special->id);
      start = pos + special->content.size();
      pos = start - 1;
    }
    EncodeOrdinary(text.substr(start), ids);
  }
  if (options.add_template_tokens) {
    ids->insert(ids->end(), template_suffix_.begin(), template_suffix_.end());
  }
}

absl::StatusOr<std::string> BpeTokenizer::Decode(
    absl::Span<const int32_t> ids) const {
  std::string out;
  for (size_t i = 0; i < ids.size(); ++i) {
    const int32_t id = ids[i];
    if (id < 0 || id >= vocab_size() || !known_[id]) {
      return absl::InvalidArgumentError(absl::StrCat(
          "token id ", id, " at position ", i, " is not in the vocabulary of ",
          source_, " (ids 0 to ", vocab_size() - 1, ")"));
    }
    out += bytes_[id];
  }
  return out;
}

std::optional<int32_t> BpeTokenizer::TokenId(absl::string_view token) const {
  for (const SpecialToken& s : specials_) {
    if (s.content == token) return s.id;
  }
  const int32_t id = encoder_.TokenId(token);
  if (id < 0) return std::nullopt;
  return id;
}

size_t BpeTokenizer::NextCut(absl::string_view text, size_t from) const {
  // A cut at p is safe for both patterns when text[p - 1] is a newline
  // between two printable ASCII characters: "x\ny" always splits as
  // ... "x" | "\n" | "y" ... or ... "x\n" | "y" ... (cl100k's punctuation
  // runs take trailing newlines), and no piece looks behind its start. A
  // special token with a newline in it could straddle the cut, and a prefix
  // space applies to the whole text's start only: then there is no cut.
  if (special_has_newline_ || add_prefix_space_) return text.size();
  for (size_t p = std::max<size_t>(from, 2); p < text.size(); ++p) {
    if (text[p - 1] == '\n' && IsAsciiGraphic(text[p - 2]) &&
        IsAsciiGraphic(text[p])) {
      return p;
    }
  }
  return text.size();
}

std::string BpeTokenizer::Describe() const {
  return absl::StrCat(
      "byte-level BPE from ", source_, " (", vocab_size(), " ids, ",
      num_merges_, " merges, ", specials_.size(), " special tokens, ",
      pattern_ == SplitPattern::kGpt2 ? "GPT-2" : "cl100k", " pattern)");
}

}  // namespace strata::text
