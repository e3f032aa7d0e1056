#include "launch/deepspeed/deepspeed_options.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/testing/status_matchers.h"
#include "launch/config/option_kinds.h"
#include "launch/deepspeed/deepspeed_config.h"
#include "strategies/options.h"

namespace strata::launch {
namespace {

using ::strata::testing::IsOk;
using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

struct Applied {
  absl::Status status;
  TrainOptions options;
  std::vector<std::string> log;
};

// Parses `json` and applies it to `options` at `world_size` ranks.
Applied Apply(const std::string& json, int world_size = 1,
              TrainOptions options = TrainOptions(),
              const std::set<std::string>& explicit_flags = {}) {
  Applied a;
  a.options = std::move(options);
  absl::StatusOr<DeepSpeedConfig> config =
      ParseDeepSpeedConfig(json, "ds.json");
  EXPECT_THAT(config.status(), IsOk()) << json;
  if (!config.ok()) return a;
  a.status = ApplyDeepSpeedConfig(*config, world_size, explicit_flags,
                                  &a.options, &a.log);
  return a;
}

// Whether some log line contains `text`.
bool Logged(const Applied& a, const std::string& text) {
  for (const std::string& line : a.log) {
    if (line.find(text) != std::string::npos) return true;
  }
  return false;
}

TEST(ApplyDeepSpeedConfigTest, BatchAndAccumulationGiveTheMicroBatch) {
  const Applied a =
      Apply(R"({"train_batch_size": 16, "gradient_accumulation_steps": 2})", 2);
  ASSERT_THAT(a.status, IsOk());
  EXPECT_EQ(a.options.global_batch, 16);
  EXPECT_EQ(a.options.micro_batch, 4);  // Per rank: 16 / 2 ranks / 2.
}

TEST(ApplyDeepSpeedConfigTest, MicroBatchAndAccumulationGiveTheBatch) {
  const Applied a = Apply(
      R"({"train_micro_batch_size_per_gpu": 2,
          "gradient_accumulation_steps": 4})",
      2);
  ASSERT_THAT(a.status, IsOk());
  EXPECT_EQ(a.options.global_batch, 16);
  EXPECT_EQ(a.options.micro_batch, 2);
}

TEST(ApplyDeepSpeedConfigTest, BatchAloneMeansNoAccumulation) {
  const Applied a = Apply(R"({"train_batch_size": 8})", 4);
  ASSERT_THAT(a.status, IsOk());
  EXPECT_EQ(a.options.global_batch, 8);
  EXPECT_EQ(a.options.micro_batch, 2);
}

TEST(ApplyDeepSpeedConfigTest, DisagreeingBatchSizesAreDeepSpeedsError) {
  const Applied a = Apply(
      R"({"train_batch_size": 16, "train_micro_batch_size_per_gpu": 3,
          "gradient_accumulation_steps": 2})",
      2);
  EXPECT_THAT(a.status.message(),
              HasSubstr("ds.json: train_batch_size is not equal to "
                        "train_micro_batch_size_per_gpu * "
                        "gradient_accumulation_steps * world size: 16 != 3 * "
                        "2 * 2"));
}

TEST(ApplyDeepSpeedConfigTest, ABatchTheWorldDoesNotDivideIsAnError) {
  const Applied a = Apply(R"({"train_batch_size": 10})", 4);
  EXPECT_THAT(a.status.message(), HasSubstr("10 != 2 * 1 * 4"));
}

TEST(ApplyDeepSpeedConfigTest, WithoutBatchSizesTheFlagsApply) {
  TrainOptions flags;
  flags.global_batch = 12;
  flags.micro_batch = 3;
  const Applied a = Apply("{}", 2, flags);
  ASSERT_THAT(a.status, IsOk());
  EXPECT_EQ(a.options.global_batch, 12);
  EXPECT_EQ(a.options.micro_batch, 3);
  EXPECT_TRUE(Logged(a, "sets no batch size"));
}

TEST(ApplyDeepSpeedConfigTest, AccumulationAloneIsAnError) {
  EXPECT_THAT(Apply(R"({"gradient_accumulation_steps": 2})").status.message(),
              HasSubstr("gradient_accumulation_steps: needs train_batch_size "
                        "or train_micro_batch_size_per_gpu"));
}

