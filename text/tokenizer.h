// The tokenizer interface: text (bytes) to token ids and back. Two kinds
// implement it: byte-level BPE (text/bpe_tokenizer.h: Hugging Face
// tokenizer.json of GPT-2 and Llama 3, GPT-2's encoder.json + vocab.bpe,
// tiktoken rank files) and SentencePiece models (Llama 2's tokenizer.model,
// text/sentencepiece_tokenizer.h). text/load_tokenizer.h picks one by file.
//
// Implementations are immutable after loading: Encode and Decode may be
// called from any number of threads at once.
#ifndef STRATA_TEXT_TOKENIZER_H_
#define STRATA_TEXT_TOKENIZER_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace strata::text {

struct EncodeOptions {
  // Special (added) tokens written in the text, such as "<|endoftext|>",
  // become their ids (Hugging Face's behaviour); false: they are encoded as
  // ordinary text (tiktoken's encode_ordinary).
  bool special_tokens_in_text = true;
  // The model's template tokens around the text (Llama's beginning-of-text
  // token), as Hugging Face's add_special_tokens.
  bool add_template_tokens = false;
};

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // Appends the ids of `text` (any bytes) to `ids`.
  virtual void Encode(absl::string_view text, const EncodeOptions& options,
                      std::vector<int32_t>* ids) const = 0;

  std::vector<int32_t> Encode(absl::string_view text,
                              const EncodeOptions& options = {}) const {
    std::vector<int32_t> ids;
    Encode(text, options, &ids);
    return ids;
  }

  // The bytes of `ids`. InvalidArgument naming the first id outside the
  // vocabulary and its position.
  virtual absl::StatusOr<std::string> Decode(
      absl::Span<const int32_t> ids) const = 0;

  // One more than the largest id.
  virtual int64_t vocab_size() const = 0;

  // The id of the token spelled `token` (special tokens by their content,
  // "<|endoftext|>"), if any.
  virtual std::optional<int32_t> TokenId(absl::string_view token) const = 0;

  // The end-of-text token (GPT-2's <|endoftext|>, Llama 3's
  // <|end_of_text|>, SentencePiece's eos), if the model has one.
  virtual std::optional<int32_t> end_of_text_id() const = 0;

  // The first offset >= `from` where `text` may be cut so that encoding the
  // two parts separately gives the ids of the whole, in order (the two
  // parts' template tokens aside); text.size() if there is none. Chunked
  // encoders (text/chunked_encode.h) cut there.
  virtual size_t NextCut(absl::string_view text, size_t from) const = 0;

  // "byte-level BPE from tokenizer.json /path (50257 ids, 50000 merges,
  // GPT-2 pattern)".
  virtual std::string Describe() const = 0;
};

}  // namespace strata::text

#endif  // STRATA_TEXT_TOKENIZER_H_
