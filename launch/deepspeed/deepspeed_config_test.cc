#include "launch/deepspeed/deepspeed_config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "base/testing/status_matchers.h"

namespace strata::launch {
namespace {

using ::strata::testing::StatusIs;
using ::testing::AllOf;
using ::testing::HasSubstr;

absl::StatusOr<DeepSpeedConfig> Parse(const std::string& json) {
  return ParseDeepSpeedConfig(json, "ds.json");
}

// The error message of parsing `json` (a test failure if it parses).
std::string ErrorOf(const std::string& json) {
  absl::StatusOr<DeepSpeedConfig> c = Parse(json);
  EXPECT_FALSE(c.ok()) << json;
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  return std::string(c.status().message());
}

TEST(ParseDeepSpeedConfigTest, AnEmptyObjectGivesDeepSpeedsDefaults) {
  ASSERT_OK_AND_ASSIGN(const DeepSpeedConfig c, Parse("{}"));
  EXPECT_EQ(c.source, "ds.json");
  EXPECT_TRUE(c.given.empty());
  EXPECT_FALSE(c.train_batch_size.has_value());
  EXPECT_EQ(c.gradient_clipping, 0.0);
  EXPECT_EQ(c.steps_per_print, 10);
  EXPECT_FALSE(c.wall_clock_breakdown);
  EXPECT_EQ(c.zero.stage, 0);
  EXPECT_EQ(c.zero.reduce_bucket_size, 500000000);
  EXPECT_EQ(c.zero.stage3_prefetch_bucket_size, 50000000);
  EXPECT_EQ(c.zero.stage3_param_persistence_threshold, 100000);
  EXPECT_FALSE(c.zero.overlap_comm.has_value());
  EXPECT_EQ(c.zero.offload_optimizer.device, "none");
  EXPECT_FALSE(c.bf16_enabled);
  EXPECT_EQ(c.fp16.initial_scale_power, 16);
  EXPECT_EQ(c.fp16.loss_scale_window, 1000);
  EXPECT_EQ(c.fp16.hysteresis, 2);
  EXPECT_FALSE(c.optimizer.present);
  EXPECT_FALSE(c.scheduler.present);
  EXPECT_FALSE(c.activation_checkpointing.present);
}

TEST(ParseDeepSpeedConfigTest, ReadsGivenValuesAndRecordsTheirPaths) {
  ASSERT_OK_AND_ASSIGN(const DeepSpeedConfig c, Parse(R"({
    "train_batch_size": 16,
    "gradient_accumulation_steps": 2,
    "gradient_clipping": 0.5,
    "bf16": {"enabled": true},
    "zero_optimization": {"stage": 2, "reduce_bucket_size": 2e8,
                          "overlap_comm": true,
                          "offload_optimizer": {"device": "cpu",
                                                "pin_memory": true}}
  })"));
  EXPECT_EQ(c.train_batch_size, 16);
  EXPECT_EQ(c.gradient_accumulation_steps, 2);
  EXPECT_FALSE(c.train_micro_batch_size_per_gpu.has_value());
  EXPECT_EQ(c.gradient_clipping, 0.5);
  EXPECT_TRUE(c.bf16_enabled);
  EXPECT_EQ(c.zero.stage, 2);
  EXPECT_EQ(c.zero.reduce_bucket_size, 200000000);  // 2e8, a whole number.
  EXPECT_EQ(c.zero.overlap_comm, true);
  EXPECT_TRUE(c.zero.offload_optimizer.present);
  EXPECT_EQ(c.zero.offload_optimizer.device, "cpu");
  EXPECT_TRUE(c.zero.offload_optimizer.pin_memory);
  EXPECT_FALSE(c.zero.offload_param.present);
  EXPECT_TRUE(c.Given("zero_optimization.reduce_bucket_size"));
  EXPECT_TRUE(c.Given("zero_optimization.offload_optimizer.pin_memory"));
  EXPECT_FALSE(c.Given("zero_optimization.allgather_bucket_size"));
}

TEST(ParseDeepSpeedConfigTest, ASyntaxErrorNamesTheFileLineAndColumn) {
  EXPECT_THAT(ErrorOf("{\n  \"train_batch_size\": 8,\n}"),
              AllOf(HasSubstr("ds.json:3:1: JSON syntax error"),
                    HasSubstr("unexpected '}'")));
}

TEST(ParseDeepSpeedConfigTest, TheRootMustBeAnObject) {
  EXPECT_THAT(ErrorOf("[1, 2]"),
              HasSubstr("ds.json: expected a JSON object of DeepSpeed keys, "
                        "got [1,2]"));
}

TEST(ParseDeepSpeedConfigTest, AnUnknownKeyIsNamedByItsFullPath) {
  EXPECT_THAT(ErrorOf(R"({"zero_optimization": {"stages": 2}})"),
              AllOf(HasSubstr("ds.json: zero_optimization.stages: unknown "
                              "key (the keys Strata knows in "
                              "zero_optimization: stage, "),
                    HasSubstr("offload_param")));
  EXPECT_THAT(ErrorOf(R"({"train_batch": 2})"),
              HasSubstr("train_batch: unknown key"));
}

TEST(ParseDeepSpeedConfigTest, AWrongTypeNamesTheKeyAndTheValue) {
  EXPECT_THAT(
      ErrorOf(R"({"optimizer": {"type": "AdamW", "params": {"betas": "x"}}})"),
      HasSubstr("ds.json: optimizer.params.betas: expected an array of 2 "
                "numbers, got \"x\""));
  EXPECT_THAT(ErrorOf(R"({"bf16": {"enabled": 1}})"),
              HasSubstr("bf16.enabled: expected true or false, got 1"));
  EXPECT_THAT(ErrorOf(R"({"zero_optimization": 2})"),
              HasSubstr("zero_optimization: expected an object, got 2"));
}

TEST(ParseDeepSpeedConfigTest, AnIntegerMustBeWhole) {
  EXPECT_THAT(ErrorOf(R"({"train_batch_size": 2.5})"),
              HasSubstr("train_batch_size: expected an integer or null, got "
                        "2.5"));
}

TEST(ParseDeepSpeedConfigTest, AutoIsExplainedAsAHuggingFacePlaceholder) {
  EXPECT_THAT(ErrorOf(R"({"train_micro_batch_size_per_gpu": "auto"})"),
              HasSubstr("\"auto\" is a Hugging Face Trainer placeholder"));
}

TEST(ParseDeepSpeedConfigTest, AValueNotAcceptedListsTheAcceptedOnes) {
  EXPECT_THAT(ErrorOf(R"({"zero_optimization": {"stage": 4}})"),
              HasSubstr("ds.json: zero_optimization.stage: 4 is not one of "
                        "0, 1, 2, 3"));
  EXPECT_THAT(
      ErrorOf(R"({"scheduler": {"type": "WarmupLR",
                                "params": {"warmup_type": "cos"}}})"),
      HasSubstr("scheduler.params.warmup_type: \"cos\" is not one of log, "
                "linear"));
}

