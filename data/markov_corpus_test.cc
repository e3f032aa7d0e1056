#include "data/markov_corpus.h"

#include <glog/logging.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <vector>

namespace strata::data {
namespace {

using ::testing::HasSubstr;

std::unique_ptr<MarkovCorpus> MakeCorpus(const MarkovCorpusOptions& options) {
  auto corpus = MarkovCorpus::Create(options);
  CHECK(corpus.ok()) << corpus.status();
  return *std::move(corpus);
}

std::vector<int64_t> AllTokens(const TokenSource& source) {
  std::vector<int64_t> tokens(source.num_tokens());
  source.Read(0, source.num_tokens(), tokens.data());
  return tokens;
}

std::string ErrorOf(const MarkovCorpusOptions& options) {
  auto corpus = MarkovCorpus::Create(options);
  EXPECT_FALSE(corpus.ok());
  EXPECT_EQ(corpus.status().code(), absl::StatusCode::kInvalidArgument);
  return std::string(corpus.status().message());
}

// Binary entropy in nats.
double H2(double p) { return -p * std::log(p) - (1 - p) * std::log(1 - p); }

TEST(MarkovCorpusTest, RowsSumToOneOverDistinctSuccessors) {
  for (int branching : {1, 2, 4, 37}) {
    MarkovCorpusOptions options;
    options.vocab_size = 37;
    options.branching = branching;
    options.num_tokens = 10;
    auto corpus = MakeCorpus(options);
    for (int64_t s = 0; s < 37; ++s) {
      const std::vector<int64_t> successors = corpus->Successors(s);
      ASSERT_EQ(successors.size(), static_cast<size_t>(branching));
      double total = 0;
      for (int64_t t = 0; t < 37; ++t) {
        const double p = corpus->TransitionProbability(s, t);
        const bool is_successor =
            std::find(successors.begin(), successors.end(), t) !=
            successors.end();
        EXPECT_EQ(p > 0, is_successor) << s << " -> " << t;
        total += p;
      }
      EXPECT_NEAR(total, 1.0, 1e-14)
          << "branching " << branching << " row " << s;
    }
  }
}

TEST(MarkovCorpusTest, NextStateAndStateZeroSelfLoopAreAlwaysSuccessors) {
  MarkovCorpusOptions options;
  options.vocab_size = 50;
  options.branching = 2;
  options.num_tokens = 10;
  auto corpus = MakeCorpus(options);
  for (int64_t s = 0; s < 50; ++s) {
    EXPECT_GT(corpus->TransitionProbability(s, (s + 1) % 50), 0) << s;
  }
  EXPECT_GT(corpus->TransitionProbability(0, 0), 0);
}

TEST(MarkovCorpusTest, StationaryDistributionIsStationary) {
  for (int branching : {2, 4, 16, 200}) {
    MarkovCorpusOptions options;
    options.vocab_size = 200;
    options.branching = branching;
    options.num_tokens = 10;
    auto corpus = MakeCorpus(options);
    const std::vector<double>& pi = corpus->stationary();
    ASSERT_EQ(pi.size(), 200u);
    double total = 0;
    for (double p : pi) total += p;
    EXPECT_NEAR(total, 1.0, 1e-12);
    for (int64_t t = 0; t < 200; ++t) {
      double flow_in = 0;
      for (int64_t s = 0; s < 200; ++s) {
        flow_in += pi[s] * corpus->TransitionProbability(s, t);
      }
      ASSERT_NEAR(flow_in, pi[t], 1e-10)
          << "branching " << branching << " state " << t;
    }
  }
}

TEST(MarkovCorpusTest, TwoStateChainMatchesClosedForm) {
  // P = [[1 - a, a], [b, 1 - b]] has pi = (b, a) / (a + b) and entropy rate
  // pi_0 H2(a) + pi_1 H2(b).
  MarkovCorpusOptions options;
  options.vocab_size = 2;
  options.branching = 2;
  options.seed = 3;
  options.num_tokens = 10;
  auto corpus = MakeCorpus(options);
  const double a = corpus->TransitionProbability(0, 1);
  const double b = corpus->TransitionProbability(1, 0);
  ASSERT_GT(a, 0);
  ASSERT_GT(b, 0);
  const double pi0 = b / (a + b);
  const double pi1 = a / (a + b);
  EXPECT_NEAR(corpus->stationary()[0], pi0, 1e-12);
  EXPECT_NEAR(corpus->stationary()[1], pi1, 1e-12);
  EXPECT_NEAR(corpus->entropy_rate_nats(), pi0 * H2(a) + pi1 * H2(b), 1e-12);
}

TEST(MarkovCorpusTest, BranchingOneIsADeterministicCycle) {
  MarkovCorpusOptions options;
  options.vocab_size = 5;
  options.branching = 1;
  options.num_tokens = 12;
  auto corpus = MakeCorpus(options);
  EXPECT_EQ(corpus->entropy_rate_nats(), 0.0);
  for (double p : corpus->stationary()) EXPECT_EQ(p, 0.2);
  const std::vector<int64_t> tokens = AllTokens(*corpus);
  for (size_t i = 1; i < tokens.size(); ++i) {
    EXPECT_EQ(tokens[i], (tokens[i - 1] + 1) % 5);
  }
}

TEST(MarkovCorpusTest, EmpiricalConditionalEntropyMatchesEntropyRate) {
  // Tolerance: the plug-in estimate -sum_{s,t} n(s,t)/N log(n(s,t)/n(s))
  // differs from the entropy rate H by
  //  (a) the fluctuation of the mean of -log P(x_{i+1} | x_i) over N
  //      transitions, whose standard deviation is sigma / sqrt(N) with sigma
  //      the long-run (autocorrelation-inclusive) standard deviation of one
  //      term; batch means over this corpus give sigma = 0.47 nats, and we
  //      allow sigma = 1 nat: 1 / sqrt(2e6) = 7.1e-4, 5 sigma = 3.5e-3;
  //  (b) the plug-in bias, -(K - V) / (2N) to first order (Miller-Madow),
  //      with K = V * branching = 512 transitions and V = 128 rows:
  //      384 / 4e6 = 1e-4.
  // Total: 3.6e-3.
  MarkovCorpusOptions options;  // vocab 128, branching 4, 2M tokens.
  auto corpus = MakeCorpus(options);
  const std::vector<int64_t> tokens = AllTokens(*corpus);
  const int64_t vocab = options.vocab_size;
  std::vector<int64_t> pair_counts(vocab * vocab, 0);
  std::vector<int64_t> row_counts(vocab, 0);
  for (size_t i = 0; i + 1 < tokens.size(); ++i) {
    ++pair_counts[tokens[i] * vocab + tokens[i + 1]];
    ++row_counts[tokens[i]];
  }
  const double n = static_cast<double>(tokens.size() - 1);
  double estimate = 0;
  for (int64_t s = 0; s < vocab; ++s) {
    for (int64_t t = 0; t < vocab; ++t) {
      const int64_t c = pair_counts[s * vocab + t];
      if (c == 0) continue;
      ASSERT_GT(corpus->TransitionProbability(s, t), 0) << s << " -> " << t;
      estimate -= c / n * std::log(static_cast<double>(c) / row_counts[s]);
    }
  }
  EXPECT_NEAR(estimate, corpus->entropy_rate_nats(), 3.6e-3);
}

TEST(MarkovCorpusTest, SameSeedGivesSameTokens) {
  MarkovCorpusOptions options;
  options.num_tokens = 10000;
  EXPECT_EQ(AllTokens(*MakeCorpus(options)), AllTokens(*MakeCorpus(options)));
}

TEST(MarkovCorpusTest, DifferentSeedGivesDifferentTokens) {
  MarkovCorpusOptions options;
  options.num_tokens = 10000;
  const std::vector<int64_t> first = AllTokens(*MakeCorpus(options));
  options.seed = 2;
  EXPECT_NE(first, AllTokens(*MakeCorpus(options)));
}

TEST(MarkovCorpusTest, DefaultCorpusIsTheSameOnEveryMachine) {
  // Golden values recorded from this implementation: rng.h derives
  // everything from std::mt19937_64's standard-fixed outputs with exact
  // arithmetic, so any platform must reproduce them. (The entropy goes
  // through std::log, hence the tolerance.)
  auto corpus = MakeCorpus(MarkovCorpusOptions());
  std::vector<int64_t> prefix(16);
  corpus->Read(0, 16, prefix.data());
  EXPECT_EQ(prefix, (std::vector<int64_t>{74, 92, 125, 80, 74, 101, 116, 5, 41,
                                          58, 59, 60, 89, 60, 89, 80}));
  EXPECT_NEAR(corpus->entropy_rate_nats(), 1.2225449767901924, 1e-13);
}

TEST(MarkovCorpusTest, ReadCopiesTheRequestedRange) {
  MarkovCorpusOptions options;
  options.num_tokens = 100;
  auto corpus = MakeCorpus(options);
  const std::vector<int64_t> all = AllTokens(*corpus);
  std::vector<int64_t> part(10);
  corpus->Read(90, 10, part.data());
  EXPECT_EQ(part, std::vector<int64_t>(all.begin() + 90, all.end()));
  for (int64_t token : all) {
    EXPECT_GE(token, 0);
    EXPECT_LT(token, 128);
  }
}

TEST(MarkovCorpusTest, DescribeNamesTheOptions) {
  MarkovCorpusOptions options;
  options.num_tokens = 1000;
  EXPECT_EQ(MakeCorpus(options)->Describe(),
            "markov(vocab=128, branching=4, seed=1, 1000 tokens)");
}

TEST(MarkovCorpusTest, VocabBelowTwoIsRejected) {
  MarkovCorpusOptions options;
  options.vocab_size = 1;
  options.branching = 1;
  EXPECT_THAT(ErrorOf(options),
              HasSubstr("vocab_size is 1, expected at least 2"));
}

TEST(MarkovCorpusTest, BranchingAboveVocabIsRejected) {
  MarkovCorpusOptions options;
  options.vocab_size = 4;
  options.branching = 5;
  EXPECT_THAT(ErrorOf(options),
              HasSubstr("branching is 5, expected a number of successors in "
                        "[1, vocab_size = 4]"));
}

TEST(MarkovCorpusTest, BranchingZeroIsRejected) {
  MarkovCorpusOptions options;
  options.branching = 0;
  EXPECT_THAT(ErrorOf(options), HasSubstr("branching is 0"));
}

TEST(MarkovCorpusTest, FewerThanTwoTokensIsRejected) {
  MarkovCorpusOptions options;
  options.num_tokens = 1;
  EXPECT_THAT(ErrorOf(options),
              HasSubstr("num_tokens is 1, expected at least 2"));
}

TEST(MarkovCorpusTest, OversizedTransitionTableIsRejected) {
  MarkovCorpusOptions options;
  options.vocab_size = 1 << 20;
  options.branching = 64;
  EXPECT_THAT(ErrorOf(options),
              HasSubstr("vocab_size * branching is 1048576 * 64, expected at "
                        "most 33554432 transitions"));
}

}  // namespace
}  // namespace strata::data
