#include "launch/train/trainer.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
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
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/time.h"
#include "base/fault_point.h"
#include "base/matmul_peak.h"
#include "base/process_memory.h"
#include "base/regex.h"
#include "base/status.h"
#include "comm/group.h"
#include "comm/wait_clock.h"
#include "data/file_sources.h"
#include "data/markov_corpus.h"
#include "data/sampler.h"
#include "data/token_source.h"
#include "data/tokenized_text.h"
#include "launch/config/flag_error.h"
#include "launch/config/train_options.h"
#include "launch/observe/progress_logger.h"
#include "launch/observe/tensor_memory.h"
#include "launch/observe/tensorboard.h"
#include "launch/observe/tensorboard_scalars.h"
#include "launch/observe/trace_session.h"
#include "launch/observe/trace_window.h"
#include "launch/train/evaluation.h"
#include "launch/train/test_faults.h"
#include "launch/train/training_checkpoint.h"
#include "models/config.h"
#include "models/dropout.h"
#include "models/factory.h"
#include "models/state_dict.h"
#include "models/unit.h"
#include "optim/loss_scaler.h"
#include "optim/lr_schedule.h"
#include "strategies/autocast.h"
#include "strategies/factory.h"
#include "strategies/mixed_precision.h"
#include "strategies/options.h"
#include "strategies/strategy.h"
#include "text/load_bpe_tokenizer.h"

