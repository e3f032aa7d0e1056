#include "launch/train/train_flags.h"

#include <gflags/gflags.h>
#include <sched.h>

#include <algorithm>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "base/file_io.h"
#include "base/status.h"
#include "checkpoint/format.h"
#include "comm/environment.h"
#include "launch/config/option_kinds.h"
#include "launch/deepspeed/deepspeed_config.h"
#include "launch/deepspeed/deepspeed_options.h"
#include "optim/lr_schedule.h"
#include "strategies/options.h"

namespace {
const strata::launch::TrainOptions kDefaults;
}  // namespace

// The flags keep their string spellings; TrainOptionsFromFlags parses the
// enumerated ones (launch/config/option_kinds.h) so that errors name the flag.

DEFINE_string(
    model, kDefaults.model,
    "Model config name: gpt-tiny, gpt-small50m, gpt-100m, gpt2, "
    "gpt2-medium, gpt2-large, gpt2-xl, llama-tiny, llama-1b, llama-7b; or a "
    "Hugging Face config.json (the file or its directory) of a GPT-2 or "
    "Llama model.");
DEFINE_int64(vocab_size, kDefaults.vocab_size,
             "Vocabulary size override (0: the model config's). Required for "
             "token-bin data.");
DEFINE_int64(seq_len, kDefaults.seq_len, "Training sequence length (tokens).");
DEFINE_double(dropout, kDefaults.dropout,
              "Dropout probability (GPT). Masks are a function of (--seed, "
              "step, global sample index, site, element), so a run sees the "
              "same masks at any world size and strategy, and after a resume.");
DEFINE_int64(loss_chunk_tokens, kDefaults.loss_chunk_tokens,
             "Fused, chunked linear + cross-entropy in the model's head: "
             "logits for this many tokens at a time, forward and backward, "
             "instead of all micro_batch * seq_len (0: unfused). Same loss, "
             "gradients within a few float ulps; saves the logits memory.");
DEFINE_string(data, std::string(strata::launch::DataKindName(kDefaults.data)),
              "markov (synthetic corpus with a known entropy floor), bytes "
              "(a text file, vocab 256), uint16 or uint32 (token-bin file), "
              "text (a text file through --tokenizer).");
DEFINE_string(data_path, kDefaults.data_path,
              "File for --data=bytes|uint16|uint32|text.");
DEFINE_string(tokenizer, kDefaults.tokenizer,
              "--data=text: tokenizer.json, encoder.json (vocab.bpe beside "
              "it), *.tiktoken, *.model, or a directory holding one; the "
              "text is encoded at start-up on every core.");
DEFINE_int64(markov_vocab, kDefaults.markov_vocab,
             "Vocabulary of the synthetic Markov corpus.");
DEFINE_int64(markov_branching, kDefaults.markov_branching,
             "Successors per state of the Markov chain (its difficulty).");
DEFINE_int64(markov_tokens, kDefaults.markov_tokens,
             "Length of the generated Markov corpus.");
DEFINE_double(eval_fraction, kDefaults.eval_fraction,
              "Fraction of the corpus (its tail) held out for evaluation.");
DEFINE_int64(steps, kDefaults.steps, "Optimizer steps.");
DEFINE_int64(global_batch, kDefaults.global_batch,
             "Sequences per optimizer step (over all ranks).");
DEFINE_int64(micro_batch, kDefaults.micro_batch,
             "Sequences per forward/backward (gradient accumulation); 0: "
             "--global_batch.");
DEFINE_double(lr, kDefaults.lr, "Peak learning rate.");
DEFINE_string(
    lr_schedule,
    std::string(strata::optim::LrScheduleKindName(kDefaults.lr_schedule)),
    "constant, cosine, linear or step (after linear warm-up); or "
    "DeepSpeed's warmup_lr, warmup_decay_lr, warmup_cosine_lr (WarmupLR, "
    "WarmupDecayLR, WarmupCosineLR, exactly: see optim/lr_schedule.h).");
DEFINE_int64(warmup_steps, kDefaults.warmup_steps, "Linear warm-up steps.");
DEFINE_int64(lr_step_size, kDefaults.lr_step_size,
             "--lr_schedule=step: multiply the learning rate by --lr_gamma "
             "every this many steps after warm-up (required, > 0).");
