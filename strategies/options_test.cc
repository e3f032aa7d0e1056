#include "strategies/options.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "base/testing/status_matchers.h"

namespace strata::strategies {
namespace {

using ::strata::testing::IsOk;
using ::strata::testing::StatusIs;
using ::testing::HasSubstr;

TEST(StrategyKindTest, ParsesEveryNameBack) {
  for (StrategyKind kind :
       {StrategyKind::kSingle, StrategyKind::kDdp, StrategyKind::kZero1,
        StrategyKind::kZero2, StrategyKind::kFsdp}) {
    ASSERT_OK_AND_ASSIGN(StrategyKind parsed,
                         ParseStrategyKind(StrategyKindName(kind)));
    EXPECT_EQ(parsed, kind) << StrategyKindName(kind);
  }
}

TEST(StrategyKindTest, NamesAreTheFlagValues) {
  EXPECT_EQ(StrategyKindName(StrategyKind::kSingle), "single");
  EXPECT_EQ(StrategyKindName(StrategyKind::kDdp), "ddp");
  EXPECT_EQ(StrategyKindName(StrategyKind::kZero1), "zero1");
  EXPECT_EQ(StrategyKindName(StrategyKind::kZero2), "zero2");
  EXPECT_EQ(StrategyKindName(StrategyKind::kFsdp), "fsdp");
}

TEST(StrategyKindTest, UnknownNameListsTheAcceptedValues) {
  // single_test.cc's RejectsUnknownKindNamingTheOption has the same message.
  EXPECT_THAT(ParseStrategyKind("fsdp2"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "--strategy must be single, ddp, zero1, zero2 or fsdp, "
                       "got 'fsdp2'"));
}

TEST(OptimizerKindTest, ParsesEveryNameBack) {
  for (OptimizerKind kind :
       {OptimizerKind::kAdamW, OptimizerKind::kAdam, OptimizerKind::kSgd}) {
    ASSERT_OK_AND_ASSIGN(OptimizerKind parsed,
                         ParseOptimizerKind(OptimizerKindName(kind)));
    EXPECT_EQ(parsed, kind) << OptimizerKindName(kind);
  }
}

TEST(OptimizerKindTest, UnknownNameListsTheAcceptedValues) {
  EXPECT_THAT(ParseOptimizerKind("lamb"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "--optimizer must be adamw, adam or sgd, got 'lamb'"));
}

TEST(ValidateOptimizerConfigTest, DefaultsOfEveryKindPass) {
  for (OptimizerKind kind :
       {OptimizerKind::kAdamW, OptimizerKind::kAdam, OptimizerKind::kSgd}) {
    OptimizerConfig config;
    config.kind = kind;
    EXPECT_THAT(ValidateOptimizerConfig(config), IsOk())
        << OptimizerKindName(kind);
  }
}

TEST(ValidateOptimizerConfigTest, NesterovWithoutMomentumNamesTheFlags) {
  OptimizerConfig config;
  config.kind = OptimizerKind::kSgd;
  config.sgd.nesterov = true;
  EXPECT_THAT(ValidateOptimizerConfig(config),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "--nesterov needs --momentum > 0 and --dampening == 0, "
                       "got --momentum 0 and --dampening 0"));
}

TEST(ValidateOptimizerConfigTest, ChecksLossScalingOptions) {
  OptimizerConfig config;
  config.loss_scaling = optim::LossScalerOptions();
  EXPECT_THAT(ValidateOptimizerConfig(config), IsOk());
  config.loss_scaling->growth_factor = 0.5;
  EXPECT_THAT(ValidateOptimizerConfig(config),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "loss scaler growth_factor must be >= 1, got 0.5"));
}

TEST(ValidateOptimizerConfigTest, NegativeMomentumNamesTheFlag) {
  OptimizerConfig config;
  config.kind = OptimizerKind::kSgd;
  config.sgd.momentum = -0.5;
  EXPECT_THAT(ValidateOptimizerConfig(config),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "--momentum must be >= 0, got -0.5"));
}

TEST(ValidateOptimizerConfigTest, AdamBetaNamesTheFlag) {
  OptimizerConfig config;
  config.kind = OptimizerKind::kAdam;
  config.adamw.beta2 = 1.0;
  EXPECT_THAT(ValidateOptimizerConfig(config),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "--beta2 must be in [0, 1), got 1"));
}

TEST(ValidateOptimizerConfigTest, NegativeEpsNamesTheFlag) {
  OptimizerConfig config;
  config.adamw.eps = -1;
  EXPECT_THAT(ValidateOptimizerConfig(config),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "--eps must be >= 0, got -1"));
}

