// Encoding large texts on many threads, with the same ids as one thread:
// each document is cut into chunks of about `chunk_bytes` at the
// tokenizer's safe cuts (Tokenizer::NextCut), which depend on the text alone,
// and the chunks are encoded in parallel and concatenated in order. So the
// ids are those of encoding each document whole, whatever the thread count.
#ifndef STRATA_TEXT_CHUNKED_ENCODE_H_
#define STRATA_TEXT_CHUNKED_ENCODE_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "text/tokenizer.h"

namespace strata::text {

struct ChunkedEncodeOptions {
  int num_threads = 1;
  size_t chunk_bytes = size_t{1} << 20;
  // Special tokens written in the text become their ids
  // (EncodeOptions::special_tokens_in_text).
  bool special_tokens_in_text = false;
  // The tokenizer's end-of-text id after each document (nanoGPT's
  // prepare.py); CHECK-fails if the tokenizer has none.
  bool end_of_text_after_documents = false;
};

// The documents' ids, one after another.
std::vector<int32_t> EncodeDocuments(
    const Tokenizer& tokenizer, absl::Span<const absl::string_view> documents,
    const ChunkedEncodeOptions& options);

// The chunks EncodeDocuments encodes one document in: offsets where each
// ends, the last text.size().
std::vector<size_t> ChunkEnds(const Tokenizer& tokenizer,
                              absl::string_view text, size_t chunk_bytes);

}  // namespace strata::text

#endif  // STRATA_TEXT_CHUNKED_ENCODE_H_
