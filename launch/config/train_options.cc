#include "launch/config/train_options.h"

#include <ATen/core/Tensor.h>
#include <torch/cuda.h>

#include <cmath>
#include <limits>
#include <string>
#include <system_error>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "base/regex.h"
#include "base/status.h"
#include "launch/config/flag_error.h"
#include "launch/observe/trace_window.h"
#include "models/config.h"
#include "models/hf_config.h"
#include "optim/loss_scaler.h"
#include "strategies/mixed_precision.h"

namespace strata::launch {

// The optimizer of a run: --optimizer and its flags as they are, with loss
// scaling from --precision=fp16 and the --loss_scale* flags.
strategies::OptimizerConfig OptimizerConfigOf(const TrainOptions& o) {
  strategies::OptimizerConfig config = o.optimizer;
  config.loss_scaling.reset();
  if (o.precision == Precision::kFp16) {
    optim::LossScalerOptions& scaling = config.loss_scaling.emplace();
    const bool dynamic = o.loss_scale == 0;
    scaling.init_scale =
        dynamic ? std::ldexp(1.0, o.loss_scale_initial_power) : o.loss_scale;
    // A static scale neither grows nor backs off (an overflowing step is
    // still skipped), as DeepSpeed's static loss scale.
    scaling.growth_factor = dynamic ? 2.0 : 1.0;
    scaling.backoff_factor = dynamic ? 0.5 : 1.0;
    scaling.growth_interval = o.loss_scale_window;
    scaling.hysteresis = o.loss_scale_hysteresis;
    scaling.min_scale = o.loss_scale_min;
  }
  return config;
}

namespace {

// --precision and the loss scaling flags: the loss scaling flags only with
// --precision=fp16, each in range (naming the flag), and fp16 only where
// this LibTorch can compute in it on the CPU.
absl::Status ValidatePrecisionFlags(const TrainOptions& o) {
  const TrainOptions defaults;
  const struct {
    const char* flag;
    bool set;
  } scaling_flags[] = {
      {"loss_scale", o.loss_scale != defaults.loss_scale},
      {"loss_scale_initial_power",
       o.loss_scale_initial_power != defaults.loss_scale_initial_power},
      {"loss_scale_window", o.loss_scale_window != defaults.loss_scale_window},
      {"loss_scale_hysteresis",
       o.loss_scale_hysteresis != defaults.loss_scale_hysteresis},
      {"loss_scale_min", o.loss_scale_min != defaults.loss_scale_min},
  };
  const bool fp16 = o.precision == Precision::kFp16;
  for (const auto& f : scaling_flags) {
    if (f.set && !fp16) {
      return FlagError(f.flag,
                       absl::StrCat("is used only with --precision=fp16 (loss "
                                    "scaling), got --precision=",
                                    PrecisionName(o.precision)));
    }
  }
  if (!(std::isfinite(o.loss_scale) && o.loss_scale >= 0 &&
        o.loss_scale <= std::numeric_limits<float>::max())) {
    return FlagError("loss_scale",
                     absl::StrCat("must be 0 (dynamic) or a positive float32 "
                                  "value, got ",
                                  o.loss_scale));
  }
  if (o.loss_scale_initial_power < 0 || o.loss_scale_initial_power > 127) {
    return FlagError("loss_scale_initial_power",
                     absl::StrCat("must be in [0, 127] (2^128 overflows "
                                  "float32), got ",
                                  o.loss_scale_initial_power));
  }
  if (o.loss_scale_window < 1) {
    return FlagError("loss_scale_window",
                     absl::StrCat("must be >= 1, got ", o.loss_scale_window));
  }
  if (o.loss_scale_hysteresis < 1) {
    return FlagError(
        "loss_scale_hysteresis",
        absl::StrCat("must be >= 1, got ", o.loss_scale_hysteresis));
  }
  if (!(std::isfinite(o.loss_scale_min) && o.loss_scale_min > 0 &&
        o.loss_scale_min <= std::numeric_limits<float>::max())) {
    return FlagError("loss_scale_min",
                     absl::StrCat("must be a positive float32 value, got ",
                                  o.loss_scale_min));
  }
  return absl::OkStatus();
}

}  // namespace

namespace {

// fp16 only where this LibTorch can compute in it on the CPU (LibTorch 1.13
// has no Half matmul there): checked last, after every flag's own checks.
absl::Status CheckComputeDtypes(const TrainOptions& o) {
  const bool fp16 = o.precision == Precision::kFp16;
  const strategies::MixedPrecisionOptions& mp = o.strategy.mixed_precision;
  const bool half_dtype_flag = mp.param_dtype == at::kHalf ||
                               mp.reduce_dtype == at::kHalf ||
                               mp.buffer_dtype == at::kHalf;
  if (fp16 || half_dtype_flag) {
    if (absl::Status can = strategies::CheckCpuComputeDtype(at::kHalf);
        !can.ok()) {
      return FlagError(
          fp16 ? "precision" : "param_dtype",
          absl::StrCat("fp16: ", can.message(),
                       ". LibTorch 2.x trains in fp16 on the CPU: run with "
                       "tools/libtorch2/run.sh (LibTorch 2.6), or use bf16"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

namespace {

// The optimizer flags: no flag of another optimizer than --optimizer's set
// away from its default (it would be ignored), then each value's range
// (strategies::ValidateOptimizerConfig, naming the flag).
absl::Status ValidateOptimizerFlags(const TrainOptions& o) {
  const TrainOptions defaults;
  const std::string optimizer = absl::StrCat(
      "--optimizer=", strategies::OptimizerKindName(o.optimizer.kind));
  const bool sgd = o.optimizer.kind == strategies::OptimizerKind::kSgd;
  const struct {
    const char* flag;
    bool set;      // Away from its default.
    bool for_sgd;  // Used by SGD (else by AdamW and Adam).
  } flags[] = {
      {"beta1", o.optimizer.adamw.beta1 != defaults.optimizer.adamw.beta1,
       false},
      {"beta2", o.optimizer.adamw.beta2 != defaults.optimizer.adamw.beta2,
       false},
      {"eps", o.optimizer.adamw.eps != defaults.optimizer.adamw.eps, false},
      {"momentum", o.optimizer.sgd.momentum != defaults.optimizer.sgd.momentum,
       true},
      {"dampening",
       o.optimizer.sgd.dampening != defaults.optimizer.sgd.dampening, true},
      {"nesterov", o.optimizer.sgd.nesterov != defaults.optimizer.sgd.nesterov,
       true},
  };
  for (const auto& f : flags) {
    if (f.set && f.for_sgd != sgd) {
      return FlagError(
          f.flag, absl::StrCat("is used only by --optimizer=",
                               f.for_sgd ? "sgd" : "adamw or adam", ", got ",
                               optimizer, " (which would ignore it)"));
    }
  }
  if (sgd && o.optimizer.sgd.dampening != 0 && o.optimizer.sgd.momentum == 0) {
    return FlagError("dampening",
                     "is used only with --momentum > 0 (it damps the "
                     "momentum buffer), got --momentum=0");
  }
  return strategies::ValidateOptimizerConfig(OptimizerConfigOf(o));
}

}  // namespace

// The learning-rate schedule of a run (optim/lr_schedule.h).
optim::LrScheduleOptions LrScheduleOptionsOf(const TrainOptions& o) {
  optim::LrScheduleOptions schedule = o.schedule;
  if (schedule.total_steps == 0) schedule.total_steps = o.steps;
  if (schedule.warmup_type.empty()) {
    schedule.warmup_type =
        optim::IsDeepSpeedSchedule(schedule.kind) ? "log" : "linear";
  }
  if (schedule.kind != optim::LrScheduleKind::kWarmupCosineLr) {
    schedule.warmup_min_ratio = 0.0;
    schedule.min_ratio = 0.0;
  }
  return schedule;
}

namespace {

// The flags of the schedules' later options: --lr_total_steps,
// --lr_warmup_type and the warmup_cosine_lr ratios, each only where its
// schedule reads it.
absl::Status ValidateScheduleFlags(const TrainOptions& o) {
  const TrainOptions defaults;
  const std::string kind(optim::LrScheduleKindName(o.schedule.kind));
  if (o.schedule.total_steps < 0) {
    return FlagError("lr_total_steps",
                     absl::StrCat("must be >= 0 (0 = --steps), got ",
                                  o.schedule.total_steps));
  }
  if (!o.schedule.warmup_type.empty() && o.schedule.warmup_type != "linear" &&
      o.schedule.warmup_type != "log") {
    return FlagError("lr_warmup_type",
                     absl::StrCat("must be log or linear, got '",
                                  o.schedule.warmup_type, "'"));
  }
  if (o.schedule.warmup_type == "log" &&
      !optim::IsDeepSpeedSchedule(o.schedule.kind)) {
    return FlagError("lr_warmup_type",
                     absl::StrCat("log is for --lr_schedule=warmup_lr, "
                                  "warmup_decay_lr or warmup_cosine_lr; ",
                                  kind, " warms up linearly"));
  }
  if (o.schedule.kind != optim::LrScheduleKind::kWarmupCosineLr) {
    for (auto [flag, value, fallback] :
         {std::tuple<const char*, double, double>{
              "lr_warmup_min_ratio", o.schedule.warmup_min_ratio,
              defaults.schedule.warmup_min_ratio},
          {"lr_cos_min_ratio", o.schedule.min_ratio,
           defaults.schedule.min_ratio}}) {
      if (value != fallback) {
        return FlagError(flag, absl::StrCat("is read by --lr_schedule="
                                            "warmup_cosine_lr only, not ",
                                            kind));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

// The strategy of a run: the flags' StrategyOptions with the two fields
// that are not flags filled in.
absl::StatusOr<strategies::StrategyOptions> StrategyOptionsOf(
    const TrainOptions& o) {
  strategies::StrategyOptions options = o.strategy;
  if (o.precision == Precision::kFp16) {
    // fp16 parameters and buffers; gradients reduced in --reduce_dtype.
    strategies::MixedPrecisionOptions& mp = options.mixed_precision;
    for (auto [flag, dtype] : {std::pair{"param_dtype", &mp.param_dtype},
                               std::pair{"buffer_dtype", &mp.buffer_dtype}}) {
      if (*dtype == at::kBFloat16) {
        return FlagError(flag,
                         "--precision=fp16 keeps the model in fp16: leave "
                         "this flag at fp32 or set fp16, got bf16");
      }
      *dtype = at::kHalf;
    }
  }
  options.fsdp.init_seed = o.seed;
  return options;
}

// The checkpoint options of a run (launch/config/checkpoint_options.h).
TrainingCheckpointOptions CheckpointOptions(const TrainOptions& o,
                                            const models::ModelConfig& config) {
  TrainingCheckpointOptions c = o.checkpoint;
  if (c.dir.empty()) c.dir = o.output_dir + "/checkpoints";
  c.seed = o.seed;
  c.model_config = models::ModelConfigRecord(o.model, config);
  return c;
}

absl::StatusOr<models::ModelConfig> ModelConfigOf(const std::string& model) {
  absl::StatusOr<models::ModelConfig> config =
      models::ModelConfigByNameOrPath(model);
  if (!config.ok()) return FlagError("model", config.status().message());
  return config;
}

namespace {

// Why these options cannot train on CUDA ("" where they can): the flags
// that do not run on CUDA yet.
std::string WhyNotCuda(const TrainOptions& o) {
  if (o.strategy.fsdp.cpu_offload) {
    return "--fsdp_cpu_offload with CUDA compute is not built yet";
  }
  if (o.precision == Precision::kFp16) {
    return "--precision=fp16 does not run on CUDA yet (fp32 and bf16 do)";
  }
  if (o.checkpoint.save_every > 0 || !o.checkpoint.resume.empty()) {
    return "checkpoints of CUDA state are not written yet (--save_every, "
           "--resume)";
  }
  return "";
}

int64_t VisibleGpus() {
  return torch::cuda::is_available() ? torch::cuda::device_count() : 0;
}

constexpr char kNoGpu[] = "this LibTorch has no CUDA or no GPU is visible";

}  // namespace

absl::StatusOr<at::Device> ResolveDevice(const TrainOptions& o) {
  return ResolveDevice(o, o.device == "cpu" ? 0 : VisibleGpus());
}

absl::StatusOr<at::Device> ResolveDevice(const TrainOptions& o,
                                         int64_t visible_gpus) {
  if (o.device == "cpu") return at::Device(at::kCPU);
  if (o.device != "cuda" && o.device != "auto") {
    return FlagError("device", absl::StrCat("must be auto, cpu or cuda, got '",
                                            o.device, "'"));
  }
  if (visible_gpus <= 0) {
    if (o.device == "auto") return at::Device(at::kCPU);
    return FlagError("device",
                     absl::StrCat("cuda: ", kNoGpu, "; use --device=cpu"));
  }
  if (const std::string why_not = WhyNotCuda(o); !why_not.empty()) {
    return FlagError(
        "device",
        absl::StrCat(o.device, ": ", visible_gpus,
                     " GPU(s) visible, so this run would train on CUDA, but ",
                     why_not, "; use --device=cpu to train on the CPU"));
  }
  return at::Device(at::kCUDA,
                    static_cast<c10::DeviceIndex>(o.local_rank % visible_gpus));
}

std::string AutoDeviceCpuReason(const TrainOptions& o) {
  if (o.device != "auto" || VisibleGpus() > 0) return "";
  return kNoGpu;
}

bool DeferredInit(const TrainOptions& o, const at::Device& device) {
  return o.fsdp_deferred_init &&
         o.strategy.kind == strategies::StrategyKind::kFsdp && device.is_cpu();
}

namespace {

// --freeze (a regex) and --ckpt_exclude_frozen_parameters (needs --freeze).
absl::Status ValidateFreezeFlags(const TrainOptions& o) {
  if (!o.freeze.empty()) {
    if (absl::Status valid = CompileRegex(o.freeze).status(); !valid.ok()) {
      return FlagError("freeze", valid.message());
    }
  }
  if (o.checkpoint.exclude_frozen_parameters && o.freeze.empty()) {
    return FlagError("ckpt_exclude_frozen_parameters",
                     "needs --freeze: no parameter is frozen");
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateTrainOptions(const TrainOptions& o) {
  if (o.steps < 1)
    return FlagError("steps", absl::StrCat("must be >= 1, got ", o.steps));
  if (o.seq_len < 1)
    return FlagError("seq_len", absl::StrCat("must be >= 1, got ", o.seq_len));
  if (o.global_batch < 1) {
    return FlagError("global_batch",
                     absl::StrCat("must be >= 1, got ", o.global_batch));
  }
  const int64_t micro = o.micro_batch == 0 ? o.global_batch : o.micro_batch;
  if (micro < 1 || o.global_batch % micro != 0) {
    return FlagError("micro_batch",
                     absl::StrFormat("must divide --global_batch=%d (0 means "
                                     "the whole batch), got %d",
                                     o.global_batch, o.micro_batch));
  }
  if (o.data != DataKind::kMarkov && o.data_path.empty()) {
    return FlagError("data_path", absl::StrCat("is required with --data=",
                                               DataKindName(o.data)));
  }
  if ((o.data == DataKind::kText) == o.tokenizer.empty()) {
    return FlagError("tokenizer",
                     "is required with --data=text and read only with it "
                     "(a tokenizer.json, encoder.json, *.tiktoken or *.model)");
  }
  if (!(o.schedule.base_lr > 0))
    return FlagError("lr",
                     absl::StrCat("must be > 0, got ", o.schedule.base_lr));
  if (o.optimizer.weight_decay < 0)
    return FlagError("weight_decay", "must be >= 0");
  if (o.optimizer.grad_clip < 0)
    return FlagError("grad_clip", "must be >= 0 (0 = off)");
  // The loss scaling flags first: OptimizerConfigOf builds the loss scaler's
  // options from them.
  STRATA_RETURN_IF_ERROR(ValidatePrecisionFlags(o));
  STRATA_RETURN_IF_ERROR(ValidateOptimizerFlags(o));
  STRATA_RETURN_IF_ERROR(ValidateTraceFlags(o.trace_steps, o.trace_dir));
  if (o.dropout < 0 || o.dropout >= 1)
    return FlagError("dropout", "must be in [0, 1)");
  STRATA_RETURN_IF_ERROR(ValidateFreezeFlags(o));
  if (o.loss_chunk_tokens < 0) {
    return FlagError(
        "loss_chunk_tokens",
        absl::StrCat("must be >= 0 (0 = unfused), got ", o.loss_chunk_tokens));
  }
  if (o.log_interval < 1) return FlagError("log_interval", "must be >= 1");
  if (o.eval_interval < 0)
    return FlagError("eval_interval", "must be >= 0 (0 = only at the end)");
  if (o.eval_batches < (o.eval_only ? 0 : 1)) {
    return FlagError("eval_batches",
                     absl::StrCat("must be >= 1 (0, all of the eval data, only "
                                  "with --eval_only), got ",
                                  o.eval_batches));
  }
  if (o.eval_only && o.checkpoint.load_weights.empty() &&
      o.checkpoint.resume.empty()) {
    return absl::InvalidArgumentError(
        "--eval_only needs --load_weights or --resume: the weights to "
        "evaluate (a Strata full or sharded checkpoint, a PyTorch state dict "
        "or Hugging Face safetensors)");
  }
  if (!(o.eval_fraction > 0 && o.eval_fraction < 0.5)) {
    return FlagError("eval_fraction", "must be in (0, 0.5)");
  }
  if (o.threads < 0) return FlagError("threads", "must be >= 0 (0 = default)");
  if (o.output_dir.empty()) return FlagError("output_dir", "must not be empty");
  // DeepSpeed's schedules may warm up for longer than the run, as DeepSpeed
  // allows.
  if (o.schedule.warmup_steps < 0 ||
      (o.schedule.warmup_steps >= o.steps &&
       o.schedule.kind != optim::LrScheduleKind::kConstant &&
       !optim::IsDeepSpeedSchedule(o.schedule.kind))) {
    return FlagError(
        "warmup_steps",
        absl::StrFormat("must be in [0, --steps=%d) for "
                        "--lr_schedule=%s, got %d",
                        o.steps, optim::LrScheduleKindName(o.schedule.kind),
                        o.schedule.warmup_steps));
  }
  if (o.schedule.kind == optim::LrScheduleKind::kStep) {
    if (o.schedule.step_size <= 0) {
      return FlagError("lr_step_size",
                       absl::StrCat("must be > 0 with --lr_schedule=step, got ",
                                    o.schedule.step_size));
    }
    if (!(std::isfinite(o.schedule.gamma) && o.schedule.gamma > 0)) {
      return FlagError("lr_gamma",
                       absl::StrCat("must be > 0 with --lr_schedule=step, got ",
                                    o.schedule.gamma));
    }
  }
  STRATA_RETURN_IF_ERROR(ValidateScheduleFlags(o));
  if (absl::Status s = optim::ValidateLrScheduleOptions(LrScheduleOptionsOf(o));
      !s.ok()) {
    return FlagError("lr_schedule", s.message());
  }
  STRATA_ASSIGN_OR_RETURN(const strategies::StrategyOptions strategy,
                          StrategyOptionsOf(o));
  STRATA_RETURN_IF_ERROR(strategies::ValidateStrategyOptions(strategy));
  auto config = ModelConfigOf(o.model);
  if (!config.ok()) return config.status();
  if (o.vocab_size < 0)
    return FlagError("vocab_size", "must be >= 0 (0 = the model's)");
  if (o.seq_len > config->seq_len) {
    return FlagError("seq_len",
                     absl::StrFormat("%d is longer than model '%s''s context "
                                     "of %d tokens",
                                     o.seq_len, o.model, config->seq_len));
  }
  STRATA_RETURN_IF_ERROR(
      ValidateTrainingCheckpointOptions(CheckpointOptions(o, *config)));
  return CheckComputeDtypes(o);
}

}  // namespace strata::launch
