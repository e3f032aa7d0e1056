#include "strategies/fsdp.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "base/testing/status_matchers.h"
#include "comm/group.h"
#include "comm/testing/multi_rank.h"
#include "models/config.h"
#include "models/factory.h"
#include "models/init.h"
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
using testing::ExpectClose;
using testing::ExpectEqual;
using testing::kSteps;
using testing::Optimizer;
using testing::Params;
using testing::RunResult;
using testing::Schedule;
using testing::Train;

std::string BlockType(const std::string& model_name) {
  return model_name.rfind("llama", 0) == 0 ? "LlamaBlock" : "GPTBlock";
}

StrategyOptions Fsdp(ShardingStrategy sharding,
                     std::vector<std::string> unit_types = {"GPTBlock"},
                     int hybrid_group = 0) {
  StrategyOptions options;
  options.kind = StrategyKind::kFsdp;
  options.fsdp.sharding = sharding;
  options.fsdp.wrap_policy.unit_types = std::move(unit_types);
  options.fsdp.hybrid_shard_group_size = hybrid_group;
  return options;
}

FsdpStrategy& AsFsdp(Strategy& strategy) {
  auto* fsdp = dynamic_cast<FsdpStrategy*>(&strategy);
  CHECK(fsdp != nullptr);
  return *fsdp;
}

Params FullParams(Strategy& strategy) {
  auto full = AsFsdp(strategy).FullModelState();
  EXPECT_THAT(full, IsOk());
  Params params;
  if (!full.ok()) return params;
  for (auto& [name, tensor] : *full) params[name] = tensor;
  return params;
}

using ModelFactory = testing::MakeModel;

// Trains with `options` on `world` ranks (each rank building its model with
// `factory`) and expects every rank to end with the same full parameters.
// `optimizer` (its config clipping at `grad_clip`) trains with its
// Schedule.
RunResult TrainOnRanks(
    const StrategyOptions& options, int world, int micro_batches,
    const ModelFactory& factory, double grad_clip = 1.0,
    const std::function<void(FsdpStrategy&, int)>& check = nullptr,
    const testing::ParityOptimizer& optimizer = testing::ParityAdamW()) {
  std::vector<Params> params(world);
  std::vector<std::vector<double>> norms(world);
  OptimizerConfig config = optimizer.config;
  config.grad_clip = grad_clip;
  const absl::Status formed = RunOnRanks(world, [&](Group& group) {
    auto created = CreateStrategy(options, factory(), &group, config,
                                  Schedule(optimizer.base_lr));
    ASSERT_THAT(created, IsOk());
    EXPECT_EQ((*created)->name(), "fsdp");
    absl::Status status = Train(**created, group.rank(), world, micro_batches,
                                &norms[group.rank()]);
    ASSERT_THAT(status, IsOk());
    params[group.rank()] = FullParams(**created);
    if (check) check(AsFsdp(**created), group.rank());
  });
  EXPECT_THAT(formed, IsOk());
  for (int r = 1; r < world; ++r) {
    ExpectEqual(params[r], params[0], absl::StrCat("rank ", r, " vs rank 0"));
  }
  return {params[0], norms[0]};
}

ModelFactory Named(const std::string& model_name) {
  return [model_name] { return Build(Config(model_name), 7); };
}

// The data-parallel tolerance of testing::ExpectClose (derived in parity.h):
// FSDP computes the same gradients as DDP, reduced with a reduce-scatter
// (the same float sums, in another grouping) and averaged over ranks, so it
// differs from single-process training exactly as DDP does. The pre-clip
// gradient norms are compared too, to 1e-5 relative (their rounding is
// ~1e-7 relative; a missing or doubled average moves them by 2x).
void ExpectMatches(
    const RunResult& got, const Params& want_params,
    const std::vector<double>& want_norms, const std::string& what,
    const testing::ParityOptimizer& optimizer = testing::ParityAdamW()) {
  ExpectClose(got.params, want_params, what, optimizer);
  testing::ExpectNormsNear(got.norms, want_norms, 1e-5, what);
}

class FsdpParityTest : public ::testing::TestWithParam<
                           std::tuple<std::string, ShardingStrategy>> {};

