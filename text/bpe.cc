#include "text/bpe.h"

#include <cstdint>
#include <limits>
#include <queue>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"

namespace strata::text {
namespace {

// Pieces of at most this many bytes merge by array scans (MergeSmall).
constexpr size_t kSmallPiece = 48;
constexpr int32_t kNoMerge = std::numeric_limits<int32_t>::max();

std::string Quoted(absl::string_view bytes) {
  return absl::StrCat("'", absl::CHexEscape(bytes), "'");
}

}  // namespace

absl::StatusOr<BytePairEncoder> BytePairEncoder::Create(
    const std::vector<std::pair<std::string, int32_t>>& tokens,
    const std::vector<BpeMerge>& merges, bool ignore_merges) {
  BytePairEncoder e;
  e.ignore_merges_ = ignore_merges;
  e.ids_.reserve(tokens.size());
  absl::flat_hash_map<int32_t, absl::string_view> bytes_of;
  bytes_of.reserve(tokens.size());
  for (const auto& [bytes, id] : tokens) {
    if (bytes.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("token id ", id, " is the empty string"));
    }
    if (id < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("token ", Quoted(bytes), " has a negative id ", id));
    }
    if (!e.ids_.emplace(bytes, id).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("token ", Quoted(bytes), " appears twice (ids ",
                       e.ids_[bytes], " and ", id, ")"));
    }
    if (!bytes_of.emplace(id, bytes).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("token id ", id, " is given to two tokens, ",
                       Quoted(bytes_of[id]), " and ", Quoted(bytes)));
    }
  }
  for (int b = 0; b < 256; ++b) {
    const auto it = e.ids_.find(std::string(1, static_cast<char>(b)));
    if (it == e.ids_.end()) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "the vocabulary has no token for the byte 0x%02X; byte-level BPE "
          "needs all 256",
          b));
    }
    e.byte_ids_[b] = it->second;
  }
  e.merges_.reserve(merges.size());
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const BpeMerge& m = merges[rank];
    const auto left = bytes_of.find(m.left);
    const auto right = bytes_of.find(m.right);
    if (left == bytes_of.end() || right == bytes_of.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("merge ", rank, " (ids ", m.left, " ", m.right,
                       ") names a token id that is not in the vocabulary"));
    }
    const std::string joined = absl::StrCat(left->second, right->second);
    const auto result = e.ids_.find(joined);
    if (result == e.ids_.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("merge ", rank, " (", Quoted(left->second), " + ",
                       Quoted(right->second), ") forms ", Quoted(joined),
                       ", which is not in the vocabulary"));
    }
    // A pair listed twice keeps its first (lowest) rank, as Hugging Face's
    // BPE does.
    e.merges_.emplace(PairKey(m.left, m.right),
                      MergeResult{static_cast<int32_t>(rank), result->second});
  }
  e.merge_count_ = static_cast<int64_t>(e.merges_.size());
  e.FindWholeTokens();
  return e;
}

void BytePairEncoder::FindWholeTokens() {
  whole_.clear();
  if (ignore_merges_) {
    whole_ = ids_;
    return;
  }
  std::vector<int32_t> ids;
  for (const auto& [bytes, id] : ids_) {
    ids.clear();
    MergeBytes(bytes, &ids);
    if (ids.size() == 1 && ids[0] == id) whole_.emplace(bytes, id);
  }
}

absl::StatusOr<BytePairEncoder> BytePairEncoder::FromRanks(
    const std::vector<std::pair<std::string, int32_t>>& tokens) {
  absl::StatusOr<BytePairEncoder> e = Create(tokens, {}, true);
  if (!e.ok()) return e.status();
  for (const auto& [bytes, rank] : tokens) {
    for (size_t split = 1; split < bytes.size(); ++split) {
      const auto left = e->ids_.find(absl::string_view(bytes).substr(0, split));
      if (left == e->ids_.end()) continue;
      const auto right = e->ids_.find(absl::string_view(bytes).substr(split));
      if (right == e->ids_.end()) continue;
      e->merges_.emplace(PairKey(left->second, right->second),
                         MergeResult{rank, rank});
    }
  }
  e->merge_count_ = static_cast<int64_t>(e->merges_.size());
  e->FindWholeTokens();
  return e;
}

int32_t BytePairEncoder::TokenId(absl::string_view bytes) const {
  const auto it = ids_.find(bytes);
  return it == ids_.end() ? -1 : it->second;
}

BytePairEncoder::MergeResult BytePairEncoder::Find(int32_t left,
                                                   int32_t right) const {
  const auto it = merges_.find(PairKey(left, right));
  return it == merges_.end() ? MergeResult{kNoMerge, -1} : it->second;
}