TEST(ApplyDeepSpeedConfigTest, StageZeroIsSingleOnOneProcessAndDdpOnMore) {
  EXPECT_EQ(Apply("{}", 1).options.strategy.kind,
            strategies::StrategyKind::kSingle);
  EXPECT_EQ(Apply("{}", 2).options.strategy.kind,
            strategies::StrategyKind::kDdp);
}

TEST(ApplyDeepSpeedConfigTest, StagesOneToThreeAreZeroAndFsdp) {
  using strategies::StrategyKind;
  const std::vector<StrategyKind> want = {
      StrategyKind::kZero1, StrategyKind::kZero2, StrategyKind::kFsdp};
  for (int stage = 1; stage <= 3; ++stage) {
    const Applied a =
        Apply(absl::StrCat(R"({"zero_optimization": {"stage": )", stage,
                           R"(, "stage3_param_persistence_threshold": 0}})"),
              2);
    ASSERT_THAT(a.status, IsOk()) << stage;
    EXPECT_EQ(a.options.strategy.kind, want[stage - 1]) << stage;
  }
}

TEST(ApplyDeepSpeedConfigTest, ReduceBucketElementsBecomeReduceDtypeBytes) {
  Applied a = Apply(
      R"({"zero_optimization": {"stage": 2, "reduce_bucket_size": 1000000}})",
      2);
  ASSERT_THAT(a.status, IsOk());
  EXPECT_EQ(a.options.strategy.bucket_bytes, 4000000);  // fp32.
  EXPECT_EQ(a.options.strategy.first_bucket_bytes, 4000000);
  a = Apply(R"({"bf16": {"enabled": true}, "zero_optimization": {"stage": 1,
               "reduce_bucket_size": 1000000}})",
            2);
  ASSERT_THAT(a.status, IsOk());
  EXPECT_EQ(a.options.strategy.bucket_bytes, 2000000);  // bf16 communication.
}

TEST(ApplyDeepSpeedConfigTest, AllgatherBucketsMustBeTheGradientBuckets) {
  EXPECT_THAT(
      Apply(R"({"zero_optimization": {"stage": 2, "reduce_bucket_size": 5e7,
                "allgather_bucket_size": 2e8}})",
            2)
          .status.message(),
      HasSubstr("zero_optimization.allgather_bucket_size: 200000000 differs "
                "from reduce_bucket_size 50000000"));
  EXPECT_THAT(
      Apply(R"({"zero_optimization": {"stage": 2, "reduce_bucket_size": 5e7,
                "allgather_bucket_size": 5e7}})",
            2)
          .status,
      IsOk());
}

TEST(ApplyDeepSpeedConfigTest, StageTwoWithoutOverlapIsAnError) {
  EXPECT_THAT(
      Apply(R"({"zero_optimization": {"stage": 2, "overlap_comm": false}})", 2)
          .status.message(),
      HasSubstr("zero_optimization.overlap_comm: false is not supported: "
                "Strata's ZeRO-2 always reduces"));
}

TEST(ApplyDeepSpeedConfigTest, KeysDeepSpeedIgnoresAtTheStageAreLogged) {
  const Applied a =
      Apply(R"({"zero_optimization": {"stage": 1, "overlap_comm": false}})", 2);
  ASSERT_THAT(a.status, IsOk());
  EXPECT_TRUE(Logged(a,
                     "zero_optimization.overlap_comm=false from ds.json has "
                     "no effect: DeepSpeed ignores it at stage 1"));
}

TEST(ApplyDeepSpeedConfigTest, StageThreeKnobsSetTheFsdpFlags) {
  const Applied a = Apply(R"({"zero_optimization": {"stage": 3,
      "stage3_prefetch_bucket_size": 0,
      "stage3_param_persistence_threshold": 1000,
      "overlap_comm": false}})",
                          2);
  ASSERT_THAT(a.status, IsOk());
  EXPECT_EQ(a.options.strategy.fsdp.sharding,
            strategies::ShardingStrategy::kFullShard);
  EXPECT_FALSE(a.options.strategy.fsdp.forward_prefetch);
  EXPECT_EQ(a.options.strategy.fsdp.backward_prefetch,
            strategies::BackwardPrefetch::kNone);
  EXPECT_EQ(a.options.strategy.fsdp.wrap_policy.min_num_params, 1000);
  EXPECT_EQ(a.options.strategy.fsdp.reductions_in_flight, 0);
}

