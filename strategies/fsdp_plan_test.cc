#include "strategies/fsdp_plan.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "base/testing/status_matchers.h"

namespace strata::strategies {
namespace {

using ::strata::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// A GPT-like model with vocabulary 10, width 2, context 4: units embed,
// blocks.0, blocks.1, head; the head's projection is tied to wte.weight.
PlanInput Gpt(std::vector<int> wrapped, int shard_size = 1) {
  PlanInput input;
  input.parameters = {
      {"wte.weight", {10, 2}},     {"wpe.weight", {4, 2}},
      {"blocks.0.ln.weight", {2}}, {"blocks.0.fc.weight", {2, 2}},
      {"blocks.1.ln.weight", {2}}, {"blocks.1.fc.weight", {2, 2}},
      {"ln_f.weight", {2}},
  };
  input.units = {
      {"embed", {"wte.weight", "wpe.weight"}},
      {"blocks.0", {"blocks.0.ln.weight", "blocks.0.fc.weight"}},
      {"blocks.1", {"blocks.1.ln.weight", "blocks.1.fc.weight"}},
      {"head", {"ln_f.weight", "wte.weight"}},
  };
  input.wrapped = std::move(wrapped);
  input.shared = {"wte.weight"};
  input.shard_size = shard_size;
  return input;
}

std::vector<std::string> Names(const FsdpPlan& plan) {
  std::vector<std::string> out;
  for (const FlatUnitPlan& u : plan.units) out.push_back(u.name);
  return out;
}

std::vector<std::string> Parameters(const FlatUnitPlan& unit) {
  std::vector<std::string> out;
  for (const auto& e : unit.entries) out.push_back(e.name);
  return out;
}

TEST(FsdpPlanTest, EveryUnitWrappedLeavesOnlyTheTiedWeightToTheRoot) {
  ASSERT_OK_AND_ASSIGN(FsdpPlan plan, PlanFlatUnits(Gpt({0, 1, 2, 3})));
  EXPECT_THAT(Names(plan),
              ElementsAre("root", "embed", "blocks.0", "blocks.1", "head"));
  EXPECT_THAT(Parameters(plan.units[0]), ElementsAre("wte.weight"));
  EXPECT_THAT(Parameters(plan.units[1]), ElementsAre("wpe.weight"));
  EXPECT_THAT(Parameters(plan.units[4]), ElementsAre("ln_f.weight"));
  EXPECT_THAT(plan.flat_of_model_unit, ElementsAre(0, 1, 2, 3));
  EXPECT_THAT(plan.moved_to_root, ElementsAre("wte.weight", "wte.weight"));
  EXPECT_TRUE(plan.has_root());
}

TEST(FsdpPlanTest, OnlyBlocksWrappedSendsTheRestToTheRootInModelOrder) {
  ASSERT_OK_AND_ASSIGN(FsdpPlan plan, PlanFlatUnits(Gpt({1, 2})));
  EXPECT_THAT(Names(plan), ElementsAre("root", "blocks.0", "blocks.1"));
  EXPECT_THAT(Parameters(plan.units[0]),
              ElementsAre("wte.weight", "wpe.weight", "ln_f.weight"));
  EXPECT_THAT(Parameters(plan.units[1]),
              ElementsAre("blocks.0.ln.weight", "blocks.0.fc.weight"));
  EXPECT_THAT(plan.flat_of_model_unit, ElementsAre(-1, 0, 1, -1));
  EXPECT_TRUE(plan.moved_to_root.empty());
  EXPECT_EQ(plan.units[0].numel, 30);
  EXPECT_EQ(plan.units[1].position, 0);
  EXPECT_EQ(plan.units[2].position, 1);
  EXPECT_EQ(plan.units[2].model_unit, 2);
}

TEST(FsdpPlanTest, EntriesAreLaidOutOneAfterTheOther) {
  ASSERT_OK_AND_ASSIGN(FsdpPlan plan, PlanFlatUnits(Gpt({1, 2})));
  const FlatUnitPlan& root = plan.units[0];
  ASSERT_EQ(root.entries.size(), 3u);
  EXPECT_EQ(root.entries[0].offset, 0);
  EXPECT_EQ(root.entries[0].numel, 20);
  EXPECT_EQ(root.entries[1].offset, 20);
  EXPECT_EQ(root.entries[1].numel, 8);
  EXPECT_EQ(root.entries[2].offset, 28);
  EXPECT_THAT(root.entries[2].shape, ElementsAre(2));
}

TEST(FsdpPlanTest, TiedWeightOfAWrappedHeadGoesToTheRoot) {
  ASSERT_OK_AND_ASSIGN(FsdpPlan plan, PlanFlatUnits(Gpt({3})));
  EXPECT_THAT(Names(plan), ElementsAre("root", "head"));
  EXPECT_THAT(Parameters(plan.units[1]), ElementsAre("ln_f.weight"));
  EXPECT_EQ(plan.units[0].entries.front().name, "wte.weight");
  EXPECT_THAT(plan.moved_to_root, ElementsAre("wte.weight"));
  EXPECT_THAT(plan.flat_of_model_unit, ElementsAre(-1, -1, -1, 0));
}

TEST(FsdpPlanTest, NoRootWhenWrappedUnitsHoldEveryParameter) {
  PlanInput input = Gpt({0, 1, 2, 3});
  input.shared.clear();
  input.units[3].parameters = {"ln_f.weight"};  // Untied head.
  ASSERT_OK_AND_ASSIGN(FsdpPlan plan, PlanFlatUnits(input));
  EXPECT_FALSE(plan.has_root());
  EXPECT_THAT(Names(plan),
              ElementsAre("embed", "blocks.0", "blocks.1", "head"));
  EXPECT_THAT(Parameters(plan.units[0]),
              ElementsAre("wte.weight", "wpe.weight"));
}

TEST(FsdpPlanTest, AUnitWithOnlySharedParametersGetsNoFlatParameter) {
  PlanInput input = Gpt({0, 1});
  input.shared = {"wte.weight", "wpe.weight"};
  ASSERT_OK_AND_ASSIGN(FsdpPlan plan, PlanFlatUnits(input));
  EXPECT_THAT(Names(plan), ElementsAre("root", "blocks.0"));
  EXPECT_THAT(plan.flat_of_model_unit, ElementsAre(-1, 0, -1, -1));
}

TEST(FsdpPlanTest, NothingToShardIsAnError) {
  PlanInput input = Gpt({0});
  input.shared = {"wte.weight", "wpe.weight"};
  EXPECT_THAT(PlanFlatUnits(input),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("nothing would be sharded")));
}

TEST(FsdpPlanTest, AnUnknownParameterIsAnError) {
  PlanInput input = Gpt({1});
  input.units[1].parameters.push_back("blocks.0.missing");
  EXPECT_THAT(PlanFlatUnits(input), StatusIs(absl::StatusCode::kInvalidArgument,
                                             HasSubstr("'blocks.0.missing'")));
}

TEST(FsdpPlanTest, FrozenParametersMarkTheirUnit) {
  PlanInput input = Gpt({1, 2});
  input.parameters[2].requires_grad = false;  // blocks.0.ln.weight
  input.parameters[4].requires_grad = false;  // blocks.1.ln.weight
  input.parameters[5].requires_grad = false;  // blocks.1.fc.weight
  ASSERT_OK_AND_ASSIGN(FsdpPlan plan, PlanFlatUnits(input));
  EXPECT_FALSE(plan.units[0].has_frozen);
  EXPECT_TRUE(plan.units[0].any_requires_grad);
  EXPECT_TRUE(plan.units[1].has_frozen);
  EXPECT_TRUE(plan.units[1].any_requires_grad);
  EXPECT_TRUE(plan.units[2].has_frozen);
  EXPECT_FALSE(plan.units[2].any_requires_grad);
  EXPECT_FALSE(plan.units[1].entries[0].requires_grad);
  EXPECT_TRUE(plan.units[1].entries[1].requires_grad);
}

TEST(FsdpPlanTest, UnitDecayRangesFreezeFrozenAndDecayMatrices) {
  PlanInput input = Gpt({1, 2});
  input.parameters[2].requires_grad = false;  // blocks.0.ln.weight
  ASSERT_OK_AND_ASSIGN(FsdpPlan plan, PlanFlatUnits(input));
  const std::vector<optim::ParamRange> b0 = UnitDecayRanges(plan.units[1], 0.1);
  ASSERT_EQ(b0.size(), 2u);
  EXPECT_EQ(b0[0].offset, 0);
  EXPECT_EQ(b0[0].numel, 2);
  EXPECT_TRUE(b0[0].frozen);
  EXPECT_EQ(b0[0].weight_decay, 0.0);
  EXPECT_EQ(b0[1].offset, 2);
  EXPECT_EQ(b0[1].numel, 4);
  EXPECT_FALSE(b0[1].frozen);
  EXPECT_EQ(b0[1].weight_decay, 0.1);
  // The root: wte, wpe decay (matrices), ln_f does not.
  const std::vector<optim::ParamRange> root =
      UnitDecayRanges(plan.units[0], 0.1);
  ASSERT_EQ(root.size(), 2u);
  EXPECT_EQ(root[0].numel, 28);
  EXPECT_EQ(root[1].weight_decay, 0.0);
}

// Root 30, blocks 6 and 6 elements, sharded over S ranks: each padded to a
// multiple of S, rank r owning [r * padded / S, (r + 1) * padded / S).
struct PaddingCase {
  int shard_size;
  int64_t root_padded, block_padded;
};

class FsdpPlanPaddingTest : public ::testing::TestWithParam<PaddingCase> {};

TEST_P(FsdpPlanPaddingTest, PadsToAMultipleOfTheShardGroupAndShardsEvenly) {
  const PaddingCase& c = GetParam();
  ASSERT_OK_AND_ASSIGN(FsdpPlan plan, PlanFlatUnits(Gpt({1, 2}, c.shard_size)));
  ASSERT_EQ(plan.units.size(), 3u);
  const int64_t s = c.shard_size;
  EXPECT_EQ(plan.shard_size, c.shard_size);
  EXPECT_EQ(plan.units[0].numel, 30);
  EXPECT_EQ(plan.units[0].padded_numel, c.root_padded);
  EXPECT_EQ(plan.units[1].padded_numel, c.block_padded);
  EXPECT_EQ(plan.units[2].padded_numel, c.block_padded);
  EXPECT_EQ(plan.units[0].shard_numel, c.root_padded / s);
  EXPECT_EQ(plan.units[1].shard_numel, c.block_padded / s);
  // Every rank's master buffer: root shard, then the blocks' shards.
  EXPECT_EQ(plan.units[0].master_offset, 0);
  EXPECT_EQ(plan.units[1].master_offset, c.root_padded / s);
  EXPECT_EQ(plan.units[2].master_offset,
            c.root_padded / s + c.block_padded / s);
  EXPECT_EQ(plan.master_numel, c.root_padded / s + 2 * c.block_padded / s);
  // The last rank's shard ends at the padded end.
  EXPECT_EQ(plan.units[0].shard_begin(c.shard_size - 1),
            c.root_padded - c.root_padded / s);
  EXPECT_EQ(plan.units[0].shard_begin(0), 0);
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, FsdpPlanPaddingTest,
                         ::testing::Values(PaddingCase{1, 30, 6},
                                           PaddingCase{2, 30, 6},
                                           PaddingCase{3, 30, 6},
                                           PaddingCase{4, 32, 8}));

TEST(ShardGroupSizeTest, FollowsTheShardingStrategy) {
  FsdpOptions options;
  options.sharding = ShardingStrategy::kFullShard;
  EXPECT_EQ(ShardGroupSize(options, 4), 4);
  options.sharding = ShardingStrategy::kShardGradOp;
  EXPECT_EQ(ShardGroupSize(options, 4), 4);
  options.sharding = ShardingStrategy::kNoShard;
  EXPECT_EQ(ShardGroupSize(options, 4), 1);
  options.sharding = ShardingStrategy::kHybridShard;
  options.hybrid_shard_group_size = 2;
  EXPECT_EQ(ShardGroupSize(options, 4), 2);
  options.sharding = ShardingStrategy::kHybridShardZero2;
  EXPECT_EQ(ShardGroupSize(options, 4), 2);
}

}  // namespace
}  // namespace strata::strategies
