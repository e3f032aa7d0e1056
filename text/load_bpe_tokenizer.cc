#include "text/load_bpe_tokenizer.h"

#include <sys/stat.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "text/hf_tokenizer_json.h"
#include "text/openai_files.h"

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

}  // namespace

absl::StatusOr<std::unique_ptr<BpeTokenizer>> LoadBpeTokenizer(
    const std::string& path) {
  if (IsDirectory(path)) {
    for (const char* name :
         {"tokenizer.json", "encoder.json", "tokenizer.model"}) {
      const std::string candidate = absl::StrCat(path, "/", name);
      if (IsFile(candidate)) return LoadBpeTokenizer(candidate);
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
    return absl::UnimplementedError(absl::StrCat(
        path,
        ": SentencePiece models cannot be read by a binary that links "
        "LibTorch (Debian's libsentencepiece bundles protobuf 3.14, which "
        "clashes with LibTorch's libprotobuf); encode the text with "
        "make_token_bin --tokenizer=",
        path, " and train on the token file (--data=uint16|uint32)"));
  }
  if (absl::EndsWith(path, ".tiktoken")) return LoadTiktokenFile(path);
  if (path == "encoder.json" || absl::EndsWith(path, "/encoder.json")) {
    return LoadGpt2EncoderFiles(path, Dir(path) + "/vocab.bpe");
  }
  if (absl::EndsWith(path, ".json")) return LoadHfTokenizerJson(path);
  return absl::InvalidArgumentError(absl::StrCat(
      path,
      ": not a tokenizer file Strata knows by its name; expected a "
      "Hugging Face tokenizer.json (*.json), GPT-2's encoder.json (with "
      "vocab.bpe beside it), a tiktoken rank file (*.tiktoken), a "
      "SentencePiece model (*.model) or a directory holding one"));
}

}  // namespace strata::text
