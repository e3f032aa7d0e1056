#include "text/byte_level_vocab.h"

#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "text/byte_level.h"

namespace strata::text {

absl::StatusOr<ByteLevelVocab> ReadByteLevelVocab(const nlohmann::json& vocab,
                                                  absl::string_view where) {
  if (!vocab.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(
        where, ": expected an object of token -> id, got ", vocab.type_name()));
  }
  ByteLevelVocab out;
  out.tokens.reserve(vocab.size());
  out.ids.reserve(vocab.size());
  for (const auto& [spelled, id] : vocab.items()) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 ||
        id.get<int64_t>() > std::numeric_limits<int32_t>::max()) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": token '", spelled, "' has id ", id.dump(),
                       "; expected an integer in [0, 2^31)"));
    }
    absl::StatusOr<std::string> bytes = ByteLevelUnspell(spelled);
    if (!bytes.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": token ", bytes.status().message()));
    }
    const int32_t value = id.get<int32_t>();
    out.tokens.emplace_back(*std::move(bytes), value);
    out.ids.emplace(spelled, value);
  }
  return out;
}

absl::StatusOr<std::vector<BpeMerge>> ByteLevelMergeIds(
    const std::vector<std::pair<std::string, std::string>>& merges,
    const ByteLevelVocab& vocab, absl::string_view where) {
  std::vector<BpeMerge> out;
  out.reserve(merges.size());
  for (size_t i = 0; i < merges.size(); ++i) {
    const auto left = vocab.ids.find(merges[i].first);
    const auto right = vocab.ids.find(merges[i].second);
    if (left == vocab.ids.end() || right == vocab.ids.end()) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, "[", i, "]: '", merges[i].first, " ", merges[i].second,
          "' names '",
          left == vocab.ids.end() ? merges[i].first : merges[i].second,
          "', which is not in the vocabulary"));
    }
    out.push_back({left->second, right->second});
  }
  return out;
}

}  // namespace strata::text