TEST(ValidateOptimizerConfigTest, KindOutsideTheEnumIsRejected) {
  OptimizerConfig config;
  config.kind = static_cast<OptimizerKind>(9);
  EXPECT_THAT(ValidateOptimizerConfig(config),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "--optimizer must be adamw, adam or sgd, got "
                       "OptimizerKind(9)"));
}

TEST(OptimizerStateNameTest, SgdIsSplitByMomentum) {
  OptimizerConfig config;
  EXPECT_EQ(OptimizerStateName(config), "adamw");
  config.kind = OptimizerKind::kAdam;
  EXPECT_EQ(OptimizerStateName(config), "adam");
  config.kind = OptimizerKind::kSgd;
  EXPECT_EQ(OptimizerStateName(config), "sgd");
  config.sgd.momentum = 0.9;
  EXPECT_EQ(OptimizerStateName(config), "sgd_momentum");
}

TEST(StrategyKindTest, ValueOutsideTheEnumIsRejected) {
  StrategyOptions options;
  options.kind = static_cast<StrategyKind>(7);
  EXPECT_THAT(ValidateStrategyOptions(options),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "--strategy must be single, ddp, zero1, zero2 or fsdp, "
                       "got StrategyKind(7)"));
}

TEST(ShardingStrategyTest, ParsesEveryNameBack) {
  for (ShardingStrategy s :
       {ShardingStrategy::kFullShard, ShardingStrategy::kShardGradOp,
        ShardingStrategy::kNoShard, ShardingStrategy::kHybridShard,
        ShardingStrategy::kHybridShardZero2}) {
    ASSERT_OK_AND_ASSIGN(ShardingStrategy parsed,
                         ParseShardingStrategy(ShardingStrategyName(s)));
    EXPECT_EQ(parsed, s) << ShardingStrategyName(s);
  }
  EXPECT_EQ(ShardingStrategyName(ShardingStrategy::kHybridShardZero2),
            "hybrid_shard_zero2");
}

TEST(ShardingStrategyTest, UnknownNameNamesTheFlag) {
  EXPECT_THAT(ParseShardingStrategy("zero3"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "--fsdp_sharding must be full_shard, shard_grad_op, "
                       "no_shard, hybrid_shard or hybrid_shard_zero2, got "
                       "'zero3'"));
}

TEST(ShardingStrategyTest, HybridAndReshardAfterForward) {
  EXPECT_TRUE(IsHybrid(ShardingStrategy::kHybridShard));
  EXPECT_TRUE(IsHybrid(ShardingStrategy::kHybridShardZero2));
  EXPECT_FALSE(IsHybrid(ShardingStrategy::kFullShard));
  EXPECT_TRUE(ReshardsAfterForward(ShardingStrategy::kFullShard));
  EXPECT_TRUE(ReshardsAfterForward(ShardingStrategy::kHybridShard));
  EXPECT_FALSE(ReshardsAfterForward(ShardingStrategy::kShardGradOp));
  EXPECT_FALSE(ReshardsAfterForward(ShardingStrategy::kHybridShardZero2));
  EXPECT_FALSE(ReshardsAfterForward(ShardingStrategy::kNoShard));
}

TEST(BackwardPrefetchTest, ParsesEveryNameBack) {
  for (BackwardPrefetch p :
       {BackwardPrefetch::kBackwardPre, BackwardPrefetch::kBackwardPost,
        BackwardPrefetch::kNone, BackwardPrefetch::kAuto}) {
    ASSERT_OK_AND_ASSIGN(BackwardPrefetch parsed,
                         ParseBackwardPrefetch(BackwardPrefetchName(p)));
    EXPECT_EQ(parsed, p) << BackwardPrefetchName(p);
  }
  EXPECT_EQ(BackwardPrefetchName(BackwardPrefetch::kBackwardPre), "pre");
}

TEST(BackwardPrefetchTest, UnknownNameNamesTheFlag) {
  EXPECT_THAT(ParseBackwardPrefetch("early"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "--fsdp_backward_prefetch must be pre, post, none or "
                       "auto, got 'early'"));
}

TEST(ValidateFsdpOptionsTest, HybridNeedsAGroupSizeDividingTheWorld) {
  StrategyOptions options;
  options.kind = StrategyKind::kFsdp;
  options.fsdp.sharding = ShardingStrategy::kHybridShard;
  EXPECT_THAT(
      ValidateFsdpOptions(options, 4),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("--fsdp_hybrid_shard_group_size must be set")));
  options.fsdp.hybrid_shard_group_size = 3;
  EXPECT_THAT(ValidateFsdpOptions(options, 4),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("does not divide the world size 4")));
  options.fsdp.hybrid_shard_group_size = 2;
  EXPECT_THAT(ValidateFsdpOptions(options, 4), IsOk());
}

