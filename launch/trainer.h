// The training loop behind //launch:train: builds a model, a data source and
// sampler, the optimizer over flat parameters and an LR schedule from
// TrainOptions, then trains with gradient accumulation, global-norm clipping,
// periodic evaluation, a progress line and a JSONL metrics file.
//
// The model is trained through a strategies::Strategy (--strategy): `single`
// in one process, or a data-parallel strategy over the ranks of a
// comm::Group, each rank taking its slice of every global batch.
#ifndef STRATA_LAUNCH_TRAINER_H_
#define STRATA_LAUNCH_TRAINER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "comm/group.h"
#include "launch/option_kinds.h"
#include "strategies/options.h"

namespace strata::launch {

// Every field is a flag of the `train` binary with the same name
// (launch/train_flags.h); error messages name fields as flags
// ("--global_batch"). Enumerated fields parse with launch/option_kinds.h.
struct TrainOptions {
  // Model.
  std::string model = "gpt-tiny";
  int64_t vocab_size = 0;  // 0: the model config's.
  int64_t seq_len = 128;
  // World-size-invariant masks (models/dropout.h): the trainer sets a
  // DropoutContext (seed, step, global sample indices) before every
  // micro-batch.
  double dropout = 0.0;
  // Data: the synthetic Markov corpus (a known entropy floor), a text file
  // (bytes, vocab 256) or a token-bin file (uint16/uint32).
  DataKind data = DataKind::kMarkov;
  std::string data_path;
  int64_t markov_vocab = 128;
  int64_t markov_branching = 4;
  int64_t markov_tokens = 4'000'000;
  double eval_fraction = 0.05;  // Tail of the corpus held out for eval.
  // Schedule of work.
  int64_t steps = 1000;
  int64_t global_batch = 32;  // Sequences per optimizer step.
  int64_t micro_batch = 0;    // Sequences per forward; 0: global_batch.
  // Optimizer.
  double lr = 3e-3;
  LrScheduleKind lr_schedule = LrScheduleKind::kCosine;
  int64_t warmup_steps = 50;
  double min_lr = 3e-4;
  // --lr_schedule=step: multiply the lr by lr_gamma every lr_step_size steps
  // after warm-up (torch.optim.lr_scheduler.StepLR).
  int64_t lr_step_size = 0;
  double lr_gamma = 0.1;
  // cosine, linear, warmup_decay_lr, warmup_cosine_lr: the step at which the
  // decay ends (DeepSpeed's total_num_steps); 0: --steps.
  int64_t lr_total_steps = 0;
  // DeepSpeed's schedules (warmup_lr, warmup_decay_lr, warmup_cosine_lr):
  // the warm-up curve, "log" or "linear"; "": the kind's own (log for
  // DeepSpeed's, as DeepSpeed's default; linear, the only one, for the
  // others).
  std::string lr_warmup_type;
  // warmup_cosine_lr: the warm-up starts at lr_warmup_min_ratio * --lr and
  // the cosine ends at lr_cos_min_ratio * --lr (DeepSpeed's
  // warmup_min_ratio and cos_min_ratio, with DeepSpeed's defaults).
  double lr_warmup_min_ratio = 0.0;
  double lr_cos_min_ratio = 1e-4;
  // --optimizer: adamw, adam or sgd (strategies::OptimizerConfig).
  strategies::OptimizerKind optimizer = strategies::OptimizerKind::kAdamW;
  double weight_decay = 0.1;  // Decoupled (adamw) or L2 (adam, sgd).
  double beta1 = 0.9;         // adamw, adam.
  double beta2 = 0.95;        // adamw, adam.
  double eps = 1e-8;          // adamw, adam.
  double momentum = 0.0;      // sgd.
  double dampening = 0.0;     // sgd.
  bool nesterov = false;      // sgd.
  double grad_clip = 1.0;     // 0: off.
  // Strategy (strategies/strategy.h).
  strategies::StrategyKind strategy = strategies::StrategyKind::kSingle;
  int64_t bucket_bytes = int64_t{25} << 20;
  int64_t first_bucket_bytes = int64_t{1} << 20;
  bool allow_unused_parameters = false;
  // Units (types or names) whose activations are recomputed in backward
  // (strategies/activation_checkpointing.h); empty: none.
  std::vector<std::string> checkpoint_units;
  // Mixed precision of single/ddp/zero1/zero2 (MixedPrecisionOptions):
  // "fp32" or "bf16" each. param_dtype bf16 stores the model's parameters
  // and gradients in bf16 with fp32 masters and optimizer state; unlike
  // --precision=bf16 (autocast: bf16 matmuls over fp32 weights).
  std::string param_dtype = "fp32";
  std::string reduce_dtype = "fp32";
  std::string buffer_dtype = "fp32";
  // FSDP (--strategy=fsdp; strategies/fsdp.h).
  std::string fsdp_sharding = "full_shard";
  std::string fsdp_wrap_unit_types = "";  // Comma-separated; empty: all.
  int64_t fsdp_wrap_min_params = 0;
  bool fsdp_forward_prefetch = false;
  std::string fsdp_backward_prefetch = "pre";
  int fsdp_limit_all_gathers = 2;
  int fsdp_reductions_in_flight = 1;
  bool fsdp_cpu_offload = false;
  int fsdp_hybrid_shard_group_size = 0;
  bool fsdp_reduce_scatter_every_micro_step = false;
  bool fsdp_deferred_init = false;
  // Checkpoints (launch/training_checkpoint.h), under ckpt_dir (default
  // <output_dir>/checkpoints): step_<n> and `latest`.
  CheckpointFormat ckpt_format = CheckpointFormat::kSharded;
  std::string ckpt_dir;     // "": <output_dir>/checkpoints.
  int64_t save_every = 0;   // Steps between saves; 0: none.
  int keep_last = 0;        // Checkpoints kept; 0: all.
  bool async_save = false;  // Write in the background while training.
  std::string resume;       // "": none; a checkpoint path; "auto": latest.
  // "": none; a checkpoint (full, sharded, or a PyTorch file) whose model
  // weights start a fresh run (step 0, fresh optimizer).
  std::string load_weights;
  int64_t ckpt_test_pause_ms = 0;  // Test hook: pause before each commit.
  // Test hook: dropout draws from each rank's default CPU generator
  // (at::dropout, no DropoutContext), so the run depends on every rank's
  // generator state.
  bool dropout_test_default_generator = false;
  // Run.
  uint64_t seed = 1;
  Precision precision = Precision::kFp32;  // bf16: autocast, bf16 matmuls.
  int64_t log_interval = 50;
  // Per-step wall-clock times of the step's phases (forward+backward,
  // optimizer step, the communication waited for, data, checkpoints) on
  // every progress line and metrics record.
  bool wall_clock_breakdown = false;
  int64_t eval_interval = 250;
  int64_t eval_batches = 8;
  std::string output_dir = "out/train";
  // "": none; otherwise rank 0 writes TensorBoard scalars to an event file
  // in this directory (launch/tensorboard_scalars.h), flushed at every
  // progress line.
  std::string tensorboard_dir;
  int threads = 1;  // LibTorch intra-op threads; 0: leave LibTorch's setting.
};

absl::Status ValidateTrainOptions(const TrainOptions& options);

struct TrainResult {
  int64_t steps = 0;
  double final_train_loss = 0;  // Mean over the last log interval.
  double final_eval_loss = 0;
  // The data's cross-entropy floor (nats/token); NaN when unknown.
  double entropy_floor_nats = 0;
  double tokens_per_s = 0;
  std::string metrics_path;
};

// Trains; rank 0 logs progress (glog INFO) every log_interval steps and
// writes <output_dir>/metrics.jsonl and <output_dir>/model.pt (a state dict
// Python's torch.load reads). Invalid options fail before any work starts.
// `group` (borrowed; null: one process) spans the ranks training together;
// every rank calls Train with the same options.
absl::StatusOr<TrainResult> Train(const TrainOptions& options,
                                  comm::Group* group = nullptr);

}  // namespace strata::launch

#endif  // STRATA_LAUNCH_TRAINER_H_