TEST(ApplyDeepSpeedConfigTest, StageThreeDefaultsPrefetchAndOverlap) {
  const Applied a = Apply(R"({"zero_optimization": {"stage": 3}})", 2);
  ASSERT_THAT(a.status, IsOk());
  EXPECT_TRUE(a.options.strategy.fsdp.forward_prefetch);
  EXPECT_EQ(a.options.strategy.fsdp.backward_prefetch,
            strategies::BackwardPrefetch::kBackwardPre);
  EXPECT_EQ(a.options.strategy.fsdp.wrap_policy.min_num_params, 100000);
  EXPECT_EQ(a.options.strategy.fsdp.reductions_in_flight, 1);
}

TEST(ApplyDeepSpeedConfigTest, MicsIsHybridSharding) {
  const Applied a =
      Apply(R"({"zero_optimization": {"stage": 3, "mics_shard_size": 2}})", 4);
  ASSERT_THAT(a.status, IsOk());
  EXPECT_EQ(a.options.strategy.fsdp.sharding,
            strategies::ShardingStrategy::kHybridShard);
  EXPECT_EQ(a.options.strategy.fsdp.hybrid_shard_group_size, 2);
  EXPECT_THAT(
      Apply(R"({"zero_optimization": {"stage": 3, "mics_shard_size": 3}})", 4)
          .status.message(),
      HasSubstr("3 does not divide the world size 4"));
}

TEST(ApplyDeepSpeedConfigTest, StageThreeCpuOffloadIsFsdpCpuOffload) {
  const Applied a = Apply(R"({"zero_optimization": {"stage": 3,
      "offload_optimizer": {"device": "cpu", "pin_memory": true},
      "offload_param": {"device": "cpu"}}})",
                          2);
  ASSERT_THAT(a.status, IsOk());
  EXPECT_TRUE(a.options.strategy.fsdp.cpu_offload);
  EXPECT_TRUE(Logged(a,
                     "offload_optimizer.pin_memory=true from ds.json has "
                     "no effect"));
}

TEST(ApplyDeepSpeedConfigTest, OffloadingOnlyOneOfTheTwoIsAnError) {
  EXPECT_THAT(Apply(R"({"zero_optimization": {"stage": 3,
      "offload_optimizer": {"device": "cpu"}}})",
                    2)
                  .status.message(),
              HasSubstr("offloads parameter shards and optimizer state "
                        "together"));
}

TEST(ApplyDeepSpeedConfigTest, OffloadBelowStageThreeIsAnError) {
  EXPECT_THAT(Apply(R"({"zero_optimization": {"stage": 2,
      "offload_optimizer": {"device": "cpu"}}})",
                    2)
                  .status.message(),
              HasSubstr("zero_optimization.offload_optimizer.device: cpu with "
                        "stage 2: Strata's ZeRO-1/2 keeps optimizer state on "
                        "the device"));
}

TEST(ApplyDeepSpeedConfigTest, Bf16IsBf16ParametersWithFp32Masters) {
  const Applied a = Apply(R"({"bf16": {"enabled": true}})");
  ASSERT_THAT(a.status, IsOk());
  EXPECT_EQ(a.options.strategy.mixed_precision.param_dtype, at::kBFloat16);
  EXPECT_EQ(a.options.strategy.mixed_precision.reduce_dtype, at::kBFloat16);
  EXPECT_EQ(a.options.strategy.mixed_precision.buffer_dtype, at::kBFloat16);
  EXPECT_EQ(a.options.precision, Precision::kFp32);  // No autocast.
}

TEST(ApplyDeepSpeedConfigTest, CommunicationDataTypeIsTheReduceDtype) {
  const Applied a = Apply(
      R"({"bf16": {"enabled": true}, "communication_data_type": "fp32"})");
  ASSERT_THAT(a.status, IsOk());
  EXPECT_EQ(a.options.strategy.mixed_precision.param_dtype, at::kBFloat16);
  EXPECT_EQ(a.options.strategy.mixed_precision.reduce_dtype, at::kFloat);
}

