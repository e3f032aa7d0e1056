#include "data/sampler.h"

#include <ATen/ops/cat.h>
#include <ATen/ops/equal.h>
#include <glog/logging.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <numeric>
#include <vector>

#include "base/testing/status_matchers.h"
#include "data/token_source.h"

namespace strata::data {
namespace {

using ::strata::testing::IsOk;

using ::testing::HasSubstr;

// Tokens 0, 1, ..., n - 1: window w then holds w * seq_len .. w * seq_len +
// seq_len, so every batch has a closed form.
std::unique_ptr<TokenSource> Counting(int64_t n) {
  std::vector<int64_t> tokens(n);
  std::iota(tokens.begin(), tokens.end(), int64_t{0});
  auto source = InMemoryTokenSource::Create(std::move(tokens), n, "counting");
  CHECK(source.ok()) << source.status();
  return *std::move(source);
}

std::unique_ptr<DistributedSampler> MakeSampler(const TokenSource* source,
                                                const SamplerOptions& options) {
  auto sampler = DistributedSampler::Create(source, options);
  CHECK(sampler.ok()) << sampler.status();
  return *std::move(sampler);
}

at::Tensor Next(DistributedSampler& sampler, int rank = 0, int world_size = 1) {
  auto batch = sampler.NextBatch(rank, world_size);
  CHECK(batch.ok()) << batch.status();
  return *std::move(batch);
}

std::vector<std::vector<int64_t>> Rows(const at::Tensor& batch) {
  CHECK_EQ(batch.dim(), 2);
  at::Tensor contiguous = batch.contiguous();
  const int64_t* data = contiguous.data_ptr<int64_t>();
  std::vector<std::vector<int64_t>> rows;
  for (int64_t i = 0; i < batch.size(0); ++i) {
    rows.emplace_back(data + i * batch.size(1), data + (i + 1) * batch.size(1));
  }
  return rows;
}

// The window each row of a batch over Counting() tokens came from.
std::vector<int64_t> Windows(const at::Tensor& batch, int64_t seq_len) {
  std::vector<int64_t> windows;
  for (const auto& row : Rows(batch)) windows.push_back(row[0] / seq_len);
  return windows;
}

// 42 tokens with seq_len 4: windows start at 0, 4, ..., 36 (10 windows; the
// last ends at token 40 and token 41 is never read).
constexpr int64_t kTokens = 42;
constexpr int64_t kSeqLen = 4;
constexpr int64_t kWindows = 10;

SamplerOptions Options(int64_t global_batch_size, bool shuffle = true,
                       uint64_t seed = 1) {
  SamplerOptions options;
  options.seq_len = kSeqLen;
  options.global_batch_size = global_batch_size;
  options.shuffle = shuffle;
  options.seed = seed;
  return options;
}

std::string ErrorOf(const absl::Status& status) {
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  return std::string(status.message());
}

TEST(DistributedSamplerTest, NumWindowsIsTokensMinusOneOverSeqLen) {
  for (const auto& [tokens, windows] : std::vector<std::pair<int64_t, int64_t>>{
           {5, 1}, {8, 1}, {9, 2}, {41, 10}, {42, 10}}) {
    auto source = Counting(tokens);
    EXPECT_EQ(MakeSampler(source.get(), Options(1))->num_windows(), windows)
        << tokens << " tokens";
  }
}

TEST(DistributedSamplerTest, UnshuffledWindowsAreConsecutiveAndShareOneToken) {
  auto source = Counting(kTokens);
  auto sampler = MakeSampler(source.get(), Options(3, /*shuffle=*/false));
  const at::Tensor batch = Next(*sampler);
  EXPECT_EQ(batch.scalar_type(), at::kLong);
  EXPECT_EQ(batch.sizes().vec(), (std::vector<int64_t>{3, kSeqLen + 1}));
  EXPECT_EQ(Rows(batch),
            (std::vector<std::vector<int64_t>>{
                {0, 1, 2, 3, 4}, {4, 5, 6, 7, 8}, {8, 9, 10, 11, 12}}));
}

TEST(DistributedSamplerTest, UnshuffledBatchWrapsIntoTheNextEpoch) {
  auto source = Counting(kTokens);
  auto sampler = MakeSampler(source.get(), Options(4, /*shuffle=*/false));
  Next(*sampler);
  Next(*sampler);
  EXPECT_EQ(Windows(Next(*sampler), kSeqLen),
            (std::vector<int64_t>{8, 9, 0, 1}));
  EXPECT_EQ(sampler->epoch(), 1);
}

TEST(DistributedSamplerTest, PositionAdvancesByTheGlobalBatchOnEveryRank) {
  auto source = Counting(kTokens);
  auto sampler = MakeSampler(source.get(), Options(6));
  EXPECT_EQ(sampler->position(), 0);
  EXPECT_EQ(Next(*sampler, 1, 3).size(0), 2);
  EXPECT_EQ(sampler->position(), 6);
  Next(*sampler, 0, 2);
  EXPECT_EQ(sampler->position(), 12);
}

TEST(DistributedSamplerTest, EveryWindowAppearsOncePerEpoch) {
  auto source = Counting(kTokens);
  auto sampler = MakeSampler(source.get(), Options(5));
  for (int epoch = 0; epoch < 4; ++epoch) {
    std::vector<int64_t> seen = Windows(Next(*sampler), kSeqLen);
    const std::vector<int64_t> second = Windows(Next(*sampler), kSeqLen);
    seen.insert(seen.end(), second.begin(), second.end());
    std::sort(seen.begin(), seen.end());
    std::vector<int64_t> all(kWindows);
    std::iota(all.begin(), all.end(), int64_t{0});
    EXPECT_EQ(seen, all) << "epoch " << epoch;
  }
}

TEST(DistributedSamplerTest, ShuffledRowsAreWholeWindows) {
  auto source = Counting(kTokens);
  auto sampler = MakeSampler(source.get(), Options(7));
  for (const auto& row : Rows(Next(*sampler))) {
    EXPECT_EQ(row[0] % kSeqLen, 0);
    for (size_t i = 1; i < row.size(); ++i) EXPECT_EQ(row[i], row[0] + i);
  }
}

TEST(DistributedSamplerTest, TwoEpochsHaveDifferentOrders) {
  auto source = Counting(kTokens);
  auto sampler = MakeSampler(source.get(), Options(kWindows));
  const std::vector<int64_t> first = Windows(Next(*sampler), kSeqLen);
  const std::vector<int64_t> second = Windows(Next(*sampler), kSeqLen);
  EXPECT_NE(first, second);
}

TEST(DistributedSamplerTest, ShuffleIsNotTheIdentity) {
  auto source = Counting(kTokens);
  auto sampler = MakeSampler(source.get(), Options(kWindows));
  std::vector<int64_t> identity(kWindows);
  std::iota(identity.begin(), identity.end(), int64_t{0});
  EXPECT_NE(Windows(Next(*sampler), kSeqLen), identity);
}

TEST(DistributedSamplerTest, SameSeedGivesSameOrder) {
  auto source = Counting(kTokens);
  auto a = MakeSampler(source.get(), Options(kWindows, true, 5));
  auto b = MakeSampler(source.get(), Options(kWindows, true, 5));
  EXPECT_TRUE(at::equal(Next(*a), Next(*b)));
}

TEST(DistributedSamplerTest, DifferentSeedGivesDifferentOrder) {
  auto source = Counting(kTokens);
  auto a = MakeSampler(source.get(), Options(kWindows, true, 5));
  auto b = MakeSampler(source.get(), Options(kWindows, true, 6));
  EXPECT_FALSE(at::equal(Next(*a), Next(*b)));
}

TEST(DistributedSamplerTest, RanksConcatenateToTheWorldSizeOneBatch) {
  // 12 is divisible by every world size 1-4; 7 steps cover 84 samples, more
  // than 8 epochs of 10 windows, so batches straddle epochs.
  auto source = Counting(kTokens);
  auto reference = MakeSampler(source.get(), Options(12));
  std::vector<at::Tensor> expected;
  for (int step = 0; step < 7; ++step) expected.push_back(Next(*reference));
  for (int world_size = 1; world_size <= 4; ++world_size) {
    std::vector<std::unique_ptr<DistributedSampler>> ranks;
    for (int r = 0; r < world_size; ++r) {
      ranks.push_back(MakeSampler(source.get(), Options(12)));
    }
    for (int step = 0; step < 7; ++step) {
      std::vector<at::Tensor> parts;
      for (int r = 0; r < world_size; ++r) {
        parts.push_back(Next(*ranks[r], r, world_size));
        ASSERT_EQ(parts.back().size(0), 12 / world_size);
      }
      EXPECT_TRUE(at::equal(at::cat(parts, 0), expected[step]))
          << "world size " << world_size << " step " << step;
    }
  }
}

TEST(DistributedSamplerTest, StateNamesEveryField) {
  auto source = Counting(kTokens);
  auto sampler = MakeSampler(source.get(), Options(6, true, 7));
  Next(*sampler);
  Next(*sampler);
  EXPECT_EQ(sampler->State(), (std::vector<std::pair<std::string, int64_t>>{
                                  {"position", 12},
                                  {"seed", 7},
                                  {"seq_len", kSeqLen},
                                  {"global_batch_size", 6},
                                  {"shuffle", 1},
                                  {"num_tokens", kTokens}}));
}

TEST(DistributedSamplerTest, ResumedSamplerContinuesIdentically) {
  auto source = Counting(kTokens);
  auto original = MakeSampler(source.get(), Options(4));
  for (int step = 0; step < 3; ++step) Next(*original);
  auto resumed = MakeSampler(source.get(), Options(4));
  ASSERT_THAT(resumed->LoadState(original->State()), IsOk());
  EXPECT_EQ(resumed->position(), 12);
  for (int step = 0; step < 6; ++step) {
    EXPECT_TRUE(at::equal(Next(*resumed), Next(*original))) << "step " << step;
  }
}

TEST(DistributedSamplerTest, ResumesAtAnotherWorldSize) {
  // Three steps at world size 2, then resume at world size 3: the ranks'
  // parts concatenate to what an uninterrupted world-size-1 run reads next.
  auto source = Counting(kTokens);
  std::vector<std::unique_ptr<DistributedSampler>> before;
  for (int r = 0; r < 2; ++r) {
    before.push_back(MakeSampler(source.get(), Options(6)));
    for (int step = 0; step < 3; ++step) Next(*before[r], r, 2);
  }
  auto uninterrupted = MakeSampler(source.get(), Options(6));
  for (int step = 0; step < 3; ++step) Next(*uninterrupted);

  std::vector<std::unique_ptr<DistributedSampler>> after;
  for (int r = 0; r < 3; ++r) {
    after.push_back(MakeSampler(source.get(), Options(6)));
    ASSERT_THAT(after[r]->LoadState(before[r % 2]->State()), IsOk());
  }
  for (int step = 0; step < 4; ++step) {
    std::vector<at::Tensor> parts;
    for (int r = 0; r < 3; ++r) parts.push_back(Next(*after[r], r, 3));
    EXPECT_TRUE(at::equal(at::cat(parts, 0), Next(*uninterrupted)))
        << "step " << step;
  }
}

TEST(DistributedSamplerTest, SourceShorterThanOneWindowIsRejected) {
  auto source = Counting(4);
  auto sampler = DistributedSampler::Create(source.get(), Options(1));
  ASSERT_FALSE(sampler.ok());
  EXPECT_EQ(ErrorOf(sampler.status()),
            "token source memory(counting, 4 tokens) has 4 tokens, expected at "
            "least seq_len + 1 = 5 for one training window");
}

TEST(DistributedSamplerTest, SeqLenBelowOneIsRejected) {
  auto source = Counting(kTokens);
  SamplerOptions options = Options(1);
  options.seq_len = 0;
  auto sampler = DistributedSampler::Create(source.get(), options);
  ASSERT_FALSE(sampler.ok());
  EXPECT_EQ(ErrorOf(sampler.status()),
            "SamplerOptions.seq_len is 0, expected at least 1");
}

TEST(DistributedSamplerTest, GlobalBatchBelowOneIsRejected) {
  auto source = Counting(kTokens);
  auto sampler = DistributedSampler::Create(source.get(), Options(0));
  ASSERT_FALSE(sampler.ok());
  EXPECT_EQ(ErrorOf(sampler.status()),
            "SamplerOptions.global_batch_size is 0, expected at least 1");
}

TEST(DistributedSamplerTest, IndivisibleGlobalBatchIsRejectedWithoutAdvancing) {
  auto source = Counting(kTokens);
  auto sampler = MakeSampler(source.get(), Options(6));
  EXPECT_THAT(
      ErrorOf(sampler->NextBatch(0, 4).status()),
      HasSubstr("global_batch_size 6 is not divisible by world_size 4"));
  EXPECT_EQ(sampler->position(), 0);
}

TEST(DistributedSamplerTest, RankOutOfRangeIsRejected) {
  auto source = Counting(kTokens);
  auto sampler = MakeSampler(source.get(), Options(6));
  EXPECT_THAT(ErrorOf(sampler->NextBatch(2, 2).status()),
              HasSubstr("rank is 2, expected a rank in [0, world_size = 2)"));
  EXPECT_THAT(ErrorOf(sampler->NextBatch(-1, 2).status()),
              HasSubstr("rank is -1"));
}

TEST(DistributedSamplerTest, WorldSizeBelowOneIsRejected) {
  auto source = Counting(kTokens);
  auto sampler = MakeSampler(source.get(), Options(6));
  EXPECT_THAT(ErrorOf(sampler->NextBatch(0, 0).status()),
              HasSubstr("world_size is 0, expected at least 1"));
}

// State of a sampler over Counting(kTokens) with Options(6) at position 12,
// with `key` set to `value`.
std::vector<std::pair<std::string, int64_t>> StateWith(const std::string& key,
                                                       int64_t value) {
  std::vector<std::pair<std::string, int64_t>> state = {
      {"position", 12},         {"seed", 1},    {"seq_len", kSeqLen},
      {"global_batch_size", 6}, {"shuffle", 1}, {"num_tokens", kTokens}};
  for (auto& [k, v] : state) {
    if (k == key) v = value;
  }
  return state;
}

TEST(DistributedSamplerTest, LoadStateRejectsEachMismatchNamingBothValues) {
  auto source = Counting(kTokens);
  auto sampler = MakeSampler(source.get(), Options(6));
  EXPECT_THAT(ErrorOf(sampler->LoadState(StateWith("seq_len", 8))),
              HasSubstr("sampler state has seq_len = 8, but this sampler has "
                        "seq_len = 4"));
  EXPECT_THAT(ErrorOf(sampler->LoadState(StateWith("global_batch_size", 12))),
              HasSubstr("global_batch_size = 12, but this sampler has "
                        "global_batch_size = 6"));
  EXPECT_THAT(ErrorOf(sampler->LoadState(StateWith("seed", 2))),
              HasSubstr("seed = 2, but this sampler has seed = 1"));
  EXPECT_THAT(ErrorOf(sampler->LoadState(StateWith("num_tokens", 100))),
              HasSubstr("num_tokens = 100, but this sampler has num_tokens = "
                        "42 (over memory(counting, 42 tokens))"));
  EXPECT_THAT(ErrorOf(sampler->LoadState(StateWith("shuffle", 0))),
              HasSubstr("shuffle = 0, but this sampler has shuffle = 1"));
  EXPECT_EQ(sampler->position(), 0);
}

TEST(DistributedSamplerTest, LoadStateAcceptsAMatchingState) {
  auto source = Counting(kTokens);
  auto sampler = MakeSampler(source.get(), Options(6));
  ASSERT_THAT(sampler->LoadState(StateWith("position", 18)), IsOk());
  EXPECT_EQ(sampler->position(), 18);
}

TEST(DistributedSamplerTest, LoadStateRejectsNegativePosition) {
  auto source = Counting(kTokens);
  auto sampler = MakeSampler(source.get(), Options(6));
  EXPECT_THAT(ErrorOf(sampler->LoadState(StateWith("position", -6))),
              HasSubstr("position = -6, expected at least 0"));
}

TEST(DistributedSamplerTest, LoadStateRejectsMissingKey) {
  auto source = Counting(kTokens);
  auto sampler = MakeSampler(source.get(), Options(6));
  auto state = StateWith("position", 0);
  state.erase(state.begin() + 2);  // seq_len
  EXPECT_EQ(ErrorOf(sampler->LoadState(state)),
            "sampler state is missing key 'seq_len'");
}

TEST(DistributedSamplerTest, LoadStateRejectsUnknownKey) {
  auto source = Counting(kTokens);
  auto sampler = MakeSampler(source.get(), Options(6));
  auto unknown = StateWith("position", 0);
  unknown.push_back({"epoch", 3});
  EXPECT_THAT(ErrorOf(sampler->LoadState(unknown)),
              HasSubstr("sampler state has unexpected key 'epoch'"));
}

TEST(DistributedSamplerTest, LoadStateRejectsRepeatedKey) {
  auto source = Counting(kTokens);
  auto sampler = MakeSampler(source.get(), Options(6));
  auto repeated = StateWith("position", 0);
  repeated.push_back({"position", 6});
  EXPECT_EQ(ErrorOf(sampler->LoadState(repeated)),
            "sampler state has key 'position' twice");
}

}  // namespace
}  // namespace strata::data
