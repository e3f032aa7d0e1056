// Reading the byte-level vocabularies and merge lists shared by
// tokenizer.json ("model": {"vocab", "merges"}) and GPT-2's encoder.json +
// vocab.bpe: tokens spelled in GPT-2's byte-to-unicode alphabet
// (text/byte_level.h) become raw bytes, and merges of two spelled tokens
// become pairs of ids. Errors (InvalidArgument) start with `where` ("<file>:
// model.vocab") and name the entry.
#ifndef STRATA_TEXT_BYTE_LEVEL_VOCAB_H_
#define STRATA_TEXT_BYTE_LEVEL_VOCAB_H_

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "text/bpe.h"

namespace strata::text {

struct ByteLevelVocab {
  // Raw bytes and id of each token.
  std::vector<std::pair<std::string, int32_t>> tokens;
  // Spelled token -> id.
  absl::flat_hash_map<std::string, int32_t> ids;
};

// A JSON object of spelled token -> id (ids in [0, 2^31)).
absl::StatusOr<ByteLevelVocab> ReadByteLevelVocab(const nlohmann::json& vocab,
                                                  absl::string_view where);

// Merges of spelled tokens ("Ġ" "t"), in rank order, as id pairs. An entry
// naming a token not in `vocab` is an error naming its index.
absl::StatusOr<std::vector<BpeMerge>> ByteLevelMergeIds(
    const std::vector<std::pair<std::string, std::string>>& merges,
    const ByteLevelVocab& vocab, absl::string_view where);

}  // namespace strata::text

#endif  // STRATA_TEXT_BYTE_LEVEL_VOCAB_H_