TEST(ParseDeepSpeedConfigTest, AValueOutOfRangeNamesTheRange) {
  EXPECT_THAT(ErrorOf(R"({"gradient_clipping": -1})"),
              HasSubstr("gradient_clipping: -1 is out of range: must be >= 0"));
  EXPECT_THAT(
      ErrorOf(
          R"({"optimizer": {"type": "Adam", "params": {"betas": [0.9, 1]}}})"),
      HasSubstr("optimizer.params.betas: [0.9, 1] is out of range: must be "
                ">= 0 and < 1"));
}

TEST(ParseDeepSpeedConfigTest, AKeyGivenTwiceIsAnError) {
  EXPECT_THAT(
      ErrorOf(R"({"zero_optimization": {"stage": 1, "stage": 2}})"),
      HasSubstr("ds.json: zero_optimization.stage: the key appears twice"));
}

TEST(ParseDeepSpeedConfigTest, AnUnimplementedSectionIsNamed) {
  EXPECT_THAT(ErrorOf(R"({"aio": {"block_size": 1048576}})"),
              HasSubstr("ds.json: aio: Strata does not implement DeepSpeed's "
                        "asynchronous I/O"));
  EXPECT_THAT(ErrorOf(R"({"zero_optimization": {"cpu_offload": true}})"),
              HasSubstr("zero_optimization.cpu_offload: deprecated by "
                        "DeepSpeed: use zero_optimization.offload_optimizer"));
}

TEST(ParseDeepSpeedConfigTest, AMonitorSectionIsAcceptedOnlyDisabled) {
  ASSERT_OK_AND_ASSIGN(
      const DeepSpeedConfig c,
      Parse(R"({"tensorboard": {"enabled": false, "output_path": "tb"}})"));
  EXPECT_TRUE(c.Given("tensorboard"));
  EXPECT_THAT(ErrorOf(R"({"tensorboard": {"enabled": true}})"),
              HasSubstr("tensorboard: Strata does not implement the "
                        "TensorBoard monitor"));
  EXPECT_THAT(ErrorOf(R"({"tensorboard": {"enabled": true}})"),
              HasSubstr("pass --tensorboard_dir"));
  EXPECT_THAT(ErrorOf(R"({"wandb": {"project": "p"}})"),
              HasSubstr("set wandb.enabled to false"));
}