TEST(ApplyDeepSpeedConfigTest, Fp16MapsToFp16ParametersAndLossScaling) {
  const Applied a = Apply(R"({"fp16": {"enabled": true,
      "initial_scale_power": 12, "loss_scale_window": 500, "hysteresis": 3,
      "min_loss_scale": 0.5}})");
  ASSERT_THAT(a.status, IsOk());
  EXPECT_EQ(a.options.precision, Precision::kFp16);
  EXPECT_EQ(a.options.strategy.mixed_precision.param_dtype, at::kHalf);
  EXPECT_EQ(a.options.strategy.mixed_precision.buffer_dtype, at::kHalf);
  EXPECT_EQ(a.options.strategy.mixed_precision.reduce_dtype,
            at::kHalf);  // DeepSpeed's default.
  EXPECT_EQ(a.options.loss_scale, 0);
  EXPECT_EQ(a.options.loss_scale_initial_power, 12);
  EXPECT_EQ(a.options.loss_scale_window, 500);
  EXPECT_EQ(a.options.loss_scale_hysteresis, 3);
  EXPECT_EQ(a.options.loss_scale_min, 0.5);
  EXPECT_TRUE(Logged(a,
                     "--loss_scale_window=500 from "
                     "fp16.loss_scale_window=500 from ds.json"));
}

TEST(ApplyDeepSpeedConfigTest, Fp16DefaultsAreDeepSpeeds) {
  const Applied a = Apply(R"({"fp16": {"enabled": true}})");
  ASSERT_THAT(a.status, IsOk());
  EXPECT_EQ(a.options.loss_scale, 0);
  EXPECT_EQ(a.options.loss_scale_initial_power, 16);
  EXPECT_EQ(a.options.loss_scale_window, 1000);
  EXPECT_EQ(a.options.loss_scale_hysteresis, 2);
  EXPECT_EQ(a.options.loss_scale_min, 1);
}

TEST(ApplyDeepSpeedConfigTest, Fp16StaticScaleLogsTheDynamicKeysAsNoEffect) {
  const Applied a = Apply(
      R"({"fp16": {"enabled": true, "loss_scale": 128, "hysteresis": 4}})");
  ASSERT_THAT(a.status, IsOk());
  EXPECT_EQ(a.options.loss_scale, 128);
  EXPECT_EQ(a.options.loss_scale_hysteresis,
            TrainOptions().loss_scale_hysteresis);
  EXPECT_TRUE(Logged(a,
                     "fp16.hysteresis=4 from ds.json has no effect: a "
                     "static fp16.loss_scale neither grows nor backs off"));
}

TEST(ApplyDeepSpeedConfigTest, Fp16CommunicationDataTypeIsReduceDtype) {
  const Applied a = Apply(
      R"({"fp16": {"enabled": true}, "communication_data_type": "fp32"})");
  ASSERT_THAT(a.status, IsOk());
  EXPECT_EQ(a.options.strategy.mixed_precision.reduce_dtype, at::kFloat);
}

TEST(ApplyDeepSpeedConfigTest, Fp16AndBf16TogetherAreAnError) {
  EXPECT_THAT(
      Apply(R"({"fp16": {"enabled": true}, "bf16": {"enabled": true}})")
          .status.message(),
      HasSubstr("ds.json: fp16.enabled: true together with bf16.enabled"));
}

TEST(ApplyDeepSpeedConfigTest, ConsecutiveHysteresisIsAnError) {
  EXPECT_THAT(Apply(R"({"fp16": {"enabled": true,
                      "consecutive_hysteresis": true}})")
                  .status.message(),
              HasSubstr("fp16.consecutive_hysteresis: true: Strata implements "
                        "DeepSpeed's default (false)"));
}

TEST(ApplyDeepSpeedConfigTest, DisabledFp16ChangesNothing) {
  const Applied a = Apply(R"({"fp16": {"enabled": false, "loss_scale": 8}})");
  ASSERT_THAT(a.status, IsOk());
  EXPECT_EQ(a.options.precision, Precision::kFp32);
  EXPECT_EQ(a.options.loss_scale, 0);
}

