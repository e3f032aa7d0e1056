// The DeepSpeed configs of launch/train/configs/ through the train binary, in
// fresh processes at 2 ranks (both need them: ZeRO-2's batch sizes are pinned
// to 2 ranks, ZeRO-3 shards): each runs, and a run with the config is bitwise
// the same run written as flags (losses, learning rates, gradient norms and the
// final model.pt bytes); a config run resumes bitwise.
#include <ATen/core/Tensor.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "base/testing/subprocess.h"
#include "launch/testing/run_output.h"
#include "strategies/mixed_precision.h"

namespace strata::launch {
namespace {

using ::strata::launch::testing::ReadFile;
using ::strata::launch::testing::TempDir;
using ::strata::testing::RunResult;
using ::testing::HasSubstr;
using ::testing::Not;

// 4 steps of gpt-tiny on 32-token sequences at 2 ranks, a metrics line per
// step, under `out`; then `more`.
RunResult Train(const std::string& out, const std::vector<std::string>& more) {
  std::vector<std::string> args = {
      ::strata::testing::RunfilePath("launch/train/train"),
      "--nproc=2",
      "--steps=4",
      "--seq_len=32",
      "--markov_tokens=20000",
      "--log_interval=1",
      "--eval_interval=0",
      "--output_dir=" + out};
  args.insert(args.end(), more.begin(), more.end());
  return ::strata::testing::Run(args, {}, absl::Seconds(240));
}

std::string Config(const std::string& name) {
  return "--deepspeed_config=" +
         ::strata::testing::RunfilePath("launch/train/configs/" + name);
}

// The (step, loss, lr, grad_norm) columns of a run's metrics.
std::vector<std::vector<double>> Metrics(const std::string& out) {
  std::vector<std::vector<double>> columns;
  for (const char* key : {"step", "loss", "lr", "grad_norm"}) {
    columns.push_back(
        launch::testing::MetricsColumn(out + "/metrics.jsonl", key));
  }
  return columns;
}

// Runs `config` and `flags` and expects the same training, bitwise.
void ExpectConfigRunsAsFlags(const std::string& name, const std::string& config,
                             const std::vector<std::string>& flags) {
  const std::string a = TempDir(name + "_config");
  const std::string b = TempDir(name + "_flags");
  const RunResult with_config = Train(a, {config});
  ASSERT_EQ(with_config.exit_code, 0) << with_config.err;
  const RunResult with_flags = Train(b, flags);
  ASSERT_EQ(with_flags.exit_code, 0) << with_flags.err;
  const std::vector<std::vector<double>> got = Metrics(a);
  ASSERT_EQ(got[0].size(), 4u) << with_config.err;
  EXPECT_EQ(got, Metrics(b));
  const std::string model = ReadFile(a + "/model.pt");
  EXPECT_FALSE(model.empty());
  EXPECT_EQ(model, ReadFile(b + "/model.pt"));
  // The explicit --log_interval=1 overrode steps_per_print, and said so.
  EXPECT_THAT(with_config.err,
              HasSubstr("--deepspeed_config: --log_interval=1 overrides "
                        "steps_per_print=50 from"));
}

TEST(DeepSpeedTrainTest, ZeroTwoBf16ConfigRunsAsItsFlags) {
  ExpectConfigRunsAsFlags(
      "zero2", Config("gpt_tiny_zero2_bf16.json"),
      {"--strategy=zero2", "--global_batch=32", "--micro_batch=8",
       "--grad_clip=1", "--param_dtype=bf16", "--reduce_dtype=bf16",
       "--buffer_dtype=bf16", "--precision=fp32",
       // reduce_bucket_size 5e6 elements of bf16.
       "--bucket_bytes=10000000", "--first_bucket_bytes=10000000",
       "--allow_unused_parameters=true", "--lr=3e-3", "--beta1=0.9",
       "--beta2=0.95", "--weight_decay=0.1", "--lr_schedule=warmup_cosine_lr",
       "--warmup_steps=50", "--lr_warmup_type=linear",
       "--lr_warmup_min_ratio=0", "--lr_cos_min_ratio=0.1",
       "--lr_total_steps=1000"});
}

// fp16 (ZeRO-1, Adam with L2 decay, WarmupLR, dynamic loss scaling) where
// this LibTorch computes in fp16 on the CPU (2.x); LibTorch 1.13 refuses
// both runs up front, naming --precision.
TEST(DeepSpeedTrainTest, Fp16ConfigRunsAsItsFlags) {
  const std::vector<std::string> flags = {
      "--strategy=zero1", "--global_batch=16", "--micro_batch=4",
      "--grad_clip=1", "--param_dtype=fp16", "--reduce_dtype=fp16",
      "--buffer_dtype=fp16", "--precision=fp16", "--loss_scale=0",
      "--loss_scale_initial_power=16", "--loss_scale_window=1000",
      "--loss_scale_hysteresis=2", "--loss_scale_min=1",
      // reduce_bucket_size 5e6 elements of fp16.
      "--bucket_bytes=10000000", "--first_bucket_bytes=10000000",
      "--allow_unused_parameters=true", "--optimizer=adam", "--lr=1e-3",
      "--beta1=0.9", "--beta2=0.999", "--eps=1e-8", "--weight_decay=0.01",
      "--lr_schedule=warmup_lr", "--min_lr=0", "--warmup_steps=20",
      "--lr_warmup_type=linear"};
  if (!strategies::CheckCpuComputeDtype(at::kHalf).ok()) {
    for (const RunResult& run : {Train(TempDir("fp16_refused_config"),
                                       {Config("gpt_tiny_fp16_adam.json")}),
                                 Train(TempDir("fp16_refused_flags"), flags)}) {
      EXPECT_NE(run.exit_code, 0);
      EXPECT_THAT(run.err, HasSubstr("--precision: fp16: this LibTorch ("));
    }
    return;
  }
  ExpectConfigRunsAsFlags("fp16", Config("gpt_tiny_fp16_adam.json"), flags);
}

TEST(DeepSpeedTrainTest, ZeroThreeCpuOffloadConfigRunsAsItsFlags) {
  ExpectConfigRunsAsFlags("zero3", Config("gpt_tiny_zero3_offload.json"),
                          {"--strategy=fsdp",
                           "--global_batch=32",
                           "--micro_batch=8",
                           "--grad_clip=1",
                           "--param_dtype=fp32",
                           "--reduce_dtype=fp32",
                           "--buffer_dtype=fp32",
                           "--precision=fp32",
                           "--fsdp_sharding=full_shard",
                           "--fsdp_wrap_min_params=10000",
                           "--fsdp_wrap_unit_types=",
                           "--fsdp_forward_prefetch=true",
                           "--fsdp_backward_prefetch=pre",
                           "--fsdp_reductions_in_flight=1",
                           "--fsdp_cpu_offload=true",
                           "--checkpoint_units=GPTBlock",
                           "--lr=3e-3",
                           "--beta1=0.9",
                           "--beta2=0.95",
                           "--weight_decay=0.1",
                           "--lr_schedule=warmup_decay_lr",
                           "--warmup_steps=50",
                           "--lr_warmup_type=linear",
                           "--min_lr=0",
                           "--lr_total_steps=1000"});
}

// A run under a DeepSpeed config (ZeRO-3, WarmupDecayLR) resumed in a fresh
// process from its step-2 checkpoint continues bitwise: the schedule's state
// (a DeepSpeed kind, its warm-up type) is saved and matches on resume.
TEST(DeepSpeedTrainTest, AResumedConfigRunContinuesBitwise) {
  const std::string whole = TempDir("resume_whole");
  const std::string part = TempDir("resume_part");
  const std::string config = Config("gpt_tiny_zero3_offload.json");
  const RunResult first = Train(whole, {config, "--save_every=2"});
  ASSERT_EQ(first.exit_code, 0) << first.err;
  const RunResult resumed =
      Train(part, {config, "--resume=" + whole + "/checkpoints/step_00000002"});
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  EXPECT_THAT(resumed.err, Not(HasSubstr("LR schedule")));
  const std::vector<std::vector<double>> want = Metrics(whole);
  const std::vector<std::vector<double>> got = Metrics(part);
  ASSERT_EQ(want[0].size(), 4u);
  ASSERT_EQ(got[0].size(), 2u);
  for (size_t column = 0; column < want.size(); ++column) {
    EXPECT_EQ(got[column],
              std::vector<double>(want[column].begin() + 2, want[column].end()))
        << column;
  }
  EXPECT_EQ(ReadFile(part + "/model.pt"), ReadFile(whole + "/model.pt"));
}

// The phase times of wall_clock_breakdown reach the progress line and the
// metrics (a flag given with the config, here, as any other).
TEST(DeepSpeedTrainTest, WallClockBreakdownAddsPhaseTimes) {
  const std::string out = TempDir("breakdown");
  const RunResult run = Train(
      out, {Config("gpt_tiny_zero2_bf16.json"), "--wall_clock_breakdown=true"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_THAT(run.err, HasSubstr("| per step: fwd+bwd "));
  const std::vector<double> forward = launch::testing::MetricsColumn(
      out + "/metrics.jsonl", "forward_backward_s");
  const std::vector<double> step =
      launch::testing::MetricsColumn(out + "/metrics.jsonl", "step_s");
  const std::vector<double> wait =
      launch::testing::MetricsColumn(out + "/metrics.jsonl", "comm_wait_s");
  ASSERT_EQ(forward.size(), 4u);
  ASSERT_EQ(wait.size(), 4u);
  for (size_t i = 0; i < forward.size(); ++i) {
    EXPECT_GT(forward[i], 0.0) << i;
    EXPECT_GT(step[i], 0.0) << i;
    // Waits happen inside forward+backward and the step.
    EXPECT_GE(wait[i], 0.0) << i;
    EXPECT_LE(wait[i], forward[i] + step[i]) << i;
  }
}

// ZeRO-3 with DeepSpeed's default stage3_param_persistence_threshold (1e5)
// on gpt-tiny, whose units are all smaller (the largest, a block, has 49,984
// parameters): DeepSpeed keeps such parameters whole on every rank, and so
// does Strata (FSDP's policy wraps no unit; the model stays in its root).
TEST(DeepSpeedTrainTest, ZeroThreeDefaultThresholdKeepsSmallUnitsWhole) {
  const std::string out = TempDir("zero3_default_threshold");
  const std::string json = TempDir("zero3_default_threshold.json");
  std::ofstream(json) << R"({
    "train_micro_batch_size_per_gpu": 4,
    "zero_optimization": {"stage": 3},
    "optimizer": {"type": "AdamW", "params": {"lr": 1e-3}}
  })";
  const RunResult run =
      Train(out, {"--deepspeed_config=" + json, "--warmup_steps=1"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_THAT(run.err, HasSubstr("--fsdp_wrap_min_params=100000"));
  EXPECT_THAT(run.err, HasSubstr("wraps no unit, so every parameter is in "
                                 "the root, kept whole on every rank"));
  EXPECT_EQ(Metrics(out)[0].size(), 4u);
}

// DeepSpeed's batch rule at the world the binary runs in: the ZeRO-2
// config's 32 = 8 x 2 x 2 needs 2 ranks.
TEST(DeepSpeedTrainTest, ABatchForAnotherWorldSizeIsNamed) {
  const RunResult run = ::strata::testing::Run(
      {::strata::testing::RunfilePath("launch/train/train"),
       Config("gpt_tiny_zero2_bf16.json"), "--output_dir=" + TempDir("world")},
      {}, absl::Seconds(60));
  EXPECT_NE(run.exit_code, 0);
  EXPECT_THAT(run.err, HasSubstr("--deepspeed_config="));
  EXPECT_THAT(run.err, HasSubstr("32 != 8 * 2 * 1"));
}

}  // namespace
}  // namespace strata::launch
