#include "launch/trainer.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <glog/logging.h>
#include <torch/csrc/autograd/autograd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/time.h"
#include "base/matmul_peak.h"
#include "base/status.h"
#include "comm/group.h"
#include "comm/wait_clock.h"
#include "data/file_sources.h"
#include "data/markov_corpus.h"
#include "data/sampler.h"
#include "data/token_source.h"
#include "launch/progress_logger.h"
#include "launch/tensorboard.h"
#include "launch/tensorboard_scalars.h"
#include "launch/training_checkpoint.h"
#include "models/config.h"
#include "models/dropout.h"
#include "models/factory.h"
#include "models/state_dict.h"
#include "models/unit.h"
#include "optim/lr_schedule.h"
#include "strategies/autocast.h"
#include "strategies/factory.h"
#include "strategies/options.h"
#include "strategies/strategy.h"

namespace strata::launch {
namespace {

absl::Status FlagError(absl::string_view flag, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("--", flag, ": ", what));
}

// A contiguous range of another source (train/eval split).
class TokenSlice final : public data::TokenSource {
 public:
  TokenSlice(const data::TokenSource* base, int64_t start, int64_t count,
             std::string label)
      : base_(base), start_(start), count_(count), label_(std::move(label)) {}
  int64_t num_tokens() const override { return count_; }
  int64_t vocab_size() const override { return base_->vocab_size(); }
  void Read(int64_t start, int64_t count, int64_t* out) const override {
    CHECK(start >= 0 && count >= 0 && start + count <= count_);
    base_->Read(start_ + start, count, out);
  }
  std::string Describe() const override {
    return absl::StrFormat("%s tokens [%d, %d) of %s", label_, start_,
                           start_ + count_, base_->Describe());
  }

 private:
  const data::TokenSource* base_;
  int64_t start_;
  int64_t count_;
  std::string label_;
};

struct Data {
  std::unique_ptr<data::TokenSource> source;
  std::unique_ptr<TokenSlice> train;
  std::unique_ptr<TokenSlice> eval;
  double entropy_floor = std::numeric_limits<double>::quiet_NaN();
};

absl::StatusOr<Data> OpenData(const TrainOptions& o) {
  Data d;
  if (o.data == DataKind::kMarkov) {
    data::MarkovCorpusOptions m;
    m.vocab_size = o.markov_vocab;
    m.branching = static_cast<int>(o.markov_branching);
    m.seed = o.seed;
    m.num_tokens = o.markov_tokens;
    auto corpus = data::MarkovCorpus::Create(m);
    if (!corpus.ok()) return Annotate(corpus.status(), "--data=markov");
    d.entropy_floor = (*corpus)->entropy_rate_nats();
    d.source = std::move(*corpus);
  } else if (o.data == DataKind::kBytes) {
    STRATA_ASSIGN_OR_RETURN(d.source, data::OpenByteText(o.data_path));
  } else {
    const data::TokenBinDtype dtype = o.data == DataKind::kUint16
                                          ? data::TokenBinDtype::kUint16
                                          : data::TokenBinDtype::kUint32;
    if (o.vocab_size <= 0) {
      return FlagError("vocab_size",
                       "token-bin data needs the vocabulary size (the ids in "
                       "the file are checked against it)");
    }
    STRATA_ASSIGN_OR_RETURN(
        d.source, data::OpenTokenBin(o.data_path, dtype, o.vocab_size));
  }
  const int64_t n = d.source->num_tokens();
  const int64_t eval_tokens = std::max<int64_t>(
      o.seq_len + 1, static_cast<int64_t>(n * o.eval_fraction));
  if (n - eval_tokens < o.seq_len + 1) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "data %s has %d tokens: too few for a training split and an eval "
        "split of at least --seq_len + 1 = %d tokens each",
        d.source->Describe(), n, o.seq_len + 1));
  }
  d.train =
      std::make_unique<TokenSlice>(d.source.get(), 0, n - eval_tokens, "train");
  d.eval = std::make_unique<TokenSlice>(d.source.get(), n - eval_tokens,
                                        eval_tokens, "eval");
  return d;
}

