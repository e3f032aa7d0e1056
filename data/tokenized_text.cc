#include "data/tokenized_text.h"

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "base/file_io.h"
#include "text/chunked_encode.h"

namespace strata::data {

absl::StatusOr<std::vector<int32_t>> TokenizeTextFiles(
    const std::vector<std::string>& paths, const text::Tokenizer& tokenizer,
    const TokenizeOptions& options) {
  if (paths.empty()) {
    return absl::InvalidArgumentError("no text files to tokenize");
  }
  if (options.end_of_text_after_documents &&
      !tokenizer.end_of_text_id().has_value()) {
    return absl::InvalidArgumentError(
        absl::StrCat(tokenizer.Describe(),
                     " has no end-of-text token to put after each file"));
  }
  std::vector<std::string> texts;
  texts.reserve(paths.size());
  for (const std::string& path : paths) {
    absl::StatusOr<std::string> text = ReadWholeFile(path);
    if (!text.ok()) return text.status();
    texts.push_back(*std::move(text));
  }
  std::vector<absl::string_view> documents(texts.begin(), texts.end());
  text::ChunkedEncodeOptions encode;
  encode.num_threads = options.num_threads;
  encode.end_of_text_after_documents = options.end_of_text_after_documents;
  std::vector<int32_t> ids =
      text::EncodeDocuments(tokenizer, documents, encode);
  if (ids.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the text files (", paths[0], paths.size() > 1 ? ", ..." : "",
        ") give no tokens: they are empty"));
  }
  return ids;
}

absl::StatusOr<std::unique_ptr<TokenSource>> OpenTokenizedText(
    const std::string& path, const text::Tokenizer& tokenizer,
    const TokenizeOptions& options) {
  absl::StatusOr<std::vector<int32_t>> ids =
      TokenizeTextFiles({path}, tokenizer, options);
  if (!ids.ok()) return ids.status();
  absl::StatusOr<std::unique_ptr<InMemoryTokenSource>> source =
      InMemoryTokenSource::Create(
          std::vector<int64_t>(ids->begin(), ids->end()),
          tokenizer.vocab_size(),
          absl::StrCat("tokenized ", path, " with ", tokenizer.Describe()));
  if (!source.ok()) return source.status();
  return std::unique_ptr<TokenSource>(*std::move(source));
}

absl::Status TextFilesToTokenBin(const std::vector<std::string>& paths,
                                 const std::string& bin_path,
                                 TokenBinDtype dtype,
                                 const text::Tokenizer& tokenizer,
                                 const TokenizeOptions& options) {
  if (dtype == TokenBinDtype::kUint16 && tokenizer.vocab_size() > (1 << 16)) {
    return absl::InvalidArgumentError(
        absl::StrCat("uint16 cannot hold the ids of ", tokenizer.Describe(),
                     " (", tokenizer.vocab_size(), " ids); use uint32"));
  }
  absl::StatusOr<std::vector<int32_t>> ids =
      TokenizeTextFiles(paths, tokenizer, options);
  if (!ids.ok()) return ids.status();
  return WriteTokenBin(std::vector<int64_t>(ids->begin(), ids->end()), bin_path,
                       dtype);
}

}  // namespace strata::data
