#include "data/markov_corpus.h"

#include <glog/logging.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "data/rng.h"

namespace strata::data {
namespace {

// Power iteration stops once ||pi P - pi||_1 is below this plus a rounding
// allowance of a few ulps per successor (each entry of pi P sums about
// `branching` products, so its rounding error is ~branching ulps of itself).
constexpr double kStationaryTolerance = 1e-12;
constexpr int kMaxPowerIterations = 1'000'000;

}  // namespace

absl::StatusOr<std::unique_ptr<MarkovCorpus>> MarkovCorpus::Create(
    const MarkovCorpusOptions& options) {
  if (options.vocab_size < 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("MarkovCorpusOptions.vocab_size is ", options.vocab_size,
                     ", expected at least 2"));
  }
  if (options.branching < 1 || options.branching > options.vocab_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("MarkovCorpusOptions.branching is ", options.branching,
                     ", expected a number of successors in [1, vocab_size = ",
                     options.vocab_size, "]"));
  }
  if (options.vocab_size > kMaxTransitions / options.branching) {
    return absl::InvalidArgumentError(
        absl::StrCat("MarkovCorpusOptions.vocab_size * branching is ",
                     options.vocab_size, " * ", options.branching,
                     ", expected at most ", kMaxTransitions, " transitions"));
  }
  if (options.num_tokens < 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("MarkovCorpusOptions.num_tokens is ", options.num_tokens,
                     ", expected at least 2"));
  }
  std::unique_ptr<MarkovCorpus> corpus(new MarkovCorpus(options));
  std::mt19937_64 gen(options.seed);
  corpus->BuildTransitions(gen);
  absl::Status solved = corpus->SolveStationary();
  if (!solved.ok()) return solved;
  double entropy = 0;
  for (int64_t s = 0; s < options.vocab_size; ++s) {
    double row_entropy = 0;
    for (int64_t i = corpus->row_begin_[s]; i < corpus->row_begin_[s + 1];
         ++i) {
      const double p = corpus->probability_[i];
      row_entropy -= p * std::log(p);
    }
    entropy += corpus->stationary_[s] * row_entropy;
  }
  corpus->entropy_rate_nats_ = entropy;
  corpus->GenerateTokens(gen);
  return corpus;
}

MarkovCorpus::MarkovCorpus(const MarkovCorpusOptions& options)
    : options_(options) {}

void MarkovCorpus::BuildTransitions(std::mt19937_64& gen) {
  const int64_t vocab = options_.vocab_size;
  const int64_t branching = options_.branching;
  row_begin_.resize(vocab + 1);
  successor_.resize(vocab * branching);
  probability_.resize(vocab * branching);
  cumulative_.resize(vocab * branching);
  // taken[i]: pool index i is already chosen for the current row (Floyd's
  // sampling); reset after each row.
  std::vector<char> taken(vocab, 0);
  std::vector<int64_t> forced;
  std::vector<int64_t> row;
  for (int64_t s = 0; s < vocab; ++s) {
    forced = {(s + 1) % vocab};
    if (s == 0 && branching >= 2) forced.push_back(0);
    std::sort(forced.begin(), forced.end());
    // Choose `branching - |forced|` distinct ids among the vocab - |forced|
    // others, uniformly (Floyd's algorithm over pool indices), then map each
    // pool index to an id by stepping over the forced ids.
    const int64_t pool = vocab - static_cast<int64_t>(forced.size());
    const int64_t extra = branching - static_cast<int64_t>(forced.size());
    row = forced;
    std::vector<int64_t> chosen;
    chosen.reserve(std::max<int64_t>(extra, 0));
    for (int64_t j = pool - extra; j < pool; ++j) {
      const int64_t t =
          static_cast<int64_t>(UniformInt(gen, static_cast<uint64_t>(j) + 1));
      const int64_t pick = taken[t] ? j : t;
      taken[pick] = 1;
      chosen.push_back(pick);
    }
    for (int64_t index : chosen) {
      taken[index] = 0;
      int64_t id = index;
      for (int64_t f : forced) {
        if (id >= f) ++id;
      }
      row.push_back(id);
    }
    std::sort(row.begin(), row.end());
    CHECK_EQ(static_cast<int64_t>(row.size()), branching);
    CHECK(std::adjacent_find(row.begin(), row.end()) == row.end())
        << "duplicate successor of state " << s;

    const int64_t begin = s * branching;
    row_begin_[s] = begin;
    double total = 0;
    for (int64_t k = 0; k < branching; ++k) {
      // A weight in (0, 1]: never zero, so every successor is reachable.
      const double weight = 1.0 - UniformDouble(gen);
      successor_[begin + k] = static_cast<int32_t>(row[k]);
      probability_[begin + k] = weight;
      total += weight;
    }
    double cumulative = 0;
    for (int64_t k = 0; k < branching; ++k) {
      probability_[begin + k] /= total;
      cumulative += probability_[begin + k];
      cumulative_[begin + k] = cumulative;
    }
    cumulative_[begin + branching - 1] = 1.0;
  }
  row_begin_[vocab] = vocab * branching;
}