DEFINE_double(lr_gamma, kDefaults.lr_gamma,
              "--lr_schedule=step: the factor applied every --lr_step_size "
              "steps (> 0).");
DEFINE_double(min_lr, kDefaults.min_lr,
              "Final learning rate of the cosine/linear schedules; where "
              "warmup_lr and warmup_decay_lr start (and warmup_decay_lr "
              "ends): DeepSpeed's warmup_min_lr.");
DEFINE_int64(lr_total_steps, kDefaults.lr_total_steps,
             "cosine, linear, warmup_decay_lr, warmup_cosine_lr: the step at "
             "which the decay ends (DeepSpeed's total_num_steps); 0: "
             "--steps.");
DEFINE_string(lr_warmup_type, kDefaults.lr_warmup_type,
              "warmup_lr, warmup_decay_lr, warmup_cosine_lr: the warm-up "
              "curve, log or linear (DeepSpeed's warmup_type); empty: log "
              "for those, linear (the only one) for the others.");
DEFINE_double(lr_warmup_min_ratio, kDefaults.lr_warmup_min_ratio,
              "--lr_schedule=warmup_cosine_lr: the warm-up starts at this "
              "fraction of --lr (DeepSpeed's warmup_min_ratio).");
DEFINE_double(lr_cos_min_ratio, kDefaults.lr_cos_min_ratio,
              "--lr_schedule=warmup_cosine_lr: the cosine ends at this "
              "fraction of --lr (DeepSpeed's cos_min_ratio).");
DEFINE_string(
    optimizer,
    strata::strategies::OptimizerKindName(kDefaults.optimizer).c_str(),
    "adamw (torch.optim.AdamW: decoupled weight decay), adam "
    "(torch.optim.Adam: L2 weight decay added to the gradients) or sgd "
    "(torch.optim.SGD: --momentum, --dampening, --nesterov; L2 weight "
    "decay). Every strategy shards its state as AdamW's.");
DEFINE_double(weight_decay, kDefaults.weight_decay,
              "Weight decay of matrices and embeddings (biases and norms get "
              "none): decoupled for adamw, L2 for adam and sgd.");
DEFINE_double(beta1, kDefaults.beta1,
              "--optimizer=adamw or adam: beta1 (first-moment decay).");
DEFINE_double(beta2, kDefaults.beta2,
              "--optimizer=adamw or adam: beta2 (second-moment decay; 0.95, "
              "the GPT convention, by default).");
DEFINE_double(eps, kDefaults.eps,
              "--optimizer=adamw or adam: eps, added to the denominator.");
DEFINE_double(momentum, kDefaults.momentum,
              "--optimizer=sgd: momentum (0: plain SGD, no momentum buffer).");
DEFINE_double(dampening, kDefaults.dampening,
              "--optimizer=sgd with --momentum > 0: dampening of the "
              "momentum buffer's new gradient.");
DEFINE_bool(nesterov, kDefaults.nesterov,
            "--optimizer=sgd: Nesterov momentum (needs --momentum > 0 and "
            "--dampening=0).");
DEFINE_double(grad_clip, kDefaults.grad_clip,
              "Global gradient-norm clipping threshold; 0: off.");
DEFINE_string(strategy,
              strata::strategies::StrategyKindName(kDefaults.strategy).c_str(),
              "single (one process); ddp, zero1, zero2 or fsdp (data "
              "parallel over the ranks of the launcher / torchrun / srun / "
              "mpirun; zero1 shards the optimizer state, zero2 also the "
              "gradients, fsdp also the parameters).");
DEFINE_int64(bucket_bytes, kDefaults.bucket_bytes,
             "DDP/ZeRO: gradient bucket size in bytes (reduced as soon as "
             "complete during backward).");
DEFINE_int64(first_bucket_bytes, kDefaults.first_bucket_bytes,
             "DDP: size of the first bucket (the last layers), smaller so "
             "communication starts early.");
DEFINE_bool(allow_unused_parameters, kDefaults.allow_unused_parameters,
            "DDP: allow parameters that get no gradient (else an error "
            "names them).");
