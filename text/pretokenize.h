// Pre-tokenization: splitting text into the pieces byte-level BPE encodes one
// by one, by the regular expressions of GPT-2 and of cl100k_base / Llama 3,
// implemented by hand over UTF-8 (text/unicode.h's classes), with the
// leftmost-first semantics those patterns have in Rust's regex (tiktoken)
// and Oniguruma (Hugging Face tokenizers):
//
//   GPT-2 (r50k_base, p50k_base; Hugging Face's ByteLevel pre-tokenizer):
//     's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+|
//     ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//   cl100k_base, Llama 3:
//     (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
//     ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
//
// \s is the White_Space property; a byte outside well-formed UTF-8 is a
// character in no class (matched by [^\s\p{L}\p{N}]). Under (?i), 's also
// matches U+017F (LATIN SMALL LETTER LONG S), whose case fold is 's'.
#ifndef STRATA_TEXT_PRETOKENIZE_H_
#define STRATA_TEXT_PRETOKENIZE_H_

#include <cstddef>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace strata::text {

enum class SplitPattern { kGpt2, kCl100k };

// The pattern's regular expression, as tiktoken and tokenizer.json spell it.
absl::string_view SplitPatternRegex(SplitPattern pattern);

// The pattern whose regular expression is exactly `regex`; InvalidArgument
// naming both supported patterns otherwise.
absl::StatusOr<SplitPattern> SplitPatternFromRegex(absl::string_view regex);

// The end (an offset into `text`) of the piece that starts at `begin`
// (begin < text.size()); pieces are never empty.
size_t PieceEnd(SplitPattern pattern, absl::string_view text, size_t begin);

// Calls `piece` for each piece of `text`, in order; together they are
// `text`.
void SplitText(SplitPattern pattern, absl::string_view text,
               absl::FunctionRef<void(absl::string_view)> piece);

}  // namespace strata::text

#endif  // STRATA_TEXT_PRETOKENIZE_H_
