// MarkovCorpus: the embedded default corpus, a seeded sparse random
// first-order Markov chain whose entropy rate is known exactly.
//
// Every state (token) has `branching` distinct successors with random
// positive probabilities. Successor (s + 1) mod vocab_size is always among
// them, so the chain is irreducible; with branching >= 2 state 0 also has a
// self-loop, which makes it aperiodic. (With branching == 1 the chain is the
// deterministic cycle 0 -> 1 -> ... -> vocab_size - 1 -> 0: periodic, but its
// stationary distribution is still unique — uniform — and its entropy rate
// 0.) The token sequence starts in a state drawn from the stationary
// distribution pi, so it is stationary from its first token.
//
// The best cross-entropy any next-token predictor that sees the previous
// token can reach on this corpus is entropy_rate_nats() (a model that sees
// longer contexts cannot do better: the chain is first-order). Training
// curves can be judged against that floor.
//
// Determinism: the transition table and the tokens come from one
// std::mt19937_64 seeded with `seed`, through rng.h (no standard
// distributions), so a seed gives the same corpus on every machine.
//
// Memory: 4 bytes per token plus 20 bytes per transition.
#ifndef STRATA_DATA_MARKOV_CORPUS_H_
#define STRATA_DATA_MARKOV_CORPUS_H_

#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "data/token_source.h"

namespace strata::data {

struct MarkovCorpusOptions {
  // Number of states, i.e. token ids [0, vocab_size).
  int64_t vocab_size = 128;
  // Successors per state, in [1, vocab_size].
  int branching = 4;
  uint64_t seed = 1;
  // Length of the generated sequence, at least 2.
  int64_t num_tokens = 2'000'000;
};

class MarkovCorpus : public TokenSource {
 public:
  // vocab_size * branching may be at most this many transitions.
  static constexpr int64_t kMaxTransitions = int64_t{1} << 25;

  // Builds the chain, solves for its stationary distribution and generates
  // the tokens. InvalidArgument naming the field if vocab_size < 2,
  // branching is outside [1, vocab_size], num_tokens < 2 or the table would
  // exceed kMaxTransitions.
  static absl::StatusOr<std::unique_ptr<MarkovCorpus>> Create(
      const MarkovCorpusOptions& options);

  int64_t num_tokens() const override;
  int64_t vocab_size() const override;
  void Read(int64_t start, int64_t count, int64_t* out) const override;
  // "markov(vocab=128, branching=4, seed=1, 2000000 tokens)".
  std::string Describe() const override;

  // Entropy rate in nats per token: sum_s pi(s) * H(P(s, .)).
  double entropy_rate_nats() const;
  // P(from, to); 0 when `to` is not a successor of `from`. CHECK-fails if
  // either is outside [0, vocab_size).
  double TransitionProbability(int64_t from, int64_t to) const;
  // The successors of `state`, ascending.
  std::vector<int64_t> Successors(int64_t state) const;
  // The stationary distribution pi (pi P = pi, sum 1), solved so that
  // ||pi P - pi||_1 <= 1e-12 (plus a rounding allowance of a few ulps per
  // successor).
  const std::vector<double>& stationary() const;
  const MarkovCorpusOptions& options() const;

 private:
  explicit MarkovCorpus(const MarkovCorpusOptions& options);

  // The steps of Create, in order, all drawing from one generator.
  void BuildTransitions(std::mt19937_64& gen);
  absl::Status SolveStationary();
  void GenerateTokens(std::mt19937_64& gen);

  const MarkovCorpusOptions options_;
  // Row s's transitions are [row_begin_[s], row_begin_[s + 1]) in successor_,
  // probability_ and cumulative_ (whose last entry per row is exactly 1).
  std::vector<int64_t> row_begin_;
  std::vector<int32_t> successor_;
  std::vector<double> probability_;
  std::vector<double> cumulative_;
  std::vector<double> stationary_;
  double entropy_rate_nats_ = 0;
  std::vector<int32_t> tokens_;
};

}  // namespace strata::data

#endif  // STRATA_DATA_MARKOV_CORPUS_H_
