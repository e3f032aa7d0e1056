// //launch:train — trains a model from flags or a --flagfile experiment
// (launch/configs/*.flags). With no flags it runs the default experiment: a
// small GPT on the synthetic Markov corpus, ending near its entropy floor.
//
//   bazel run //launch:train
//   bazel run //launch:train -- --flagfile=launch/configs/gpt_tiny_bf16.flags
#include <gflags/gflags.h>
#include <glog/logging.h>
#include <sched.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "comm/environment.h"
#include "comm/group.h"
#include "comm/rendezvous.h"
#include "launch/launcher.h"
#include "launch/trainer.h"

namespace {
const strata::launch::TrainOptions kDefaults;
}  // namespace

DEFINE_string(
    model, kDefaults.model,
    "Model config name: gpt-tiny, gpt-small50m, gpt-100m, gpt2, "
    "gpt2-medium, gpt2-large, gpt2-xl, llama-tiny, llama-1b, llama-7b.");
DEFINE_int64(vocab_size, kDefaults.vocab_size,
             "Vocabulary size override (0: the model config's). Required for "
             "token-bin data.");
DEFINE_int64(seq_len, kDefaults.seq_len, "Training sequence length (tokens).");
DEFINE_double(dropout, kDefaults.dropout, "Dropout probability.");
DEFINE_string(data, kDefaults.data,
              "markov (synthetic corpus with a known entropy floor), bytes "
              "(a text file, vocab 256), uint16 or uint32 (token-bin file).");
DEFINE_string(data_path, kDefaults.data_path,
              "File for --data=bytes|uint16|uint32.");
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
DEFINE_string(lr_schedule, kDefaults.lr_schedule,
              "constant, cosine, linear or step (after linear warm-up).");
DEFINE_int64(warmup_steps, kDefaults.warmup_steps, "Linear warm-up steps.");
DEFINE_double(min_lr, kDefaults.min_lr,
              "Final learning rate of the cosine/linear schedules.");
DEFINE_double(weight_decay, kDefaults.weight_decay,
              "AdamW weight decay (matrices and embeddings only).");
DEFINE_double(beta1, kDefaults.beta1, "AdamW beta1.");
DEFINE_double(beta2, kDefaults.beta2, "AdamW beta2.");
DEFINE_double(grad_clip, kDefaults.grad_clip,
              "Global gradient-norm clipping threshold; 0: off.");
DEFINE_string(strategy, kDefaults.strategy,
              "single (one process); ddp, zero1 or zero2 (data parallel over "
              "the ranks of the launcher / torchrun / srun / mpirun; zero1 "
              "shards the optimizer state, zero2 also the gradients).");
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
              "gradient computation, or not at all (none).");
DEFINE_int32(fsdp_limit_all_gathers, kDefaults.fsdp_limit_all_gathers,
             "--strategy=fsdp: at most this many unit all-gathers in flight "
             "(rate limiter); 0: no limit.");
DEFINE_int32(fsdp_reductions_in_flight, kDefaults.fsdp_reductions_in_flight,
             "--strategy=fsdp: unit gradient reductions left running while "
             "backward continues (each holds a unit's full gradients); 0: "
             "wait for each at once (least memory).");
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
DEFINE_bool(fsdp_deferred_init, kDefaults.fsdp_deferred_init,
            "--strategy=fsdp: build the model without allocating its "
            "parameters and materialise only each rank's shards (values "
            "identical to a full build), for models too large for one rank.");
DEFINE_string(ckpt_format, kDefaults.ckpt_format,
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
              "latest one under --ckpt_dir; empty: start fresh. Restores the "
              "model, optimizer, step, data position and generator.");
DEFINE_int64(ckpt_test_pause_ms, 0,
             "Test hook: pause this long inside every save, after the data "
             "is written and before the commit.");
DEFINE_int32(collective_timeout_s, 600,
             "How long a collective may wait for the other ranks.");
DEFINE_bool(debug_collectives, false,
            "Check every collective's sizes and dtypes across ranks first "
            "(clear errors instead of Gloo aborts; one extra small "
            "all-gather per collective).");
DEFINE_uint64(seed, kDefaults.seed,
              "Seed of the initialisation, the data and the sampler.");
DEFINE_string(precision, kDefaults.precision,
              "fp32, or bf16 (autocast: bf16 matmuls, fp32 weights; for "
              "bf16 weights with fp32 masters see --param_dtype).");
DEFINE_int64(log_interval, kDefaults.log_interval,
             "Steps between progress lines and metrics records.");
DEFINE_int64(eval_interval, kDefaults.eval_interval,
             "Steps between evaluations; 0: only at the end.");
DEFINE_int64(eval_batches, kDefaults.eval_batches,
             "Micro-batches per evaluation.");
DEFINE_string(output_dir, "",
              "Directory for metrics.jsonl and model.pt (default: out/train "
              "under the directory bazel run was started from).");
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

