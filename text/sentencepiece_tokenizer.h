// SentencePiece models (Llama 2's tokenizer.model) through Debian's
// libsentencepiece: encoding, decoding, the beginning-of-text template and
// the end-of-text id are the model's own. SentencePiece does not read
// special tokens out of text, so EncodeOptions::special_tokens_in_text has
// no effect; add_template_tokens puts the model's BOS first (as Llama 2's
// Hugging Face tokenizer does). Decoding follows SentencePiece: the dummy
// prefix space is dropped, byte-fallback pieces become bytes (ill-formed
// UTF-8 among them U+FFFD), control tokens nothing.
#ifndef STRATA_TEXT_SENTENCEPIECE_TOKENIZER_H_
#define STRATA_TEXT_SENTENCEPIECE_TOKENIZER_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "text/tokenizer.h"

namespace strata::text {

namespace internal {
class SentencePieceModel;
}  // namespace internal

class SentencePieceTokenizer : public Tokenizer {
 public:
  // InvalidArgument naming the file and SentencePiece's message if it is
  // not a model SentencePiece loads; NotFound if it does not exist.
  static absl::StatusOr<std::unique_ptr<SentencePieceTokenizer>> Load(
      const std::string& path);
  ~SentencePieceTokenizer() override;

  using Tokenizer::Encode;
  void Encode(absl::string_view text, const EncodeOptions& options,
              std::vector<int32_t>* ids) const override;
  absl::StatusOr<std::string> Decode(
      absl::Span<const int32_t> ids) const override;
  int64_t vocab_size() const override;
  std::optional<int32_t> TokenId(absl::string_view token) const override;
  std::optional<int32_t> end_of_text_id() const override;
  // SentencePiece's dummy prefix makes every cut change the ids: none.
  size_t NextCut(absl::string_view text, size_t from) const override {
    return text.size();
  }
  std::string Describe() const override;

 private:
  SentencePieceTokenizer(std::string path,
                         std::unique_ptr<internal::SentencePieceModel> model);
  std::string path_;
  std::unique_ptr<internal::SentencePieceModel> model_;
};

}  // namespace strata::text

#endif  // STRATA_TEXT_SENTENCEPIECE_TOKENIZER_H_
