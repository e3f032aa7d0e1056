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

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "comm/environment.h"
#include "comm/group.h"
#include "comm/rendezvous.h"
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
DEFINE_int32(collective_timeout_s, 600,
             "How long a collective may wait for the other ranks.");
DEFINE_bool(debug_collectives, false,
            "Check every collective's sizes and dtypes across ranks first "
            "(clear errors instead of Gloo aborts; one extra small "
            "all-gather per collective).");
DEFINE_uint64(seed, kDefaults.seed,
              "Seed of the initialisation, the data and the sampler.");
DEFINE_string(precision, kDefaults.precision,
              "fp32, or bf16 (autocast: bf16 matmuls, fp32 weights).");
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

int main(int argc, char** argv) {
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

  // The world: one process, or the ranks of the launcher, torchrun, srun or
  // mpirun (read from their environment variables).
  auto world = strata::comm::RendezvousInfoFromEnv(strata::comm::ProcessEnv());
  if (!world.ok()) {
    LOG(ERROR) << world.status().message();
    return 1;
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
