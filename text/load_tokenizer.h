// Opens a tokenizer by its file, the one entry point binaries use
// (make_token_bin --tokenizer, train --tokenizer, strata_generate
// --tokenizer):
//
//   *.model            SentencePiece (Llama 2's tokenizer.model)
//   *.tiktoken         tiktoken ranks (r50k_base, p50k_base, cl100k_base)
//   .../encoder.json   GPT-2's files, with vocab.bpe beside it
//   *.json             Hugging Face tokenizer.json (GPT-2, Llama 3)
//   a directory        its tokenizer.json, else encoder.json + vocab.bpe,
//                      else tokenizer.model
//
// Errors name the path and, for a path of none of these forms, list them.
#ifndef STRATA_TEXT_LOAD_TOKENIZER_H_
#define STRATA_TEXT_LOAD_TOKENIZER_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "text/tokenizer.h"

namespace strata::text {

absl::StatusOr<std::unique_ptr<Tokenizer>> LoadTokenizer(
    const std::string& path);

}  // namespace strata::text

#endif  // STRATA_TEXT_LOAD_TOKENIZER_H_