TEST(ApplyDeepSpeedConfigTest, AdamIsAdamWUnlessAdamWModeIsFalse) {
  using strategies::OptimizerKind;
  EXPECT_EQ(Apply(R"({"optimizer": {"type": "Adam"}})").options.optimizer.kind,
            OptimizerKind::kAdamW);
  EXPECT_EQ(Apply(R"({"optimizer": {"type": "adam",
                      "params": {"adam_w_mode": false}}})")
                .options.optimizer.kind,
            OptimizerKind::kAdam);
  EXPECT_EQ(Apply(R"({"optimizer": {"type": "AdamW",
                      "params": {"adam_w_mode": false}}})")
                .options.optimizer.kind,
            OptimizerKind::kAdamW);
}

TEST(ApplyDeepSpeedConfigTest, OptimizerParametersAndTheirDefaults) {
  const Applied a =
      Apply(R"({"optimizer": {"type": "AdamW", "params": {"lr": 3e-4}}})");
  ASSERT_THAT(a.status, IsOk());
  EXPECT_EQ(a.options.schedule.base_lr, 3e-4);
  EXPECT_EQ(a.options.optimizer.adamw.beta1,
            0.9);  // FusedAdam's defaults, not Strata's
  EXPECT_EQ(a.options.optimizer.adamw.beta2, 0.999);  // --beta2=0.95.
  EXPECT_EQ(a.options.optimizer.adamw.eps, 1e-8);
  EXPECT_EQ(a.options.optimizer.weight_decay, 0.0);
}

TEST(ApplyDeepSpeedConfigTest, TorchAdamWDefaultsToItsWeightDecay) {
  const Applied a = Apply(
      R"({"optimizer": {"type": "AdamW", "params": {"torch_adam": true}}})");
  ASSERT_THAT(a.status, IsOk());
  EXPECT_EQ(a.options.optimizer.weight_decay, 0.01);
  EXPECT_TRUE(Logged(a, "Strata decays matrices and embeddings only"));
}

TEST(ApplyDeepSpeedConfigTest, SgdTakesItsMomentumParameters) {
  const Applied a = Apply(R"({"optimizer": {"type": "SGD", "params": {
      "lr": 0.1, "momentum": 0.9, "dampening": 0.0, "nesterov": true,
      "weight_decay": 1e-4}}})");
  ASSERT_THAT(a.status, IsOk());
  EXPECT_EQ(a.options.optimizer.kind, strategies::OptimizerKind::kSgd);
  EXPECT_EQ(a.options.schedule.base_lr, 0.1);
  EXPECT_EQ(a.options.optimizer.sgd.momentum, 0.9);
  EXPECT_TRUE(a.options.optimizer.sgd.nesterov);
  EXPECT_EQ(a.options.optimizer.weight_decay, 1e-4);
}

TEST(ApplyDeepSpeedConfigTest, WarmupLrSetsEveryStepsLr) {
  const Applied a = Apply(R"({
      "optimizer": {"type": "AdamW", "params": {"lr": 5e-4}},
      "scheduler": {"type": "WarmupLR", "params": {"warmup_min_lr": 1e-5,
                    "warmup_max_lr": 1e-3, "warmup_num_steps": 20}}})");
  ASSERT_THAT(a.status, IsOk());
  EXPECT_EQ(a.options.schedule.kind, optim::LrScheduleKind::kWarmupLr);
  EXPECT_EQ(a.options.schedule.base_lr, 1e-3);
  EXPECT_EQ(a.options.schedule.min_lr, 1e-5);
  EXPECT_EQ(a.options.schedule.warmup_steps, 20);
  EXPECT_EQ(a.options.schedule.warmup_type, "log");
  EXPECT_TRUE(Logged(a,
                     "optimizer.params.lr=0.0005 from ds.json has no "
                     "effect: scheduler WarmupLR sets every step's lr"));
  EXPECT_THAT(ValidateTrainOptions(a.options), IsOk());
}

TEST(ApplyDeepSpeedConfigTest, WarmupCosineLrScalesTheOptimizersLr) {
  const Applied a = Apply(R"({
      "optimizer": {"type": "AdamW", "params": {"lr": 5e-4}},
      "scheduler": {"type": "WarmupCosineLR", "params": {
          "total_num_steps": 100, "warmup_num_steps": 10,
          "warmup_min_ratio": 0.1, "cos_min_ratio": 0.01,
          "warmup_type": "linear"}}})");
  ASSERT_THAT(a.status, IsOk());
  EXPECT_EQ(a.options.schedule.kind, optim::LrScheduleKind::kWarmupCosineLr);
  EXPECT_EQ(a.options.schedule.base_lr, 5e-4);
  EXPECT_EQ(a.options.schedule.total_steps, 100);
  EXPECT_EQ(a.options.schedule.warmup_min_ratio, 0.1);
  EXPECT_EQ(a.options.schedule.min_ratio, 0.01);
  EXPECT_EQ(a.options.schedule.warmup_type, "linear");
  EXPECT_THAT(ValidateTrainOptions(a.options), IsOk());
}

