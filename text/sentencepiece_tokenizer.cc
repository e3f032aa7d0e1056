#include "text/sentencepiece_tokenizer.h"

#include <glog/logging.h>
#include <sys/stat.h>

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "text/sentencepiece_model.h"

namespace strata::text {

SentencePieceTokenizer::SentencePieceTokenizer(
    std::string path, std::unique_ptr<internal::SentencePieceModel> model)
    : path_(std::move(path)), model_(std::move(model)) {}

SentencePieceTokenizer::~SentencePieceTokenizer() = default;

absl::StatusOr<std::unique_ptr<SentencePieceTokenizer>>
SentencePieceTokenizer::Load(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) {
    return absl::NotFoundError(
        absl::StrCat(path, ": no such SentencePiece model file"));
  }
  std::string error;
  std::unique_ptr<internal::SentencePieceModel> model =
      internal::SentencePieceModel::Load(path, &error);
  if (model == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": not a SentencePiece model SentencePiece can load: ", error));
  }
  return std::unique_ptr<SentencePieceTokenizer>(
      new SentencePieceTokenizer(path, std::move(model)));
}

void SentencePieceTokenizer::Encode(absl::string_view text,
                                    const EncodeOptions& options,
                                    std::vector<int32_t>* ids) const {
  if (options.add_template_tokens && model_->bos_id() >= 0) {
    ids->push_back(model_->bos_id());
  }
  std::vector<int> pieces;
  std::string error;
  // Fails only for a model that did not load, which Load rules out.
  CHECK(model_->Encode(std::string_view(text.data(), text.size()), &pieces,
                       &error))
      << path_ << ": " << error;
  ids->insert(ids->end(), pieces.begin(), pieces.end());
}

absl::StatusOr<std::string> SentencePieceTokenizer::Decode(
    absl::Span<const int32_t> ids) const {
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= vocab_size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("token id ", ids[i], " at position ", i,
                       " is not in the vocabulary of SentencePiece model ",
                       path_, " (ids 0 to ", vocab_size() - 1, ")"));
    }
  }
  std::string text;
  std::string error;
  if (!model_->Decode(std::vector<int>(ids.begin(), ids.end()), &text,
                      &error)) {
    return absl::InvalidArgumentError(absl::StrCat(path_, ": ", error));
  }
  return text;
}

int64_t SentencePieceTokenizer::vocab_size() const { return model_->size(); }

std::optional<int32_t> SentencePieceTokenizer::TokenId(
    absl::string_view token) const {
  const int id = model_->PieceId(std::string_view(token.data(), token.size()));
  if (id < 0) return std::nullopt;
  return id;
}

std::optional<int32_t> SentencePieceTokenizer::end_of_text_id() const {
  if (model_->eos_id() < 0) return std::nullopt;
  return model_->eos_id();
}

std::string SentencePieceTokenizer::Describe() const {
  return absl::StrCat("SentencePiece model ", path_, " (", vocab_size(),
                      " ids, bos ", model_->bos_id(), ", eos ",
                      model_->eos_id(), ")");
}

}  // namespace strata::text