TEST_P(FsdpParityTest, MatchesSingleOnTheFullBatch) {
  const auto& [model_name, sharding] = GetParam();
  std::vector<double> want_norms;
  const Params want = testing::TrainSingle(model_name, &want_norms);
  for (int world = 1; world <= 4; ++world) {
    for (int micro : {1, 2}) {
      const std::string what =
          absl::StrCat(ShardingStrategyName(sharding), " ", model_name,
                       " world ", world, " micro-batches ", micro);
      ExpectMatches(TrainOnRanks(Fsdp(sharding, {BlockType(model_name)}), world,
                                 micro, Named(model_name)),
                    want, want_norms, what);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Sharding, FsdpParityTest,
    ::testing::Combine(::testing::Values("gpt-tiny", "llama-tiny"),
                       ::testing::Values(ShardingStrategy::kFullShard,
                                         ShardingStrategy::kShardGradOp,
                                         ShardingStrategy::kNoShard)));

// Adam and SGD (AdamW is the default above) over the concatenated master
// shards, full shard at 1..4 ranks, to each one's derived tolerance
// (parity.h, ExpectClose).
class FsdpOptimizerParityTest
    : public ::testing::TestWithParam<testing::ParityOptimizer> {};

TEST_P(FsdpOptimizerParityTest, MatchesSingleWithTheSameOptimizer) {
  const testing::ParityOptimizer& optimizer = GetParam();
  std::vector<double> want_norms;
  const Params want =
      testing::TrainSingle("gpt-tiny", &want_norms, 0.0, optimizer);
  for (int world = 1; world <= 4; ++world) {
    for (int micro : {1, 2}) {
      const std::string what = absl::StrCat(optimizer.name, " world ", world,
                                            " micro-batches ", micro);
      ExpectMatches(
          TrainOnRanks(Fsdp(ShardingStrategy::kFullShard, {"GPTBlock"}), world,
                       micro, Named("gpt-tiny"), optimizer.config.grad_clip,
                       nullptr, optimizer),
          want, want_norms, what, optimizer);
    }
  }
}

// ParityAdamWInfNorm clips at every step (its norms all exceed its
// grad_clip), so the parity runs above compare clipped updates.
TEST(FsdpTest, InfinityNormParityOptimizerClipsEveryStep) {
  const testing::ParityOptimizer optimizer = testing::ParityAdamWInfNorm();
  std::vector<double> norms;
  testing::TrainSingle("gpt-tiny", &norms, 0.0, optimizer);
  ASSERT_FALSE(norms.empty());
  for (double norm : norms) EXPECT_GT(norm, optimizer.config.grad_clip);
}

INSTANTIATE_TEST_SUITE_P(
    Optimizers, FsdpOptimizerParityTest,
    ::testing::Values(testing::ParityAdam(), testing::ParitySgd(),
                      testing::ParityAdamWInfNorm()),
    [](const ::testing::TestParamInfo<testing::ParityOptimizer>& info) {
      return info.param.name;
    });

// Dropout masks follow the global sample, so FSDP (full shard) at 1..4 ranks
// with dropout matches single-process training with the same dropout to the
// tolerance without it (ddp_test checks that this dropout changes the
// gradients).
TEST(FsdpTest, MatchesSingleWithDropout) {
  std::vector<double> want_norms;
  const Params want =
      testing::TrainSingle("gpt-tiny", &want_norms, testing::kParityDropout);
  const ModelFactory with_dropout = [] {
    return Build(Config("gpt-tiny", testing::kParityDropout), 7);
  };
  for (int world = 1; world <= 4; ++world) {
    for (int micro : {1, 2}) {
      const std::string what =
          absl::StrCat("dropout world ", world, " micro-batches ", micro);
      ExpectMatches(TrainOnRanks(Fsdp(ShardingStrategy::kFullShard,
                                      {BlockType("gpt-tiny")}),
                                 world, micro, with_dropout),
                    want, want_norms, what);
    }
  }
}

TEST(FsdpTest, HybridShardTwoByTwoMatchesSingle) {
  std::vector<double> want_norms;
  const Params want = testing::TrainSingle("gpt-tiny", &want_norms);
  for (ShardingStrategy s :
       {ShardingStrategy::kHybridShard, ShardingStrategy::kHybridShardZero2}) {
    for (int micro : {1, 2}) {
      ExpectMatches(
          TrainOnRanks(Fsdp(s, {"GPTBlock"}, /*hybrid_group=*/2), 4, micro,
                       Named("gpt-tiny"),
                       /*grad_clip=*/1.0,
                       [](FsdpStrategy& fsdp, int) {
                         EXPECT_EQ(fsdp.shard_group_size(), 2);
                         EXPECT_EQ(fsdp.replicate_group_size(), 2);
                       }),
          want, want_norms,
          absl::StrCat(ShardingStrategyName(s), " 2x2 micro ", micro));
    }
  }
}

TEST(FsdpTest, WrappingEveryUnitPutsTheTiedEmbeddingInTheRoot) {
  std::vector<double> want_norms;
  const Params want = testing::TrainSingle("gpt-tiny", &want_norms);
  const RunResult got = TrainOnRanks(
      Fsdp(ShardingStrategy::kFullShard, /*unit_types=*/{}), 3, 2,
      Named("gpt-tiny"), 1.0, [](FsdpStrategy& fsdp, int) {
        const auto units = fsdp.flat_units();
        ASSERT_EQ(units.size(), 5u);  // root, embed, 2 blocks, head.
        EXPECT_TRUE(units[0].root);
        EXPECT_EQ(units[0].parameters,
                  (std::vector<std::string>{"wte.weight"}));
        EXPECT_EQ(units[1].name, "embed");
        EXPECT_EQ(units[1].parameters,
                  (std::vector<std::string>{"wpe.weight"}));
        // numel padded to a multiple of the shard group size.
        EXPECT_EQ(units[1].padded_numel % 3, 0);
      });
  ExpectMatches(got, want, want_norms, "every unit wrapped, tied wte");
}

TEST(FsdpTest, BitwiseEqualToZeroAtWorldTwoWithoutClipping) {
  // Two ranks: every gradient element is the same float sum (a + b) / 2 in
  // ZeRO's bucketed reductions and FSDP's per-unit ones; AdamW is
  // element-wise with the same per-element weight decay: bitwise equal. With
  // 2 micro-batches, FSDP by default (reduce_scatter_every_micro_step) and
  // ZeRO-2 (always, as DeepSpeed) reduce-scatter each micro-batch and add the
  // second's result to the shard; FSDP under no_sync and ZeRO-1 add the
  // micro-batches locally and reduce once.
  std::map<std::string, Params> zero;
  for (const std::string kind : {"zero1", "zero2"}) {
    ASSERT_TRUE(RunOnRanks(2, [&](Group& group) {
                  auto created = CreateStrategy(
                      testing::Kind(kind), Build(Config("gpt-tiny"), 7), &group,
                      Optimizer(/*grad_clip=*/0), Schedule());
                  ASSERT_THAT(created, IsOk());
                  ASSERT_THAT(Train(**created, group.rank(), 2, 2), IsOk());
                  if (group.rank() == 0)
                    zero[kind] = testing::Snapshot(**created);
                }).ok());
  }
  const RunResult fsdp = TrainOnRanks(Fsdp(ShardingStrategy::kFullShard), 2, 2,
                                      Named("gpt-tiny"), /*grad_clip=*/0);
  ExpectEqual(fsdp.params, zero["zero2"], "full_shard vs zero2");
  StrategyOptions no_sync = Fsdp(ShardingStrategy::kFullShard);
  no_sync.fsdp.reduce_scatter_every_micro_step = false;
  const RunResult fsdp_no_sync =
      TrainOnRanks(no_sync, 2, 2, Named("gpt-tiny"), /*grad_clip=*/0);
  ExpectEqual(fsdp_no_sync.params, zero["zero1"],
              "full_shard no_sync vs zero1");
}

TEST(FsdpTest, PrefetchSettingsGiveBitwiseTheSameResult) {
  const RunResult reference =
      TrainOnRanks(Fsdp(ShardingStrategy::kFullShard), 2, 1, Named("gpt-tiny"));
  struct Variant {
    bool forward_prefetch;
    BackwardPrefetch backward;
    int limit;
  };
  for (const Variant& v : {Variant{true, BackwardPrefetch::kBackwardPre, 2},
                           Variant{true, BackwardPrefetch::kBackwardPost, 1},
                           Variant{false, BackwardPrefetch::kNone, 0},
                           Variant{true, BackwardPrefetch::kBackwardPre, 0}}) {
    StrategyOptions options = Fsdp(ShardingStrategy::kFullShard);
    options.fsdp.forward_prefetch = v.forward_prefetch;
    options.fsdp.backward_prefetch = v.backward;
    options.fsdp.limit_all_gathers = v.limit;
    const std::string what =
        absl::StrCat("forward_prefetch ", v.forward_prefetch, " backward ",
                     BackwardPrefetchName(v.backward), " limit ", v.limit);
    const RunResult got = TrainOnRanks(
        options, 2, 1, Named("gpt-tiny"), 1.0, [&](FsdpStrategy& fsdp, int) {
          const auto& c = fsdp.counters();
          if (v.limit > 0) {
            EXPECT_LE(c.max_all_gathers_in_flight, v.limit) << what;
          }
          const bool any_prefetch =
              v.forward_prefetch || v.backward != BackwardPrefetch::kNone;
          if (any_prefetch && v.limit != 1) {
            EXPECT_GT(c.prefetches, 0) << what;
          }
          if (!any_prefetch) {
            EXPECT_EQ(c.prefetches, 0) << what;
          }
          // Two blocks, gathered in forward and again in backward, per step.
          EXPECT_EQ(c.all_gathers, 4 * kSteps) << what;
          EXPECT_EQ(fsdp.num_units_gathered(), 0) << what;
        });
    ExpectEqual(got.params, reference.params, what);
  }
}

TEST(FsdpTest, ReductionsInFlightDoNotChangeTheResult) {
  const RunResult reference =
      TrainOnRanks(Fsdp(ShardingStrategy::kFullShard), 2, 1, Named("gpt-tiny"));
  for (int in_flight : {0, 3}) {
    StrategyOptions options = Fsdp(ShardingStrategy::kFullShard);
    options.fsdp.reductions_in_flight = in_flight;
    ExpectEqual(TrainOnRanks(options, 2, 1, Named("gpt-tiny")).params,
                reference.params,
                absl::StrCat("reductions in flight ", in_flight));
  }
}

TEST(FsdpTest, ShardGradOpKeepsUnitsGatheredThroughForward) {
  TrainOnRanks(Fsdp(ShardingStrategy::kShardGradOp), 2, 1, Named("gpt-tiny"),
               1.0, [](FsdpStrategy& fsdp, int) {
                 // Both blocks gathered at the end of forward; one gather
                 // each per step.
                 EXPECT_EQ(fsdp.counters().max_units_gathered, 2);
                 EXPECT_EQ(fsdp.counters().all_gathers, 2 * kSteps);
                 EXPECT_EQ(fsdp.num_units_gathered(), 0);
               });
}

TEST(FsdpTest, AccumulationReduceScattersEveryMicroBatchByDefault) {
  // PyTorch FSDP's default: every micro-batch's gradients go to the shard.
  std::vector<double> want_norms;
  const Params want = testing::TrainSingle("gpt-tiny", &want_norms);
  const StrategyOptions options = Fsdp(ShardingStrategy::kFullShard);
  ASSERT_TRUE(options.fsdp.reduce_scatter_every_micro_step);
  ExpectMatches(TrainOnRanks(options, 2, 2, Named("gpt-tiny"), 1.0,
                             [](FsdpStrategy& fsdp, int) {
                               // 2 blocks + root, 2 micro-batches, 5 steps.
                               EXPECT_EQ(fsdp.counters().reductions,
                                         3 * 2 * kSteps);
                             }),
                want, want_norms, "reduce-scatter every micro-batch");
}

TEST(FsdpTest, NoShardReducesOnceAStepWhateverTheAccumulationMode) {
  // fp32 NO_SHARD's gradient shard is the full gradient: reducing each
  // micro-batch would save no memory, so it all-reduces in the last only.
  std::vector<double> want_norms;
  const Params want = testing::TrainSingle("gpt-tiny", &want_norms);
  for (const bool every : {true, false}) {
    StrategyOptions options = Fsdp(ShardingStrategy::kNoShard);
    options.fsdp.reduce_scatter_every_micro_step = every;
    const std::string what =
        absl::StrCat("no_shard, every micro-batch ", every);
    ExpectMatches(
        TrainOnRanks(options, 2, 2, Named("gpt-tiny"), 1.0,
                     [&](FsdpStrategy& fsdp, int) {
                       // 2 blocks + root, once a step, 5 steps.
                       EXPECT_EQ(fsdp.counters().reductions, 3 * kSteps)
                           << what;
                     }),
        want, want_norms, what);
  }
}

TEST(FsdpTest, NoSyncAccumulationMatchesSingle) {
  // reduce_scatter_every_micro_step off (PyTorch's no_sync()): the full
  // gradients are kept and reduced once, in the last micro-batch.
  std::vector<double> want_norms;
  const Params want = testing::TrainSingle("gpt-tiny", &want_norms);
  StrategyOptions options = Fsdp(ShardingStrategy::kFullShard);
  options.fsdp.reduce_scatter_every_micro_step = false;
  ExpectMatches(TrainOnRanks(options, 2, 2, Named("gpt-tiny"), 1.0,
                             [](FsdpStrategy& fsdp, int) {
                               // 2 blocks + root, once a step, 5 steps.
                               EXPECT_EQ(fsdp.counters().reductions,
                                         3 * kSteps);
                             }),
                want, want_norms, "no_sync accumulation");
}

std::shared_ptr<models::UnitModel> WithFrozenPositions() {
  auto model = Build(Config("gpt-tiny"), 7);
  for (auto& item : model->named_parameters()) {
    if (item.key() == "wpe.weight" ||
        item.key().rfind("blocks.0.ln_1", 0) == 0) {
      item.value().set_requires_grad(false);
    }
  }
  return model;
}

TEST(FsdpTest, FrozenParametersStayFrozenAndTheRestMatchesSingle) {
  // Single-process reference with the same parameters frozen.
  auto single_model = WithFrozenPositions();
  const Params initial = [&] {
    Params p;
    for (const auto& item : single_model->named_parameters()) {
      p[item.key()] = item.value().detach().clone();
    }
    return p;
  }();
  auto single = CreateStrategy(StrategyOptions(), single_model, nullptr,
                               Optimizer(), Schedule());
  ASSERT_THAT(single, IsOk());
  std::vector<double> want_norms;
  ASSERT_THAT(Train(**single, 0, 1, 1, &want_norms), IsOk());
  const Params want = testing::Snapshot(**single);
  EXPECT_TRUE(at::equal(want.at("wpe.weight"), initial.at("wpe.weight")));

  for (ShardingStrategy s :
       {ShardingStrategy::kFullShard, ShardingStrategy::kNoShard}) {
    // Every unit wrapped: the frozen wpe is a unit of its own ("embed"
    // without the tied wte); blocks.0 mixes frozen and trainable.
    const RunResult got = TrainOnRanks(Fsdp(s, {}), 3, 2, WithFrozenPositions);
    ExpectMatches(got, want, want_norms,
                  absl::StrCat("frozen ", ShardingStrategyName(s)));
    EXPECT_TRUE(
        at::equal(got.params.at("wpe.weight"), initial.at("wpe.weight")));
    EXPECT_TRUE(at::equal(got.params.at("blocks.0.ln_1.weight"),
                          initial.at("blocks.0.ln_1.weight")));
  }
}

TEST(FsdpTest, DeferredInitMaterialisesShardsEqualToAFullBuild) {
  auto config = models::ConfigByName("llama-tiny");
  ASSERT_THAT(config, IsOk());
  models::BuildOptions full_options;
  full_options.seed = 11;
  auto full_model = models::BuildModel(*config, full_options);
  ASSERT_THAT(full_model, IsOk());
  for (int world : {1, 3}) {
    std::vector<Params> got(world);
    ASSERT_TRUE(RunOnRanks(world, [&](Group& group) {
                  models::BuildOptions deferred;
                  deferred.seed = 11;
                  deferred.deferred = true;
                  auto model = models::BuildModel(*config, deferred);
                  ASSERT_THAT(model, IsOk());
                  StrategyOptions options =
                      Fsdp(ShardingStrategy::kFullShard, {"LlamaBlock"});
                  options.fsdp.init_seed = 11;
                  auto created = CreateStrategy(options, *model, &group,
                                                Optimizer(), Schedule());
                  ASSERT_THAT(created, IsOk());
                  got[group.rank()] = FullParams(**created);
                }).ok());
    for (const auto& item : (*full_model)->named_parameters()) {
      for (int r = 0; r < world; ++r) {
        EXPECT_TRUE(at::equal(got[r].at(item.key()), item.value()))
            << "world " << world << " rank " << r << " " << item.key();
      }
    }
  }
}

TEST(FsdpTest, ModelStateHoldsEachRanksShardOfEveryParameter) {
  // The runs of all ranks tile every parameter exactly once.
  const int world = 3;
  std::vector<std::vector<ShardedTensor>> states(world);
  std::vector<Params> full(world);
  ASSERT_TRUE(RunOnRanks(world, [&](Group& group) {
                auto created =
                    CreateStrategy(Fsdp(ShardingStrategy::kFullShard),
                                   Build(Config("gpt-tiny"), 7), &group,
                                   Optimizer(), Schedule());
                ASSERT_THAT(created, IsOk());
                std::vector<ShardedTensor> state = (*created)->ModelState();
                for (auto& t : state) t.local = t.local.clone();
                states[group.rank()] = std::move(state);
                full[group.rank()] = FullParams(**created);
              }).ok());
  std::map<std::string, at::Tensor> assembled;
  std::map<std::string, int64_t> covered;
  for (const auto& state : states) {
    for (const ShardedTensor& t : state) {
      at::Tensor& a = assembled[t.name];
      if (!a.defined()) a = at::full(t.global_shape, -1.0f);
      a.view(-1).narrow(0, t.offset, t.local.numel()).copy_(t.local);
      covered[t.name] += t.local.numel();
    }
  }
  for (const auto& [name, value] : full[0]) {
    ASSERT_EQ(assembled.count(name), 1u) << name;
    EXPECT_EQ(covered[name], value.numel()) << name;
    EXPECT_TRUE(at::equal(assembled[name], value)) << name;
  }
}

TEST(FsdpTest, MemoryFollowsTheShardingFormulas) {
  // FULL_SHARD keeps, per rank, 4 bytes of fp32 master + 4 of gradient shard
  // + 8 of AdamW state per owned element: 16 * padded / N, and nothing
  // gathered between steps, neither the wrapped units nor the root (the tied
  // embedding, wpe and ln_f; fsdp_memory_test.cc).
  for (int world : {2, 4}) {
    ASSERT_TRUE(RunOnRanks(world, [&](Group& group) {
                  auto created =
                      CreateStrategy(Fsdp(ShardingStrategy::kFullShard),
                                     Build(Config("gpt-tiny"), 7), &group,
                                     Optimizer(), Schedule());
                  ASSERT_THAT(created, IsOk());
                  ASSERT_THAT(Train(**created, group.rank(), world, 1, nullptr,
                                    /*steps=*/1),
                              IsOk());
                  FsdpStrategy& fsdp = AsFsdp(**created);
                  int64_t padded = 0;
                  for (const auto& unit : fsdp.flat_units()) {
                    padded += unit.padded_numel;
                  }
                  const MemoryReport m = fsdp.Memory();
                  EXPECT_EQ(m.parameter_bytes, 4 * padded / world);
                  EXPECT_EQ(m.gradient_bytes, 4 * padded / world);
                  EXPECT_EQ(m.optimizer_bytes, 8 * padded / world + 8);
                  EXPECT_EQ(fsdp.num_units_gathered(), 0);
                }).ok());
  }
}

TEST(FsdpTest, SummonFullParamsGathersIntoTheModelAndWritesBack) {
  ASSERT_TRUE(
      RunOnRanks(2, [&](Group& group) {
        auto model = Build(Config("gpt-tiny"), 7);
        auto created = CreateStrategy(Fsdp(ShardingStrategy::kFullShard), model,
                                      &group, Optimizer(), Schedule());
        ASSERT_THAT(created, IsOk());
        FsdpStrategy& fsdp = AsFsdp(**created);
        ASSERT_THAT(Train(fsdp, group.rank(), 2, 1, nullptr, 2), IsOk());
        const Params full = FullParams(fsdp);
        ASSERT_THAT(fsdp.SummonFullParams(), IsOk());
        EXPECT_EQ(fsdp.num_units_gathered(), 2);
        for (const auto& item : model->named_parameters()) {
          EXPECT_TRUE(at::equal(item.value(), full.at(item.key())))
              << item.key();
        }
        {
          at::NoGradGuard no_grad;
          model->named_parameters()["blocks.1.mlp.fc.bias"].fill_(0.5);
        }
        ASSERT_THAT(fsdp.ReleaseFullParams(/*writeback=*/true), IsOk());
        EXPECT_EQ(fsdp.num_units_gathered(), 0);
        const Params after = FullParams(fsdp);
        EXPECT_TRUE(
            at::equal(after.at("blocks.1.mlp.fc.bias"), at::full({256}, 0.5f)));
        EXPECT_TRUE(at::equal(after.at("blocks.0.mlp.fc.bias"),
                              full.at("blocks.0.mlp.fc.bias")));
      }).ok());
}

TEST(FsdpTest, EvaluationWithoutGradientsFreesEveryUnit) {
  ASSERT_TRUE(RunOnRanks(2, [&](Group& group) {
                auto model = Build(Config("gpt-tiny"), 7);
                auto created =
                    CreateStrategy(Fsdp(ShardingStrategy::kShardGradOp), model,
                                   &group, Optimizer(), Schedule());
                ASSERT_THAT(created, IsOk());
                at::Tensor tokens = at::randint(256, {2, 16}, at::kLong);
                at::Tensor logits;
                {
                  at::NoGradGuard no_grad;
                  logits = model->Forward(tokens);
                }
                EXPECT_EQ(logits.sizes(), (std::vector<int64_t>{2, 16, 256}));
                EXPECT_EQ(AsFsdp(**created).num_units_gathered(), 0);
              }).ok());
}

TEST(FsdpTest, ActivationCheckpointingMatchesSingle) {
  std::vector<double> want_norms;
  const Params want = testing::TrainSingle("gpt-tiny", &want_norms);
  for (ShardingStrategy s :
       {ShardingStrategy::kFullShard, ShardingStrategy::kShardGradOp}) {
    StrategyOptions options = Fsdp(s);
    options.checkpoint_units = {"GPTBlock"};
    options.fsdp.forward_prefetch = true;
    ExpectMatches(
        TrainOnRanks(options, 2, 2, Named("gpt-tiny")), want, want_norms,
        absl::StrCat("checkpointed blocks, ", ShardingStrategyName(s)));
  }
}

// bf16 parameters with fp32 master shards against bf16 single, with the
// tolerance derived in testing::ExpectWithinBf16Noise (parity.h): FSDP
// reduces bf16 (or fp32) partial gradients of each rank's rows, single one
// bf16 gradient of all rows, so elements differ by bf16 rounding; the
// gradient norms within 2^-6 relative, the fp32 masters within the bf16
// noise bound, and the model's bf16 parameters (gathered) bitwise the
// masters cast to bf16.
class FsdpMixedPrecisionTest
    : public ::testing::TestWithParam<
          std::tuple<ShardingStrategy, at::ScalarType>> {};

TEST_P(FsdpMixedPrecisionTest, MatchesBf16Single) {
  const auto& [sharding, reduce_dtype] = GetParam();
  StrategyOptions options = Fsdp(sharding);
  options.mixed_precision.param_dtype = at::kBFloat16;
  options.mixed_precision.reduce_dtype = reduce_dtype;
  testing::ExpectMixedMatchesSingle(
      "gpt-tiny", options, "fsdp", {2, 3}, [](Strategy& strategy) {
        ASSERT_THAT(AsFsdp(strategy).SummonFullParams(), IsOk());
      });
}

INSTANTIATE_TEST_SUITE_P(
    Dtypes, FsdpMixedPrecisionTest,
    ::testing::Combine(::testing::Values(ShardingStrategy::kFullShard,
                                         ShardingStrategy::kNoShard),
                       ::testing::Values(at::kFloat, at::kBFloat16)));

TEST(FsdpTest, InvalidOptionsFailBeforeTraining) {
  struct Case {
    StrategyOptions options;
    int world;
    std::string expected;
  };
  std::vector<Case> cases;
  cases.push_back({Fsdp(ShardingStrategy::kHybridShard, {"GPTBlock"}, 2), 3,
                   "--fsdp_hybrid_shard_group_size=2 does not divide the "
                   "world size 3"});
  cases.push_back({Fsdp(ShardingStrategy::kHybridShard, {"GPTBlock"}, 0), 2,
                   "--fsdp_hybrid_shard_group_size must be set"});
  cases.push_back({Fsdp(ShardingStrategy::kFullShard, {"GPTBlock"}, 2), 2,
                   "is only used with --fsdp_sharding=hybrid_shard"});
  cases.push_back({Fsdp(ShardingStrategy::kFullShard, {"Block"}), 2,
                   "--fsdp_wrap_unit_types: the model has no unit of type "
                   "'Block'"});
  StrategyOptions limit = Fsdp(ShardingStrategy::kFullShard);
  limit.fsdp.limit_all_gathers = -1;
  cases.push_back({limit, 1, "--fsdp_limit_all_gathers must be >= 0"});
  StrategyOptions reductions = Fsdp(ShardingStrategy::kFullShard);
  reductions.fsdp.reductions_in_flight = -2;
  cases.push_back({reductions, 1, "--fsdp_reductions_in_flight must be >= 0"});
  StrategyOptions dtype = Fsdp(ShardingStrategy::kFullShard);
  dtype.mixed_precision.param_dtype = at::kDouble;
  cases.push_back({dtype, 1, "--param_dtype must be fp32, bf16 or fp16"});
  for (const Case& c : cases) {
    ASSERT_TRUE(RunOnRanks(c.world, [&](Group& group) {
                  auto created =
                      CreateStrategy(c.options, Build(Config("gpt-tiny"), 7),
                                     &group, Optimizer(), Schedule());
                  ASSERT_FALSE(created.ok()) << c.expected;
                  EXPECT_NE(created.status().message().find(c.expected),
                            std::string::npos)
                      << created.status();
                }).ok());
  }
}

// A wrap policy that wraps no unit (every unit below min_num_params, as
// DeepSpeed's stage3_param_persistence_threshold on gpt-tiny): the whole
// model is the root, kept gathered on every rank (gathered once at creation
// and once after each step), its gradients reduce-scattered and its masters
// sharded; it trains as single-process training does, within the
// data-parallel tolerance of testing::ExpectClose.
TEST(FsdpTest, PolicyWrappingNothingKeepsTheModelInTheRoot) {
  std::vector<double> want_norms;
  const Params want = testing::TrainSingle("gpt-tiny", &want_norms);
  for (ShardingStrategy sharding :
       {ShardingStrategy::kFullShard, ShardingStrategy::kShardGradOp}) {
    StrategyOptions nothing = Fsdp(sharding, {});
    nothing.fsdp.wrap_policy.min_num_params = 10'000'000;
    const std::string what =
        absl::StrCat(ShardingStrategyName(sharding), " wrapping nothing");
    ExpectMatches(
        TrainOnRanks(nothing, 2, 2, Named("gpt-tiny"), 1.0,
                     [&](FsdpStrategy& fsdp, int rank) {
                       const auto units = fsdp.flat_units();
                       ASSERT_EQ(units.size(), 1u) << what;
                       EXPECT_TRUE(units[0].root) << what;
                       EXPECT_EQ(fsdp.counters().all_gathers, 0) << what;
                       EXPECT_EQ(fsdp.counters().root_all_gathers, 1 + kSteps)
                           << what;
                     }),
        want, want_norms, what);
  }
}

TEST(FsdpTest, StepAndMicroBatchOrderIsChecked) {
  auto created = CreateStrategy(Fsdp(ShardingStrategy::kFullShard),
                                Build(Config("gpt-tiny"), 7), nullptr,
                                Optimizer(), Schedule());
  ASSERT_THAT(created, IsOk());
  auto step = (*created)->Step(0);
  ASSERT_FALSE(step.ok());
  EXPECT_NE(step.status().message().find("before the step's last micro-batch"),
            std::string::npos);
  at::Tensor tokens = at::randint(256, {2, 17}, at::kLong);
  at::Tensor in = tokens.narrow(1, 0, 16), out = tokens.narrow(1, 1, 16);
  ASSERT_THAT((*created)->ForwardBackward(in, out, 1.0, true), IsOk());
  auto again = (*created)->ForwardBackward(in, out, 1.0, true);
  ASSERT_FALSE(again.ok());
  EXPECT_NE(again.status().message().find("call Step() first"),
            std::string::npos);
  EXPECT_THAT((*created)->Step(0), IsOk());
}

TEST(FsdpTest, ModelsWithDifferentShapesAcrossRanksFailCleanly) {
  ASSERT_TRUE(
      RunOnRanks(2, [&](Group& group) {
        auto config = Config("gpt-tiny");
        if (group.rank() == 1) config.dim = 32;
        auto created =
            CreateStrategy(Fsdp(ShardingStrategy::kFullShard), Build(config, 7),
                           &group, Optimizer(), Schedule());
        ASSERT_FALSE(created.ok());
        EXPECT_NE(created.status().message().find("shape"), std::string::npos)
            << created.status();
      }).ok());
}

}  // namespace
}  // namespace strata::strategies