TEST(ParseDeepSpeedConfigTest, AnUnsupportedValueOfAKnownKeyIsNamed) {
  EXPECT_THAT(
      ErrorOf(
          R"({"activation_checkpointing": {"partition_activations": true}})"),
      HasSubstr("activation_checkpointing.partition_activations: true is not "
                "supported: Strata does not partition checkpointed "
                "activations"));
  EXPECT_THAT(
      ErrorOf(R"({"zero_optimization": {"zero_quantized_weights": true}})"),
      HasSubstr("only false (DeepSpeed's default) is accepted"));
  EXPECT_THAT(
      ErrorOf(R"({"zero_optimization": {"offload_param": {"device": "nvme",
                  "nvme_path": "/nvme"}}})"),
      HasSubstr("zero_optimization.offload_param.device: \"nvme\" is not "
                "supported: Strata does not implement NVMe offload"));
}

TEST(ParseDeepSpeedConfigTest, DefaultValuesOfUnimplementedKeysAreAccepted) {
  ASSERT_OK_AND_ASSIGN(const DeepSpeedConfig c, Parse(R"({
    "zero_allow_untested_optimizer": false,
    "activation_checkpointing": {"partition_activations": false,
                                 "cpu_checkpointing": false},
    "zero_optimization": {"offload_param": {"device": "cpu",
                                            "nvme_path": null}}})"));
  EXPECT_TRUE(c.activation_checkpointing.present);
  EXPECT_EQ(c.zero.offload_param.device, "cpu");
}

TEST(ParseDeepSpeedConfigTest, StringsOfCaseFreeKeysAreLowerCased) {
  ASSERT_OK_AND_ASSIGN(const DeepSpeedConfig c,
                       Parse(R"({"communication_data_type": "BF16"})"));
  EXPECT_EQ(c.communication_data_type, "bf16");
}

TEST(ParseDeepSpeedConfigTest, AdamAndAdamWAreMatchedInAnyCase) {
  ASSERT_OK_AND_ASSIGN(DeepSpeedConfig c,
                       Parse(R"({"optimizer": {"type": "ADAMW"}})"));
  EXPECT_EQ(c.optimizer.type, "adamw");
  ASSERT_OK_AND_ASSIGN(c, Parse(R"({"optimizer": {"type": "Adam",
      "params": {"lr": 3e-4, "betas": [0.8, 0.99], "eps": 1e-6,
                 "weight_decay": 0.1, "adam_w_mode": false}}})"));
  EXPECT_EQ(c.optimizer.type, "adam");
  EXPECT_EQ(c.optimizer.lr, 3e-4);
  EXPECT_EQ(c.optimizer.betas[0], 0.8);
  EXPECT_EQ(c.optimizer.betas[1], 0.99);
  EXPECT_EQ(c.optimizer.eps, 1e-6);
  EXPECT_EQ(c.optimizer.weight_decay, 0.1);
  EXPECT_FALSE(c.optimizer.adam_w_mode);
}

TEST(ParseDeepSpeedConfigTest, SgdIsMatchedAsTorchOptimSgd) {
  ASSERT_OK_AND_ASSIGN(const DeepSpeedConfig c, Parse(R"({"optimizer": {
      "type": "SGD", "params": {"lr": 0.1, "momentum": 0.9,
                                "nesterov": true}}})"));
  EXPECT_EQ(c.optimizer.type, "sgd");
  EXPECT_EQ(c.optimizer.momentum, 0.9);
  EXPECT_TRUE(c.optimizer.nesterov);
  EXPECT_THAT(ErrorOf(R"({"optimizer": {"type": "sgd",
                                        "params": {"lr": 0.1}}})"),
              HasSubstr("optimizer.type: \"sgd\" is not an optimizer "
                        "DeepSpeed knows"));
}

TEST(ParseDeepSpeedConfigTest, OtherOptimizersAreNamed) {
  EXPECT_THAT(ErrorOf(R"({"optimizer": {"type": "Lamb"}})"),
              HasSubstr("optimizer.type: Strata does not implement the "
                        "\"Lamb\" optimizer"));
  EXPECT_THAT(ErrorOf(R"({"optimizer": {"type": "RMSprop"}})"),
              HasSubstr("Strata does not implement the \"RMSprop\""));
  EXPECT_THAT(ErrorOf(R"({"optimizer": {"type": "Fancy"}})"),
              HasSubstr("\"Fancy\" is neither a DeepSpeed optimizer"));
  EXPECT_THAT(ErrorOf(R"({"optimizer": {"params": {"lr": 1}}})"),
              HasSubstr("optimizer.type: missing"));
}

