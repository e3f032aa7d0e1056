// Byte-pair encoding of one pre-tokenized piece: the piece's bytes start as
// single-byte tokens, and the adjacent pair of lowest rank is merged
// (leftmost first among equal ranks) until no adjacent pair has a merge.
// This is the merge loop of both Hugging Face's BPE model (a pair's rank is
// its line in `merges`) and tiktoken (a pair's rank is the rank of the token
// it forms), so one encoder serves tokenizer.json, GPT-2's
// encoder.json/vocab.bpe and tiktoken rank files.
//
// Short pieces (the vast majority) merge in a small array scanned for the
// minimum; long ones (whitespace runs, base64 blobs) in a linked list with a
// priority queue, O(n log n). Tokens are raw bytes here: the byte-to-unicode
// mapping of GPT-2's files is undone when they are read (text/byte_level.h).
#ifndef STRATA_TEXT_BPE_H_
#define STRATA_TEXT_BPE_H_

#include <array>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace strata::text {

struct BpeMerge {
  int32_t left;
  int32_t right;
};

class BytePairEncoder {
 public:
  // `tokens`: each token's bytes and id (ids unique, >= 0; bytes unique).
  // Every single byte must be a token. `merges` in rank order (lowest
  // first); each must form a token (left's bytes then right's). With
  // `ignore_merges`, a piece that is itself a token encodes as that token
  // (tiktoken; Hugging Face's ignore_merges). Errors (InvalidArgument) name
  // the offending token, byte or merge by index.
  static absl::StatusOr<BytePairEncoder> Create(
      const std::vector<std::pair<std::string, int32_t>>& tokens,
      const std::vector<BpeMerge>& merges, bool ignore_merges);

  // tiktoken's semantics from its ranks alone: the rank of a pair is the
  // rank of the token the two form (every split of every token into two
  // tokens is a merge), and ignore_merges. `tokens` as in Create, with the
  // id as the rank.
  static absl::StatusOr<BytePairEncoder> FromRanks(
      const std::vector<std::pair<std::string, int32_t>>& tokens);

  // Appends the ids of `piece` (non-empty) to `ids`.
  void Encode(absl::string_view piece, std::vector<int32_t>* ids) const;

  // The id of the token whose bytes are `bytes`, or -1.
  int32_t TokenId(absl::string_view bytes) const;

  int64_t num_merges() const { return merge_count_; }

 private:
  struct MergeResult {
    int32_t rank;
    int32_t result;
  };
  static uint64_t PairKey(int32_t left, int32_t right) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) |
           static_cast<uint32_t>(right);
  }
  // The merge of (left, right), or rank -1.
  MergeResult Find(int32_t left, int32_t right) const;
  void MergeSmall(std::vector<int32_t>* symbols) const;
  void MergeLarge(std::vector<int32_t>* symbols) const;
  // Merges `piece` from its bytes (no whole-token lookup).
  void MergeBytes(absl::string_view piece, std::vector<int32_t>* ids) const;
  // Fills whole_.
  void FindWholeTokens();

  absl::flat_hash_map<std::string, int32_t> ids_;
  // Tokens whose own bytes encode to themselves (with ignore_merges: every
  // token): a piece equal to one is that token, without merging.
  absl::flat_hash_map<std::string, int32_t> whole_;
  absl::flat_hash_map<uint64_t, MergeResult> merges_;
  std::array<int32_t, 256> byte_ids_{};
  bool ignore_merges_ = false;
  int64_t merge_count_ = 0;
};

}  // namespace strata::text

#endif  // STRATA_TEXT_BPE_H_
