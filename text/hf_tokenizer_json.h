// Hugging Face tokenizer.json files of byte-level BPE models: GPT-2's
// (pre_tokenizer ByteLevel with its regex) and Llama 3's (Split by the
// cl100k pattern, then ByteLevel without regex; ignore_merges). What is read:
//
//   model: {type: "BPE", vocab, merges ("a b" strings or [a, b] pairs),
//           ignore_merges, byte_fallback (moot: every byte is a token);
//           dropout, continuing_subword_prefix, end_of_word_suffix: null}
//   pre_tokenizer: ByteLevel{use_regex: true, add_prefix_space}, or
//           Sequence[Split{pattern: {Regex: <GPT-2 or cl100k pattern>},
//           behavior: Isolated, invert: false}, ByteLevel{use_regex: false}]
//   normalizer: null;  decoder: ByteLevel or null
//   post_processor: null, ByteLevel, TemplateProcessing (its "single"
//           template: special tokens around $A), or a Sequence of those
//   added_tokens: [{id, content, special, lstrip/rstrip/single_word: false}]
//
// Anything else is refused with InvalidArgument naming the file and the key
// ("<file>: pre_tokenizer.type: 'Metaspace' is not supported; ..."), so a
// model is never half-understood. SentencePiece-style tokenizer.json files
// (Llama 2's, Metaspace and byte fallback) are among the refused: load
// Llama 2's tokenizer.model instead (text/sentencepiece_tokenizer.h).
#ifndef STRATA_TEXT_HF_TOKENIZER_JSON_H_
#define STRATA_TEXT_HF_TOKENIZER_JSON_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "text/bpe_tokenizer.h"

namespace strata::text {

// Parses tokenizer.json text (named `source` in errors and Describe()).
absl::StatusOr<std::unique_ptr<BpeTokenizer>> ParseHfTokenizerJson(
    absl::string_view json_text, absl::string_view source);

// Reads and parses the file at `path`; NotFound naming it if absent.
absl::StatusOr<std::unique_ptr<BpeTokenizer>> LoadHfTokenizerJson(
    const std::string& path);

}  // namespace strata::text

#endif  // STRATA_TEXT_HF_TOKENIZER_JSON_H_