DEFINE_string(checkpoint_units, "",
              "Activation checkpointing: comma-separated unit types or names "
              "(e.g. GPTBlock, LlamaBlock, blocks.3) whose activations are "
              "recomputed during backward instead of kept; empty: none.");
DEFINE_string(param_dtype, kDefaults.param_dtype,
              "single/ddp/zero1/zero2 mixed precision: fp32, or bf16 "
              "(parameters and gradients stored in bf16, fp32 master "
              "weights, optimizer state and gradient accumulation). Unlike "
              "--precision=bf16, which keeps fp32 weights and autocasts "
              "matmuls.");
DEFINE_string(reduce_dtype, kDefaults.reduce_dtype,
              "Mixed precision: dtype gradients are communicated in, fp32 "
              "or bf16.");
DEFINE_string(buffer_dtype, kDefaults.buffer_dtype,
              "Mixed precision: dtype of the model's buffers, fp32 or bf16.");
DEFINE_string(fsdp_sharding, kDefaults.fsdp_sharding,
              "--strategy=fsdp: full_shard (parameters, gradients and "
              "optimizer state sharded; parameters freed after each unit's "
              "forward), shard_grad_op (kept gathered until after backward), "
              "no_shard (DDP-like), hybrid_shard or hybrid_shard_zero2 "
              "(sharded within groups of --fsdp_hybrid_shard_group_size "
              "ranks, replicated across them).");
DEFINE_string(fsdp_wrap_unit_types, kDefaults.fsdp_wrap_unit_types,
              "--strategy=fsdp: comma-separated unit types that become FSDP "
              "units (e.g. GPTBlock, LlamaBlock, Embedding, Head); with "
              "neither this nor --fsdp_wrap_min_params, every unit.");
DEFINE_int64(fsdp_wrap_min_params, kDefaults.fsdp_wrap_min_params,
             "--strategy=fsdp: also wrap units with at least this many "
             "parameters; 0: off.");
DEFINE_bool(fsdp_forward_prefetch, kDefaults.fsdp_forward_prefetch,
            "--strategy=fsdp: all-gather the next unit during the current "
            "unit's forward.");
DEFINE_string(fsdp_backward_prefetch, kDefaults.fsdp_backward_prefetch,
              "--strategy=fsdp: prefetch the next unit's parameters in "
              "backward before (pre) or after (post) the current unit's "
              "gradient computation, or not at all (none); auto: pre on "
              "CUDA, post on the CPU (less memory; Gloo's communication "
              "runs on the computing cores).");
DEFINE_int32(fsdp_limit_all_gathers, kDefaults.fsdp_limit_all_gathers,
             "--strategy=fsdp: at most this many unit all-gathers in flight "
             "(rate limiter); 0: no limit.");
DEFINE_int32(fsdp_reductions_in_flight, kDefaults.fsdp_reductions_in_flight,
             "--strategy=fsdp: unit gradient reductions left running while "
             "backward continues (each holds a unit's full gradients); 0: "
             "wait for each at once (least memory); -1 (auto): 1 on CUDA, "
             "0 on the CPU.");
DEFINE_bool(fsdp_cpu_offload, kDefaults.fsdp_cpu_offload,
            "--strategy=fsdp: keep shards and optimizer state in host "
            "memory (GPU builds; the identity on CPU builds).");
DEFINE_int32(fsdp_hybrid_shard_group_size,
             kDefaults.fsdp_hybrid_shard_group_size,
             "--strategy=fsdp with hybrid sharding: ranks per shard group "
             "(e.g. per node); must divide the world size.");
DEFINE_bool(fsdp_reduce_scatter_every_micro_step,
            kDefaults.fsdp_reduce_scatter_every_micro_step,
            "--strategy=fsdp with gradient accumulation: reduce-scatter every "
            "micro-batch and free the full gradients (less memory, more "
            "communication).");
DEFINE_bool(fsdp_reuse_buffers, kDefaults.fsdp_reuse_buffers,
            "--strategy=fsdp: keep released unit buffers (gathered "
            "parameters, full gradients) within a step and reuse them for the "
            "next of the same size instead of allocating per gather; emptied "
            "at the step's end. Off by default: on gpt-100m it cost 11-17 MiB "
            "of peak resident set for 2-5 % of tokens/s (BENCHMARKS.md).");
