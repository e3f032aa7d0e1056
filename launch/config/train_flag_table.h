// The flag table of //launch/train:train: one line per option, naming the
// flag, the TrainOptions field it sets and its help. Each flag is declared and
// mapped here once, as gemma.cpp's one visitor(...) call per option: the
// binary registers its flags from this table (launch/train/train_flags.cc)
// and reads them back through it, and the tests walk it. A flag's default is
// its field's default in TrainOptions (TrainFlagDefaults). No gflags here:
// the visitors decide what a line means.
#ifndef STRATA_LAUNCH_CONFIG_TRAIN_FLAG_TABLE_H_
#define STRATA_LAUNCH_CONFIG_TRAIN_FLAG_TABLE_H_

#include <string>
#include <type_traits>
#include <vector>

#include "absl/status/statusor.h"
#include "checkpoint/format.h"
#include "launch/config/option_kinds.h"
#include "launch/config/train_options.h"
#include "optim/lr_schedule.h"
#include "strategies/options.h"

namespace strata::launch {

// The command-line spelling of an option's type: Parse from the value of
// the flag `flag` (errors name it) and Format back (Parse(flag, Format(x))
// == x). Defined for the enums TrainOptions holds, the mixed-precision
// dtypes (fp32, bf16, fp16) and lists (comma-separated; empty entries kept,
// for the consumer to report).
template <class T>
struct FlagSpelling;

// The spelling of an enum whose package has a Parse function and a Name
// function. A Parse that takes what to name in its errors is given the flag;
// the others name the enum's one flag themselves.
template <class T, auto kParse, auto kName>
struct EnumSpelling {
  static absl::StatusOr<T> Parse(const std::string& flag,
                                 const std::string& s) {
    if constexpr (std::is_invocable_v<decltype(kParse), const std::string&,
                                      const std::string&>) {
      return kParse(s, "--" + flag);
    } else {
      return kParse(s);
    }
  }
  static std::string Format(T v) { return std::string(kName(v)); }
};

template <>
struct FlagSpelling<DataKind>
    : EnumSpelling<DataKind, &ParseDataKind, &DataKindName> {};
template <>
struct FlagSpelling<Precision>
    : EnumSpelling<Precision, &ParsePrecision, &PrecisionName> {};
template <>
struct FlagSpelling<optim::LrScheduleKind>
    : EnumSpelling<optim::LrScheduleKind, &optim::ParseLrScheduleKind,
                   &optim::LrScheduleKindName> {};
template <>
struct FlagSpelling<strategies::OptimizerKind>
    : EnumSpelling<strategies::OptimizerKind, &strategies::ParseOptimizerKind,
                   &strategies::OptimizerKindName> {};
template <>
struct FlagSpelling<strategies::StrategyKind>
    : EnumSpelling<strategies::StrategyKind, &strategies::ParseStrategyKind,
                   &strategies::StrategyKindName> {};
template <>
struct FlagSpelling<checkpoint::Format>
    : EnumSpelling<checkpoint::Format, &checkpoint::ParseFormat,
                   &checkpoint::FormatName> {};
template <>
struct FlagSpelling<strategies::ShardingStrategy>
    : EnumSpelling<strategies::ShardingStrategy,
                   &strategies::ParseShardingStrategy,
                   &strategies::ShardingStrategyName> {};
template <>
struct FlagSpelling<strategies::BackwardPrefetch>
    : EnumSpelling<strategies::BackwardPrefetch,
                   &strategies::ParseBackwardPrefetch,
                   &strategies::BackwardPrefetchName> {};

// --param_dtype, --reduce_dtype and --buffer_dtype share one spelling, so
// its errors name the flag they read.
template <>
struct FlagSpelling<at::ScalarType> {
  static absl::StatusOr<at::ScalarType> Parse(const std::string& flag,
                                              const std::string& s) {
    return strategies::ParseMixedPrecisionDtype(flag, s);
  }
  static std::string Format(at::ScalarType v) {
    return strategies::MixedPrecisionDtypeName(v);
  }
};

// "" is the empty list; otherwise every comma-separated entry, trimmed
// (empty ones kept).
template <>
struct FlagSpelling<std::vector<std::string>> {
  static absl::StatusOr<std::vector<std::string>> Parse(const std::string& flag,
                                                        const std::string& s);
  static std::string Format(const std::vector<std::string>& v);
};

// The values the flags start from: TrainOptions' defaults, but an empty
// --output_dir (the binary resolves it to out/train under the directory the
// user started in).
TrainOptions TrainFlagDefaults();

// The table, in groups.

// The model and its data: --model, --seq_len, --data, ...
template <class Visitor>
void VisitModelAndDataFlags(TrainOptions& o, Visitor&& v) {
  v("model", &o.model,
    "Model config name: gpt-tiny, gpt-small50m, gpt-100m, gpt2, "
    "gpt2-medium, gpt2-large, gpt2-xl, llama-tiny, llama-1b, llama-7b; or a "
    "Hugging Face config.json (the file or its directory) of a GPT-2 or "
    "Llama model.");
  v("vocab_size", &o.vocab_size,
    "Vocabulary size override (0: the model config's). Required for "
    "token-bin data.");
  v("seq_len", &o.seq_len, "Training sequence length (tokens).");
  v("dropout", &o.dropout,
    "Dropout probability (GPT). Masks are a function of (--seed, "
    "step, global sample index, site, element), so a run sees the "
    "same masks at any world size and strategy, and after a resume.");
  v("loss_chunk_tokens", &o.loss_chunk_tokens,
    "Fused, chunked linear + cross-entropy in the model's head: "
    "logits for this many tokens at a time, forward and backward, "
    "instead of all micro_batch * seq_len (0: unfused). Same loss, "
    "gradients within a few float ulps; saves the logits memory.");
  v("freeze", &o.freeze,
    "Freeze the parameters whose names this regex matches (a "
    "search, e.g. '^wpe\\.|^blocks\\.0\\.'): requires_grad false, so "
    "they get no gradient, no optimizer state and never change; "
    "empty: none. A regex that matches no parameter is an error.");
  v("data", &o.data,
    "markov (synthetic corpus with a known entropy floor), bytes "
    "(a text file, vocab 256), uint16 or uint32 (token-bin file), "
    "text (a text file through --tokenizer).");
  v("data_path", &o.data_path, "File for --data=bytes|uint16|uint32|text.");
  v("tokenizer", &o.tokenizer,
    "--data=text: tokenizer.json, encoder.json (vocab.bpe beside "
    "it), *.tiktoken, *.model, or a directory holding one; the "
    "text is encoded at start-up on every core.");
  v("markov_vocab", &o.markov_vocab,
    "Vocabulary of the synthetic Markov corpus.");
  v("markov_branching", &o.markov_branching,
    "Successors per state of the Markov chain (its difficulty).");
  v("markov_tokens", &o.markov_tokens,
    "Length of the generated Markov corpus.");
  v("eval_fraction", &o.eval_fraction,
    "Fraction of the corpus (its tail) held out for evaluation.");
}

// The batch, the learning-rate schedule and the optimizer: --steps,
// --global_batch, --lr, --optimizer, ...
template <class Visitor>
void VisitOptimizationFlags(TrainOptions& o, Visitor&& v) {
  v("steps", &o.steps, "Optimizer steps.");
  v("global_batch", &o.global_batch,
    "Sequences per optimizer step (over all ranks).");
  v("micro_batch", &o.micro_batch,
    "Sequences per forward/backward (gradient accumulation); 0: "
    "--global_batch.");
  v("lr", &o.schedule.base_lr, "Peak learning rate.");
  v("lr_schedule", &o.schedule.kind,
    "constant, cosine, linear or step (after linear warm-up); or "
    "DeepSpeed's warmup_lr, warmup_decay_lr, warmup_cosine_lr (WarmupLR, "
    "WarmupDecayLR, WarmupCosineLR, exactly: see optim/lr_schedule.h).");
  v("warmup_steps", &o.schedule.warmup_steps, "Linear warm-up steps.");
  v("lr_step_size", &o.schedule.step_size,
    "--lr_schedule=step: multiply the learning rate by --lr_gamma "
    "every this many steps after warm-up (required, > 0).");
  v("lr_gamma", &o.schedule.gamma,
    "--lr_schedule=step: the factor applied every --lr_step_size "
    "steps (> 0).");
  v("min_lr", &o.schedule.min_lr,
    "Final learning rate of the cosine/linear schedules; where "
    "warmup_lr and warmup_decay_lr start (and warmup_decay_lr "
    "ends): DeepSpeed's warmup_min_lr.");
  v("lr_total_steps", &o.schedule.total_steps,
    "cosine, linear, warmup_decay_lr, warmup_cosine_lr: the step at "
    "which the decay ends (DeepSpeed's total_num_steps); 0: "
    "--steps.");
  v("lr_warmup_type", &o.schedule.warmup_type,
    "warmup_lr, warmup_decay_lr, warmup_cosine_lr: the warm-up "
    "curve, log or linear (DeepSpeed's warmup_type); empty: log "
    "for those, linear (the only one) for the others.");
  v("lr_warmup_min_ratio", &o.schedule.warmup_min_ratio,
    "--lr_schedule=warmup_cosine_lr: the warm-up starts at this "
    "fraction of --lr (DeepSpeed's warmup_min_ratio).");
  v("lr_cos_min_ratio", &o.schedule.min_ratio,
    "--lr_schedule=warmup_cosine_lr: the cosine ends at this "
    "fraction of --lr (DeepSpeed's cos_min_ratio).");
  v("optimizer", &o.optimizer.kind,
    "adamw (torch.optim.AdamW: decoupled weight decay), adam "
    "(torch.optim.Adam: L2 weight decay added to the gradients) or sgd "
    "(torch.optim.SGD: --momentum, --dampening, --nesterov; L2 weight "
    "decay). Every strategy shards its state as AdamW's.");
  v("weight_decay", &o.optimizer.weight_decay,
    "Weight decay of matrices and embeddings (biases and norms get "
    "none): decoupled for adamw, L2 for adam and sgd.");
  v("beta1", &o.optimizer.adamw.beta1,
    "--optimizer=adamw or adam: beta1 (first-moment decay).");
  v("beta2", &o.optimizer.adamw.beta2,
    "--optimizer=adamw or adam: beta2 (second-moment decay; 0.95, "
    "the GPT convention, by default).");
  v("eps", &o.optimizer.adamw.eps,
    "--optimizer=adamw or adam: eps, added to the denominator.");
  v("momentum", &o.optimizer.sgd.momentum,
    "--optimizer=sgd: momentum (0: plain SGD, no momentum buffer).");
  v("dampening", &o.optimizer.sgd.dampening,
    "--optimizer=sgd with --momentum > 0: dampening of the "
    "momentum buffer's new gradient.");
  v("nesterov", &o.optimizer.sgd.nesterov,
    "--optimizer=sgd: Nesterov momentum (needs --momentum > 0 and "
    "--dampening=0).");
  v("grad_clip", &o.optimizer.grad_clip,
    "Global gradient-norm clipping threshold; 0: off.");
  v("grad_clip_norm_type", &o.optimizer.grad_clip_norm_type,
    "The p of --grad_clip's p-norm (clip_grad_norm_'s norm_type): 2, inf "
    "(the largest |gradient|), or any p > 0.");
}

// The strategy and its options: --strategy, buckets, mixed precision,
// --fsdp_*.
template <class Visitor>
void VisitStrategyFlags(TrainOptions& o, Visitor&& v) {
  v("strategy", &o.strategy.kind,
    "single (one process); ddp, zero1, zero2 or fsdp (data "
    "parallel over the ranks of the launcher / torchrun / srun / "
    "mpirun; zero1 shards the optimizer state, zero2 also the "
    "gradients, fsdp also the parameters).");
  v("bucket_bytes", &o.strategy.bucket_bytes,
    "DDP/ZeRO: gradient bucket size in bytes (reduced as soon as "
    "complete during backward).");
  v("first_bucket_bytes", &o.strategy.first_bucket_bytes,
    "DDP: size of the first bucket (the last layers), smaller so "
    "communication starts early.");
  v("allow_unused_parameters", &o.strategy.allow_unused_parameters,
    "DDP: allow parameters that get no gradient (else an error "
    "names them).");
  v("checkpoint_units", &o.strategy.checkpoint_units,
    "Activation checkpointing: comma-separated unit types or names "
    "(e.g. GPTBlock, LlamaBlock, blocks.3) whose activations are "
    "recomputed during backward instead of kept; empty: none.");
  v("checkpoint_every", &o.strategy.checkpoint_every,
    "Selective activation checkpointing: of the units "
    "--checkpoint_units selects, in forward order, only every "
    "k-th (the k-th, 2k-th, ...) is recomputed; 1: all of them.");
  v("param_dtype", &o.strategy.mixed_precision.param_dtype,
    "single/ddp/zero1/zero2 mixed precision: fp32, or bf16 "
    "(parameters and gradients stored in bf16, fp32 master "
    "weights, optimizer state and gradient accumulation). Unlike "
    "--precision=bf16, which keeps fp32 weights and autocasts "
    "matmuls.");
  v("reduce_dtype", &o.strategy.mixed_precision.reduce_dtype,
    "Mixed precision: dtype gradients are communicated in, fp32 "
    "or bf16.");
  v("buffer_dtype", &o.strategy.mixed_precision.buffer_dtype,
    "Mixed precision: dtype of the model's buffers, fp32 or bf16.");
  v("fsdp_sharding", &o.strategy.fsdp.sharding,
    "--strategy=fsdp: full_shard (parameters, gradients and "
    "optimizer state sharded; parameters freed after each unit's "
    "forward), shard_grad_op (kept gathered until after backward), "
    "no_shard (DDP-like), hybrid_shard or hybrid_shard_zero2 "
    "(sharded within groups of --fsdp_hybrid_shard_group_size "
    "ranks, replicated across them).");
  v("fsdp_wrap_unit_types", &o.strategy.fsdp.wrap_policy.unit_types,
    "--strategy=fsdp: comma-separated unit types that become FSDP "
    "units (e.g. GPTBlock, LlamaBlock, Embedding, Head); with "
    "neither this nor --fsdp_wrap_min_params, every unit.");
  v("fsdp_wrap_min_params", &o.strategy.fsdp.wrap_policy.min_num_params,
    "--strategy=fsdp: also wrap units with at least this many "
    "parameters; 0: off.");
  v("fsdp_forward_prefetch", &o.strategy.fsdp.forward_prefetch,
    "--strategy=fsdp: all-gather the next unit during the current "
    "unit's forward.");
  v("fsdp_backward_prefetch", &o.strategy.fsdp.backward_prefetch,
    "--strategy=fsdp: prefetch the next unit's parameters in "
    "backward before (pre) or after (post) the current unit's "
    "gradient computation, or not at all (none); auto: pre on "
    "CUDA, post on the CPU (less memory; Gloo's communication "
    "runs on the computing cores).");
  v("fsdp_limit_all_gathers", &o.strategy.fsdp.limit_all_gathers,
    "--strategy=fsdp: at most this many unit all-gathers in flight "
    "(rate limiter); 0: no limit.");
  v("fsdp_reductions_in_flight", &o.strategy.fsdp.reductions_in_flight,
    "--strategy=fsdp: unit gradient reductions left running while "
    "backward continues (each holds a unit's full gradients); 0: "
    "wait for each at once (least memory); -1 (auto): 1 on CUDA, "
    "0 on the CPU.");
  v("fsdp_cpu_offload", &o.strategy.fsdp.cpu_offload,
    "--strategy=fsdp: keep shards and optimizer state in host "
    "memory (with CUDA compute; the identity with CPU compute, and not "
    "built for CUDA compute yet: train refuses it there).");
  v("fsdp_hybrid_shard_group_size", &o.strategy.fsdp.hybrid_shard_group_size,
    "--strategy=fsdp with hybrid sharding: ranks per shard group "
    "(e.g. per node); must divide the world size.");
  v("fsdp_reduce_scatter_every_micro_step",
    &o.strategy.fsdp.reduce_scatter_every_micro_step,
    "--strategy=fsdp with gradient accumulation: reduce-scatter every "
    "micro-batch and free the full gradients, as PyTorch FSDP and "
    "DeepSpeed ZeRO-3; false: keep every unit's full fp32 gradients "
    "until the last micro-batch and reduce once (PyTorch's no_sync(): "
    "fewer reductions, 4 bytes per parameter more per rank).");
  v("fsdp_reuse_buffers", &o.strategy.fsdp.reuse_buffers,
    "--strategy=fsdp: keep released unit buffers (gathered "
    "parameters, full gradients) within a step and reuse them for the "
    "next of the same size instead of allocating per gather; emptied "
    "at the step's end. Off by default: on gpt-100m it cost 11-17 MiB "
    "of peak resident set for 2-5 % of tokens/s (BENCHMARKS.md).");
  v("fsdp_deferred_init", &o.fsdp_deferred_init,
    "--strategy=fsdp: build the model without allocating its "
    "parameters and materialise only each rank's shards (values "
    "identical to a full build), so a full model never exists on a "
    "rank. Default on; ignored by other strategies and on CUDA "
    "(which builds the full model, logged).");
}

// Checkpoints: --ckpt_*, --save_every, --resume, --load_weights, ...
template <class Visitor>
void VisitCheckpointFlags(TrainOptions& o, Visitor&& v) {
  v("ckpt_format", &o.checkpoint.format,
    "Checkpoint format: sharded (one data file per rank written in "
    "parallel plus metadata; loads under any world size and "
    "strategy), full (one PyTorch file written by rank 0; "
    "torch.load reads it), local (one file per rank; loads only "
    "with the same world size and strategy) or dcp (PyTorch's "
    "torch.distributed.checkpoint layout, one file per rank plus "
    ".metadata: dcp.load reads it at any world size, and so does "
    "--resume).");
  v("ckpt_dir", &o.checkpoint.dir,
    "Directory of the run's checkpoints (step_<n>, latest); empty: "
    "<output_dir>/checkpoints.");
  v("ckpt_exclude_frozen_parameters", &o.checkpoint.exclude_frozen_parameters,
    "Leave the frozen parameters (--freeze) out of checkpoints, as "
    "mmengine's DeepSpeedStrategy(exclude_frozen_parameters=True); "
    "--resume then keeps their values, which are the run's initial "
    "ones (the same --seed). model.pt keeps every parameter.");
  v("save_every", &o.checkpoint.save_every,
    "Save a checkpoint every this many steps; 0: never.");
  v("keep_last", &o.checkpoint.keep_last,
    "Keep only the newest this many checkpoints; 0: all.");
  v("async_save", &o.checkpoint.async_save,
    "Write checkpoints in the background: training waits only for "
    "a copy of the state in memory.");
  v("resume", &o.checkpoint.resume,
    "Resume from this checkpoint (a path), or 'auto' for the "
    "newest valid one under --ckpt_dir (a corrupt one is skipped "
    "with a warning; with none, start from scratch); empty: start "
    "fresh. Restores the "
    "model, optimizer, step, data position and generator. A "
    "PyTorch file (torch.save of {\"state_dict\", \"optimizer\": "
    "the optimizer's state_dict(), \"meta\": {\"step\"}}) "
    "resumes too: the data position is derived from the step. The "
    "checkpoint's optimizer must be --optimizer's (and, for sgd, "
    "with momentum or without as --momentum).");
  v("load_weights", &o.checkpoint.load_weights,
    "Start a fresh run (step 0, fresh optimizer and schedule) from "
    "the model weights of this checkpoint: a Strata full or "
    "sharded checkpoint, or a PyTorch file (torch.save of a dict "
    "with \"state_dict\", or of a bare state dict), or Hugging "
    "Face GPT-2 / Llama safetensors (a .safetensors file or a "
    "model directory, single or sharded; converted for --model). "
    "Strict unless --load_weights_strict=false: missing, unexpected "
    "or mis-shaped keys are an error. Exclusive with --resume.");
  v("load_weights_strict", &o.checkpoint.load_weights_strict,
    "--load_weights: false loads what matches, keeps the model's "
    "other tensors at their initial values and ignores the "
    "checkpoint's others, listing both in a warning (mmengine's "
    "strict=False). Mis-shaped keys stay an error.");
  v("load_weights_revise_keys", &o.checkpoint.load_weights_revise_keys,
    "--load_weights: REGEX=REPLACEMENT rules separated by ';', applied "
    "in order to the checkpoint's model keys before matching "
    "(mmengine's revise_keys), e.g. '^module\\.=' strips DDP's "
    "prefix. Strata, PyTorch and DCP checkpoints (not Hugging Face "
    "weights).");
}

// The run: --seed, --precision and loss scaling, --device, --threads.
template <class Visitor>
void VisitRunFlags(TrainOptions& o, Visitor&& v) {
  v("seed", &o.seed, "Seed of the initialisation, the data and the sampler.");
  v("precision", &o.precision,
    "fp32; bf16 (autocast: bf16 matmuls, fp32 weights; for "
    "bf16 weights with fp32 masters see --param_dtype); or fp16 "
    "(fp16 weights and activations, fp32 masters and optimizer "
    "state, loss scaling: --loss_scale...; needs LibTorch 2.x).");
  v("loss_scale", &o.loss_scale,
    "--precision=fp16: a static loss scale, or 0 for a dynamic one "
    "(DeepSpeed's fp16.loss_scale).");
  v("loss_scale_initial_power", &o.loss_scale_initial_power,
    "--precision=fp16, dynamic: the first scale is "
    "2^loss_scale_initial_power (fp16.initial_scale_power).");
  v("loss_scale_window", &o.loss_scale_window,
    "--precision=fp16, dynamic: clean steps before the scale "
    "doubles (fp16.loss_scale_window).");
  v("loss_scale_hysteresis", &o.loss_scale_hysteresis,
    "--precision=fp16, dynamic: overflowing steps tolerated before "
    "the scale halves; the first hysteresis - 1 are only skipped "
    "(fp16.hysteresis).");
  v("loss_scale_min", &o.loss_scale_min,
    "--precision=fp16, dynamic: the scale never halves below this "
    "(fp16.min_loss_scale).");
  v("device", &o.device,
    "auto, cpu or cuda (cuda:LOCAL_RANK modulo the visible GPUs): "
    "where parameters, gradients, optimizer state and activations "
    "live. auto: cuda where this LibTorch has CUDA, a GPU is "
    "visible and the run can use it (fp32 or bf16; no "
    "checkpoints or --fsdp_cpu_offload so far), else cpu");
  v("threads", &o.threads,
    "LibTorch intra-op threads (element-wise ops, softmax, ...); 0: "
    "OMP_NUM_THREADS when set (the launcher sets it per rank), else "
    "every CPU this process may run on. fp32 matmuls use OpenBLAS's "
    "own threads (OPENBLAS_NUM_THREADS, default all CPUs); on two "
    "cores 1 is fastest for small models (see BENCHMARKS.md).");
}

// Evaluation and what a run writes: --log_interval, --eval_*,
// --output_dir, --tensorboard_dir, --trace_*.
template <class Visitor>
void VisitObservabilityFlags(TrainOptions& o, Visitor&& v) {
  v("log_interval", &o.log_interval,
    "Steps between progress lines and metrics records.");
  v("wall_clock_breakdown", &o.wall_clock_breakdown,
    "Add the per-step wall-clock times of the step's phases to every "
    "progress line and metrics record: forward+backward, optimizer "
    "step, the time spent waiting for collectives, data, "
    "checkpoints (rank 0's, steady clock).");
  v("eval_interval", &o.eval_interval,
    "Steps between evaluations; 0: only at the end.");
  v("eval_batches", &o.eval_batches,
    "Micro-batches per evaluation; with --eval_only, 0: all of the "
    "eval data.");
  v("eval_only", &o.eval_only,
    "Evaluate the weights of --load_weights or --resume on the eval "
    "data (loss and perplexity over --eval_batches micro-batches, "
    "printed and written to <output_dir>/eval.json) and exit without "
    "training.");
  v("output_dir", &o.output_dir,
    "Directory for metrics.jsonl and model.pt (default: out/train "
    "under the directory bazel run was started from).");
  v("tensorboard_dir", &o.tensorboard_dir,
    "Rank 0 also writes the progress scalars (train/loss, "
    "eval/loss, lr, grad_norm, tokens_per_s, mfu; "
    "exposed_comm_share with --wall_clock_breakdown) to a "
    "TensorBoard event file in this directory, flushed at every "
    "progress line; view with `tensorboard --logdir <dir>`. "
    "Empty: none.");
  v("trace_steps", &o.trace_steps,
    "FIRST:LAST: record a timeline trace of steps FIRST..LAST "
    "(from 1, inclusive) into --trace_dir/trace.json (every "
    "rank's unit forward/backward, collectives, optimizer, "
    "checkpoints; open in ui.perfetto.dev). Empty: none.");
  v("trace_dir", &o.trace_dir,
    "Directory of the --trace_steps timeline trace (rank 0 "
    "writes trace.json there).");
}

// The flags only tests set (TestHook lines).
template <class Visitor>
void VisitTestHookFlags(TrainOptions& o, Visitor&& v) {
  v.TestHook(
      "ckpt_test_pause_ms", &o.test_hooks.ckpt_test_pause_ms,
      "Every rank pauses this long inside every checkpoint save, after its "
      "data is written and before the commit (launch/train/test_faults.h).");
  v.TestHook(
      "test_kill_at", &o.test_hooks.test_kill_at,
      "PHASE:STEP[:NTH],...: in restart round k, rank --test_kill_rank[k] "
      "SIGKILLs itself at the NTH time it reaches PHASE (forward, backward, "
      "collective, save, async_save, step_end) in step STEP.");
  v.TestHook("test_kill_rank", &o.test_hooks.test_kill_rank,
             "R[,R...]: the rank --test_kill_at kills, one per restart round.");
  v.TestHook(
      "dropout_test_default_generator",
      &o.test_hooks.dropout_test_default_generator,
      "Dropout draws its masks from each rank's default CPU generator "
      "(at::dropout) instead of the world-size-invariant DropoutContext: a "
      "run whose future depends on every rank's own generator state.");
}

// Calls, for every flag of `train` that sets a TrainOptions field, in the
// order `train --help` groups them:
//   v(name, &o.<field>, help)           a flag users set;
//   v.TestHook(name, &o.<field>, what)  a flag only tests set (hidden from
//                                       --help; `what` documents it).
// The field's type is one of std::string, int, int64_t, uint64_t, double,
// bool, or a type with a FlagSpelling. TrainOptions::local_rank and
// restart_count are not flags (the binary sets them from the rendezvous).
// `o` is borrowed for the call.
template <class Visitor>
void VisitTrainFlags(TrainOptions& o, Visitor&& v) {
  VisitModelAndDataFlags(o, v);
  VisitOptimizationFlags(o, v);
  VisitStrategyFlags(o, v);
  VisitCheckpointFlags(o, v);
  VisitRunFlags(o, v);
  VisitObservabilityFlags(o, v);
  VisitTestHookFlags(o, v);
}

}  // namespace strata::launch

#endif  // STRATA_LAUNCH_CONFIG_TRAIN_FLAG_TABLE_H_
