// The options of //launch/train:train (TrainOptions, one field per flag), their
// validation, and their translation into the options of the layers below:
// the optimizer, the LR schedule, the strategy and the checkpoints. The
// training loop (launch/train/trainer.h) and the DeepSpeed config mapping
// (launch/deepspeed/deepspeed_options.h) share them.
#ifndef STRATA_LAUNCH_CONFIG_TRAIN_OPTIONS_H_
#define STRATA_LAUNCH_CONFIG_TRAIN_OPTIONS_H_

#include <c10/core/Device.h>

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "checkpoint/format.h"
#include "launch/config/checkpoint_options.h"
#include "launch/config/option_kinds.h"
#include "models/config.h"
#include "optim/lr_schedule.h"
#include "strategies/options.h"

namespace strata::launch {

// The test hooks of `train` (flags only tests set, hidden from --help).
struct TrainTestHooks {
  // The test faults (launch/train/test_faults.h): a pause in every save
  // before its commit; a schedule of SIGKILLs inside a forward, backward,
  // collective or save, or at a step's end, one entry per restart round
  // ("": none), and the rank each kills.
  int64_t ckpt_test_pause_ms = 0;
  std::string test_kill_at;
  std::string test_kill_rank = "0";
  // Dropout draws from each rank's default CPU generator (at::dropout, no
  // DropoutContext), so the run depends on every rank's generator state.
  bool dropout_test_default_generator = false;
};

// `train`'s optimizer defaults: strategies::OptimizerConfig's, with beta2
// 0.95 (GPT-style training) rather than PyTorch's 0.999.
inline strategies::OptimizerConfig TrainOptimizerDefaults() {
  strategies::OptimizerConfig config;
  config.adamw.beta2 = 0.95;
  return config;
}

// `train`'s LR-schedule defaults: cosine from 3e-3 to 3e-4 after 50 warm-up
// steps, over the whole run (total_steps 0: --steps); warmup_type "" (log
// for DeepSpeed's kinds, as DeepSpeed's default, linear for the others); for
// warmup_cosine_lr, DeepSpeed's defaults warmup_min_ratio 0 and cos_min_ratio
// 1e-4.
inline optim::LrScheduleOptions TrainLrScheduleDefaults() {
  optim::LrScheduleOptions schedule;
  schedule.kind = optim::LrScheduleKind::kCosine;
  schedule.base_lr = 3e-3;
  schedule.warmup_steps = 50;
  schedule.min_lr = 3e-4;
  schedule.total_steps = 0;
  schedule.warmup_type = "";
  schedule.warmup_min_ratio = 0.0;
  schedule.min_ratio = 1e-4;
  return schedule;
}

// Every field but local_rank and restart_count is a flag of the `train`
// binary, most with the same name, declared once in the flag table
// (launch/config/train_flag_table.h); error messages name fields as flags
// ("--global_batch"). Enumerated fields parse with
// launch/config/option_kinds.h.
struct TrainOptions {
  // Model.
  std::string model = "gpt-tiny";
  int64_t vocab_size = 0;  // 0: the model config's.
  int64_t seq_len = 128;
  // World-size-invariant masks (models/dropout.h): the trainer sets a
  // DropoutContext (seed, step, global sample indices) before every
  // micro-batch.
  double dropout = 0.0;
  // The head's loss in chunks of this many tokens, forward and backward,
  // never holding the full [micro_batch * seq_len, vocab] logits
  // (ModelConfig::loss_chunk_tokens, models/chunked_loss.h); 0: unfused.
  int64_t loss_chunk_tokens = 0;
  // Parameters whose names this regex matches (std::regex_search) are frozen
  // (requires_grad false) before the strategy is made; "": none.
  std::string freeze;
  // Data: the synthetic Markov corpus (a known entropy floor), a text file
  // (bytes, vocab 256; text, through `tokenizer`) or a token-bin file
  // (uint16/uint32).
  DataKind data = DataKind::kMarkov;
  std::string data_path;
  std::string tokenizer;  // --data=text: a file text/load_tokenizer.h reads.
  int64_t markov_vocab = 128;
  int64_t markov_branching = 4;
  int64_t markov_tokens = 4'000'000;
  double eval_fraction = 0.05;  // Tail of the corpus held out for eval.
  // Schedule of work.
  int64_t steps = 1000;
  int64_t global_batch = 32;  // Sequences per optimizer step.
  int64_t micro_batch = 0;    // Sequences per forward; 0: global_batch.
  // The learning-rate schedule (optim::LrScheduleOptions, train's defaults:
  // TrainLrScheduleDefaults): --lr (base_lr), --lr_schedule (kind),
  // --warmup_steps, --min_lr, --lr_step_size and --lr_gamma (step), and
  // DeepSpeed's --lr_total_steps (total_steps), --lr_warmup_type
  // (warmup_type), --lr_warmup_min_ratio and --lr_cos_min_ratio
  // (warmup_min_ratio, min_ratio). Two fields hold a "the run's own" value
  // LrScheduleOptionsOf resolves: total_steps 0 is --steps, warmup_type ""
  // the kind's own curve.
  optim::LrScheduleOptions schedule = TrainLrScheduleDefaults();
  // The optimizer (strategies::OptimizerConfig): --optimizer (kind: adamw,
  // adam or sgd), --weight_decay (decoupled for adamw, L2 for adam and sgd),
  // --beta1, --beta2, --eps (adamw, adam), --momentum, --dampening,
  // --nesterov (sgd), --grad_clip (0: off). Its loss_scaling is not a flag:
  // OptimizerConfigOf sets it from --precision=fp16 and the --loss_scale*
  // flags.
  strategies::OptimizerConfig optimizer = TrainOptimizerDefaults();
  // The strategy (strategies::StrategyOptions): --strategy (kind),
  // --bucket_bytes, --first_bucket_bytes, --allow_unused_parameters,
  // --checkpoint_units, --checkpoint_every, --param_dtype, --reduce_dtype,
  // --buffer_dtype (mixed_precision) and the --fsdp_* flags (fsdp: sharding,
  // wrap_policy as --fsdp_wrap_unit_types and --fsdp_wrap_min_params,
  // forward_prefetch, backward_prefetch, limit_all_gathers,
  // reductions_in_flight, cpu_offload, hybrid_shard_group_size,
  // reduce_scatter_every_micro_step, reuse_buffers). Two fields are not
  // flags: StrategyOptionsOf sets fsdp.init_seed from --seed, and the fp16
  // parameter and buffer dtypes from --precision=fp16.
  strategies::StrategyOptions strategy;
  // FSDP builds the model without allocating its parameters and each rank
  // materialises only its shards (DeferredInit). Ignored by the other
  // strategies, and on CUDA (the full model is built there; logged).
  bool fsdp_deferred_init = true;
  // Where parameters, gradients, optimizer state and activations live:
  // "cpu", "cuda" (cuda:local_rank, modulo the visible GPUs), or "auto"
  // (ResolveDevice). On CUDA, collectives use NCCL in CUDA builds where each
  // rank has a GPU of its own, else host memory over Gloo.
  std::string device = "auto";
  // This process's rank on its node (LOCAL_RANK), set by the binary from the
  // rendezvous, not a flag.
  int local_rank = 0;
  // The job's restart round (TORCHELASTIC_RESTART_COUNT, from the
  // rendezvous, not a flag): 0 for the first start.
  int restart_count = 0;
  // Checkpoints (launch/config/checkpoint_options.h): --ckpt_format,
  // --ckpt_dir (default <output_dir>/checkpoints: step_<n> and `latest`),
  // --save_every, --keep_last, --async_save, --resume, --load_weights. Its
  // seed, model_config and schedule are not flags: CheckpointOptions fills
  // them in.
  TrainingCheckpointOptions checkpoint;
  // Flags only tests set.
  TrainTestHooks test_hooks;
  // Run.
  uint64_t seed = 1;
  // bf16: autocast, bf16 matmuls over fp32 weights. fp16: fp16 parameters,
  // activations and buffers with fp32 masters and optimizer state
  // (--param_dtype and --buffer_dtype fp16; gradients reduced in
  // --reduce_dtype), with loss scaling: a static --loss_scale, or with 0
  // a dynamic one starting at 2^loss_scale_initial_power, doubled after
  // loss_scale_window clean steps, halved (not below loss_scale_min) on
  // every overflow after loss_scale_hysteresis - 1 absorbed ones
  // (DeepSpeed's fp16 section).
  Precision precision = Precision::kFp32;
  double loss_scale = 0;  // 0: dynamic.
  int loss_scale_initial_power = 16;
  int64_t loss_scale_window = 1000;
  int64_t loss_scale_hysteresis = 2;
  double loss_scale_min = 1;
  int64_t log_interval = 50;
  // Per-step wall-clock times of the step's phases (forward+backward,
  // optimizer step, the communication waited for, data, checkpoints) on
  // every progress line and metrics record.
  bool wall_clock_breakdown = false;
  int64_t eval_interval = 250;
  // Micro-batches per evaluation; with eval_only, 0: all of the eval split.
  int64_t eval_batches = 8;
  // Evaluate the weights of --load_weights or --resume on the eval split
  // (loss, perplexity; <output_dir>/eval.json) and exit without training.
  bool eval_only = false;
  std::string output_dir = "out/train";
  // "": none; otherwise rank 0 writes TensorBoard scalars to an event file
  // in this directory (launch/observe/tensorboard_scalars.h), flushed at every
  // progress line.
  std::string tensorboard_dir;
  // The timeline trace (launch/observe/trace_session.h): "FIRST:LAST" steps
  // (from 1, inclusive) and the directory of trace.json; both empty: none.
  std::string trace_steps;
  std::string trace_dir;
  int threads = 1;  // LibTorch intra-op threads; 0: leave LibTorch's setting.
};

// The model --model names: a named config (models::ConfigByName), or a
// Hugging Face config.json (the file, or a directory holding it: GPT-2 or
// Llama, Llama 3.1's rope scaling included). Errors name --model.
absl::StatusOr<models::ModelConfig> ModelConfigOf(const std::string& model);

// The device --device names: cuda:local_rank (modulo the visible GPUs) or
// the CPU. "auto" is CUDA whenever this LibTorch has CUDA and a GPU is
// visible, else the CPU; it never falls back to the CPU where a GPU is
// visible. Where a GPU is visible (auto) or asked for (cuda) and a flag does
// not run on CUDA yet (--precision=fp16, --fsdp_cpu_offload, --save_every,
// --resume), or --device=cuda finds no GPU, it is an error naming --device,
// the flag, and --device=cpu as the fix.
absl::StatusOr<at::Device> ResolveDevice(const TrainOptions& o);
// As above, with the number of visible GPUs given (the tests').
absl::StatusOr<at::Device> ResolveDevice(const TrainOptions& o,
                                         int64_t visible_gpus);

// Why --device=auto resolves to the CPU ("this LibTorch has no CUDA or no
// GPU is visible"); "" where --device is not "auto" or a GPU is visible. The
// train binary logs it once (rank 0), so a CPU run is never chosen silently.
std::string AutoDeviceCpuReason(const TrainOptions& o);

// Whether the model is built deferred: --fsdp_deferred_init with
// --strategy=fsdp on the CPU (deferred init materialises shards on the host
// only so far; on CUDA the full model is built instead, which the trainer
// logs).
bool DeferredInit(const TrainOptions& o, const at::Device& device);

// Checks every option before any work starts; errors name the flag
// ("--global_batch: must be >= 1, got 0"). Flags of another optimizer or
// precision than the chosen one set away from their defaults are errors;
// --precision=fp16 (or an fp16 dtype flag) where this LibTorch cannot
// compute fp16 on the CPU is refused (strategies::CheckCpuComputeDtype).
absl::Status ValidateTrainOptions(const TrainOptions& options);

// The translations of valid options (ValidateTrainOptions passed).
// --optimizer and its flags; with --precision=fp16 the loss scaling.
strategies::OptimizerConfig OptimizerConfigOf(const TrainOptions& options);
// The schedule the run uses: `schedule` with total_steps 0 resolved to
// --steps and warmup_type "" to the kind's own; the warmup_cosine_lr ratios
// kept for that kind only (0 for the others, as their saved state records).
optim::LrScheduleOptions LrScheduleOptionsOf(const TrainOptions& options);
// The strategy the run uses: `strategy` with fsdp.init_seed from --seed and,
// with --precision=fp16, fp16 parameters and buffers (an error naming
// --param_dtype or --buffer_dtype where that flag says bf16).
absl::StatusOr<strategies::StrategyOptions> StrategyOptionsOf(
    const TrainOptions& options);
// The run's checkpoint options: `checkpoint` with its directory resolved
// (<output_dir>/checkpoints where --ckpt_dir is empty) and the seed and
// the run's model `config` (--model with --vocab_size applied) recorded in
// meta (models::ModelConfigRecord).
TrainingCheckpointOptions CheckpointOptions(const TrainOptions& options,
                                            const models::ModelConfig& config);

}  // namespace strata::launch

#endif  // STRATA_LAUNCH_CONFIG_TRAIN_OPTIONS_H_
