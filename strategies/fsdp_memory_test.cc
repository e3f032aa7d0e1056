// FSDP's memory, measured with the tracking allocator (base/
// tracking_allocator.h), and the sharded root: gathered only around the
// units that read it, so that between steps every byte of model state is
// sharded (16 bytes per owned element with AdamW, 16 Psi_padded / N).
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/testing/status_matchers.h"
#include "base/tracking_allocator.h"
#include "comm/group.h"
#include "comm/testing/multi_rank.h"
#include "models/config.h"
#include "models/factory.h"
#include "models/init.h"
#include "models/unit.h"
#include "strategies/factory.h"
#include "strategies/fsdp.h"
#include "strategies/strategy.h"
#include "strategies/testing/parity.h"

namespace strata::strategies {
namespace {

using comm::Group;
using comm::testing::RunOnRanks;
using ::strata::MemoryTagScope;
using ::strata::TrackingAllocator;
using ::strata::testing::IsOk;
using testing::Build;
using testing::Config;
using testing::Optimizer;
using testing::Schedule;
using testing::Train;

// FULL_SHARD over `unit_types` (GPT's blocks by default).
StrategyOptions FullShard(std::vector<std::string> unit_types = {"GPTBlock"}) {
  StrategyOptions options;
  options.kind = StrategyKind::kFsdp;
  options.fsdp.sharding = ShardingStrategy::kFullShard;
  options.fsdp.wrap_policy.unit_types = std::move(unit_types);
  return options;
}

FsdpStrategy& FsdpOf(Strategy& strategy) {
  auto* fsdp = dynamic_cast<FsdpStrategy*>(&strategy);
  CHECK(fsdp != nullptr);
  return *fsdp;
}

int64_t PaddedNumel(const FsdpStrategy& fsdp, bool root_only = false) {
  int64_t numel = 0;
  for (const auto& unit : fsdp.flat_units()) {
    if (unit.root || !root_only) numel += unit.padded_numel;
  }
  return numel;
}

TEST(FsdpRootTest, GatheredForEachUnitThatReadsItAndFreedBetweenSteps) {
  // GPT's blocks wrapped (the root: wte, wpe, ln_f; read by the embed and
  // head units) or every unit wrapped (the root: the tied wte, owned by the
  // embed unit and read by the head). Each micro-batch gathers the root
  // four times: the embed's and the head's forward, the head's and the
  // embed's backward (freed in between: the blocks do not read it).
  for (const std::vector<std::string>& types :
       {std::vector<std::string>{"GPTBlock"},
        std::vector<std::string>{"Embedding", "GPTBlock", "Head"}}) {
    ASSERT_TRUE(
        RunOnRanks(2, [&](Group& group) {
          auto created =
              CreateStrategy(FullShard(types), Build(Config("gpt-tiny"), 7),
                             &group, Optimizer(), Schedule());
          ASSERT_THAT(created, IsOk());
          FsdpStrategy& fsdp = FsdpOf(**created);
          EXPECT_EQ(fsdp.counters().root_all_gathers, 0);
          ASSERT_THAT(Train(fsdp, group.rank(), 2, /*micro_batches=*/2, nullptr,
                            /*steps=*/1),
                      IsOk());
          EXPECT_EQ(fsdp.counters().root_all_gathers, 2 * 4)
              << types.size() << " unit types";
          EXPECT_EQ(fsdp.Memory().parameter_bytes, 4 * PaddedNumel(fsdp) / 2);
          EXPECT_EQ(fsdp.Memory().gradient_bytes, 4 * PaddedNumel(fsdp) / 2);
        }).ok());
  }
}

TEST(FsdpRootTest, AdjacentReadersKeepItGatheredBetweenThem) {
  // Only blocks.0 wrapped: blocks.1 and the head, adjacent, both read the
  // root. Forward gathers it for the embed and once for blocks.1 and the
  // head; backward once for the head and blocks.1 (freeing it between them
  // would leave blocks.1's backward without parameters: an error) and once
  // for the embed: 4 per micro-batch.
  ASSERT_TRUE(
      RunOnRanks(2, [&](Group& group) {
        StrategyOptions options = FullShard({});
        options.fsdp.wrap_policy.predicate = [](const models::UnitInfo& unit) {
          return unit.name == "blocks.0";
        };
        auto created = CreateStrategy(options, Build(Config("gpt-tiny"), 7),
                                      &group, Optimizer(), Schedule());
        ASSERT_THAT(created, IsOk());
        FsdpStrategy& fsdp = FsdpOf(**created);
        ASSERT_THAT(Train(fsdp, group.rank(), 2, /*micro_batches=*/2, nullptr,
                          /*steps=*/1),
                    IsOk());
        EXPECT_EQ(fsdp.counters().root_all_gathers, 2 * 4);
        EXPECT_EQ(fsdp.Memory().parameter_bytes, 4 * PaddedNumel(fsdp) / 2);
      }).ok());
}

TEST(FsdpRootTest, ShardGradOpKeepsTheRootGathered) {
  // SHARD_GRAD_OP does not free parameters after forward; its root stays
  // gathered (re-gathered once after each step), its units do not.
  ASSERT_TRUE(
      RunOnRanks(2, [&](Group& group) {
        StrategyOptions options = FullShard();
        options.fsdp.sharding = ShardingStrategy::kShardGradOp;
        auto created = CreateStrategy(options, Build(Config("gpt-tiny"), 7),
                                      &group, Optimizer(), Schedule());
        ASSERT_THAT(created, IsOk());
        FsdpStrategy& fsdp = FsdpOf(**created);
        fsdp.ResetCounters();
        ASSERT_THAT(Train(fsdp, group.rank(), 2, 1, nullptr, 2), IsOk());
        EXPECT_EQ(fsdp.counters().root_all_gathers, 2);
        EXPECT_EQ(fsdp.Memory().parameter_bytes,
                  4 * PaddedNumel(fsdp) / 2 +
                      4 * PaddedNumel(fsdp, /*root_only=*/true));
      }).ok());
}

// A GPT whose units are large next to the activations of a [1, 8] micro-batch,
// so that measured memory is dominated by model state.
models::ModelConfig MemoryConfig() {
  models::ModelConfig config = Config("gpt-tiny");
  config.dim = 256;
  config.ffn_dim = 1024;
  config.num_layers = 4;
  config.seq_len = 16;
  return config;
}

TEST(FsdpMemoryTest, BetweenStepsModelStateIsSixteenPsiOverN) {
  ASSERT_THAT(TrackingAllocator::Install(), IsOk());
  const models::ModelConfig config = MemoryConfig();
  at::Tensor tokens = at::randint(256, {1, 9}, at::kLong);
  const at::Tensor in = tokens.narrow(1, 0, 8), out = tokens.narrow(1, 1, 8);
  // Saved activations of one forward of the whole (unsharded) model on this
  // micro-batch, measured; backward's temporaries are those of one unit at a
  // time, below half of them: activations A <= 1.5 x this.
  int64_t forward_bytes = 0;
  {
    MemoryTagScope scope("plain");
    auto model = Build(config, 7);
    TrackingAllocator::ResetPeak("plain");
    const int64_t before = TrackingAllocator::Stats("plain").live_bytes;
    at::Tensor loss = models::UnitModel::Loss(model->Forward(in), out);
    forward_bytes = TrackingAllocator::Stats("plain").peak_bytes - before;
  }
  const double activation_bound = 1.5 * forward_bytes;
  for (int world : {2, 4}) {
    ASSERT_TRUE(
        RunOnRanks(world, [&](Group& group) {
          const std::string tag =
              absl::StrCat("fsdp", world, "_", group.rank());
          MemoryTagScope scope(tag);
          StrategyOptions options = FullShard();
          options.fsdp.limit_all_gathers = 1;
          auto created = CreateStrategy(options, Build(config, 7), &group,
                                        Optimizer(), Schedule());
          ASSERT_THAT(created, IsOk());
          FsdpStrategy& fsdp = FsdpOf(**created);
          auto step = [&] {
            fsdp.ZeroGrad();
            ASSERT_THAT(fsdp.ForwardBackward(in, out, 1.0, true), IsOk());
            ASSERT_THAT(fsdp.Step(0), IsOk());
          };
          step();  // Lazily allocated state settles.
          const int64_t steady = TrackingAllocator::Stats(tag).live_bytes;
          TrackingAllocator::ResetPeak(tag);
          step();
          const int64_t peak = TrackingAllocator::Stats(tag).peak_bytes;
          // No growth from step to step (a few hundred bytes: the comm
          // layer's small persistent workspaces).
          EXPECT_NEAR(TrackingAllocator::Stats(tag).live_bytes, steady, 1024);

          int64_t padded = 0, root = 0, unit = 0, largest = 0;
          for (const auto& u : fsdp.flat_units()) {
            padded += u.padded_numel;
            if (u.root) root = u.padded_numel;
            if (!u.root) unit = std::max(unit, u.padded_numel);
          }
          for (const auto& item : fsdp.model().named_parameters()) {
            largest = std::max<int64_t>(largest, item.value().numel());
          }
          // Between steps every byte of model state is sharded: fp32 master
          // + gradient shard + AdamW's two moments per owned element, 16
          // bytes, the root included. Measured live storage of this rank,
          // to the kilobyte (the rest: AdamW's 8-byte step counter and the
          // comm layer's small persistent workspaces).
          const int64_t state = 16 * padded / world;
          EXPECT_NEAR(steady, state, 1024)
              << "world " << world << " rank " << group.rank();
          // During a step, on top, at most: two units' full parameters (the
          // unit in backward and one prefetched: the limit is 1), two units'
          // full gradients (that unit's and the previous unit's, whose
          // reduce-scatter is in flight) with that reduce-scatter's output
          // shard, the root's full parameters (gathered for the head's
          // backward) and gradients, the activations, and one
          // parameter's gradient as autograd computes it (a fresh tensor,
          // then added into the flat gradient view).
          const double in_flight = 2 * 4.0 * unit + 2 * 4.0 * unit +
                                   4.0 * unit / world + 2 * 4.0 * root +
                                   activation_bound + 4.0 * largest;
          EXPECT_LE(peak - steady, in_flight)
              << "world " << world << " rank " << group.rank();
          // Not keeping units gathered: a unit is 1/4 of the blocks, so
          // holding every block's parameters and gradients would exceed it.
          EXPECT_GT(8.0 * (padded - root), in_flight);
          EXPECT_EQ(fsdp.Memory().parameter_bytes, 4 * padded / world);
        }).ok());
  }
}

TEST(FsdpMemoryTest, DeferredInitPeakIsShardsPlusOneParameter) {
  ASSERT_THAT(TrackingAllocator::Install(), IsOk());
  models::ModelConfig config = MemoryConfig();
  const int world = 2;
  ASSERT_TRUE(RunOnRanks(world, [&](Group& group) {
                const std::string tag = absl::StrCat("deferred_", group.rank());
                MemoryTagScope scope(tag);
                TrackingAllocator::ResetPeak(tag);
                const int64_t before = TrackingAllocator::Stats(tag).live_bytes;
                models::BuildOptions build;
                build.seed = 3;
                build.deferred = true;
                auto model = models::BuildModel(config, build);
                ASSERT_THAT(model, IsOk());
                StrategyOptions options = FullShard();
                options.fsdp.init_seed = 3;
                auto created = CreateStrategy(options, *model, &group,
                                              Optimizer(), Schedule());
                ASSERT_THAT(created, IsOk());
                int64_t padded = 0, root = 0, largest = 0;
                for (const auto& u : FsdpOf(**created).flat_units()) {
                  padded += u.padded_numel;
                  if (u.root) root = u.padded_numel;
                }
                for (const auto& item : (*model)->named_parameters()) {
                  largest = std::max<int64_t>(largest, item.value().numel());
                }
                // Shards (fp32 master, gradient shard, AdamW moments: 16 bytes
                // per owned element) and one parameter's full value at a time
                // while it is materialised — never the root's or a unit's full
                // parameters kept, let alone the model's (4 x padded bytes).
                // (Each flat parameter's full buffers exist for a moment as its
                // views are made, before the optimizer state: 8 x padded /
                // world + 8 x root, below.)
                const int64_t peak =
                    TrackingAllocator::Stats(tag).peak_bytes - before;
                const double bound = 16.0 * padded / world + 4.0 * largest;
                EXPECT_LT(8.0 * padded / world + 8.0 * root, bound);
                EXPECT_LE(peak, 1.02 * bound);
                EXPECT_LT(bound, 4.0 * padded + 16.0 * padded / world);
              }).ok());
}

}  // namespace
}  // namespace strata::strategies