// The optimizer of a run (--optimizer and its flags).
strategies::OptimizerConfig OptimizerConfigOf(const TrainOptions& o) {
  strategies::OptimizerConfig config;
  config.kind = o.optimizer;
  config.weight_decay = o.weight_decay;
  config.adamw.beta1 = o.beta1;
  config.adamw.beta2 = o.beta2;
  config.adamw.eps = o.eps;
  config.sgd.momentum = o.momentum;
  config.sgd.dampening = o.dampening;
  config.sgd.nesterov = o.nesterov;
  config.grad_clip = o.grad_clip;
  return config;
}

// The optimizer flags: no flag of another optimizer than --optimizer's set
// away from its default (it would be ignored), then each value's range
// (strategies::ValidateOptimizerConfig, naming the flag).
absl::Status ValidateOptimizerFlags(const TrainOptions& o) {
  const TrainOptions defaults;
  const std::string optimizer =
      absl::StrCat("--optimizer=", strategies::OptimizerKindName(o.optimizer));
  const bool sgd = o.optimizer == strategies::OptimizerKind::kSgd;
  const struct {
    const char* flag;
    bool set;      // Away from its default.
    bool for_sgd;  // Used by SGD (else by AdamW and Adam).
  } flags[] = {
      {"beta1", o.beta1 != defaults.beta1, false},
      {"beta2", o.beta2 != defaults.beta2, false},
      {"eps", o.eps != defaults.eps, false},
      {"momentum", o.momentum != defaults.momentum, true},
      {"dampening", o.dampening != defaults.dampening, true},
      {"nesterov", o.nesterov != defaults.nesterov, true},
  };
  for (const auto& f : flags) {
    if (f.set && f.for_sgd != sgd) {
      return FlagError(
          f.flag, absl::StrCat("is used only by --optimizer=",
                               f.for_sgd ? "sgd" : "adamw or adam", ", got ",
                               optimizer, " (which would ignore it)"));
    }
  }
  if (sgd && o.dampening != 0 && o.momentum == 0) {
    return FlagError("dampening",
                     "is used only with --momentum > 0 (it damps the "
                     "momentum buffer), got --momentum=0");
  }
  return strategies::ValidateOptimizerConfig(OptimizerConfigOf(o));
}

// The learning-rate schedule of a run (optim/lr_schedule.h).
optim::LrScheduleOptions LrScheduleOptionsOf(const TrainOptions& o) {
  optim::LrScheduleOptions schedule;
  schedule.kind = std::string(LrScheduleKindName(o.lr_schedule));
  schedule.base_lr = o.lr;
  schedule.warmup_steps = o.warmup_steps;
  schedule.total_steps = o.lr_total_steps > 0 ? o.lr_total_steps : o.steps;
  schedule.min_lr = o.min_lr;
  schedule.step_size = o.lr_step_size;
  schedule.gamma = o.lr_gamma;
  schedule.warmup_type = !o.lr_warmup_type.empty()            ? o.lr_warmup_type
                         : IsDeepSpeedSchedule(o.lr_schedule) ? "log"
                                                              : "linear";
  if (o.lr_schedule == LrScheduleKind::kWarmupCosineLr) {
    schedule.warmup_min_ratio = o.lr_warmup_min_ratio;
    schedule.min_ratio = o.lr_cos_min_ratio;
  }
  return schedule;
}

}  // namespace

