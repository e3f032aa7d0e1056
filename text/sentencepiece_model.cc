// Includes no abseil header (see sentencepiece_model.h).
#include "text/sentencepiece_model.h"

#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace strata::text::internal {

struct SentencePieceModel::Impl {
  sentencepiece::SentencePieceProcessor processor;
};

SentencePieceModel::SentencePieceModel(std::unique_ptr<Impl> impl)
    : impl_(std::move(impl)) {}

SentencePieceModel::~SentencePieceModel() = default;

std::unique_ptr<SentencePieceModel> SentencePieceModel::Load(
    const std::string& path, std::string* error) {
  auto impl = std::make_unique<Impl>();
  const sentencepiece::util::Status status = impl->processor.Load(path);
  if (!status.ok()) {
    *error = status.ToString();
    return nullptr;
  }
  return std::unique_ptr<SentencePieceModel>(
      new SentencePieceModel(std::move(impl)));
}

bool SentencePieceModel::Encode(std::string_view text, std::vector<int>* ids,
                                std::string* error) const {
  const sentencepiece::util::Status status = impl_->processor.Encode(text, ids);
  if (!status.ok()) *error = status.ToString();
  return status.ok();
}

bool SentencePieceModel::Decode(const std::vector<int>& ids, std::string* text,
                                std::string* error) const {
  const sentencepiece::util::Status status = impl_->processor.Decode(ids, text);
  if (!status.ok()) *error = status.ToString();
  return status.ok();
}

int SentencePieceModel::size() const { return impl_->processor.GetPieceSize(); }

int SentencePieceModel::bos_id() const { return impl_->processor.bos_id(); }

int SentencePieceModel::eos_id() const { return impl_->processor.eos_id(); }

int SentencePieceModel::PieceId(std::string_view piece) const {
  const int id = impl_->processor.PieceToId(piece);
  if (id < 0 || id >= size() || impl_->processor.IdToPiece(id) != piece) {
    return -1;
  }
  return id;
}

bool TrainSentencePiece(const std::string& args, std::string* error) {
  const sentencepiece::util::Status status =
      sentencepiece::SentencePieceTrainer::Train(args);
  if (!status.ok()) *error = status.ToString();
  return status.ok();
}

}  // namespace strata::text::internal