DEFINE_bool(fsdp_deferred_init, kDefaults.fsdp_deferred_init,
            "--strategy=fsdp: build the model without allocating its "
            "parameters and materialise only each rank's shards (values "
            "identical to a full build), so a full model never exists on a "
            "rank. Default on; ignored by other strategies and on CUDA "
            "(which builds the full model, logged).");
DEFINE_string(
    ckpt_format,
    std::string(strata::checkpoint::FormatName(kDefaults.ckpt_format)),
    "Checkpoint format: sharded (one data file per rank written in "
    "parallel plus metadata; loads under any world size and "
    "strategy), full (one PyTorch file written by rank 0; "
    "torch.load reads it) or local (one file per rank; loads only "
    "with the same world size and strategy).");
DEFINE_string(ckpt_dir, kDefaults.ckpt_dir,
              "Directory of the run's checkpoints (step_<n>, latest); empty: "
              "<output_dir>/checkpoints.");
DEFINE_int64(save_every, kDefaults.save_every,
             "Save a checkpoint every this many steps; 0: never.");
DEFINE_int32(keep_last, kDefaults.keep_last,
             "Keep only the newest this many checkpoints; 0: all.");
DEFINE_bool(async_save, kDefaults.async_save,
            "Write checkpoints in the background: training waits only for "
            "a copy of the state in memory.");