namespace strata::launch {
namespace {

// --freeze: sets requires_grad false on the parameters whose names `regex`
// (validated) matches, before the strategy is made; rank 0 logs them. A
// regex that matches no parameter is an error naming the flag.
absl::Status FreezeParameters(models::UnitModel& model,
                              const std::string& regex, bool log) {
  if (regex.empty()) return absl::OkStatus();
  absl::StatusOr<std::regex> re = CompileRegex(regex);
  if (!re.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--freeze: ", re.status().message()));
  }
  std::vector<std::string> frozen;
  int64_t elements = 0;
  for (auto& item : model.named_parameters()) {
    if (!std::regex_search(item.key(), *re)) continue;
    item.value().set_requires_grad(false);
    frozen.push_back(item.key());
    elements += item.value().numel();
  }
  if (frozen.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--freeze='", regex,
                     "' matches no parameter of the model (names "
                     "such as '",
                     model.named_parameters()[0].key(), "')"));
  }
  LOG_IF(INFO, log) << "--freeze: " << frozen.size()
                    << (frozen.size() == 1 ? " parameter (" : " parameters (")
                    << elements
                    << " elements) frozen: " << absl::StrJoin(frozen, ", ");
  return absl::OkStatus();
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
  } else if (o.data == DataKind::kText) {
    auto tokenizer = text::LoadBpeTokenizer(o.tokenizer);
    if (!tokenizer.ok())
      return FlagError("tokenizer", tokenizer.status().message());
    data::TokenizeOptions tokenize;
    tokenize.num_threads =
        std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
    tokenize.end_of_text_after_documents =
        (*tokenizer)->end_of_text_id().has_value();
    STRATA_ASSIGN_OR_RETURN(
        d.source, data::OpenTokenizedText(o.data_path, **tokenizer, tokenize));
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

// Creates --output_dir (rank 0 only).
absl::Status CreateOutputDir(const TrainOptions& o) {
  std::error_code ec;
  std::filesystem::create_directories(o.output_dir, ec);
  if (ec) {
    return FlagError("output_dir", absl::StrCat("cannot create '", o.output_dir,
                                                "': ", ec.message()));
  }
  return absl::OkStatus();
}

// Creates --output_dir and its metrics.jsonl (rank 0 only).
absl::StatusOr<std::unique_ptr<ProgressLogger>> OpenProgress(
    const TrainOptions& o) {
  STRATA_RETURN_IF_ERROR(CreateOutputDir(o));
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
  at::Device device = at::Device(at::kCPU);  // ResolveDevice(--device).
  models::ModelConfig config;
  Data data;
  std::unique_ptr<ProgressLogger> progress;  // Rank 0 only.
  // Rank 0 with --tensorboard_dir; flushes its file when destroyed.
  std::unique_ptr<TensorBoardWriter> tensorboard;
  std::shared_ptr<models::UnitModel> model;
  std::unique_ptr<strategies::Strategy> strategy;
  // The test faults (--test_kill_at, --ckpt_test_pause_ms); usually null.
  std::unique_ptr<TestFaultInjector> test_faults;
  data::SamplerOptions sampler_options;
  std::unique_ptr<data::DistributedSampler> sampler;
  std::unique_ptr<TrainingCheckpoints> checkpoints;
  // --trace_steps (launch/observe/trace_session.h); null: none.
  std::unique_ptr<TraceSession> trace;
  int64_t local_batch = 0;  // Sequences per rank and step.
  int64_t micro = 0;        // Sequences per forward.
  int64_t tokens_per_step = 0;
  // Tensor storage live before the model was built
  // (launch/observe/tensor_memory.h); unset without the tracking allocator or
  // on a CUDA device.
  std::optional<int64_t> tensor_baseline_bytes;
  double flops_per_token = 0;
  double peak_flops = 0;  // The world's: the sum over ranks.
};

// The model config and the data, checked against each other before anything
// big is built; then the output directory (rank 0; with --eval_only no
// metrics file, which would replace a training run's).
absl::Status BuildDataAndOutput(const TrainOptions& o, Run* run) {
  STRATA_ASSIGN_OR_RETURN(run->config, ModelConfigOf(o.model));
  if (o.vocab_size > 0) run->config.vocab_size = o.vocab_size;
  run->config.dropout = o.dropout;
  run->config.loss_chunk_tokens = o.loss_chunk_tokens;
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
  if (run->rank == 0 && o.eval_only) return CreateOutputDir(o);
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

// The test faults' options (launch/train/test_faults.h).
TestFaultOptions TestFaultOptionsOf(const TrainOptions& o, const Run& run) {
  TestFaultOptions k;
  k.at = o.test_hooks.test_kill_at;
  k.ranks = o.test_hooks.test_kill_rank;
  k.save_pause_ms = o.test_hooks.ckpt_test_pause_ms;
  k.restart_round = o.restart_count;
  k.rank = run.rank;
  k.world_size = run.world_size;
  k.save_every = o.checkpoint.save_every;
  k.async_save = o.checkpoint.async_save;
  k.ckpt_format = o.checkpoint.format;
  return k;
}

// --trace_steps: after the strategy's interceptors
// (launch/observe/trace_session.h).
absl::Status MaybeCreateTrace(const TrainOptions& o, Run* run) {
  STRATA_ASSIGN_OR_RETURN(const std::optional<TraceWindow> window,
                          ParseTraceSteps(o.trace_steps));
  if (!window.has_value() || o.eval_only) return absl::OkStatus();
  STRATA_ASSIGN_OR_RETURN(
      run->trace,
      TraceSession::Create({*window, o.trace_dir}, run->group, *run->model));
  return absl::OkStatus();
}

// The model (with bf16 autocast for --precision=bf16), the strategy over
// it, the training sampler and the checkpoint manager.
absl::Status BuildTraining(const TrainOptions& o, Run* run) {
  STRATA_ASSIGN_OR_RETURN(run->device, ResolveDevice(o));
  if (run->device.is_cuda()) {
    // This rank's GPU is the current device before anything is allocated,
    // so that what allocates on the current device (the caching allocator,
    // streams, NCCL) uses it, not GPU 0.
    c10::impl::getDeviceGuardImpl(run->device.type())->setDevice(run->device);
  } else if (const std::string why = AutoDeviceCpuReason(o);
             run->rank == 0 && !why.empty()) {
    LOG(INFO) << "--device=auto: training on the CPU: " << why;
  }
  models::BuildOptions build;
  build.seed = o.seed;
  build.deferred = DeferredInit(o, run->device);
  LOG_IF(INFO, run->rank == 0 && !build.deferred && o.fsdp_deferred_init &&
                   o.strategy.kind == strategies::StrategyKind::kFsdp)
      << "--fsdp_deferred_init: shards are materialised on the host only so "
         "far; building the full model on "
      << run->device.str();
  STRATA_ASSIGN_OR_RETURN(run->model, models::BuildModel(run->config, build));
  run->model->train();
  if (run->device.is_cuda()) {
    run->model->to(run->device);
    LOG_IF(INFO, run->rank == 0) << "training on " << run->device.str();
  }
  STRATA_RETURN_IF_ERROR(
      FreezeParameters(*run->model, o.freeze, run->rank == 0));
  if (o.precision == Precision::kBf16) {
    run->model->AddInterceptor(
        std::make_shared<strategies::AutocastInterceptor>());
  }

  STRATA_ASSIGN_OR_RETURN(const strategies::StrategyOptions strategy_options,
                          StrategyOptionsOf(o));
  const optim::LrScheduleOptions schedule_options = LrScheduleOptionsOf(o);
  STRATA_ASSIGN_OR_RETURN(
      run->strategy,
      strategies::CreateStrategy(strategy_options, run->model, run->group,
                                 OptimizerConfigOf(o), schedule_options));
  STRATA_ASSIGN_OR_RETURN(
      run->test_faults,
      InstallTestFaults(TestFaultOptionsOf(o, *run), *run->model));

  run->sampler_options.seq_len = o.seq_len;
  run->sampler_options.global_batch_size = o.global_batch;
  run->sampler_options.seed = o.seed;
  STRATA_ASSIGN_OR_RETURN(
      run->sampler, data::DistributedSampler::Create(run->data.train.get(),
                                                     run->sampler_options));
  TrainingCheckpointOptions ckpt_options = CheckpointOptions(o, run->config);
  ckpt_options.schedule = schedule_options;
  STRATA_ASSIGN_OR_RETURN(
      run->checkpoints,
      TrainingCheckpoints::Create(ckpt_options, run->strategy.get(),
                                  run->sampler.get(), run->group));
  return MaybeCreateTrace(o, run);
}

// Builds a run for this rank of `group` (borrowed; null: one process).
absl::Status BuildRun(const TrainOptions& o, comm::Group* group, Run* run) {
  run->group = group;
  run->rank = group == nullptr ? 0 : group->rank();
  run->world_size = group == nullptr ? 1 : group->size();
  STRATA_RETURN_IF_ERROR(CheckWorld(o, run->world_size));
  if (o.threads > 0) at::set_num_threads(o.threads);
  STRATA_RETURN_IF_ERROR(BuildDataAndOutput(o, run));
  const std::optional<int64_t> before_model = TrackedLiveBytes();
  STRATA_RETURN_IF_ERROR(BuildTraining(o, run));
  if (run->device.is_cpu()) run->tensor_baseline_bytes = before_model;
  run->local_batch = o.global_batch / run->world_size;
  run->micro = o.micro_batch == 0 ? run->local_batch : o.micro_batch;
  run->tokens_per_step = o.global_batch * o.seq_len;
  run->flops_per_token = models::TrainingFlopsPerToken(run->config, o.seq_len);
  // Every rank has the same hardware share; the world's peak is the sum.
  // (--eval_only reports no MFU.)
  if (o.eval_only) return absl::OkStatus();
  run->peak_flops =
      run->world_size *
      MeasureMatmulPeakFlops(o.precision == Precision::kBf16   ? at::kBFloat16
                             : o.precision == Precision::kFp16 ? at::kHalf
                                                               : at::kFloat,
                             /*n=*/run->device.is_cuda() ? 8192 : 1024,
                             /*seconds=*/0.5, run->device);
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

// Every rank's peak resident set (VmHWM), in rank order: one all-gather,
// which every rank joins.
absl::StatusOr<std::vector<int64_t>> WorldPeakResident(const Run& run) {
  STRATA_ASSIGN_OR_RETURN(const int64_t mine, PeakResidentBytes());
  if (run.group == nullptr || run.world_size == 1) {
    return std::vector<int64_t>{mine};
  }
  const at::Tensor local = at::full({1}, mine, at::kLong);
  at::Tensor all = at::empty({run.world_size}, at::kLong);
  STRATA_RETURN_IF_ERROR(run.group->AllGather(local, all));
  const int64_t* data = all.data_ptr<int64_t>();
  return std::vector<int64_t>(data, data + run.world_size);
}

// "peak resident set (VmHWM): rank 0 1933 MiB, rank 1 1890 MiB".
std::string PeakResidentLine(const std::vector<int64_t>& bytes) {
  std::string line = "peak resident set (VmHWM):";
  for (size_t rank = 0; rank < bytes.size(); ++rank) {
    absl::StrAppendFormat(&line, "%s rank %d %d MiB", rank == 0 ? "" : ",",
                          rank, bytes[rank] >> 20);
  }
  return line;
}

// The loss over --eval_batches held-out micro-batches (0: all of the eval
// split). Every rank evaluates the same batches with the same weights, so
// every rank gets the same loss without communication (under FSDP each
// forward's all-gathers are collectives all ranks join).
absl::StatusOr<EvalResult> Evaluate(const TrainOptions& o, Run& run) {
  EvalOptions eval;
  eval.seq_len = o.seq_len;
  eval.batch_size = run.micro;
  eval.num_batches = o.eval_batches;
  eval.device = run.device;
  return EvaluateLoss(*run.model, *run.data.eval, eval);
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
  batch = batch.to(run.device);
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
    if (!o.test_hooks.dropout_test_default_generator) {
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
  // With loss scaling a non-finite loss makes non-finite gradients: the
  // step was skipped and the scale backs off, as DeepSpeed's fp16 does.
  if (!std::isfinite(step_loss) && !stepped->skipped) {
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
  int64_t interval_loss_steps = 0;
  double interval_eval_s = 0;
  PhaseTimes interval_phases;
  double eval_loss = std::numeric_limits<double>::quiet_NaN();
  for (int64_t step = first_step; step < o.steps; ++step) {
    // For the progress records a failed collective's error quotes.
    if (run.group != nullptr) run.group->SetTrainingStep(step);
    SetFaultStep(step);
    if (run.trace) STRATA_RETURN_IF_ERROR(run.trace->BeforeStep(step + 1));
    strategies::StepResult stepped;
    STRATA_ASSIGN_OR_RETURN(
        const double step_loss,
        TrainStep(o, run, step, &stepped, &interval_phases));
    const auto checkpoint_start = std::chrono::steady_clock::now();
    STRATA_RETURN_IF_ERROR(run.checkpoints->AfterStep(step + 1));
    interval_phases.checkpoint_s += SecondsSince(checkpoint_start);
    ReachFaultPoint(FaultSite::kStepEnd, step);
    if (run.trace) STRATA_RETURN_IF_ERROR(run.trace->AfterStep(step + 1));
    if (stepped.skipped) ++result->skipped_steps;
    ++interval_steps;
    // A skipped fp16 step's non-finite loss stays out of the mean.
    if (std::isfinite(step_loss)) {
      interval_loss += step_loss;
      ++interval_loss_steps;
    }

    const bool last = step + 1 == o.steps;
    const bool eval_now =
        last || (o.eval_interval > 0 && (step + 1) % o.eval_interval == 0);
    if (eval_now) {
      const auto eval_start = std::chrono::steady_clock::now();
      STRATA_ASSIGN_OR_RETURN(const EvalResult eval, Evaluate(o, run));
      eval_loss = eval.loss_nats;
      interval_eval_s += SecondsSince(eval_start);
    }
    if ((step + 1) % o.log_interval != 0 && !last) continue;
    ProgressRecord record;
    STRATA_ASSIGN_OR_RETURN(
        record.loss, WorldMean(run, interval_loss_steps > 0
                                        ? interval_loss / interval_loss_steps
                                        : std::nan("")));
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
    if (const optim::LossScaler* scaler = run.strategy->loss_scaler()) {
      record.loss_scale = scaler->scale();
      record.skipped_steps = result->skipped_steps;
      result->final_loss_scale = scaler->scale();
    }
    record.elapsed_s = std::chrono::duration<double>(now - start).count();
    record.tokens_per_s = interval_steps * run.tokens_per_step / interval_s;
    record.mfu = record.tokens_per_s * run.flops_per_token / run.peak_flops;
    record.eta_s = record.elapsed_s / (step + 1) * (o.steps - step - 1);
    if (o.wall_clock_breakdown) {
      record.phases = PerStep(interval_phases, interval_steps);
    }
    if (!o.tensorboard_dir.empty()) {  // On every rank: a collective.
      STRATA_ASSIGN_OR_RETURN(record.peak_resident_bytes,
                              WorldPeakResident(run));
    }
    record.tensor_peak_bytes = TrackedPeakAbove(run.tensor_baseline_bytes);
    if (run.rank == 0) run.progress->Log(record);
    if (run.tensorboard != nullptr) {
      STRATA_RETURN_IF_ERROR(WriteProgressScalars(record, *run.tensorboard));
    }
    result->final_train_loss = record.loss;
    result->tokens_per_s = record.tokens_per_s;
    interval_start = now;
    interval_loss = 0;
    interval_steps = 0;
    interval_loss_steps = 0;
    interval_eval_s = 0;
    interval_phases = PhaseTimes();
  }
  result->final_eval_loss = eval_loss;
  return absl::OkStatus();
}

// --eval_only on rank 0: logs the result of the weights at `weights` and
// writes <output_dir>/eval.json.
absl::Status WriteEvalOnlyRecord(const TrainOptions& o, const Run& run,
                                 const std::string& weights,
                                 const EvalResult& eval) {
  EvalRecordInfo info;
  info.model = o.model;
  info.weights = weights;
  info.data = run.data.eval->Describe();
  info.strategy = run.strategy->name();
  info.world_size = run.world_size;
  const std::string path = o.output_dir + "/eval.json";
  STRATA_RETURN_IF_ERROR(WriteEvalRecord(path, eval, info));
  LOG(INFO) << "--eval_only: " << info.weights << " on " << info.data << " ("
            << info.strategy << ", " << info.world_size
            << " rank(s)): " << EvalLine(eval) << "; wrote " << path;
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<TrainResult> Train(const TrainOptions& o, comm::Group* group) {
  STRATA_RETURN_IF_ERROR(ValidateTrainOptions(o));
  Run run;
  STRATA_RETURN_IF_ERROR(BuildRun(o, group, &run));
  if (run.rank == 0 && !o.eval_only) LogRunSummary(o, run);

  TrainResult result;
  result.metrics_path = o.output_dir + "/metrics.jsonl";
  result.entropy_floor_nats = run.data.entropy_floor;
  // Dropout draws from the default CPU generator: seed it from --seed and
  // the rank here, after the start-up work that also draws from it (the
  // matmul peak measurement takes a timing-dependent number of draws), so
  // that a run is reproducible from its flags.
  at::manual_seed(o.seed * 1000003 + run.rank);
  if (o.eval_only) {
    STRATA_ASSIGN_OR_RETURN(
        const std::string weights,
        LoadWeightsOnly(CheckpointOptions(o, run.config), run.config,
                        *run.strategy, run.group));
    STRATA_ASSIGN_OR_RETURN(result.eval, Evaluate(o, run));
    result.final_eval_loss = result.eval.loss_nats;
    if (run.rank == 0) {
      STRATA_RETURN_IF_ERROR(WriteEvalOnlyRecord(o, run, weights, result.eval));
    }
    return result;
  }
  // Resuming restores the state, the sampler position and the generator
  // (last: nothing may draw from the generator between this and the loop).
  STRATA_RETURN_IF_ERROR(run.checkpoints->MaybeLoadWeights(run.config));
  STRATA_ASSIGN_OR_RETURN(const int64_t first_step,
                          run.checkpoints->MaybeResume());
  ResetTrackedPeak();  // The steps' peak, not the start-up's.
  STRATA_RETURN_IF_ERROR(RunSteps(o, run, first_step, &result));
  if (run.trace) STRATA_RETURN_IF_ERROR(run.trace->Finish());
  STRATA_RETURN_IF_ERROR(run.checkpoints->Finish());
  // What `top` showed at its highest, per rank (one all-gather).
  STRATA_ASSIGN_OR_RETURN(result.peak_resident_bytes, WorldPeakResident(run));
  if (run.rank == 0) LOG(INFO) << PeakResidentLine(result.peak_resident_bytes);
  STRATA_ASSIGN_OR_RETURN(
      result.tensor_peak_bytes,
      WorldTensorPeakBytes(run.group, run.tensor_baseline_bytes));
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
