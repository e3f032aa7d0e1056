// ValidateTrainOptions: every flag checked before any work starts, errors
// naming the flag — the optimizer flags (those of another optimizer than
// --optimizer's) and the precision flags (loss scaling only with
// --precision=fp16; fp16 refused up front where LibTorch cannot compute it).
#include "launch/config/train_options.h"

#include <ATen/core/Tensor.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <limits>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "base/testing/status_matchers.h"
#include "base/testing/temp_dir.h"
#include "models/config.h"
#include "models/hf_config.h"
#include "optim/lr_schedule.h"
#include "strategies/mixed_precision.h"
#include "strategies/options.h"

namespace strata::launch {
namespace {

using ::strata::testing::IsOk;
using ::testing::AllOf;
using ::testing::HasSubstr;

// The optimizer flags (ValidateTrainOptions): an option of another
// optimizer than --optimizer's is an error naming both flags; each value is
// checked with its flag named.
TEST(LrScheduleOptionsOfTest, ZeroTotalStepsIsTheRunsSteps) {
  TrainOptions o;
  o.steps = 700;
  EXPECT_EQ(LrScheduleOptionsOf(o).total_steps, 700);
  o.schedule.total_steps = 300;
  EXPECT_EQ(LrScheduleOptionsOf(o).total_steps, 300);
}

TEST(LrScheduleOptionsOfTest, EmptyWarmupTypeIsTheKindsOwn) {
  TrainOptions o;
  EXPECT_EQ(LrScheduleOptionsOf(o).warmup_type, "linear");
  o.schedule.kind = optim::LrScheduleKind::kWarmupLr;
  EXPECT_EQ(LrScheduleOptionsOf(o).warmup_type, "log");
  o.schedule.warmup_type = "linear";
  EXPECT_EQ(LrScheduleOptionsOf(o).warmup_type, "linear");
}

TEST(LrScheduleOptionsOfTest, RatiosAreKeptForWarmupCosineOnly) {
  TrainOptions o;
  o.schedule.warmup_min_ratio = 0.1;
  EXPECT_EQ(LrScheduleOptionsOf(o).warmup_min_ratio, 0.0);
  EXPECT_EQ(LrScheduleOptionsOf(o).min_ratio, 0.0);
  o.schedule.kind = optim::LrScheduleKind::kWarmupCosineLr;
  EXPECT_EQ(LrScheduleOptionsOf(o).warmup_min_ratio, 0.1);
  EXPECT_EQ(LrScheduleOptionsOf(o).min_ratio, 1e-4);  // DeepSpeed's default.
}

TEST(LrScheduleOptionsOfTest, TheOtherFieldsAreTheFlags) {
  TrainOptions o;
  o.schedule.kind = optim::LrScheduleKind::kStep;
  o.schedule.base_lr = 0.5;
  o.schedule.warmup_steps = 3;
  o.schedule.min_lr = 0.01;
  o.schedule.step_size = 7;
  o.schedule.gamma = 0.25;
  const optim::LrScheduleOptions s = LrScheduleOptionsOf(o);
  EXPECT_EQ(s.kind, optim::LrScheduleKind::kStep);
  EXPECT_EQ(s.base_lr, 0.5);
  EXPECT_EQ(s.warmup_steps, 3);
  EXPECT_EQ(s.min_lr, 0.01);
  EXPECT_EQ(s.step_size, 7);
  EXPECT_EQ(s.gamma, 0.25);
}

TEST(OptimizerFlagsTest, DefaultsPassForEveryOptimizer) {
  for (strategies::OptimizerKind kind :
       {strategies::OptimizerKind::kAdamW, strategies::OptimizerKind::kAdam,
        strategies::OptimizerKind::kSgd}) {
    TrainOptions o;
    o.optimizer.kind = kind;
    EXPECT_THAT(ValidateTrainOptions(o), IsOk())
        << strategies::OptimizerKindName(kind);
  }
}

TEST(OptimizerFlagsTest, MomentumWithAdamWNamesBothFlags) {
  TrainOptions o;
  o.optimizer.sgd.momentum = 0.9;
  EXPECT_THAT(ValidateTrainOptions(o).message(),
              HasSubstr("--momentum: is used only by --optimizer=sgd, got "
                        "--optimizer=adamw"));
}

TEST(OptimizerFlagsTest, NesterovWithAdamNamesBothFlags) {
  TrainOptions o;
  o.optimizer.kind = strategies::OptimizerKind::kAdam;
  o.optimizer.sgd.nesterov = true;
  EXPECT_THAT(ValidateTrainOptions(o).message(),
              HasSubstr("--nesterov: is used only by --optimizer=sgd, got "
                        "--optimizer=adam"));
}

TEST(OptimizerFlagsTest, BetaWithSgdNamesBothFlags) {
  TrainOptions o;
  o.optimizer.kind = strategies::OptimizerKind::kSgd;
  o.optimizer.adamw.beta2 = 0.999;
  EXPECT_THAT(ValidateTrainOptions(o).message(),
              HasSubstr("--beta2: is used only by --optimizer=adamw or adam, "
                        "got --optimizer=sgd"));
}

TEST(OptimizerFlagsTest, NesterovWithoutMomentumIsAnError) {
  TrainOptions o;
  o.optimizer.kind = strategies::OptimizerKind::kSgd;
  o.optimizer.sgd.nesterov = true;
  EXPECT_THAT(ValidateTrainOptions(o).message(),
              HasSubstr("--nesterov needs --momentum > 0 and --dampening == 0, "
                        "got --momentum 0 and --dampening 0"));
}

TEST(OptimizerFlagsTest, NesterovWithDampeningIsAnError) {
  TrainOptions o;
  o.optimizer.kind = strategies::OptimizerKind::kSgd;
  o.optimizer.sgd.momentum = 0.9;
  o.optimizer.sgd.dampening = 0.1;
  o.optimizer.sgd.nesterov = true;
  EXPECT_THAT(ValidateTrainOptions(o).message(),
              HasSubstr("got --momentum 0.9 and --dampening 0.1"));
}

TEST(OptimizerFlagsTest, NormTypeThatIsNoNormIsAnError) {
  TrainOptions o;
  o.optimizer.grad_clip_norm_type = -1;
  EXPECT_THAT(ValidateTrainOptions(o).message(),
              HasSubstr("--grad_clip_norm_type must be > 0"));
}

TEST(OptimizerFlagsTest, InfinityNormTypeIsValid) {
  TrainOptions o;
  o.optimizer.grad_clip_norm_type = std::numeric_limits<double>::infinity();
  EXPECT_THAT(ValidateTrainOptions(o), IsOk());
}

TEST(OptimizerFlagsTest, DampeningWithoutMomentumIsAnError) {
  TrainOptions o;
  o.optimizer.kind = strategies::OptimizerKind::kSgd;
  o.optimizer.sgd.dampening = 0.5;
  EXPECT_THAT(ValidateTrainOptions(o).message(),
              HasSubstr("--dampening: is used only with --momentum > 0"));
}

TEST(OptimizerFlagsTest, NegativeMomentumNamesTheFlag) {
  TrainOptions o;
  o.optimizer.kind = strategies::OptimizerKind::kSgd;
  o.optimizer.sgd.momentum = -0.1;
  EXPECT_THAT(ValidateTrainOptions(o).message(),
              HasSubstr("--momentum must be >= 0, got -0.1"));
}

TEST(OptimizerFlagsTest, NegativeEpsNamesTheFlag) {
  TrainOptions o;
  o.optimizer.kind = strategies::OptimizerKind::kAdam;
  o.optimizer.adamw.eps = -1e-8;
  EXPECT_THAT(ValidateTrainOptions(o).message(),
              HasSubstr("--eps must be >= 0, got -1e-08"));
}

TEST(OptimizerFlagsTest, Beta1OfOneNamesTheFlag) {
  TrainOptions o;
  o.optimizer.adamw.beta1 = 1.0;
  EXPECT_THAT(ValidateTrainOptions(o).message(),
              HasSubstr("--beta1 must be in [0, 1), got 1"));
}

TEST(PrecisionFlagsTest, LossScaleFlagsNeedFp16) {
  TrainOptions o;
  o.loss_scale_window = 10;
  EXPECT_THAT(ValidateTrainOptions(o).message(),
              HasSubstr("--loss_scale_window: is used only with "
                        "--precision=fp16 (loss scaling), got "
                        "--precision=fp32"));
}

TEST(PrecisionFlagsTest, InitialPowerPastFloat32NamesTheFlag) {
  TrainOptions o;
  o.precision = Precision::kFp16;
  o.loss_scale_initial_power = 128;
  EXPECT_THAT(ValidateTrainOptions(o).message(),
              HasSubstr("--loss_scale_initial_power: must be in [0, 127]"));
}

TEST(PrecisionFlagsTest, NegativeLossScaleNamesTheFlag) {
  TrainOptions o;
  o.precision = Precision::kFp16;
  o.loss_scale = -1;
  EXPECT_THAT(ValidateTrainOptions(o).message(),
              HasSubstr("--loss_scale: must be 0 (dynamic) or a positive "
                        "float32 value, got -1"));
}

TEST(PrecisionFlagsTest, Fp16WithBf16ParametersNamesTheFlag) {
  TrainOptions o;
  o.precision = Precision::kFp16;
  o.strategy.mixed_precision.param_dtype = at::kBFloat16;
  EXPECT_THAT(ValidateTrainOptions(o).message(),
              HasSubstr("--param_dtype: --precision=fp16 keeps the model in "
                        "fp16: leave this flag at fp32 or set fp16, got "
                        "bf16"));
}

// Where this LibTorch cannot compute in fp16 on the CPU (1.13), fp16 is
// refused up front, naming the flag, the op and the way out; where it can
// (2.x), the same options pass.
TEST(PrecisionFlagsTest, Fp16IsRefusedUpFrontWhereLibTorchCannotComputeIt) {
  TrainOptions o;
  o.precision = Precision::kFp16;
  if (strategies::CheckCpuComputeDtype(at::kHalf).ok()) {
    EXPECT_THAT(ValidateTrainOptions(o), IsOk());
    return;
  }
  const std::string message(ValidateTrainOptions(o).message());
  EXPECT_THAT(message, HasSubstr("--precision: fp16: this LibTorch ("));
  EXPECT_THAT(message, HasSubstr(") cannot train in Half on the CPU: "));
  EXPECT_THAT(message, HasSubstr("tools/libtorch2/run.sh"));
}

TEST(ModelFlagTest, ConfigJsonGivesThePublishedConfig) {
  // llama-1b's config as Hugging Face writes it (rope scaling included).
  const absl::StatusOr<models::ModelConfig> named =
      models::ConfigByName("llama-1b");
  ASSERT_THAT(named, IsOk());
  const std::string dir = testing::FreshTempDir("llama_config");
  std::ofstream(dir + "/config.json") << models::HfConfigJson(*named);
  for (const std::string& model : {dir, dir + "/config.json"}) {
    const absl::StatusOr<models::ModelConfig> read = ModelConfigOf(model);
    ASSERT_THAT(read, IsOk()) << model;
    EXPECT_EQ(read->family, "llama");
    EXPECT_EQ(read->vocab_size, named->vocab_size);
    EXPECT_EQ(read->num_layers, named->num_layers);
    EXPECT_EQ(read->num_kv_heads, named->num_kv_heads);
    EXPECT_EQ(read->rope_theta, named->rope_theta);
    EXPECT_EQ(read->rope_scaling.type, "llama3");
    EXPECT_EQ(read->rope_scaling.factor, named->rope_scaling.factor);
    EXPECT_EQ(read->tie_embeddings, named->tie_embeddings);
  }
}

TEST(ModelFlagTest, UnknownModelTypeNamesTheFlagAndTheFile) {
  const std::string dir = testing::FreshTempDir("bert_config");
  std::ofstream(dir + "/config.json") << R"({"model_type": "bert"})";
  EXPECT_THAT(ModelConfigOf(dir).status().message(),
              AllOf(HasSubstr("--model"), HasSubstr("config.json"),
                    HasSubstr("'bert'")));
}

TEST(ModelFlagTest, UnknownNameSuggestsAConfigJson) {
  EXPECT_THAT(ModelConfigOf("gpt-5").status().message(),
              AllOf(HasSubstr("--model"), HasSubstr("gpt-5"),
                    HasSubstr("or a config.json or its directory")));
}

// --eval_only: evaluates loaded weights, so it needs --load_weights or
// --resume; --eval_batches=0 (the whole eval split) only with it.
TEST(EvalOnlyFlagsTest, NeedsWeightsAndAllowsEvalBatchesZero) {
  TrainOptions o;
  o.eval_only = true;
  EXPECT_THAT(ValidateTrainOptions(o).message(),
              HasSubstr("--eval_only needs --load_weights or --resume"));
  o.checkpoint.load_weights = "/ckpt/step_00000004";
  EXPECT_THAT(ValidateTrainOptions(o), IsOk());
  o.checkpoint.load_weights = "";
  o.checkpoint.resume = "auto";
  o.eval_batches = 0;
  EXPECT_THAT(ValidateTrainOptions(o), IsOk());
  o.eval_batches = -1;
  EXPECT_THAT(ValidateTrainOptions(o).message(),
              HasSubstr("--eval_batches: must be >= 1 (0, all of the eval "
                        "data, only with --eval_only), got -1"));
  o.eval_only = false;
  o.eval_batches = 0;
  EXPECT_THAT(ValidateTrainOptions(o).message(),
              HasSubstr("--eval_batches: must be >= 1"));
}

TEST(AutoDeviceTest, OnlyAutoExplainsAFallback) {
  TrainOptions o;
  o.device = "cpu";
  EXPECT_EQ(AutoDeviceCpuReason(o), "");
  o.device = "cuda";
  EXPECT_EQ(AutoDeviceCpuReason(o), "");
}

// The reason is empty exactly when auto picks CUDA, on this machine.
TEST(AutoDeviceTest, NoReasonExactlyWhenAutoPicksCuda) {
  TrainOptions o;
  o.device = "auto";
  ASSERT_OK_AND_ASSIGN(const at::Device device, ResolveDevice(o));
  EXPECT_EQ(AutoDeviceCpuReason(o).empty(), device.is_cuda());
}

TEST(ResolveDeviceTest, AutoWithoutAGpuIsTheCpu) {
  TrainOptions o;
  o.device = "auto";
  o.precision = Precision::kFp16;  // Runs on the CPU: no error there.
  ASSERT_OK_AND_ASSIGN(const at::Device device, ResolveDevice(o, 0));
  EXPECT_TRUE(device.is_cpu());
}

TEST(ResolveDeviceTest, AutoWithAGpuIsCudaLocalRankModuloGpus) {
  TrainOptions o;
  o.device = "auto";
  o.local_rank = 5;
  ASSERT_OK_AND_ASSIGN(const at::Device device, ResolveDevice(o, 2));
  EXPECT_EQ(device, at::Device(at::kCUDA, 1));  // 5 mod 2.
}

TEST(ResolveDeviceTest, CpuIsTheCpuWhereAGpuIsVisible) {
  TrainOptions o;
  o.device = "cpu";
  o.precision = Precision::kFp16;
  ASSERT_OK_AND_ASSIGN(const at::Device device, ResolveDevice(o, 1));
  EXPECT_TRUE(device.is_cpu());
}

TEST(ResolveDeviceTest, CudaWithoutAGpuNamesTheFlagAndTheFix) {
  TrainOptions o;
  o.device = "cuda";
  EXPECT_THAT(ResolveDevice(o, 0).status().message(),
              AllOf(HasSubstr("--device: cuda"), HasSubstr("no GPU is visible"),
                    HasSubstr("use --device=cpu")));
}

// Where a GPU is visible, auto never falls back to the CPU: a flag that does
// not run on CUDA yet is an error naming it and --device=cpu.
TEST(ResolveDeviceTest, AutoWithAGpuRefusesFp16NamingTheFlag) {
  TrainOptions o;
  o.device = "auto";
  o.precision = Precision::kFp16;
  const absl::Status status = ResolveDevice(o, 1).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(),
              AllOf(HasSubstr("--device: auto"), HasSubstr("--precision=fp16"),
                    HasSubstr("use --device=cpu")));
}

TEST(ResolveDeviceTest, AutoWithAGpuRefusesCpuOffloadNamingTheFlag) {
  TrainOptions o;
  o.device = "auto";
  o.strategy.fsdp.cpu_offload = true;
  EXPECT_THAT(
      ResolveDevice(o, 1).status().message(),
      AllOf(HasSubstr("--fsdp_cpu_offload"), HasSubstr("use --device=cpu")));
}

TEST(ResolveDeviceTest, CudaRefusesCheckpointsNamingTheFlags) {
  TrainOptions o;
  o.device = "cuda";
  o.checkpoint.save_every = 10;
  EXPECT_THAT(ResolveDevice(o, 1).status().message(),
              AllOf(HasSubstr("--save_every"), HasSubstr("use --device=cpu")));
  o.checkpoint.save_every = 0;
  o.checkpoint.resume = "latest";
  EXPECT_THAT(ResolveDevice(o, 1).status().message(),
              AllOf(HasSubstr("--resume"), HasSubstr("use --device=cpu")));
}

TEST(ResolveDeviceTest, UnknownDeviceNamesTheFlag) {
  TrainOptions o;
  o.device = "tpu";
  EXPECT_THAT(ResolveDevice(o, 1).status().message(),
              HasSubstr("--device: must be auto, cpu or cuda, got 'tpu'"));
}

}  // namespace
}  // namespace strata::launch
