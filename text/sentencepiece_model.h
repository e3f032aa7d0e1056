// A narrow wrapper of Debian's libsentencepiece, behind plain C++ types.
// sentencepiece_processor.h declares `namespace absl { using
// std::string_view; }`, which clashes with abseil's own absl::string_view
// class (Debian builds abseil with ABSL_OPTION_USE_STD_STRING_VIEW 0), so no
// file may include both; this header keeps SentencePiece's out of every other
// file. Errors come back as strings (SentencePiece's own messages). Internal
// to //text:sentencepiece_tokenizer.
#ifndef STRATA_TEXT_SENTENCEPIECE_MODEL_H_
#define STRATA_TEXT_SENTENCEPIECE_MODEL_H_

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace strata::text::internal {

class SentencePieceModel {
 public:
  // nullptr and *error set if the model cannot be loaded.
  static std::unique_ptr<SentencePieceModel> Load(const std::string& path,
                                                  std::string* error);
  ~SentencePieceModel();

  // False and *error set on failure.
  bool Encode(std::string_view text, std::vector<int>* ids,
              std::string* error) const;
  bool Decode(const std::vector<int>& ids, std::string* text,
              std::string* error) const;
  int size() const;
  // -1 where the model has none.
  int bos_id() const;
  int eos_id() const;
  // The id of the piece spelled `piece`, or -1.
  int PieceId(std::string_view piece) const;

 private:
  struct Impl;
  explicit SentencePieceModel(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Trains a model with SentencePiece's trainer from its flag string
// ("--input=... --model_prefix=... --vocab_size=..."); false and *error set
// on failure. For tests, which build their models.
bool TrainSentencePiece(const std::string& args, std::string* error);

}  // namespace strata::text::internal

#endif  // STRATA_TEXT_SENTENCEPIECE_MODEL_H_
