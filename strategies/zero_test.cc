#include "strategies/zero.h"

#include <ATen/ATen.h>
#include <glog/logging.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "base/testing/status_matchers.h"
#include "comm/testing/multi_rank.h"
#include "data/markov_corpus.h"
#include "data/sampler.h"
#include "models/config.h"
#include "models/factory.h"
#include "strategies/factory.h"
#include "strategies/strategy.h"
#include "strategies/testing/parity.h"

namespace strata::strategies {
namespace {

using ::strata::testing::IsOk;

using comm::Group;
using comm::testing::RunOnRanks;
using testing::Build;
using testing::Config;
using testing::ExpectEqual;
using testing::ExpectMatchesSingle;
using testing::Kind;
using testing::kSteps;
using testing::Optimizer;
using testing::Params;
using testing::Schedule;
using testing::Snapshot;
using testing::Train;

int64_t NumParameterElements(const std::string& model_name) {
  int64_t n = 0;
  for (const auto& p : Build(Config(model_name), 7)->parameters()) {
    n += p.numel();
  }
  return n;
}

class ZeroParityTest
    : public ::testing::TestWithParam<std::tuple<std::string, std::string>> {};

TEST_P(ZeroParityTest, MatchesSingleOnTheFullBatch) {
  const auto& [model_name, kind] = GetParam();
  ExpectMatchesSingle(model_name, Kind(kind), kind,
                      /*what_prefix=*/absl::StrCat(kind, " "));
}

INSTANTIATE_TEST_SUITE_P(
    Models, ZeroParityTest,
    ::testing::Combine(::testing::Values("gpt-tiny", "llama-tiny"),
                       ::testing::Values("zero1", "zero2")));

// Adam and SGD (AdamW is the default above), each bucket's optimizer over its
// shard, at 1..4 ranks to each one's derived tolerance (parity.h,
// ExpectClose).
class ZeroOptimizerParityTest
    : public ::testing::TestWithParam<
          std::tuple<std::string, testing::ParityOptimizer>> {};

TEST_P(ZeroOptimizerParityTest, MatchesSingleWithTheSameOptimizer) {
  const auto& [kind, optimizer] = GetParam();
  ExpectMatchesSingle("gpt-tiny", Kind(kind), kind,
                      /*what_prefix=*/absl::StrCat(kind, " "),
                      /*dropout=*/0.0, optimizer);
}

INSTANTIATE_TEST_SUITE_P(
    KindsAndOptimizers, ZeroOptimizerParityTest,
    ::testing::Combine(::testing::Values("zero1", "zero2"),
                       ::testing::Values(testing::ParityAdam(),
                                         testing::ParitySgd(),
                                         testing::ParityAdamWInfNorm())),
    [](const ::testing::TestParamInfo<
        std::tuple<std::string, testing::ParityOptimizer>>& info) {
      return absl::StrCat(std::get<0>(info.param), "_",
                          std::get<1>(info.param).name);
    });

class ZeroDropoutParityTest : public ::testing::TestWithParam<std::string> {};

// Dropout masks follow the global sample, so ZeRO at 1..4 ranks with dropout
// matches single-process training with the same dropout to the tolerance
// without it (ddp_test checks that this dropout changes the gradients).
TEST_P(ZeroDropoutParityTest, MatchesSingleWithDropout) {
  ExpectMatchesSingle("gpt-tiny", Kind(GetParam()), GetParam(),
                      /*what_prefix=*/absl::StrCat(GetParam(), " dropout "),
                      testing::kParityDropout);
}

INSTANTIATE_TEST_SUITE_P(Kinds, ZeroDropoutParityTest,
                         ::testing::Values("zero1", "zero2"));

// Runs `options` at world 2 with `micro_batches`, and expects parameters
// bitwise equal to options[0]'s (DDP) on both ranks, every bucket reduced
// from the backward hooks.
void ExpectBitwiseEqualToDdp(const std::vector<StrategyOptions>& options,
                             int micro_batches) {
  std::vector<std::vector<Params>> results(options.size(),
                                           std::vector<Params>(2));
  std::vector<std::vector<double>> norms(options.size());
  for (size_t k = 0; k < options.size(); ++k) {
    ASSERT_TRUE(
        RunOnRanks(2, [&](Group& group) {
          auto created =
              CreateStrategy(options[k], Build(Config("gpt-tiny"), 7), &group,
                             Optimizer(/*grad_clip=*/0), Schedule());
          ASSERT_THAT(created, IsOk());
          if (k > 0) {
            auto* zero = dynamic_cast<ZeroStrategy*>(created->get());
            ASSERT_NE(zero, nullptr);
            EXPECT_GT(zero->buckets().size(), 10u);
          }
          std::vector<double> local_norms;
          absl::Status status =
              Train(**created, group.rank(), 2, micro_batches, &local_norms);
          ASSERT_THAT(status, IsOk());
          if (k > 0) {
            // Every bucket is reduced from the backward hooks, none left to
            // Step(): zero1 once per step, zero2 once per micro-batch.
            auto* zero = dynamic_cast<ZeroStrategy*>(created->get());
            const int64_t reductions =
                options[k].kind == StrategyKind::kZero2 ? micro_batches : 1;
            EXPECT_EQ(zero->buckets_launched_in_backward(),
                      reductions * kSteps *
                          static_cast<int64_t>(zero->buckets().size()));
            EXPECT_EQ(zero->buckets_launched_at_step(), 0);
          }
          results[k][group.rank()] = Snapshot(**created);
          if (group.rank() == 0) norms[k] = local_norms;
        }).ok());
  }
  for (size_t k = 1; k < options.size(); ++k) {
    for (int rank = 0; rank < 2; ++rank) {
      ExpectEqual(
          results[k][rank], results[0][0],
          absl::StrCat(StrategyKindName(options[k].kind), " rank ", rank,
                       " vs ddp, ", micro_batches, " micro-batches"));
    }
    ASSERT_EQ(norms[k].size(), norms[0].size());
    for (size_t s = 0; s < norms[0].size(); ++s) {
      EXPECT_NEAR(norms[k][s], norms[0][s], 1e-6 * norms[0][s])
          << StrategyKindName(options[k].kind) << " step " << s;
    }
  }
}

TEST(ZeroTest, BitwiseEqualToDdpAtWorldTwoWithoutClipping) {
  // Small ZeRO buckets: many buckets, parameters straddling bucket and shard
  // boundaries. With two ranks and one micro-batch every gradient element is
  // the same float sum (a + b) / 2 and AdamW is element-wise, so the results
  // must be bitwise equal to DDP's.
  ExpectBitwiseEqualToDdp(
      {Kind("ddp"), Kind("zero1", /*bucket_bytes=*/1000, 600),
       Kind("zero2", /*bucket_bytes=*/1000, 600)},
      1);
}

TEST(ZeroTest, ZeroOneBitwiseEqualToDdpWithAccumulation) {
  // zero1, as DDP, adds the micro-batches locally and all-reduces once:
  // ((a1 + a2) + (b1 + b2)) / 2. zero2 reduce-scatters each micro-batch,
  // (a1 + b1) / 2 + (a2 + b2) / 2, a different float sum: its agreement with
  // accumulation is ZeroParityTest's (1 and 2 micro-batches, derived
  // tolerance).
  ExpectBitwiseEqualToDdp(
      {Kind("ddp"), Kind("zero1", /*bucket_bytes=*/1000, 600)}, 2);
}

TEST(ZeroTest, MemoryMatchesTheZeroFormulas) {
  const int64_t psi = NumParameterElements("gpt-tiny");
  for (const std::string kind : {"zero1", "zero2"}) {
    for (int world : {2, 4}) {
      const std::string what = absl::StrCat(kind, " world ", world);
      ASSERT_TRUE(
          RunOnRanks(
              world,
              [&](Group& group) {
                auto created =
                    CreateStrategy(Kind(kind), Build(Config("gpt-tiny"), 7),
                                   &group, Optimizer(), Schedule());
                ASSERT_THAT(created, IsOk());
                // After a step: ZeRO-2's full-size gradients are released
                // again.
                ASSERT_THAT(Train(**created, group.rank(), world, 1, nullptr,
                                  /*steps=*/1),
                            IsOk());
                const MemoryReport m = (*created)->Memory();
                const double n = world;
                // 8 bytes of AdamW state per owned element.
                EXPECT_NEAR(m.optimizer_bytes, 8 * psi / n, 0.05 * 8 * psi / n)
                    << what;
                const int64_t padded = m.parameter_bytes / 4;
                EXPECT_GE(padded, psi);
                EXPECT_LT(padded, psi + world);
                EXPECT_EQ(m.communication_bytes, 4 * padded / world) << what;
                const double total =
                    m.parameter_bytes + m.gradient_bytes + m.optimizer_bytes;
                if (kind == "zero1") {
                  EXPECT_EQ(m.gradient_bytes, 4 * padded) << what;
                  EXPECT_EQ(m.transient_gradient_bytes, 0) << what;
                  EXPECT_NEAR(total, 8 * psi + 8 * psi / n,
                              0.05 * (8 * psi + 8 * psi / n))
                      << what;
                } else {
                  // Only the fp32 gradient shard is held between steps; the
                  // full-size buffer exists during a step's backward.
                  EXPECT_EQ(m.gradient_bytes, 4 * padded / world) << what;
                  EXPECT_EQ(m.transient_gradient_bytes, 4 * padded) << what;
                  EXPECT_NEAR(total, 4 * psi + 12 * psi / n,
                              0.05 * (4 * psi + 12 * psi / n))
                      << what;
                }
              })
              .ok())
          << what;
    }
  }
}

// One step of `micro_batches` micro-batches of 2 rows each, fixed tokens;
// returns Memory() after each ForwardBackward, then after Step().
std::vector<MemoryReport> StepRecordingMemory(Strategy& strategy, int rank,
                                              int micro_batches, int step) {
  std::vector<MemoryReport> reports;
  strategy.ZeroGrad();
  at::Tensor tokens =
      (at::arange(2 * micro_batches * (testing::kSeqLen + 1), at::kLong) * 7 +
       rank) %
      256;
  tokens = tokens.view({2 * micro_batches, testing::kSeqLen + 1});
  for (int m = 0; m < micro_batches; ++m) {
    at::Tensor rows = tokens.narrow(0, 2 * m, 2);
    auto loss = strategy.ForwardBackward(
        rows.narrow(1, 0, testing::kSeqLen).contiguous(),
        rows.narrow(1, 1, testing::kSeqLen).contiguous(), 1.0 / micro_batches,
        m + 1 == micro_batches);
    EXPECT_THAT(loss, IsOk());
    reports.push_back(strategy.Memory());
  }
  EXPECT_THAT(strategy.Step(step), IsOk());
  reports.push_back(strategy.Memory());
  return reports;
}

TEST(ZeroTest, ZeroTwoReduceScattersEveryMicroBatch) {
  ASSERT_TRUE(RunOnRanks(2, [&](Group& group) {
                auto created =
                    CreateStrategy(Kind("zero2", /*bucket_bytes=*/20000, 6000),
                                   Build(Config("gpt-tiny"), 7), &group,
                                   Optimizer(), Schedule());
                ASSERT_THAT(created, IsOk());
                auto* zero = dynamic_cast<ZeroStrategy*>(created->get());
                ASSERT_NE(zero, nullptr);
                const auto& buckets = zero->buckets();
                ASSERT_GT(buckets.size(), 10u);
                const int64_t padded = zero->Memory().parameter_bytes / 4;
                const int64_t shard_bytes = 4 * padded / 2;
                EXPECT_EQ(zero->Memory().gradient_bytes, shard_bytes);
                EXPECT_EQ(zero->Memory().transient_gradient_bytes, 0);
                // Two micro-batches: the first is reduce-scattered before
                // ForwardBackward returns, and every bucket released ...
                std::vector<MemoryReport> m =
                    StepRecordingMemory(*zero, group.rank(), 2, 0);
                EXPECT_EQ(m[0].gradient_bytes, shard_bytes);
                // ... the last backward finishes all but the last
                // kBucketsInFlight = 2 (with their accumulation outputs,
                // 1/N of each, communication buffers) ...
                const int64_t last_two =
                    4 * (buckets[buckets.size() - 1].numel +
                         buckets[buckets.size() - 2].numel);
                EXPECT_EQ(m[1].gradient_bytes, shard_bytes + last_two);
                EXPECT_EQ(m[1].communication_bytes,
                          m[0].communication_bytes + last_two / 2);
                // ... and Step() releases the rest. At no time was more than
                // a few buckets held: far less than the full gradient.
                EXPECT_EQ(m[2].gradient_bytes, shard_bytes);
                EXPECT_EQ(m[2].communication_bytes, m[0].communication_bytes);
                EXPECT_GT(m[2].transient_gradient_bytes, 0);
                EXPECT_LT(m[2].transient_gradient_bytes, 4 * padded / 2);
                // Every bucket once per micro-batch.
                EXPECT_EQ(zero->buckets_launched_in_backward() +
                              zero->buckets_launched_at_step(),
                          2 * static_cast<int64_t>(buckets.size()));
              }).ok());
}

TEST(ZeroTest, ZeroTwoWithoutAccumulationHoldsAFewBucketsAtOnce) {
  ASSERT_TRUE(RunOnRanks(2, [&](Group& group) {
                auto created =
                    CreateStrategy(Kind("zero2", /*bucket_bytes=*/20000, 6000),
                                   Build(Config("gpt-tiny"), 7), &group,
                                   Optimizer(), Schedule());
                ASSERT_THAT(created, IsOk());
                const int64_t padded = (*created)->Memory().parameter_bytes / 4;
                std::vector<MemoryReport> m =
                    StepRecordingMemory(**created, group.rank(), 1, 0);
                EXPECT_EQ(m.back().gradient_bytes, 4 * padded / 2);
                // Buckets are allocated as their first gradient arrives and
                // released two launches later: far less than the full gradient
                // at any time.
                EXPECT_GT(m.back().transient_gradient_bytes, 0);
                EXPECT_LT(m.back().transient_gradient_bytes, 4 * padded / 2);
                LOG(INFO) << "zero2 peak bucket storage "
                          << m.back().transient_gradient_bytes << " of "
                          << 4 * padded;
              }).ok());
}

TEST(ZeroTest, ZeroTwoReallocatesGradientsWithoutZeroGrad) {
  // A step started without ZeroGrad still accumulates into zeroed memory:
  // the same result as with it.
  std::vector<Params> results(2);
  for (int with_zero_grad = 0; with_zero_grad < 2; ++with_zero_grad) {
    ASSERT_TRUE(
        RunOnRanks(2, [&](Group& group) {
          auto created =
              CreateStrategy(Kind("zero2"), Build(Config("gpt-tiny"), 7),
                             &group, Optimizer(), Schedule());
          ASSERT_THAT(created, IsOk());
          at::Tensor tokens =
              (at::arange(2 * (testing::kSeqLen + 1), at::kLong) * 7 +
               group.rank()) %
              256;
          tokens = tokens.view({2, testing::kSeqLen + 1});
          for (int step = 0; step < 2; ++step) {
            if (with_zero_grad) (*created)->ZeroGrad();
            ASSERT_TRUE(
                (*created)
                    ->ForwardBackward(
                        tokens.narrow(1, 0, testing::kSeqLen).contiguous(),
                        tokens.narrow(1, 1, testing::kSeqLen).contiguous(), 1.0,
                        true)
                    .ok());
            ASSERT_THAT((*created)->Step(step), IsOk());
          }
          if (group.rank() == 0) {
            results[with_zero_grad] = Snapshot(**created);
          }
        }).ok());
  }
  ExpectEqual(results[0], results[1], "zero2 without vs with ZeroGrad");
}

class ZeroMixedPrecisionTest
    : public ::testing::TestWithParam<std::tuple<std::string, at::ScalarType>> {
};

TEST_P(ZeroMixedPrecisionTest, MatchesBf16Single) {
  const auto& [kind, reduce_dtype] = GetParam();
  // Small buckets: parameters straddle bucket and shard boundaries, so the
  // master shards are many runs.
  testing::ExpectMixedMatchesSingle(
      "gpt-tiny",
      testing::MixedKind(kind, reduce_dtype, /*bucket_bytes=*/20000, 6000),
      kind, {2, 3, 4});
}

INSTANTIATE_TEST_SUITE_P(KindsAndReduceDtypes, ZeroMixedPrecisionTest,
                         ::testing::Combine(::testing::Values("zero1", "zero2"),
                                            ::testing::Values(at::kFloat,
                                                              at::kBFloat16)));

TEST(ZeroTest, FrozenParametersStayUnchanged) {
  for (const std::string kind : {"zero1", "zero2"}) {
    testing::ExpectFrozenParametersUnchanged(Kind(kind));
    testing::ExpectFrozenParametersUnchanged(
        testing::MixedKind(kind, at::kBFloat16));
  }
}

TEST(ZeroTest, MixedPrecisionMemoryMatchesTheFormulas) {
  const int64_t psi = NumParameterElements("gpt-tiny");
  for (const std::string kind : {"zero1", "zero2"}) {
    for (int world : {2, 4}) {
      const std::string what = absl::StrCat(kind, " bf16 world ", world);
      ASSERT_TRUE(
          RunOnRanks(
              world,
              [&](Group& group) {
                auto created =
                    CreateStrategy(testing::MixedKind(kind, at::kBFloat16),
                                   Build(Config("gpt-tiny"), 7), &group,
                                   Optimizer(), Schedule());
                ASSERT_THAT(created, IsOk());
                ASSERT_THAT(Train(**created, group.rank(), world, 1, nullptr,
                                  /*steps=*/1),
                            IsOk());
                const MemoryReport m = (*created)->Memory();
                const int64_t padded = (psi + world - 1) / world * world;
                const int64_t shard = padded / world;
                // bf16 parameters (replicated) + the fp32 master shard.
                EXPECT_EQ(m.parameter_bytes, 2 * padded + 4 * shard) << what;
                // exp_avg and exp_avg_sq of the shard, plus one int64 step
                // per bucket optimizer.
                EXPECT_NEAR(m.optimizer_bytes, 8 * shard, 0.01 * 8 * shard)
                    << what;
                // bf16 staging and, for zero2, the bf16 reduced shard.
                EXPECT_EQ(m.communication_bytes,
                          kind == "zero1" ? 2 * shard : 4 * shard)
                    << what;
                if (kind == "zero1") {
                  // bf16 gradients + fp32 accumulation, full size.
                  EXPECT_EQ(m.gradient_bytes, 6 * padded) << what;
                  EXPECT_EQ(m.transient_gradient_bytes, 0) << what;
                } else {
                  EXPECT_EQ(m.gradient_bytes, 4 * shard) << what;
                  EXPECT_EQ(m.transient_gradient_bytes, 6 * padded) << what;
                }
              })
              .ok())
          << what;
    }
  }
}

TEST(ZeroTest, MixedPrecisionReloadRegathersTheBf16Parameters) {
  // Overwriting the fp32 master shards (a checkpoint load) and calling
  // AfterStateLoaded gives every rank bf16 parameters equal to the new
  // masters cast.
  ASSERT_TRUE(
      RunOnRanks(3, [&](Group& group) {
        auto created = CreateStrategy(
            testing::MixedKind("zero2", at::kBFloat16, 20000, 6000),
            Build(Config("gpt-tiny"), 7), &group, Optimizer(), Schedule());
        ASSERT_THAT(created, IsOk());
        for (const ShardedTensor& t : (*created)->ModelState()) {
          at::Tensor local = t.local;
          // A value that depends only on the global element index.
          local.copy_(at::arange(t.offset, t.offset + local.numel(), at::kFloat)
                          .view(local.sizes()) *
                      1e-3);
        }
        ASSERT_THAT((*created)->AfterStateLoaded(), IsOk());
        for (const auto& item : (*created)->model().named_parameters()) {
          const at::Tensor& p = item.value();
          const at::Tensor want =
              (at::arange(p.numel(), at::kFloat) * 1e-3).to(at::kBFloat16);
          EXPECT_TRUE(at::equal(p.reshape({-1}), want)) << item.key();
        }
      }).ok());
}

TEST(ZeroTest, MixedPrecisionFullModelStateGathersTheMasters) {
  std::mutex mu;
  std::vector<ShardedTensor> runs;
  std::vector<std::vector<std::pair<std::string, at::Tensor>>> full(3);
  ASSERT_TRUE(RunOnRanks(3, [&](Group& group) {
                auto created = CreateStrategy(
                    testing::MixedKind("zero2", at::kBFloat16, 20000, 6000),
                    Build(Config("gpt-tiny"), 7), &group, Optimizer(),
                    Schedule());
                ASSERT_THAT(created, IsOk());
                ASSERT_THAT(Train(**created, group.rank(), 3, 1, nullptr,
                                  /*steps=*/2),
                            IsOk());
                auto gathered = (*created)->FullModelState();
                ASSERT_THAT(gathered, IsOk());
                std::lock_guard<std::mutex> lock(mu);
                full[group.rank()] = *gathered;
                for (const ShardedTensor& t : (*created)->ModelState()) {
                  runs.push_back({t.name, t.global_shape, t.offset,
                                  t.local.detach().clone()});
                }
              }).ok());
  const Params masters = testing::Assemble(runs);
  const Params initial = testing::ParametersOf(*Build(Config("gpt-tiny"), 7));
  for (int rank = 0; rank < 3; ++rank) {
    ASSERT_EQ(full[rank].size(), masters.size()) << rank;
    for (const auto& [name, value] : full[rank]) {
      EXPECT_EQ(value.scalar_type(), at::kFloat) << name;
      EXPECT_TRUE(at::equal(value, masters.at(name))) << rank << " " << name;
      // Trained: not the initial value.
      EXPECT_FALSE(at::equal(value, initial.at(name))) << name;
    }
  }
}

TEST(ZeroTest, OptimizerStateShardsCoverEveryElementOnce) {
  // Three ranks and small buckets: padding, and parameters straddling shard
  // and bucket boundaries.
  for (const std::string kind : {"zero1", "zero2"}) {
    std::mutex mu;
    std::vector<ShardedTensor> all;
    std::map<std::string, std::vector<int64_t>> shapes;
    ASSERT_TRUE(RunOnRanks(3, [&](Group& group) {
                  auto created =
                      CreateStrategy(Kind(kind, /*bucket_bytes=*/1000, 600),
                                     Build(Config("gpt-tiny"), 7), &group,
                                     Optimizer(), Schedule());
                  ASSERT_THAT(created, IsOk());
                  ASSERT_THAT(Train(**created, group.rank(), 3, 1, nullptr,
                                    /*steps=*/1),
                              IsOk());
                  std::vector<ShardedTensor> state =
                      (*created)->OptimizerState();
                  std::lock_guard<std::mutex> lock(mu);
                  for (ShardedTensor& t : state) {
                    t.local = t.local.clone();
                    all.push_back(std::move(t));
                  }
                  if (group.rank() == 0) {
                    for (const ShardedTensor& t : (*created)->ModelState()) {
                      shapes[t.name] = t.global_shape;
                    }
                  }
                }).ok());
    std::map<std::string, at::Tensor> counts;
    for (const auto& [name, shape] : shapes) {
      for (const char* key : {"exp_avg", "exp_avg_sq"}) {
        int64_t numel = 1;
        for (int64_t d : shape) numel *= d;
        counts[absl::StrCat(name, ".", key)] = at::zeros({numel}, at::kInt);
      }
    }
    int steps = 0;
    for (const ShardedTensor& t : all) {
      if (t.name == "step") {
        EXPECT_EQ(t.local.item<int64_t>(), 1) << kind;
        ++steps;
        continue;
      }
      auto it = counts.find(t.name);
      ASSERT_NE(it, counts.end()) << kind << ": " << t.name;
      const std::string param = t.name.substr(0, t.name.rfind('.'));
      EXPECT_EQ(t.global_shape, shapes[param]) << kind << ": " << t.name;
      ASSERT_GE(t.offset, 0);
      ASSERT_LE(t.offset + t.local.numel(), it->second.numel()) << t.name;
      it->second.narrow(0, t.offset, t.local.numel()).add_(1);
    }
    EXPECT_EQ(steps, 3) << kind;
    for (const auto& [name, count] : counts) {
      EXPECT_TRUE(at::equal(count, at::ones_like(count)))
          << kind << ": " << name << " covered " << count.min().item<int>()
          << " to " << count.max().item<int>() << " times";
    }
  }
}

TEST(ZeroTest, CreateNeedsAGroup) {
  auto created = CreateStrategy(Kind("zero2"), Build(Config("gpt-tiny"), 7),
                                nullptr, Optimizer(), Schedule());
  ASSERT_FALSE(created.ok());
  EXPECT_EQ(created.status().message(),
            "--strategy zero2 needs a process group, got none");
}

}  // namespace
}  // namespace strata::strategies
