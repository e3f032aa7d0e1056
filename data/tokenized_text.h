// Text files encoded with a tokenizer (text/): in memory as a TokenSource
// (train --data=text) or into a nanoGPT token file (make_token_bin
// --tokenizer). Each file is a document; encoding uses
// text/chunked_encode.h, so the ids are the same for any thread count.
#ifndef STRATA_DATA_TOKENIZED_TEXT_H_
#define STRATA_DATA_TOKENIZED_TEXT_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "data/file_sources.h"
#include "data/token_source.h"
#include "text/tokenizer.h"

namespace strata::data {

struct TokenizeOptions {
  int num_threads = 1;
  // The tokenizer's end-of-text id after each file (nanoGPT's prepare.py).
  bool end_of_text_after_documents = true;
};

// The ids of the files, one after another. NotFound / InvalidArgument
// naming a file that cannot be read; InvalidArgument if end_of_text is
// asked of a tokenizer without one, or nothing comes out (empty files).
absl::StatusOr<std::vector<int32_t>> TokenizeTextFiles(
    const std::vector<std::string>& paths, const text::Tokenizer& tokenizer,
    const TokenizeOptions& options);

// One text file as tokens (vocabulary: the tokenizer's). Describe():
// "memory(tokenized /path with <tokenizer>, 1234 tokens)".
absl::StatusOr<std::unique_ptr<TokenSource>> OpenTokenizedText(
    const std::string& path, const text::Tokenizer& tokenizer,
    const TokenizeOptions& options);

// The files' ids as a nanoGPT token file (WriteTokenBin). InvalidArgument
// if the tokenizer's vocabulary does not fit `dtype` (uint16: at most
// 65536 ids).
absl::Status TextFilesToTokenBin(const std::vector<std::string>& paths,
                                 const std::string& bin_path,
                                 TokenBinDtype dtype,
                                 const text::Tokenizer& tokenizer,
                                 const TokenizeOptions& options);

}  // namespace strata::data

#endif  // STRATA_DATA_TOKENIZED_TEXT_H_
