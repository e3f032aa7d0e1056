// Opens a byte-level BPE tokenizer by its file, as text/load_tokenizer.h
// does for every format but SentencePiece models:
//
//   *.tiktoken         tiktoken ranks (r50k_base, p50k_base, cl100k_base)
//   .../encoder.json   GPT-2's files, with vocab.bpe beside it
//   *.json             Hugging Face tokenizer.json (GPT-2, Llama 3)
//   a directory        its tokenizer.json, else encoder.json + vocab.bpe
//
// For binaries that link LibTorch: Debian's libsentencepiece carries its own
// copy of protobuf 3.14, whose symbols clash with the libprotobuf (3.21)
// LibTorch loads, and the process crashes at start-up when both are linked.
// So train and strata_generate take this loader, and a *.model path (or a
// directory holding only tokenizer.model) gets an error saying to encode
// with make_token_bin instead.
#ifndef STRATA_TEXT_LOAD_BPE_TOKENIZER_H_
#define STRATA_TEXT_LOAD_BPE_TOKENIZER_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "text/bpe_tokenizer.h"

namespace strata::text {

absl::StatusOr<std::unique_ptr<BpeTokenizer>> LoadBpeTokenizer(
    const std::string& path);

}  // namespace strata::text

#endif  // STRATA_TEXT_LOAD_BPE_TOKENIZER_H_