TEST(ValidateFsdpOptionsTest, GroupSizeWithoutHybridIsRejected) {
  StrategyOptions options;
  options.fsdp.hybrid_shard_group_size = 2;
  EXPECT_THAT(ValidateFsdpOptions(options, 4),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("is only used with --fsdp_sharding=hybrid")));
}

TEST(ValidateFsdpOptionsTest, NegativeLimitsAreRejected) {
  StrategyOptions options;
  options.fsdp.reductions_in_flight = -2;
  EXPECT_THAT(ValidateFsdpOptions(options, 1),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("--fsdp_reductions_in_flight must be >= 0")));
  options.fsdp.reductions_in_flight = 0;
  options.fsdp.limit_all_gathers = -1;
  EXPECT_THAT(ValidateFsdpOptions(options, 1),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("--fsdp_limit_all_gathers must be >= 0")));
}

TEST(ValidateFsdpOptionsTest, AutoReductionsAreAccepted) {
  StrategyOptions options;
  options.fsdp.reductions_in_flight = FsdpOptions::kAutoReductions;
  EXPECT_THAT(ValidateFsdpOptions(options, 2), IsOk());
}

TEST(ResolveFsdpScheduleTest, AutoOnCudaIsPrefetchBeforeAndOneReduction) {
  const FsdpSchedule s = ResolveFsdpSchedule(FsdpOptions(), /*cuda=*/true);
  EXPECT_EQ(s.backward_prefetch, BackwardPrefetch::kBackwardPre);
  EXPECT_EQ(s.reductions_in_flight, 1);
}

TEST(ResolveFsdpScheduleTest, AutoOnCpuIsPrefetchAfterAndNoReduction) {
  const FsdpSchedule s = ResolveFsdpSchedule(FsdpOptions(), /*cuda=*/false);
  EXPECT_EQ(s.backward_prefetch, BackwardPrefetch::kBackwardPost);
  EXPECT_EQ(s.reductions_in_flight, 0);
}

TEST(ResolveFsdpScheduleTest, ExplicitValuesAreKept) {
  FsdpOptions options;
  options.backward_prefetch = BackwardPrefetch::kNone;
  options.reductions_in_flight = 3;
  const FsdpSchedule s = ResolveFsdpSchedule(options, /*cuda=*/false);
  EXPECT_EQ(s.backward_prefetch, BackwardPrefetch::kNone);
  EXPECT_EQ(s.reductions_in_flight, 3);
}

TEST(StrategyOptionsTest, CheckpointEveryNeedsCheckpointUnits) {
  StrategyOptions options;
  options.checkpoint_every = 2;
  EXPECT_THAT(ValidateStrategyOptions(options),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("--checkpoint_every=2 picks among the units "
                                 "--checkpoint_units selects, and it is "
                                 "empty")));
  options.checkpoint_units = {"GPTBlock"};
  EXPECT_THAT(ValidateStrategyOptions(options), IsOk());
  options.checkpoint_every = 0;
  EXPECT_THAT(ValidateStrategyOptions(options),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("--checkpoint_every must be >= 1, got 0")));
}

// --fsdp_wrap_unit_types=GPTBlock, (a stray comma) is an error, not a
// policy silently missing the type the user meant to add.
TEST(StrategyOptionsTest, EmptyWrapUnitTypeNamesTheFlag) {
  StrategyOptions options;
  options.fsdp.wrap_policy.unit_types = {"GPTBlock", ""};
  EXPECT_THAT(ValidateStrategyOptions(options),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("--fsdp_wrap_unit_types has an empty entry")));
  options.fsdp.wrap_policy.unit_types = {"GPTBlock"};
  EXPECT_THAT(ValidateStrategyOptions(options), IsOk());
}

TEST(MixedPrecisionDtypeTest, NamesAreWhatTheFlagsParse) {
  for (at::ScalarType dtype : {at::kFloat, at::kBFloat16, at::kHalf}) {
    const std::string name = MixedPrecisionDtypeName(dtype);
    absl::StatusOr<at::ScalarType> parsed =
        ParseMixedPrecisionDtype("param_dtype", name);
    ASSERT_THAT(parsed, IsOk()) << name;
    EXPECT_EQ(*parsed, dtype) << name;
  }
  EXPECT_EQ(MixedPrecisionDtypeName(at::kFloat), "fp32");
}

}  // namespace
}  // namespace strata::strategies
