#include "text/load_tokenizer.h"

#include <sys/stat.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "text/hf_tokenizer_json.h"
#include "text/openai_files.h"
#include "text/sentencepiece_tokenizer.h"

namespace strata::text {
namespace {

bool IsFile(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

bool IsDirectory(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

std::string Dir(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

template <typename T>
absl::StatusOr<std::unique_ptr<Tokenizer>> Upcast(
    absl::StatusOr<std::unique_ptr<T>> t) {
  if (!t.ok()) return t.status();
  return std::unique_ptr<Tokenizer>(*std::move(t));
}

}  // namespace

absl::StatusOr<std::unique_ptr<Tokenizer>> LoadTokenizer(
    const std::string& path) {
  if (IsDirectory(path)) {
    for (const char* name :
         {"tokenizer.json", "encoder.json", "tokenizer.model"}) {
      const std::string candidate = absl::StrCat(path, "/", name);
      if (IsFile(candidate)) return LoadTokenizer(candidate);
    }
    return absl::NotFoundError(absl::StrCat(
        path,
        ": the directory holds no tokenizer.json, encoder.json (+ vocab.bpe) "
        "or tokenizer.model"));
  }
  if (!IsFile(path)) {
    return absl::NotFoundError(
        absl::StrCat(path, ": no such tokenizer file or directory"));
  }
  if (absl::EndsWith(path, ".model")) {
    return Upcast(SentencePieceTokenizer::Load(path));
  }
  if (absl::EndsWith(path, ".tiktoken")) return Upcast(LoadTiktokenFile(path));
  if (path == "encoder.json" || absl::EndsWith(path, "/encoder.json")) {
    return Upcast(LoadGpt2EncoderFiles(path, Dir(path) + "/vocab.bpe"));
  }
  if (absl::EndsWith(path, ".json")) return Upcast(LoadHfTokenizerJson(path));
  return absl::InvalidArgumentError(absl::StrCat(
      path,
      ": not a tokenizer file Strata knows by its name; expected a "
      "Hugging Face tokenizer.json (*.json), GPT-2's encoder.json (with "
      "vocab.bpe beside it), a tiktoken rank file (*.tiktoken), a "
      "SentencePiece model (*.model) or a directory holding one"));
}

}  // namespace strata::text