absl::Status MarkovCorpus::SolveStationary() {
  const int64_t vocab = options_.vocab_size;
  if (options_.branching == 1) {
    // The cycle 0 -> 1 -> ... -> 0 is doubly stochastic: pi is uniform.
    stationary_.assign(vocab, 1.0 / static_cast<double>(vocab));
    return absl::OkStatus();
  }
  // Power iteration on the lazy chain (I + P) / 2, which has the same
  // stationary distribution and converges for any irreducible chain.
  const double tolerance =
      kStationaryTolerance + 8.0 * options_.branching * DBL_EPSILON;
  std::vector<double> pi(vocab, 1.0 / static_cast<double>(vocab));
  std::vector<double> next(vocab);
  double residual = 0;
  for (int iteration = 0; iteration < kMaxPowerIterations; ++iteration) {
    std::fill(next.begin(), next.end(), 0.0);
    for (int64_t s = 0; s < vocab; ++s) {
      const double mass = pi[s];
      for (int64_t i = row_begin_[s]; i < row_begin_[s + 1]; ++i) {
        next[successor_[i]] += mass * probability_[i];
      }
    }
    residual = 0;
    for (int64_t s = 0; s < vocab; ++s) residual += std::abs(next[s] - pi[s]);
    if (residual <= tolerance) {
      stationary_ = std::move(pi);
      return absl::OkStatus();
    }
    double total = 0;
    for (int64_t s = 0; s < vocab; ++s) {
      pi[s] = 0.5 * (pi[s] + next[s]);
      total += pi[s];
    }
    for (int64_t s = 0; s < vocab; ++s) pi[s] /= total;
  }
  return absl::InternalError(absl::StrCat(
      "stationary distribution of ", Describe(), " did not converge in ",
      kMaxPowerIterations, " power iterations: ||pi P - pi||_1 = ", residual,
      ", expected at most ", tolerance));
}

void MarkovCorpus::GenerateTokens(std::mt19937_64& gen) {
  const int64_t vocab = options_.vocab_size;
  // Start state from pi (inverse CDF); rounding can leave u just above the
  // last partial sum, in which case the last state is used.
  const double u = UniformDouble(gen);
  int64_t state = vocab - 1;
  double cumulative = 0;
  for (int64_t s = 0; s < vocab; ++s) {
    cumulative += stationary_[s];
    if (u < cumulative) {
      state = s;
      break;
    }
  }
  tokens_.resize(options_.num_tokens);
  tokens_[0] = static_cast<int32_t>(state);
  const double* cdf = cumulative_.data();
  const int32_t* successor = successor_.data();
  const int64_t branching = options_.branching;
  for (int64_t t = 1; t < options_.num_tokens; ++t) {
    const double v = UniformDouble(gen);
    const int64_t begin = state * branching;
    // First successor whose cumulative probability exceeds v; the row's last
    // entry is exactly 1 > v.
    const int64_t k =
        std::upper_bound(cdf + begin, cdf + begin + branching, v) -
        (cdf + begin);
    state = successor[begin + k];
    tokens_[t] = static_cast<int32_t>(state);
  }
}

int64_t MarkovCorpus::num_tokens() const { return options_.num_tokens; }

int64_t MarkovCorpus::vocab_size() const { return options_.vocab_size; }

void MarkovCorpus::Read(int64_t start, int64_t count, int64_t* out) const {
  CheckReadRange(start, count, out);
  std::copy_n(tokens_.begin() + start, count, out);
}

std::string MarkovCorpus::Describe() const {
  return absl::StrCat(
      "markov(vocab=", options_.vocab_size, ", branching=", options_.branching,
      ", seed=", options_.seed, ", ", options_.num_tokens, " tokens)");
}

double MarkovCorpus::entropy_rate_nats() const { return entropy_rate_nats_; }

double MarkovCorpus::TransitionProbability(int64_t from, int64_t to) const {
  CHECK(from >= 0 && from < options_.vocab_size)
      << "TransitionProbability: state " << from << " outside [0, "
      << options_.vocab_size << ")";
  CHECK(to >= 0 && to < options_.vocab_size)
      << "TransitionProbability: state " << to << " outside [0, "
      << options_.vocab_size << ")";
  const auto begin = successor_.begin() + row_begin_[from];
  const auto end = successor_.begin() + row_begin_[from + 1];
  const auto it = std::lower_bound(begin, end, static_cast<int32_t>(to));
  if (it == end || *it != to) return 0;
  return probability_[it - successor_.begin()];
}

std::vector<int64_t> MarkovCorpus::Successors(int64_t state) const {
  CHECK(state >= 0 && state < options_.vocab_size)
      << "Successors: state " << state << " outside [0, " << options_.vocab_size
      << ")";
  return std::vector<int64_t>(successor_.begin() + row_begin_[state],
                              successor_.begin() + row_begin_[state + 1]);
}

const std::vector<double>& MarkovCorpus::stationary() const {
  return stationary_;
}

const MarkovCorpusOptions& MarkovCorpus::options() const { return options_; }

}  // namespace strata::data