namespace {

// The flags of the schedules' later options: --lr_total_steps,
// --lr_warmup_type and the warmup_cosine_lr ratios, each only where its
// schedule reads it.
absl::Status ValidateScheduleFlags(const TrainOptions& o) {
  const TrainOptions defaults;
  const std::string kind(LrScheduleKindName(o.lr_schedule));
  if (o.lr_total_steps < 0) {
    return FlagError(
        "lr_total_steps",
        absl::StrCat("must be >= 0 (0 = --steps), got ", o.lr_total_steps));
  }
  if (!o.lr_warmup_type.empty() && o.lr_warmup_type != "linear" &&
      o.lr_warmup_type != "log") {
    return FlagError(
        "lr_warmup_type",
        absl::StrCat("must be log or linear, got '", o.lr_warmup_type, "'"));
  }
  if (o.lr_warmup_type == "log" && !IsDeepSpeedSchedule(o.lr_schedule)) {
    return FlagError("lr_warmup_type",
                     absl::StrCat("log is for --lr_schedule=warmup_lr, "
                                  "warmup_decay_lr or warmup_cosine_lr; ",
                                  kind, " warms up linearly"));
  }
  if (o.lr_schedule != LrScheduleKind::kWarmupCosineLr) {
    for (auto [flag, value, fallback] :
         {std::tuple<const char*, double, double>{"lr_warmup_min_ratio",
                                                  o.lr_warmup_min_ratio,
                                                  defaults.lr_warmup_min_ratio},
          {"lr_cos_min_ratio", o.lr_cos_min_ratio,
           defaults.lr_cos_min_ratio}}) {
      if (value != fallback) {
        return FlagError(flag, absl::StrCat("is read by --lr_schedule="
                                            "warmup_cosine_lr only, not ",
                                            kind));
      }
    }
  }
  return absl::OkStatus();
}

// The strategy flags (--strategy, buckets, --checkpoint_units, the dtype
// and --fsdp_* flags) as StrategyOptions; parse errors name the flag.
absl::StatusOr<strategies::StrategyOptions> StrategyOptionsFromFlags(
    const TrainOptions& o) {
  strategies::StrategyOptions options;
  options.kind = o.strategy;
  options.bucket_bytes = o.bucket_bytes;
  options.first_bucket_bytes = o.first_bucket_bytes;
  options.allow_unused_parameters = o.allow_unused_parameters;
  options.checkpoint_units = o.checkpoint_units;
  strategies::MixedPrecisionOptions& mp = options.mixed_precision;
  STRATA_ASSIGN_OR_RETURN(mp.param_dtype, strategies::ParseMixedPrecisionDtype(
                                              "param_dtype", o.param_dtype));
  STRATA_ASSIGN_OR_RETURN(mp.reduce_dtype, strategies::ParseMixedPrecisionDtype(
                                               "reduce_dtype", o.reduce_dtype));
  STRATA_ASSIGN_OR_RETURN(mp.buffer_dtype, strategies::ParseMixedPrecisionDtype(
                                               "buffer_dtype", o.buffer_dtype));
  if (o.strategy != strategies::StrategyKind::kFsdp) return options;
  strategies::FsdpOptions& f = options.fsdp;
  STRATA_ASSIGN_OR_RETURN(f.sharding,
                          strategies::ParseShardingStrategy(o.fsdp_sharding));
  for (absl::string_view type :
       absl::StrSplit(o.fsdp_wrap_unit_types, ',', absl::SkipWhitespace())) {
    f.wrap_policy.unit_types.emplace_back(absl::StripAsciiWhitespace(type));
  }
  f.wrap_policy.min_num_params = o.fsdp_wrap_min_params;
  f.forward_prefetch = o.fsdp_forward_prefetch;
  STRATA_ASSIGN_OR_RETURN(
      f.backward_prefetch,
      strategies::ParseBackwardPrefetch(o.fsdp_backward_prefetch));
  f.limit_all_gathers = o.fsdp_limit_all_gathers;
  f.reductions_in_flight = o.fsdp_reductions_in_flight;
  f.cpu_offload = o.fsdp_cpu_offload;
  f.hybrid_shard_group_size = o.fsdp_hybrid_shard_group_size;
  f.reduce_scatter_every_micro_step = o.fsdp_reduce_scatter_every_micro_step;
  f.init_seed = o.seed;
  return options;
}

}  // namespace