DEFINE_string(resume, kDefaults.resume,
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
DEFINE_string(load_weights, kDefaults.load_weights,
              "Start a fresh run (step 0, fresh optimizer and schedule) from "
              "the model weights of this checkpoint: a Strata full or "
              "sharded checkpoint, or a PyTorch file (torch.save of a dict "
              "with \"state_dict\", or of a bare state dict), or Hugging "
              "Face GPT-2 / Llama safetensors (a .safetensors file or a "
              "model directory, single or sharded; converted for --model). "
              "Strict: "
              "missing, unexpected or mis-shaped keys are an error. "
              "Exclusive with --resume.");
DEFINE_int32(collective_timeout_s, 600,
             "How long a collective may wait for the other ranks.");
DEFINE_bool(debug_collectives, false,
            "Check every collective's sizes and dtypes across ranks first "
            "(clear errors instead of Gloo aborts; one extra small "
            "all-gather per collective).");
DEFINE_uint64(seed, kDefaults.seed,
              "Seed of the initialisation, the data and the sampler.");
DEFINE_string(precision,
              std::string(strata::launch::PrecisionName(kDefaults.precision)),
              "fp32; bf16 (autocast: bf16 matmuls, fp32 weights; for "
              "bf16 weights with fp32 masters see --param_dtype); or fp16 "
              "(fp16 weights and activations, fp32 masters and optimizer "
              "state, loss scaling: --loss_scale...; needs LibTorch 2.x).");
DEFINE_double(loss_scale, kDefaults.loss_scale,
              "--precision=fp16: a static loss scale, or 0 for a dynamic one "
              "(DeepSpeed's fp16.loss_scale).");
DEFINE_int32(loss_scale_initial_power, kDefaults.loss_scale_initial_power,
             "--precision=fp16, dynamic: the first scale is "
             "2^loss_scale_initial_power (fp16.initial_scale_power).");
DEFINE_int64(loss_scale_window, kDefaults.loss_scale_window,
             "--precision=fp16, dynamic: clean steps before the scale "
             "doubles (fp16.loss_scale_window).");
DEFINE_int64(loss_scale_hysteresis, kDefaults.loss_scale_hysteresis,
             "--precision=fp16, dynamic: overflowing steps tolerated before "
             "the scale halves; the first hysteresis - 1 are only skipped "
             "(fp16.hysteresis).");
DEFINE_double(loss_scale_min, kDefaults.loss_scale_min,
              "--precision=fp16, dynamic: the scale never halves below this "
              "(fp16.min_loss_scale).");
DEFINE_int64(log_interval, kDefaults.log_interval,
             "Steps between progress lines and metrics records.");
DEFINE_bool(wall_clock_breakdown, kDefaults.wall_clock_breakdown,
            "Add the per-step wall-clock times of the step's phases to every "
            "progress line and metrics record: forward+backward, optimizer "
            "step, the time spent waiting for collectives, data, "
            "checkpoints (rank 0's, steady clock).");
DEFINE_string(deepspeed_config, "",
              "A DeepSpeed config (JSON) mapped onto these flags, as "
              "mmengine's DeepSpeedStrategy passes it to DeepSpeed: batch "
              "sizes, ZeRO stage -> --strategy, bf16, optimizer, scheduler, "
              "clipping, activation checkpointing, ... (README.md, "
              "\"DeepSpeed configs\"). Flags given explicitly override it "
              "(logged). A relative path is tried from the working "
              "directory, then from where `bazel run` was started.");
DEFINE_int64(eval_interval, kDefaults.eval_interval,
             "Steps between evaluations; 0: only at the end.");
DEFINE_int64(eval_batches, kDefaults.eval_batches,
             "Micro-batches per evaluation; with --eval_only, 0: all of the "
             "eval data.");
DEFINE_bool(eval_only, kDefaults.eval_only,
            "Evaluate the weights of --load_weights or --resume on the eval "
            "data (loss and perplexity over --eval_batches micro-batches, "
            "printed and written to <output_dir>/eval.json) and exit without "
            "training.");
DEFINE_string(output_dir, "",
              "Directory for metrics.jsonl and model.pt (default: out/train "
              "under the directory bazel run was started from).");
DEFINE_string(tensorboard_dir, "",
              "Rank 0 also writes the progress scalars (train/loss, "
              "eval/loss, lr, grad_norm, tokens_per_s, mfu; "
              "exposed_comm_share with --wall_clock_breakdown) to a "
              "TensorBoard event file in this directory, flushed at every "
              "progress line; view with `tensorboard --logdir <dir>`. "
              "Empty: none.");
DEFINE_string(trace_steps, "",
              "FIRST:LAST: record a timeline trace of steps FIRST..LAST "
              "(from 1, inclusive) into --trace_dir/trace.json (every "
              "rank's unit forward/backward, collectives, optimizer, "
              "checkpoints; open in ui.perfetto.dev). Empty: none.");
DEFINE_string(trace_dir, "",
              "Directory of the --trace_steps timeline trace (rank 0 "
              "writes trace.json there).");
DEFINE_string(device, kDefaults.device,
              "auto, cpu or cuda (cuda:LOCAL_RANK modulo the visible GPUs): "
              "where parameters, gradients, optimizer state and activations "
              "live. auto: cuda where this LibTorch has CUDA, a GPU is "
              "visible and the run can use it (fp32 or bf16; no "
              "checkpoints or --fsdp_cpu_offload so far), else cpu");
DEFINE_int32(threads, 1,
             "LibTorch intra-op threads (element-wise ops, softmax, ...); 0: "
             "OMP_NUM_THREADS when set (the launcher sets it per rank), else "
             "every CPU this process may run on. fp32 matmuls use OpenBLAS's "
             "own threads (OPENBLAS_NUM_THREADS, default all CPUs); on two "
             "cores 1 is fastest for small models (see BENCHMARKS.md).");

DEFINE_int32(nproc, 1,
             "Ranks to train with on this machine. With > 1 and no rank "
             "environment (torchrun, launch, Slurm, Open MPI), train "
             "re-launches itself through the launcher as --nproc ranks "
             "(threads split evenly between them) and waits for them; e.g. "
             "--nproc=2 --strategy=fsdp.");
DEFINE_int32(max_restarts, 0,
             "With --nproc > 1 (train starts its own ranks): when a rank "
             "fails, stop the others and restart all ranks, up to this many "
             "times (torchrun's --max_restarts); pair it with --save_every "
             "and --resume=auto so that each round continues from the newest "
             "valid checkpoint. 0: the first failure ends the run.");

DEFINE_double(heartbeat_timeout_s, 0,
              "With --nproc > 1 (train starts its own ranks): every rank "
              "beats on a pipe; one silent this long (stopped, frozen) is "
              "reported with its process state and the job stops, as "
              "launch's --heartbeat_timeout_s. 0: no heartbeat.");
DEFINE_double(heartbeat_startup_timeout_s, 120,
              "With --heartbeat_timeout_s: seconds a rank may take from its "
              "start to its first heartbeat.");

// --- Test hooks --------------------------------------------------------------
// Flags only tests set. Their help text is gflags' kStrippedFlagHelp, the
// marker gflags' usage reporting (--help, --helpfull, --helpon, --helpmatch)
// treats as "pretend the flag does not exist", so they never show in
// `train --help`; they still parse, and the start-up flags line lists them.
// What each does is documented here instead.

// The test faults (launch/train/test_faults.h says what each does).
// Every rank pauses this long inside every checkpoint save, after its data
// is written and before the commit.
DEFINE_int64(ckpt_test_pause_ms, 0, GFLAGS_NAMESPACE::kStrippedFlagHelp);

// PHASE:STEP[:NTH],... and R[,R...]: in restart round k, rank R_k SIGKILLs
// itself at the NTH time it reaches PHASE (forward, backward, collective,
// save, async_save, step_end) in step STEP.
DEFINE_string(test_kill_at, "", GFLAGS_NAMESPACE::kStrippedFlagHelp);
DEFINE_string(test_kill_rank, "0", GFLAGS_NAMESPACE::kStrippedFlagHelp);

// Dropout draws its masks from each rank's default CPU generator
// (at::dropout) instead of the world-size-invariant DropoutContext
// (TrainOptions::dropout_test_default_generator): a run whose future depends
// on every rank's own generator state.
DEFINE_bool(dropout_test_default_generator, false,
            GFLAGS_NAMESPACE::kStrippedFlagHelp);

namespace strata::launch {
namespace {

// --threads=0: OMP_NUM_THREADS when set (the launcher sets it per rank), else
// every CPU this process may run on.
int DefaultThreads(const comm::EnvLookup& env) {
  const std::optional<std::string> omp = env("OMP_NUM_THREADS");
  int from_env = 0;
  if (omp.has_value() && absl::SimpleAtoi(*omp, &from_env) && from_env > 0) {
    return from_env;
  }
  cpu_set_t cpus;
  CPU_ZERO(&cpus);
  return sched_getaffinity(0, sizeof(cpus), &cpus) == 0
             ? std::max(1, CPU_COUNT(&cpus))
             : 1;
}

// An empty --output_dir: under `bazel run` the working directory is the
// runfiles tree; write where the user started.
std::string DefaultOutputDir(const comm::EnvLookup& env) {
  const std::optional<std::string> cwd = env("BUILD_WORKING_DIRECTORY");
  return absl::StrCat(cwd.has_value() ? *cwd : ".", "/", kDefaults.output_dir);
}

// The flags of this file given on the command line (or in a --flagfile),
// --deepspeed_config aside: the ones that override the config.
std::set<std::string> ExplicitTrainFlags() {
  std::vector<gflags::CommandLineFlagInfo> flags;
  gflags::GetAllFlags(&flags);
  std::set<std::string> given;
  for (const auto& f : flags) {
    if (f.filename.find("launch/train/train_flags.cc") == std::string::npos)
      continue;
    if (!f.is_default && f.name != "deepspeed_config") given.insert(f.name);
  }
  return given;
}

// The world the run will have: the launcher's (or torchrun's, srun's,
// mpirun's) world size, else --nproc (train re-launches itself as that
// many ranks).
absl::StatusOr<int> WorldSize(const comm::EnvLookup& env) {
  STRATA_ASSIGN_OR_RETURN(const comm::RendezvousInfo world,
                          comm::RendezvousInfoFromEnv(env));
  return world.source == "single-process" ? FLAGS_nproc : world.world_size;
}

// --deepspeed_config's file: as given, else (relative) under the directory
// `bazel run` was started in.
absl::StatusOr<std::string> ReadDeepSpeedConfig(const comm::EnvLookup& env) {
  const std::string& path = FLAGS_deepspeed_config;
  absl::StatusOr<std::string> text = ReadWholeFile(path);
  const std::optional<std::string> cwd = env("BUILD_WORKING_DIRECTORY");
  if (!text.ok() && absl::IsNotFound(text.status()) && !path.empty() &&
      path[0] != '/' && cwd.has_value()) {
    absl::StatusOr<std::string> there =
        ReadWholeFile(absl::StrCat(*cwd, "/", path));
    if (there.ok() || !absl::IsNotFound(there.status())) return there;
    return absl::NotFoundError(absl::StrCat(
        "no such file here or under ", *cwd,
        " (where bazel run was started): ", text.status().message()));
  }
  return text;
}

absl::Status ApplyDeepSpeedFlag(const comm::EnvLookup& env, TrainOptions* o,
                                std::vector<std::string>* notes) {
  STRATA_ASSIGN_OR_RETURN(const std::string text, ReadDeepSpeedConfig(env));
  STRATA_ASSIGN_OR_RETURN(const DeepSpeedConfig config,
                          ParseDeepSpeedConfig(text, FLAGS_deepspeed_config));
  STRATA_ASSIGN_OR_RETURN(const int world_size, WorldSize(env));
  std::vector<std::string> lines;
  STRATA_RETURN_IF_ERROR(ApplyDeepSpeedConfig(config, world_size,
                                              ExplicitTrainFlags(), o, &lines));
  if (notes != nullptr) {
    for (std::string& line : lines) {
      notes->push_back(absl::StrCat("--deepspeed_config: ", line));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<TrainOptions> TrainOptionsFromFlags(
    const comm::EnvLookup& env, std::vector<std::string>* notes) {
  TrainOptions o;
  o.model = FLAGS_model;
  o.vocab_size = FLAGS_vocab_size;
  o.seq_len = FLAGS_seq_len;
  o.dropout = FLAGS_dropout;
  o.loss_chunk_tokens = FLAGS_loss_chunk_tokens;
  STRATA_ASSIGN_OR_RETURN(o.data, ParseDataKind(FLAGS_data));
  o.data_path = FLAGS_data_path;
  o.tokenizer = FLAGS_tokenizer;
  o.markov_vocab = FLAGS_markov_vocab;
  o.markov_branching = FLAGS_markov_branching;
  o.markov_tokens = FLAGS_markov_tokens;
  o.eval_fraction = FLAGS_eval_fraction;
  o.steps = FLAGS_steps;
  o.global_batch = FLAGS_global_batch;
  o.micro_batch = FLAGS_micro_batch;
  o.lr = FLAGS_lr;
  STRATA_ASSIGN_OR_RETURN(o.lr_schedule,
                          optim::ParseLrScheduleKind(FLAGS_lr_schedule));
  o.warmup_steps = FLAGS_warmup_steps;
  o.lr_step_size = FLAGS_lr_step_size;
  o.lr_gamma = FLAGS_lr_gamma;
  o.min_lr = FLAGS_min_lr;
  o.lr_total_steps = FLAGS_lr_total_steps;
  o.lr_warmup_type = FLAGS_lr_warmup_type;
  o.lr_warmup_min_ratio = FLAGS_lr_warmup_min_ratio;
  o.lr_cos_min_ratio = FLAGS_lr_cos_min_ratio;
  STRATA_ASSIGN_OR_RETURN(o.optimizer,
                          strategies::ParseOptimizerKind(FLAGS_optimizer));
  o.weight_decay = FLAGS_weight_decay;
  o.beta1 = FLAGS_beta1;
  o.beta2 = FLAGS_beta2;
  o.eps = FLAGS_eps;
  o.momentum = FLAGS_momentum;
  o.dampening = FLAGS_dampening;
  o.nesterov = FLAGS_nesterov;
  o.grad_clip = FLAGS_grad_clip;
  o.seed = FLAGS_seed;
  STRATA_ASSIGN_OR_RETURN(o.precision, ParsePrecision(FLAGS_precision));
  o.loss_scale = FLAGS_loss_scale;
  o.loss_scale_initial_power = FLAGS_loss_scale_initial_power;
  o.loss_scale_window = FLAGS_loss_scale_window;
  o.loss_scale_hysteresis = FLAGS_loss_scale_hysteresis;
  o.loss_scale_min = FLAGS_loss_scale_min;
  o.log_interval = FLAGS_log_interval;
  o.wall_clock_breakdown = FLAGS_wall_clock_breakdown;
  o.eval_interval = FLAGS_eval_interval;
  o.eval_batches = FLAGS_eval_batches;
  o.eval_only = FLAGS_eval_only;
  o.threads = FLAGS_threads;
  o.device = FLAGS_device;
  STRATA_ASSIGN_OR_RETURN(o.strategy,
                          strategies::ParseStrategyKind(FLAGS_strategy));
  o.bucket_bytes = FLAGS_bucket_bytes;
  o.first_bucket_bytes = FLAGS_first_bucket_bytes;
  o.allow_unused_parameters = FLAGS_allow_unused_parameters;
  if (!FLAGS_checkpoint_units.empty()) {
    // Empty entries are kept: CreateStrategy reports them.
    for (absl::string_view unit : absl::StrSplit(FLAGS_checkpoint_units, ',')) {
      o.checkpoint_units.emplace_back(absl::StripAsciiWhitespace(unit));
    }
  }
  o.param_dtype = FLAGS_param_dtype;
  o.reduce_dtype = FLAGS_reduce_dtype;
  o.buffer_dtype = FLAGS_buffer_dtype;
  o.fsdp_sharding = FLAGS_fsdp_sharding;
  o.fsdp_wrap_unit_types = FLAGS_fsdp_wrap_unit_types;
  o.fsdp_wrap_min_params = FLAGS_fsdp_wrap_min_params;
  o.fsdp_forward_prefetch = FLAGS_fsdp_forward_prefetch;
  o.fsdp_backward_prefetch = FLAGS_fsdp_backward_prefetch;
  o.fsdp_limit_all_gathers = FLAGS_fsdp_limit_all_gathers;
  o.fsdp_reductions_in_flight = FLAGS_fsdp_reductions_in_flight;
  o.fsdp_cpu_offload = FLAGS_fsdp_cpu_offload;
  o.fsdp_hybrid_shard_group_size = FLAGS_fsdp_hybrid_shard_group_size;
  o.fsdp_reduce_scatter_every_micro_step =
      FLAGS_fsdp_reduce_scatter_every_micro_step;
  o.fsdp_deferred_init = FLAGS_fsdp_deferred_init;
  o.fsdp_reuse_buffers = FLAGS_fsdp_reuse_buffers;
  STRATA_ASSIGN_OR_RETURN(o.ckpt_format,
                          checkpoint::ParseFormat(FLAGS_ckpt_format));
  o.ckpt_dir = FLAGS_ckpt_dir;
  o.save_every = FLAGS_save_every;
  o.keep_last = FLAGS_keep_last;
  o.async_save = FLAGS_async_save;
  o.resume = FLAGS_resume;
  o.load_weights = FLAGS_load_weights;
  o.ckpt_test_pause_ms = FLAGS_ckpt_test_pause_ms;
  o.test_kill_at = FLAGS_test_kill_at;
  o.test_kill_rank = FLAGS_test_kill_rank;
  o.dropout_test_default_generator = FLAGS_dropout_test_default_generator;
  if (o.threads == 0) o.threads = DefaultThreads(env);
  o.output_dir = FLAGS_output_dir;
  if (o.output_dir.empty()) o.output_dir = DefaultOutputDir(env);
  o.tensorboard_dir = FLAGS_tensorboard_dir;
  o.trace_steps = FLAGS_trace_steps;
  o.trace_dir = FLAGS_trace_dir;
  if (!FLAGS_deepspeed_config.empty()) {
    STRATA_RETURN_IF_ERROR(
        Annotate(ApplyDeepSpeedFlag(env, &o, notes),
                 absl::StrCat("--deepspeed_config=", FLAGS_deepspeed_config)));
  }
  return o;
}

std::string TrainFlagsSummary() {
  std::vector<gflags::CommandLineFlagInfo> flags;
  gflags::GetAllFlags(&flags);  // Sorted by file, then name.
  std::string summary;
  for (const auto& f : flags) {
    if (f.filename.find("launch/train/train_flags.cc") == std::string::npos)
      continue;
    std::string value = f.current_value;
    double number = 0;
    if (f.type == "double" && absl::SimpleAtod(value, &number)) {
      value = absl::StrFormat("%g", number);
    }
    absl::StrAppend(&summary, " --", f.name, "=", value);
  }
  return summary;
}

}  // namespace strata::launch