TEST(ParseDeepSpeedConfigTest, OptimizerParametersMustBeTheTypes) {
  EXPECT_THAT(ErrorOf(R"({"optimizer": {"type": "AdamW",
                                "params": {"momentum": 0.9}}})"),
              HasSubstr("optimizer.params.momentum: not a parameter of AdamW"));
  EXPECT_THAT(ErrorOf(R"({"optimizer": {"type": "SGD",
                                "params": {"lr": 1, "betas": [0.9, 0.9]}}})"),
              HasSubstr("optimizer.params.betas: not a parameter of SGD"));
  EXPECT_THAT(ErrorOf(R"({"optimizer": {"type": "AdamW",
                                        "params": {"max_grad_norm": 1}}})"),
              HasSubstr("clip with the top-level gradient_clipping"));
}

TEST(ParseDeepSpeedConfigTest, SgdNeedsALearningRateAndNesterovMomentum) {
  EXPECT_THAT(ErrorOf(R"({"optimizer": {"type": "SGD"}})"),
              HasSubstr("optimizer.params.lr: missing"));
  EXPECT_THAT(ErrorOf(R"({"optimizer": {"type": "SGD",
      "params": {"lr": 0.1, "nesterov": true}}})"),
              HasSubstr("optimizer.params.nesterov: true needs momentum > 0"));
}

TEST(ParseDeepSpeedConfigTest, ReadsTheWarmupSchedules) {
  ASSERT_OK_AND_ASSIGN(DeepSpeedConfig c, Parse(R"({"scheduler": {
      "type": "WarmupDecayLR", "params": {"warmup_min_lr": 1e-5,
      "warmup_max_lr": 1e-3, "warmup_num_steps": 10,
      "warmup_type": "linear", "total_num_steps": 100}}})"));
  EXPECT_EQ(c.scheduler.type, "WarmupDecayLR");
  EXPECT_EQ(c.scheduler.warmup_min_lr, 1e-5);
  EXPECT_EQ(c.scheduler.warmup_max_lr, 1e-3);
  EXPECT_EQ(c.scheduler.warmup_num_steps, 10);
  EXPECT_EQ(c.scheduler.warmup_type, "linear");
  EXPECT_EQ(c.scheduler.total_num_steps, 100);
  ASSERT_OK_AND_ASSIGN(c, Parse(R"({"scheduler": {"type": "WarmupCosineLR",
      "params": {"total_num_steps": 50}}})"));
  EXPECT_EQ(c.scheduler.warmup_type, "log");  // DeepSpeed's default.
  EXPECT_EQ(c.scheduler.warmup_num_steps, 1000);
  EXPECT_EQ(c.scheduler.cos_min_ratio, 0.0001);
}

TEST(ParseDeepSpeedConfigTest, SchedulerTypesAndParametersAreChecked) {
  EXPECT_THAT(ErrorOf(R"({"scheduler": {"type": "warmuplr"}})"),
              HasSubstr("scheduler.type: \"warmuplr\" is not one of "
                        "WarmupLR, WarmupDecayLR, WarmupCosineLR"));
  EXPECT_THAT(ErrorOf(R"({"scheduler": {"type": "OneCycle"}})"),
              HasSubstr("Strata does not implement the \"OneCycle\""));
  EXPECT_THAT(ErrorOf(R"({"scheduler": {"type": "WarmupLR",
                                        "params": {"total_num_steps": 9}}})"),
              HasSubstr("scheduler.params.total_num_steps: not a parameter "
                        "of WarmupLR"));
  EXPECT_THAT(ErrorOf(R"({"scheduler": {"type": "WarmupDecayLR"}})"),
              HasSubstr("scheduler.params.total_num_steps: missing"));
  EXPECT_THAT(ErrorOf(R"({"scheduler": {"type": "WarmupCosineLR",
          "params": {"total_num_steps": 10, "warmup_num_steps": 10}}})"),
              HasSubstr("10 equals the warm-up"));
  EXPECT_THAT(ErrorOf(R"({"scheduler": {"type": "WarmupLR",
      "params": {"last_batch_iteration": 5}}})"),
              HasSubstr("--resume restores a run's position"));
}

}  // namespace
}  // namespace strata::launch
