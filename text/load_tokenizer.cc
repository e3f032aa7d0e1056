#include "text/load_tokenizer.h"

#include <sys/stat.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "text/load_bpe_tokenizer.h"
#include "text/sentencepiece_tokenizer.h"

namespace strata::text {
namespace {

bool IsFile(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

// The SentencePiece model `path` stands for: itself (*.model), or a
// directory's tokenizer.model when it holds no byte-level files.
std::string SentencePiecePath(const std::string& path) {
  if (absl::EndsWith(path, ".model")) return path;
  struct stat st;
  if (stat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) return "";
  for (const char* name : {"tokenizer.json", "encoder.json"}) {
    if (IsFile(absl::StrCat(path, "/", name))) return "";
  }
  const std::string model = absl::StrCat(path, "/tokenizer.model");
  return IsFile(model) ? model : "";
}

}  // namespace

absl::StatusOr<std::unique_ptr<Tokenizer>> LoadTokenizer(
    const std::string& path) {
  const std::string model = SentencePiecePath(path);
  if (!model.empty()) {
    absl::StatusOr<std::unique_ptr<SentencePieceTokenizer>> t =
        SentencePieceTokenizer::Load(model);
    if (!t.ok()) return t.status();
    return std::unique_ptr<Tokenizer>(*std::move(t));
  }
  absl::StatusOr<std::unique_ptr<BpeTokenizer>> t = LoadBpeTokenizer(path);
  if (!t.ok()) return t.status();
  return std::unique_ptr<Tokenizer>(*std::move(t));
}

}  // namespace strata::text