TEST(ApplyDeepSpeedConfigTest, ActivationCheckpointingRecomputesTheBlocks) {
  EXPECT_THAT(Apply(R"({"activation_checkpointing": {}})")
                  .options.strategy.checkpoint_units,
              ElementsAre("GPTBlock"));
  TrainOptions llama;
  llama.model = "llama-tiny";
  EXPECT_THAT(Apply(R"({"activation_checkpointing": {}})", 1, llama)
                  .options.strategy.checkpoint_units,
              ElementsAre("LlamaBlock"));
}

TEST(ApplyDeepSpeedConfigTest, RunKeysAndDeepSpeedsDefaults) {
  Applied a = Apply(R"({"gradient_clipping": 0.5, "steps_per_print": 7,
                        "wall_clock_breakdown": true})");
  ASSERT_THAT(a.status, IsOk());
  EXPECT_EQ(a.options.optimizer.grad_clip, 0.5);
  EXPECT_EQ(a.options.log_interval, 7);
  EXPECT_TRUE(a.options.wall_clock_breakdown);
  a = Apply("{}");  // DeepSpeed clips nothing and prints every 10 steps.
  EXPECT_EQ(a.options.optimizer.grad_clip, 0.0);
  EXPECT_EQ(a.options.log_interval, 10);
  EXPECT_TRUE(Logged(a,
                     "--grad_clip=0 from gradient_clipping=0 (DeepSpeed's "
                     "default; ds.json leaves it out)"));
}

TEST(ApplyDeepSpeedConfigTest, ExplicitFlagsWinAndEachOverrideIsLogged) {
  TrainOptions flags;
  flags.schedule.base_lr = 0.001;
  flags.optimizer.grad_clip = 2.0;
  const Applied a = Apply(
      R"({"optimizer": {"type": "AdamW", "params": {"lr": 3e-4}},
          "gradient_clipping": 1.0})",
      1, flags, {"lr", "grad_clip"});
  ASSERT_THAT(a.status, IsOk());
  EXPECT_EQ(a.options.schedule.base_lr, 0.001);
  EXPECT_EQ(a.options.optimizer.grad_clip, 2.0);
  EXPECT_THAT(a.log, Contains("--lr=0.001 overrides optimizer.params.lr=0.0003 "
                              "from ds.json"));
  EXPECT_THAT(a.log, Contains("--grad_clip=2 overrides gradient_clipping=1 "
                              "from ds.json"));
}

TEST(ApplyDeepSpeedConfigTest, AppliedValuesAreLogged) {
  const Applied a = Apply(R"({"zero_optimization": {"stage": 2}})", 2);
  EXPECT_THAT(a.log, Contains("--strategy=zero2 from zero_optimization.stage=2 "
                              "from ds.json"));
}

TEST(ApplyDeepSpeedConfigTest, AConfigGivesValidOptions) {
  const Applied a = Apply(R"({
      "train_batch_size": 8, "train_micro_batch_size_per_gpu": 2,
      "bf16": {"enabled": true}, "gradient_clipping": 1.0,
      "zero_optimization": {"stage": 2, "reduce_bucket_size": 5e7,
                            "allgather_bucket_size": 5e7,
                            "overlap_comm": true},
      "optimizer": {"type": "AdamW", "params": {"lr": 1e-3,
                    "betas": [0.9, 0.95], "weight_decay": 0.1}},
      "scheduler": {"type": "WarmupDecayLR", "params": {
          "warmup_num_steps": 2, "total_num_steps": 10,
          "warmup_max_lr": 1e-3}},
      "activation_checkpointing": {"partition_activations": false}})",
                          2);
  ASSERT_THAT(a.status, IsOk());
  EXPECT_THAT(ValidateTrainOptions(a.options), IsOk());
}

}  // namespace
}  // namespace strata::launch