namespace {

// The checkpoint options of a run (launch/training_checkpoint.h).
TrainingCheckpointOptions CheckpointOptions(const TrainOptions& o) {
  TrainingCheckpointOptions c;
  c.format = std::string(CheckpointFormatName(o.ckpt_format));
  c.dir = o.ckpt_dir.empty() ? o.output_dir + "/checkpoints" : o.ckpt_dir;
  c.save_every = o.save_every;
  c.keep_last = o.keep_last;
  c.async_save = o.async_save;
  c.resume = o.resume;
  c.load_weights = o.load_weights;
  c.test_pause_before_commit = absl::Milliseconds(o.ckpt_test_pause_ms);
  c.seed = o.seed;
  c.model_config = o.model;
  return c;
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
  if (!(o.lr > 0))
    return FlagError("lr", absl::StrCat("must be > 0, got ", o.lr));
  if (o.weight_decay < 0) return FlagError("weight_decay", "must be >= 0");
  if (o.grad_clip < 0) return FlagError("grad_clip", "must be >= 0 (0 = off)");
  STRATA_RETURN_IF_ERROR(ValidateOptimizerFlags(o));
  if (o.dropout < 0 || o.dropout >= 1)
    return FlagError("dropout", "must be in [0, 1)");
  if (o.log_interval < 1) return FlagError("log_interval", "must be >= 1");
  if (o.eval_interval < 0)
    return FlagError("eval_interval", "must be >= 0 (0 = only at the end)");
  if (o.eval_batches < 1) return FlagError("eval_batches", "must be >= 1");
  if (!(o.eval_fraction > 0 && o.eval_fraction < 0.5)) {
    return FlagError("eval_fraction", "must be in (0, 0.5)");
  }
  if (o.threads < 0) return FlagError("threads", "must be >= 0 (0 = default)");
  if (o.output_dir.empty()) return FlagError("output_dir", "must not be empty");
  // DeepSpeed's schedules may warm up for longer than the run, as DeepSpeed
  // allows.
  if (o.warmup_steps < 0 || (o.warmup_steps >= o.steps &&
                             o.lr_schedule != LrScheduleKind::kConstant &&
                             !IsDeepSpeedSchedule(o.lr_schedule))) {
    return FlagError("warmup_steps",
                     absl::StrFormat("must be in [0, --steps=%d) for "
                                     "--lr_schedule=%s, got %d",
                                     o.steps, LrScheduleKindName(o.lr_schedule),
                                     o.warmup_steps));
  }
  if (o.lr_schedule == LrScheduleKind::kStep) {
    if (o.lr_step_size <= 0) {
      return FlagError("lr_step_size",
                       absl::StrCat("must be > 0 with --lr_schedule=step, got ",
                                    o.lr_step_size));
    }
    if (!(std::isfinite(o.lr_gamma) && o.lr_gamma > 0)) {
      return FlagError("lr_gamma",
                       absl::StrCat("must be > 0 with --lr_schedule=step, got ",
                                    o.lr_gamma));
    }
  }
  STRATA_RETURN_IF_ERROR(ValidateScheduleFlags(o));
  if (absl::Status s = optim::ValidateLrScheduleOptions(LrScheduleOptionsOf(o));
      !s.ok()) {
    return FlagError("lr_schedule", s.message());
  }
  STRATA_ASSIGN_OR_RETURN(const strategies::StrategyOptions strategy,
                          StrategyOptionsFromFlags(o));
  STRATA_RETURN_IF_ERROR(strategies::ValidateStrategyOptions(strategy));
  if (o.fsdp_deferred_init && o.strategy != strategies::StrategyKind::kFsdp) {
    return FlagError("fsdp_deferred_init",
                     absl::StrCat("needs --strategy=fsdp (each rank then "
                                  "materialises only its shards), got "
                                  "--strategy=",
                                  strategies::StrategyKindName(o.strategy)));
  }
  auto config = models::ConfigByName(o.model);
  if (!config.ok()) return FlagError("model", config.status().message());
  if (o.vocab_size < 0)
    return FlagError("vocab_size", "must be >= 0 (0 = the model's)");
  if (o.seq_len > config->seq_len) {
    return FlagError("seq_len",
                     absl::StrFormat("%d is longer than model '%s''s context "
                                     "of %d tokens",
                                     o.seq_len, o.model, config->seq_len));
  }
  STRATA_RETURN_IF_ERROR(
      ValidateTrainingCheckpointOptions(CheckpointOptions(o)));
  return absl::OkStatus();
}

namespace {

// The checks that need the world size, which ValidateTrainOptions does not
// know.
absl::Status CheckWorld(const TrainOptions& o, int world_size) {
  if (o.global_batch % world_size != 0) {
    return FlagError("global_batch",
                     absl::StrFormat("%d sequences do not split evenly over "
                                     "%d ranks",
                                     o.global_batch, world_size));
  }
  const int64_t local_batch = o.global_batch / world_size;
  if (o.micro_batch != 0 && local_batch % o.micro_batch != 0) {
    return FlagError("micro_batch",
                     absl::StrFormat("must divide the per-rank batch "
                                     "(--global_batch=%d / %d ranks = %d), "
                                     "got %d",
                                     o.global_batch, world_size, local_batch,
                                     o.micro_batch));
  }
  return absl::OkStatus();
}

// Creates --output_dir and its metrics.jsonl (rank 0 only).
absl::StatusOr<std::unique_ptr<ProgressLogger>> OpenProgress(
    const TrainOptions& o) {
  std::error_code ec;
  std::filesystem::create_directories(o.output_dir, ec);
  if (ec) {
    return FlagError("output_dir", absl::StrCat("cannot create '", o.output_dir,
                                                "': ", ec.message()));
  }
  auto progress = ProgressLogger::Open(o.output_dir + "/metrics.jsonl");
  if (!progress.ok())
    return FlagError("output_dir", progress.status().message());
  return std::move(*progress);
}

// Everything a run builds before its first step. The members are in
// construction order, so they are destroyed in reverse: the checkpoints
// (which borrow the strategy and the sampler) first, the data last.
struct Run {
  comm::Group* group = nullptr;  // Borrowed; null: one process.
  int rank = 0;
  int world_size = 1;
  models::ModelConfig config;
  Data data;
  std::unique_ptr<ProgressLogger> progress;  // Rank 0 only.
  // Rank 0 with --tensorboard_dir; flushes its file when destroyed.
  std::unique_ptr<TensorBoardWriter> tensorboard;
  std::shared_ptr<models::UnitModel> model;
  std::unique_ptr<strategies::Strategy> strategy;
  data::SamplerOptions sampler_options;
  std::unique_ptr<data::DistributedSampler> sampler;
  std::unique_ptr<TrainingCheckpoints> checkpoints;
  int64_t local_batch = 0;  // Sequences per rank and step.
  int64_t micro = 0;        // Sequences per forward.
  int64_t tokens_per_step = 0;
  double flops_per_token = 0;
  double peak_flops = 0;  // The world's: the sum over ranks.
};

// The model config and the data, checked against each other before anything
// big is built; then the output directory (rank 0).
absl::Status BuildDataAndOutput(const TrainOptions& o, Run* run) {
  STRATA_ASSIGN_OR_RETURN(run->config, models::ConfigByName(o.model));
  if (o.vocab_size > 0) run->config.vocab_size = o.vocab_size;
  run->config.dropout = o.dropout;
  STRATA_RETURN_IF_ERROR(models::ValidateConfig(run->config));
  STRATA_ASSIGN_OR_RETURN(run->data, OpenData(o));
  const int64_t data_vocab = run->data.source->vocab_size();
  if (data_vocab > run->config.vocab_size) {
    return FlagError("vocab_size",
                     absl::StrFormat("the data's token ids go up to %d but "
                                     "model '%s' has a vocabulary of %d; pass "
                                     "--vocab_size=%d or a larger model",
                                     data_vocab - 1, o.model,
                                     run->config.vocab_size, data_vocab));
  }
  if (run->rank == 0) {
    STRATA_ASSIGN_OR_RETURN(run->progress, OpenProgress(o));
    if (!o.tensorboard_dir.empty()) {
      auto writer = TensorBoardWriter::Open(o.tensorboard_dir);
      if (!writer.ok()) {
        return FlagError("tensorboard_dir", writer.status().message());
      }
      run->tensorboard = std::move(*writer);
      LOG(INFO) << "TensorBoard events: " << run->tensorboard->path();
    }
  }
  return absl::OkStatus();
}

// The model (with bf16 autocast for --precision=bf16), the strategy over
// it, the training sampler and the checkpoint manager.
absl::Status BuildTraining(const TrainOptions& o, Run* run) {
  models::BuildOptions build;
  build.seed = o.seed;
  build.deferred = o.fsdp_deferred_init;
  STRATA_ASSIGN_OR_RETURN(run->model, models::BuildModel(run->config, build));
  run->model->train();
  if (o.precision == Precision::kBf16) {
    run->model->AddInterceptor(
        std::make_shared<strategies::AutocastInterceptor>());
  }

  STRATA_ASSIGN_OR_RETURN(const strategies::StrategyOptions strategy_options,
                          StrategyOptionsFromFlags(o));
  const optim::LrScheduleOptions schedule_options = LrScheduleOptionsOf(o);
  STRATA_ASSIGN_OR_RETURN(
      run->strategy,
      strategies::CreateStrategy(strategy_options, run->model, run->group,
                                 OptimizerConfigOf(o), schedule_options));

  run->sampler_options.seq_len = o.seq_len;
  run->sampler_options.global_batch_size = o.global_batch;
  run->sampler_options.seed = o.seed;
  STRATA_ASSIGN_OR_RETURN(
      run->sampler, data::DistributedSampler::Create(run->data.train.get(),
                                                     run->sampler_options));
  TrainingCheckpointOptions ckpt_options = CheckpointOptions(o);
  ckpt_options.schedule = schedule_options;
  STRATA_ASSIGN_OR_RETURN(
      run->checkpoints,
      TrainingCheckpoints::Create(ckpt_options, run->strategy.get(),
                                  run->sampler.get(), run->group));
  return absl::OkStatus();
}

// Builds a run for this rank of `group` (borrowed; null: one process).
absl::Status BuildRun(const TrainOptions& o, comm::Group* group, Run* run) {
  run->group = group;
  run->rank = group == nullptr ? 0 : group->rank();
  run->world_size = group == nullptr ? 1 : group->size();
  STRATA_RETURN_IF_ERROR(CheckWorld(o, run->world_size));
  if (o.threads > 0) at::set_num_threads(o.threads);
  STRATA_RETURN_IF_ERROR(BuildDataAndOutput(o, run));
  STRATA_RETURN_IF_ERROR(BuildTraining(o, run));
  run->local_batch = o.global_batch / run->world_size;
  run->micro = o.micro_batch == 0 ? run->local_batch : o.micro_batch;
  run->tokens_per_step = o.global_batch * o.seq_len;
  run->flops_per_token = models::TrainingFlopsPerToken(run->config, o.seq_len);
  // Every rank has the same hardware share; the world's peak is the sum.
  run->peak_flops =
      run->world_size * MeasureMatmulPeakFlops(o.precision == Precision::kBf16
                                                   ? at::kBFloat16
                                                   : at::kFloat);
  return absl::OkStatus();
}

// Rank 0's start-of-run summary: model, data, floor, strategy and schedule.
void LogRunSummary(const TrainOptions& o, const Run& run) {
  const int64_t num_parameters = models::NumParameters(run.config);
  LOG(INFO) << absl::StrFormat(
      "model %s: %d parameters (%.1fM), %.3g training FLOP/token at "
      "seq_len %d",
      o.model, num_parameters, num_parameters / 1e6, run.flops_per_token,
      o.seq_len);
  LOG(INFO) << "data: " << run.data.train->Describe()
            << "; eval: " << run.data.eval->Describe();
  if (std::isfinite(run.data.entropy_floor)) {
    LOG(INFO) << absl::StrFormat(
        "entropy floor of the data: %.4f nats/token (the best achievable "
        "loss); uniform guess: %.4f",
        run.data.entropy_floor,
        std::log(static_cast<double>(run.data.source->vocab_size())));
  }
  LOG(INFO) << absl::StrFormat(
      "strategy %s on %d rank(s): %d steps x %d sequences x %d tokens (per "
      "rank %d micro-batches of %d), %s, threads %d, matmul peak measured "
      "%.1f GFLOP/s per rank; metrics: %s",
      run.strategy->name(), run.world_size, o.steps, o.global_batch, o.seq_len,
      run.local_batch / run.micro, run.micro, PrecisionName(o.precision),
      at::get_num_threads(), run.peak_flops / run.world_size / 1e9,
      run.progress->metrics_path());
}

// The mean over ranks of a per-rank value (one scalar all-reduce).
absl::StatusOr<double> WorldMean(const Run& run, double local) {
  if (run.group == nullptr || run.world_size == 1) return local;
  at::Tensor t = at::full({1}, local, at::kDouble);
  STRATA_RETURN_IF_ERROR(run.group->AllReduce(t, comm::ReduceOp::kAverage));
  return t.item<double>();
}

// The mean loss over --eval_batches held-out batches. Every rank evaluates
// the same batches (its weights are the same), so no communication is
// needed.
absl::StatusOr<double> Evaluate(const TrainOptions& o, Run& run) {
  data::SamplerOptions eval_options = run.sampler_options;
  eval_options.shuffle = false;
  eval_options.global_batch_size = run.micro;
  STRATA_ASSIGN_OR_RETURN(
      std::unique_ptr<data::DistributedSampler> eval_sampler,
      data::DistributedSampler::Create(run.data.eval.get(), eval_options));
  run.model->eval();
  at::NoGradGuard no_grad;
  double total = 0;
  for (int64_t i = 0; i < o.eval_batches; ++i) {
    STRATA_ASSIGN_OR_RETURN(at::Tensor batch, eval_sampler->NextBatch(0, 1));
    total += models::UnitModel::Loss(
                 run.model->Forward(batch.narrow(1, 0, o.seq_len)),
                 batch.narrow(1, 1, o.seq_len))
                 .item<double>();
  }
  run.model->train();
  return total / o.eval_batches;
}

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
      .count();
}

// One optimizer step (all micro-batches); returns this rank's mean loss and
// sets `*stepped`; adds the step's phase times to `*phases`. A non-finite
// loss is an error.
absl::StatusOr<double> TrainStep(const TrainOptions& o, Run& run, int64_t step,
                                 strategies::StepResult* stepped,
                                 PhaseTimes* phases) {
  run.strategy->ZeroGrad();
  // The global index of this rank's first sample of the step: dropout masks
  // are drawn from (seed, step, global sample index), so they do not depend
  // on the world size, the strategy or the micro-batch split
  // (models/dropout.h).
  const int64_t first_sample =
      run.sampler->position() + run.rank * run.local_batch;
  const auto data_start = std::chrono::steady_clock::now();
  STRATA_ASSIGN_OR_RETURN(at::Tensor batch,
                          run.sampler->NextBatch(run.rank, run.world_size));
  phases->data_s += SecondsSince(data_start);
  const double waited_before = comm::ThreadCollectiveWaitSeconds();
  const auto forward_start = std::chrono::steady_clock::now();
  const int64_t local_batch = run.local_batch;
  const int64_t micro = run.micro;
  double step_loss = 0;
  for (int64_t m = 0; m < local_batch; m += micro) {
    const at::Tensor mb = batch.narrow(0, m, micro);
    auto dropout = std::make_shared<models::DropoutContext>();
    dropout->seed = o.seed;
    dropout->step = step;
    for (int64_t i = 0; i < micro; ++i) {
      dropout->sample_ids.push_back(first_sample + m + i);
    }
    if (!o.dropout_test_default_generator) {
      run.model->SetDropoutContext(std::move(dropout));
    }
    STRATA_ASSIGN_OR_RETURN(
        double loss, run.strategy->ForwardBackward(
                         mb.narrow(1, 0, o.seq_len), mb.narrow(1, 1, o.seq_len),
                         static_cast<double>(micro) / local_batch,
                         /*last_micro_batch=*/m + micro == local_batch));
    step_loss += loss * micro / local_batch;
  }
  phases->forward_backward_s += SecondsSince(forward_start);
  const auto step_start = std::chrono::steady_clock::now();
  STRATA_ASSIGN_OR_RETURN(*stepped, run.strategy->Step(step));
  phases->step_s += SecondsSince(step_start);
  phases->comm_wait_s += comm::ThreadCollectiveWaitSeconds() - waited_before;
  if (!std::isfinite(step_loss)) {
    return absl::InternalError(absl::StrFormat(
        "rank %d: loss became %f at step %d (lr %.3g, grad norm %.3g); "
        "lower --lr or enable --grad_clip",
        run.rank, step_loss, step, stepped->lr, stepped->grad_norm));
  }
  return step_loss;
}

// The interval's phase times per step.
PhaseTimes PerStep(const PhaseTimes& total, int64_t steps) {
  const double n = static_cast<double>(steps);
  PhaseTimes p;
  p.forward_backward_s = total.forward_backward_s / n;
  p.step_s = total.step_s / n;
  p.comm_wait_s = total.comm_wait_s / n;
  p.data_s = total.data_s / n;
  p.checkpoint_s = total.checkpoint_s / n;
  return p;
}

// The steps from `first_step` to --steps with evaluation and progress
// logging; fills the result's losses and throughput.
absl::Status RunSteps(const TrainOptions& o, Run& run, int64_t first_step,
                      TrainResult* result) {
  const auto start = std::chrono::steady_clock::now();
  auto interval_start = start;
  double interval_loss = 0;
  int64_t interval_steps = 0;
  double interval_eval_s = 0;
  PhaseTimes interval_phases;
  double eval_loss = std::numeric_limits<double>::quiet_NaN();
  for (int64_t step = first_step; step < o.steps; ++step) {
    strategies::StepResult stepped;
    STRATA_ASSIGN_OR_RETURN(
        const double step_loss,
        TrainStep(o, run, step, &stepped, &interval_phases));
    const auto checkpoint_start = std::chrono::steady_clock::now();
    STRATA_RETURN_IF_ERROR(run.checkpoints->AfterStep(step + 1));
    interval_phases.checkpoint_s += SecondsSince(checkpoint_start);
    interval_loss += step_loss;
    ++interval_steps;

    const bool last = step + 1 == o.steps;
    const bool eval_now =
        last || (o.eval_interval > 0 && (step + 1) % o.eval_interval == 0);
    if (eval_now) {
      const auto eval_start = std::chrono::steady_clock::now();
      STRATA_ASSIGN_OR_RETURN(eval_loss, Evaluate(o, run));
      interval_eval_s += SecondsSince(eval_start);
    }
    if ((step + 1) % o.log_interval != 0 && !last) continue;
    ProgressRecord record;
    STRATA_ASSIGN_OR_RETURN(record.loss,
                            WorldMean(run, interval_loss / interval_steps));
    const auto now = std::chrono::steady_clock::now();
    // Training throughput: evaluation time is not training time.
    const double interval_s =
        std::chrono::duration<double>(now - interval_start).count() -
        interval_eval_s;
    record.step = step + 1;
    record.total_steps = o.steps;
    record.entropy_floor = run.data.entropy_floor;
    if (eval_now) record.eval_loss = eval_loss;
    record.lr = stepped.lr;
    record.grad_norm = stepped.grad_norm;
    record.elapsed_s = std::chrono::duration<double>(now - start).count();
    record.tokens_per_s = interval_steps * run.tokens_per_step / interval_s;
    record.mfu = record.tokens_per_s * run.flops_per_token / run.peak_flops;
    record.eta_s = record.elapsed_s / (step + 1) * (o.steps - step - 1);
    if (o.wall_clock_breakdown) {
      record.phases = PerStep(interval_phases, interval_steps);
    }
    if (run.rank == 0) run.progress->Log(record);
    if (run.tensorboard != nullptr) {
      STRATA_RETURN_IF_ERROR(WriteProgressScalars(record, *run.tensorboard));
    }
    result->final_train_loss = record.loss;
    result->tokens_per_s = record.tokens_per_s;
    interval_start = now;
    interval_loss = 0;
    interval_steps = 0;
    interval_eval_s = 0;
    interval_phases = PhaseTimes();
  }
  result->final_eval_loss = eval_loss;
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<TrainResult> Train(const TrainOptions& o, comm::Group* group) {
  STRATA_RETURN_IF_ERROR(ValidateTrainOptions(o));
  Run run;
  STRATA_RETURN_IF_ERROR(BuildRun(o, group, &run));
  if (run.rank == 0) LogRunSummary(o, run);

  TrainResult result;
  result.metrics_path = o.output_dir + "/metrics.jsonl";
  result.entropy_floor_nats = run.data.entropy_floor;
  // Dropout draws from the default CPU generator: seed it from --seed and
  // the rank here, after the start-up work that also draws from it (the
  // matmul peak measurement takes a timing-dependent number of draws), so
  // that a run is reproducible from its flags.
  at::manual_seed(o.seed * 1000003 + run.rank);
  // Resuming restores the state, the sampler position and the generator
  // (last: nothing may draw from the generator between this and the loop).
  STRATA_RETURN_IF_ERROR(run.checkpoints->MaybeLoadWeights());
  STRATA_ASSIGN_OR_RETURN(const int64_t first_step,
                          run.checkpoints->MaybeResume());
  STRATA_RETURN_IF_ERROR(RunSteps(o, run, first_step, &result));
  STRATA_RETURN_IF_ERROR(run.checkpoints->Finish());
  result.steps = o.steps;
  // Gathered on every rank (a collective for sharded strategies).
  STRATA_ASSIGN_OR_RETURN(auto full_state, run.strategy->FullModelState());
  if (run.rank == 0) {
    const std::string model_path = o.output_dir + "/model.pt";
    STRATA_RETURN_IF_ERROR(models::SaveStateDict(full_state, model_path));
    LOG(INFO) << "saved " << model_path << " (loads in Python with torch.load)";
  }
  return result;
}

}  // namespace strata::launch
