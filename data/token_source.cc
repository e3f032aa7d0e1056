#include "data/token_source.h"

#include <glog/logging.h>

#include <algorithm>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace strata::data {

void TokenSource::CheckReadRange(int64_t start, int64_t count,
                                 const int64_t* out) const {
  CHECK(start >= 0 && count >= 0 && start <= num_tokens() - count)
      << "Read of tokens [" << start << ", " << start + count << ") from "
      << Describe() << ", which has " << num_tokens() << " tokens";
  CHECK(out != nullptr || count == 0) << "Read of " << count << " tokens from "
                                      << Describe() << " into a null buffer";
}

absl::StatusOr<std::unique_ptr<InMemoryTokenSource>>
InMemoryTokenSource::Create(std::vector<int64_t> tokens, int64_t vocab_size,
                            std::string name) {
  if (vocab_size < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("in-memory tokens '", name, "': vocab_size is ",
                     vocab_size, ", expected at least 1"));
  }
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] < 0 || tokens[i] >= vocab_size) {
      return absl::InvalidArgumentError(absl::StrCat(
          "in-memory tokens '", name, "': token at offset ", i, " is ",
          tokens[i], ", expected an id in [0, ", vocab_size, ")"));
    }
  }
  return std::unique_ptr<InMemoryTokenSource>(
      new InMemoryTokenSource(std::move(tokens), vocab_size, std::move(name)));
}

InMemoryTokenSource::InMemoryTokenSource(std::vector<int64_t> tokens,
                                         int64_t vocab_size, std::string name)
    : tokens_(std::move(tokens)),
      vocab_size_(vocab_size),
      name_(std::move(name)) {}

int64_t InMemoryTokenSource::num_tokens() const {
  return static_cast<int64_t>(tokens_.size());
}

int64_t InMemoryTokenSource::vocab_size() const { return vocab_size_; }

void InMemoryTokenSource::Read(int64_t start, int64_t count,
                               int64_t* out) const {
  CheckReadRange(start, count, out);
  std::copy_n(tokens_.begin() + start, count, out);
}

std::string InMemoryTokenSource::Describe() const {
  return absl::StrCat("memory(", name_, ", ", tokens_.size(), " tokens)");
}

}  // namespace strata::data