int main(int argc, char** argv) {
  const std::vector<std::string> original_args(argv + 1, argv + argc);
  gflags::SetUsageMessage(
      "Trains a model. Flags may come from --flagfile=launch/configs/*.flags.");
  gflags::ParseCommandLineFlags(&argc, &argv, /*remove_flags=*/true);
  google::InitGoogleLogging(argv[0]);
  FLAGS_logtostderr = true;
  if (argc > 1) {
    LOG(ERROR) << "unexpected argument '" << argv[1]
               << "': train takes only flags (see --help)";
    return 1;
  }
  if (FLAGS_nproc < 1) {
    LOG(ERROR) << "--nproc must be >= 1, got " << FLAGS_nproc;
    return 1;
  }
  // The world: one process, or the ranks of the launcher, torchrun, srun or
  // mpirun (read from their environment variables).
  auto world = strata::comm::RendezvousInfoFromEnv(strata::comm::ProcessEnv());
  if (!world.ok()) {
    LOG(ERROR) << world.status().message();
    return 1;
  }
  if (FLAGS_nproc > 1) {
    if (world->world_size == 1) {
      if (FLAGS_strategy == "single") {
        LOG(ERROR) << "--nproc=" << FLAGS_nproc
                   << " needs a data-parallel --strategy (ddp, zero1, zero2 "
                      "or fsdp); --strategy=single trains in one process";
        return 1;
      }
      auto launch = strata::launch::SelfLaunchOptions(FLAGS_nproc, original_args);
      if (!launch.ok()) {
        LOG(ERROR) << launch.status().message();
        return 1;
      }
      LOG(INFO) << "starting " << FLAGS_nproc
                << " ranks through the launcher (rank output prefixed "
                   "[rankN]:)";
      const absl::Status status = strata::launch::Launch(*launch);
      if (!status.ok()) LOG(ERROR) << status.message();
      return strata::launch::ExitCodeFromStatus(status);
    }
  }

  strata::launch::TrainOptions o;
  o.model = FLAGS_model;
  o.vocab_size = FLAGS_vocab_size;
  o.seq_len = FLAGS_seq_len;
  o.dropout = FLAGS_dropout;
  o.data = FLAGS_data;
  o.data_path = FLAGS_data_path;
  o.markov_vocab = FLAGS_markov_vocab;
  o.markov_branching = FLAGS_markov_branching;
  o.markov_tokens = FLAGS_markov_tokens;
  o.eval_fraction = FLAGS_eval_fraction;
  o.steps = FLAGS_steps;
  o.global_batch = FLAGS_global_batch;
  o.micro_batch = FLAGS_micro_batch;
  o.lr = FLAGS_lr;
  o.lr_schedule = FLAGS_lr_schedule;
  o.warmup_steps = FLAGS_warmup_steps;
  o.min_lr = FLAGS_min_lr;
  o.weight_decay = FLAGS_weight_decay;
  o.beta1 = FLAGS_beta1;
  o.beta2 = FLAGS_beta2;
  o.grad_clip = FLAGS_grad_clip;
  o.seed = FLAGS_seed;
  o.precision = FLAGS_precision;
  o.log_interval = FLAGS_log_interval;
  o.eval_interval = FLAGS_eval_interval;
  o.eval_batches = FLAGS_eval_batches;
  o.threads = FLAGS_threads;
  o.strategy = FLAGS_strategy;
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
  o.ckpt_format = FLAGS_ckpt_format;
  o.ckpt_dir = FLAGS_ckpt_dir;
  o.save_every = FLAGS_save_every;
  o.keep_last = FLAGS_keep_last;
  o.async_save = FLAGS_async_save;
  o.resume = FLAGS_resume;
  o.ckpt_test_pause_ms = FLAGS_ckpt_test_pause_ms;
  if (o.threads == 0) {
    const char* omp = std::getenv("OMP_NUM_THREADS");
    int from_env = 0;
    if (omp != nullptr && absl::SimpleAtoi(omp, &from_env) && from_env > 0) {
      o.threads = from_env;
    } else {
      cpu_set_t cpus;
      CPU_ZERO(&cpus);
      o.threads = sched_getaffinity(0, sizeof(cpus), &cpus) == 0
                      ? std::max(1, CPU_COUNT(&cpus))
                      : 1;
    }
  }
  o.output_dir = FLAGS_output_dir;
  if (o.output_dir.empty()) {
    // Under `bazel run` the working directory is the runfiles tree; write
    // where the user started.
    const char* cwd = std::getenv("BUILD_WORKING_DIRECTORY");
    o.output_dir =
        absl::StrCat(cwd != nullptr ? cwd : ".", "/", kDefaults.output_dir);
  }

  if (world->world_size > 1 && o.strategy == "single") {
    LOG(ERROR) << "--strategy=single trains in one process, but this is rank "
               << world->rank << " of " << world->world_size << " ("
               << world->source
               << " variables); use --strategy=ddp (or zero1, zero2) to train "
                  "on all ranks";
    return 1;
  }
  std::vector<gflags::CommandLineFlagInfo> flags;
  gflags::GetAllFlags(&flags);
  std::string summary;
  for (const auto& f : flags) {
    if (f.filename.find("train_main.cc") == std::string::npos) continue;
    std::string value = f.current_value;
    double number = 0;
    if (f.type == "double" && absl::SimpleAtod(value, &number)) {
      value = absl::StrFormat("%g", number);
    }
    absl::StrAppend(&summary, " --", f.name, "=", value);
  }
  if (world->rank == 0) LOG(INFO) << "flags:" << summary;

  std::unique_ptr<strata::comm::Group> group;
  if (o.strategy != "single") {
    strata::comm::GroupOptions group_options;
    group_options.timeout = absl::Seconds(FLAGS_collective_timeout_s);
    group_options.check_collectives = FLAGS_debug_collectives;
    auto connected = strata::comm::ConnectWorld(*world, group_options);
    if (!connected.ok()) {
      LOG(ERROR) << connected.status().message();
      return 1;
    }
    group = std::move(*connected);
  }
  if (world->rank != 0) FLAGS_minloglevel = google::WARNING;

  auto result = strata::launch::Train(o, group.get());
  if (!result.ok()) {
    LOG(ERROR) << result.status().message();
    return 1;
  }
  LOG(INFO) << "done: " << result->steps << " steps, final train loss "
            << result->final_train_loss << ", eval loss "
            << result->final_eval_loss;
  return 0;
}