void BytePairEncoder::Encode(absl::string_view piece,
                             std::vector<int32_t>* ids) const {
  if (piece.size() == 1) {
    ids->push_back(byte_ids_[static_cast<unsigned char>(piece[0])]);
    return;
  }
  const auto it = whole_.find(piece);
  if (it != whole_.end()) {
    ids->push_back(it->second);
    return;
  }
  MergeBytes(piece, ids);
}

void BytePairEncoder::MergeBytes(absl::string_view piece,
                                 std::vector<int32_t>* ids) const {
  const size_t first = ids->size();
  for (const char c : piece) {
    ids->push_back(byte_ids_[static_cast<unsigned char>(c)]);
  }
  std::vector<int32_t> symbols(ids->begin() + first, ids->end());
  ids->resize(first);
  if (piece.size() <= kSmallPiece) {
    MergeSmall(&symbols);
  } else {
    MergeLarge(&symbols);
  }
  ids->insert(ids->end(), symbols.begin(), symbols.end());
}

void BytePairEncoder::MergeSmall(std::vector<int32_t>* symbols) const {
  std::vector<int32_t>& s = *symbols;
  // ranks[i]: the rank of the pair (s[i], s[i + 1]).
  int32_t ranks[kSmallPiece];
  int32_t results[kSmallPiece];
  size_t n = s.size();
  for (size_t i = 0; i + 1 < n; ++i) {
    const MergeResult m = Find(s[i], s[i + 1]);
    ranks[i] = m.rank;
    results[i] = m.result;
  }
  while (n > 1) {
    size_t best = 0;
    for (size_t i = 1; i + 1 < n; ++i) {
      if (ranks[i] < ranks[best]) best = i;
    }
    if (ranks[best] == kNoMerge) break;
    s[best] = results[best];
    for (size_t i = best + 1; i + 1 < n; ++i) {
      s[i] = s[i + 1];
      ranks[i] = ranks[i + 1];
      results[i] = results[i + 1];
    }
    --n;
    if (best > 0) {
      const MergeResult m = Find(s[best - 1], s[best]);
      ranks[best - 1] = m.rank;
      results[best - 1] = m.result;
    }
    if (best + 1 < n) {
      const MergeResult m = Find(s[best], s[best + 1]);
      ranks[best] = m.rank;
      results[best] = m.result;
    }
  }
  s.resize(n);
}

void BytePairEncoder::MergeLarge(std::vector<int32_t>* symbols) const {
  std::vector<int32_t>& s = *symbols;
  const int32_t n = static_cast<int32_t>(s.size());
  std::vector<int32_t> prev(n);
  std::vector<int32_t> next(n);
  std::vector<bool> alive(n, true);
  for (int32_t i = 0; i < n; ++i) {
    prev[i] = i - 1;
    next[i] = i + 1 < n ? i + 1 : -1;
  }
  // (rank, left position, result): lowest rank first, then leftmost.
  struct Candidate {
    int32_t rank;
    int32_t pos;
    int32_t result;
    bool operator>(const Candidate& o) const {
      return rank != o.rank ? rank > o.rank : pos > o.pos;
    }
  };
  std::priority_queue<Candidate, std::vector<Candidate>,
                      std::greater<Candidate>>
      queue;
  auto push = [&](int32_t pos) {
    if (pos < 0 || next[pos] < 0) return;
    const MergeResult m = Find(s[pos], s[next[pos]]);
    if (m.rank != kNoMerge) queue.push({m.rank, pos, m.result});
  };
  for (int32_t i = 0; i + 1 < n; ++i) push(i);
  while (!queue.empty()) {
    const Candidate top = queue.top();
    queue.pop();
    // Stale: the left symbol was merged away, has no right neighbour any
    // more, or the pair changed since this candidate was pushed.
    if (!alive[top.pos] || next[top.pos] < 0) continue;
    const MergeResult now = Find(s[top.pos], s[next[top.pos]]);
    if (now.rank != top.rank || now.result != top.result) continue;
    const int32_t right = next[top.pos];
    s[top.pos] = top.result;
    alive[right] = false;
    next[top.pos] = next[right];
    if (next[right] >= 0) prev[next[right]] = top.pos;
    push(prev[top.pos]);
    push(top.pos);
  }
  size_t out = 0;
  for (int32_t i = 0; i >= 0 && i < n; i = next[i]) s[out++] = s[i];
  s.resize(out);
}

}  // namespace strata::text
