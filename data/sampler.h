// DistributedSampler: cuts a TokenSource into training sequences and deals
// each optimizer step's global batch out to the ranks, resumably.
//
// The source is cut into num_windows() = floor((num_tokens - 1) / seq_len)
// windows of seq_len + 1 tokens; window w is tokens
// [w * seq_len, w * seq_len + seq_len + 1), so consecutive windows share one
// token (the last target of one is the first input of the next) and no token
// is used as a target twice. Tokens after the last window are never read.
//
// Global sample k (k = 0, 1, ...) is window perm_e(k mod num_windows), where
// e = k / num_windows is the epoch and perm_e a permutation of the windows
// drawn from (seed, e) — the identity when !shuffle. Global batch j is
// samples [j * B, (j + 1) * B) with B = global_batch_size; a batch may span
// two epochs. Rank r of W gets its rows [r * B / W, (r + 1) * B / W), so the
// ranks' parts, concatenated in rank order, are the global batch: training
// at any world size sees exactly the same sequences in the same order.
//
// Every rank runs its own sampler with the same options over the same source;
// the samplers stay in step because each NextBatch advances position() by the
// whole global batch. State() is independent of the world size, so a run may
// resume at another world size and continue at the same global sample.
//
// Determinism: permutations come from std::mt19937_64 through rng.h, so a
// seed gives the same order on every machine.
//
// Thread-compatibility: non-const methods need external synchronisation.
#ifndef STRATA_DATA_SAMPLER_H_
#define STRATA_DATA_SAMPLER_H_

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "data/token_source.h"

namespace strata::data {

struct SamplerOptions {
  // Tokens per training sequence (inputs); each window holds seq_len + 1.
  int64_t seq_len = 128;
  // Sequences per optimizer step, over all ranks.
  int64_t global_batch_size = 32;
  uint64_t seed = 1;
  // Visit the windows in a fresh random order each epoch; in order if false.
  bool shuffle = true;
};

class DistributedSampler {
 public:
  // Borrows `source` (not null), which must outlive the sampler.
  // InvalidArgument if seq_len or global_batch_size is below 1, or the source
  // has fewer than seq_len + 1 tokens (naming both numbers).
  static absl::StatusOr<std::unique_ptr<DistributedSampler>> Create(
      const TokenSource* source, const SamplerOptions& options);

  DistributedSampler(const DistributedSampler&) = delete;
  DistributedSampler& operator=(const DistributedSampler&) = delete;

  // This rank's part of the next global batch, as an int64 tensor
  // [global_batch_size / world_size, seq_len + 1] (inputs = [:, :-1],
  // targets = [:, 1:]), and advances position() by global_batch_size.
  // InvalidArgument, without advancing, if world_size < 1, rank is outside
  // [0, world_size) or global_batch_size % world_size != 0.
  absl::StatusOr<at::Tensor> NextBatch(int rank, int world_size);

  // Global samples consumed so far (independent of the world size).
  int64_t position() const;
  // The epoch of the next sample: position() / num_windows().
  int64_t epoch() const;
  int64_t num_windows() const;
  const SamplerOptions& options() const;

  // The window global sample `k` reads (k >= 0).
  int64_t WindowOfSample(int64_t k);

  // Resumable state: {"position", "seed", "seq_len", "global_batch_size",
  // "shuffle" (0 or 1), "num_tokens"}, in that order. The seed is stored as
  // its two's-complement int64.
  std::vector<std::pair<std::string, int64_t>> State() const;
  // Restores position() from State() output. InvalidArgument, changing
  // nothing, if a key is missing, repeated or unknown, position is negative,
  // or seed, seq_len, global_batch_size, shuffle or num_tokens differ from
  // this sampler's (naming the key and both values).
  absl::Status LoadState(
      const std::vector<std::pair<std::string, int64_t>>& state);

 private:
  DistributedSampler(const TokenSource* source, const SamplerOptions& options);

  // The window order of `epoch`, from a cache of the two most recently used
  // epochs (a batch spans at most two unless it is longer than an epoch).
  const std::vector<int64_t>& Permutation(int64_t epoch);

  struct CachedPermutation {
    int64_t epoch = -1;
    std::vector<int64_t> windows;
  };

  const TokenSource* const source_;
  const SamplerOptions options_;
  const int64_t num_windows_;
  int64_t position_ = 0;
  CachedPermutation cache_[2];
};

}  // namespace strata::data

#endif  // STRATA_DATA_SAMPLER_H_
