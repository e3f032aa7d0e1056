#include "strategies/fsdp.h"

#include <ATen/core/grad_mode.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>
#include <ATen/ops/zeros_like.h>
#include <glog/logging.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <stdexcept>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status.h"
#include "strategies/fsdp_init.h"
#include "strategies/fsdp_plan.h"
#include "strategies/fsdp_root.h"
#include "strategies/fsdp_unit.h"
#include "strategies/gradient_arrival_hooks.h"
#include "strategies/mixed_precision.h"
#include "strategies/optimizer_factory.h"
#include "strategies/replicas.h"
#include "strategies/wrap_policy.h"

namespace strata::strategies {
namespace {

// Ends forward or backward (ForwardBackward turns the exception into its
// status; the latched error, the first one, is what it returns) once a
// collective failed: computing on with released storage would fail later
// with a follow-on error, or crash.
void ThrowIfFailed(const absl::Status& latched) {
  if (!latched.ok()) throw std::runtime_error(std::string(latched.message()));
}

constexpr char kKind[] = "fsdp";

}  // namespace

struct FsdpStrategy::Reduction {
  enum Stage { kReduceScatter, kAllReduce, kLocal };
  FlatUnit* unit = nullptr;
  Stage stage = kLocal;
  at::Tensor src;           // Reduce-scatter input (kept alive).
  at::Tensor out;           // This rank's reduced gradient (shard).
  bool into_shard = false;  // `out` is the gradient shard itself.
  std::unique_ptr<comm::Work> work;
};

class FsdpStrategy::Interceptor : public models::UnitInterceptor {
 public:
  Interceptor(FsdpStrategy* strategy, std::vector<int> flat_of_model_unit,
              std::vector<bool> reads_root)
      : strategy_(strategy),
        flat_of_model_unit_(std::move(flat_of_model_unit)),
        reads_root_(std::move(reads_root)) {}

  void Detach() { strategy_ = nullptr; }

  at::Tensor Run(const models::UnitInfo& unit, const at::Tensor& input,
                 const models::UnitForward& forward) override {
    const size_t i = static_cast<size_t>(unit.index);  // < 0: out of range.
    if (i >= reads_root_.size() ||
        (flat_of_model_unit_[i] < 0 && !reads_root_[i])) {
      return forward(input);
    }
    if (strategy_ == nullptr) {
      throw std::runtime_error(absl::StrCat(
          "unit '", unit.name,
          "' was sharded by an FSDP strategy that has "
          "been destroyed: its parameters are gone. Keep the strategy alive "
          "while using the model, or copy FsdpStrategy::FullModelState() into "
          "a fresh model first"));
    }
    return strategy_->RunUnit(unit.index, input, forward);
  }

 private:
  FsdpStrategy* strategy_;
  const std::vector<int> flat_of_model_unit_;
  const std::vector<bool> reads_root_;
};

// --- Creation --------------------------------------------------------------

absl::StatusOr<std::unique_ptr<FsdpStrategy>> FsdpStrategy::Create(
    const StrategyOptions& options, std::shared_ptr<models::UnitModel> model,
    comm::Group* group, const OptimizerConfig& config,
    const optim::LrScheduleOptions& schedule) {
  if (model == nullptr) {
    return absl::InvalidArgumentError("strategy 'fsdp': model is null");
  }
  if (options.kind != StrategyKind::kFsdp) {
    return absl::InvalidArgumentError(
        absl::StrCat("FsdpStrategy::Create: options.kind must be 'fsdp', got '",
                     StrategyKindName(options.kind), "'"));
  }
  STRATA_RETURN_IF_ERROR(ValidateStrategyOptions(options));
  STRATA_RETURN_IF_ERROR(
      ValidateFsdpOptions(options, group == nullptr ? 1 : group->size()));
  STRATA_RETURN_IF_ERROR(ValidateOptimizerConfig(config));
  STRATA_RETURN_IF_ERROR(optim::ValidateLrScheduleOptions(schedule));
  std::unique_ptr<FsdpStrategy> strategy(
      new FsdpStrategy(std::move(model), options, config, group));
  STRATA_RETURN_IF_ERROR(strategy->Build(schedule));
  return strategy;
}

FsdpStrategy::FsdpStrategy(std::shared_ptr<models::UnitModel> model,
                           const StrategyOptions& options,
                           const OptimizerConfig& config, comm::Group* world)
    : Strategy(std::move(model), config, options.mixed_precision.param_dtype),
      options_(options),
      config_(config),
      world_(world) {}

FsdpStrategy::~FsdpStrategy() {
  if (interceptor_ != nullptr) interceptor_->Detach();
  for (auto& reduction : reductions_) {
    if (reduction->work == nullptr) continue;
    absl::Status status = reduction->work->Wait();
    LOG_IF(WARNING, !status.ok())
        << "fsdp: a gradient reduction failed while the strategy was "
           "destroyed: "
        << status;
  }
  for (FlatUnit* unit : gathers_in_flight_) {
    absl::Status status = unit->gather_work->Wait();
    LOG_IF(WARNING, !status.ok())
        << "fsdp: an all-gather failed while the strategy was destroyed: "
        << status;
  }
}

bool FsdpStrategy::reshard_after_forward() const {
  return ReshardsAfterForward(options_.fsdp.sharding);
}

absl::Status FsdpStrategy::Build(const optim::LrScheduleOptions& schedule) {
  const int rank = world_ == nullptr ? 0 : world_->rank();
  STRATA_RETURN_IF_ERROR(SetUpGroups());
  root_sharded_ = sharded() && reshard_after_forward();
  if (options_.fsdp.cpu_offload) {
    LOG_IF(INFO, rank == 0)
        << "fsdp: --fsdp_cpu_offload: parameter shards, gradient shards and "
           "optimizer state stay in host memory; on this CPU build the "
           "compute device is the host, so this changes nothing";
  }
  STRATA_ASSIGN_OR_RETURN(const int64_t master_numel, PlanUnits());
  // Devices: the model computes where its parameters are (meta: the host);
  // shards and optimizer state live there too, or on the host with
  // cpu_offload. With CPU compute both are the host.
  compute_device_ = at::Device(at::kCPU);
  bool deferred = false;
  bool first = true;
  for (const auto& item : model().named_parameters()) {
    const at::Tensor& param = item.value();
    if (first && !param.is_meta()) compute_device_ = param.device();
    first = false;
    deferred = deferred || param.is_meta();
  }
  state_device_ =
      options_.fsdp.cpu_offload ? at::Device(at::kCPU) : compute_device_;
  fsdp_schedule_ =
      ResolveFsdpSchedule(options_.fsdp, compute_device_.is_cuda());
  master_ =
      at::zeros({master_numel},
                at::TensorOptions().dtype(at::kFloat).device(state_device_));
  grad_shards_ = at::zeros_like(master_);
  if (options_.fsdp.param_init_fn && !deferred) {
    return absl::InvalidArgumentError(
        "fsdp: FsdpOptions::param_init_fn is set, but no parameter of the "
        "model is on the meta device: it initialises deferred models only "
        "(models::BuildOptions::deferred; train's --fsdp_deferred_init)");
  }
  ShardSource source;
  source.model = &model();
  source.init_seed = options_.fsdp.init_seed;
  source.param_init_fn = &options_.fsdp.param_init_fn;
  source.deferred = deferred;
  source.world = world_;
  source.staging_device = compute_device_;
  for (auto& unit : flat_units_) {
    STRATA_RETURN_IF_ERROR(FillMasterShard(
        *unit, unit->params, shard_rank_, source,
        master_.narrow(0, unit->master_offset, unit->shard_numel)));
    // The model's parameters become views of the unit's full buffer, which
    // is the master shard itself when nothing is sharded or cast.
    const bool alias_master = shard_size_ == 1 && param_dtype() == at::kFloat &&
                              state_device_ == compute_device_;
    unit->CreateViews(
        master_.narrow(0, unit->master_offset, unit->shard_numel),
        grad_shards_.narrow(0, unit->master_offset, unit->shard_numel),
        alias_master,
        alias_master && options_.mixed_precision.reduce_dtype == at::kFloat,
        param_dtype(), compute_device_, &unit_buffers_);
    if (!unit->full_aliases_master) {
      if ((unit->root && !root_sharded_) || shard_size_ == 1) {
        Gather(*unit);  // Stays gathered.
      } else {
        unit->ReleaseFull();
      }
    }
    STRATA_RETURN_IF_ERROR(latched_error());
  }
  STRATA_RETURN_IF_ERROR(CastAndBroadcastBuffers(
      model(), options_.mixed_precision.buffer_dtype, world_));
  STRATA_RETURN_IF_ERROR(BuildOptimizer(schedule));
  AddHooks();
  if (rank == 0) {
    int64_t wrapped_numel = 0;
    for (const FlatUnit* unit : wrapped_) wrapped_numel += unit->numel;
    LOG(INFO) << "fsdp: " << ShardingStrategyName(options_.fsdp.sharding)
              << ", " << wrapped_.size() << " wrapped units (" << wrapped_numel
              << " parameters) + root (" << (root_ ? root_->numel : 0)
              << " parameters, "
              << (root_sharded_ ? "sharded" : "kept gathered")
              << "), shard group " << shard_size_ << " x replicas "
              << replicate_size_ << ", param " << c10::toString(param_dtype())
              << " / reduce "
              << c10::toString(options_.mixed_precision.reduce_dtype)
              << (deferred ? ", deferred init" : "") << ", backward prefetch "
              << BackwardPrefetchName(fsdp_schedule_.backward_prefetch) << ", "
              << fsdp_schedule_.reductions_in_flight
              << " reduction(s) in flight";
  }
  return absl::OkStatus();
}

absl::Status FsdpStrategy::SetUpGroups() {
  const int world = world_ == nullptr ? 1 : world_->size();
  const int rank = world_ == nullptr ? 0 : world_->rank();
  shard_size_ = ShardGroupSize(options_.fsdp, world);
  replicate_size_ = world / shard_size_;
  shard_rank_ = rank % shard_size_;
  if (world == 1) return absl::OkStatus();
  STRATA_RETURN_IF_ERROR(CheckSameModelOnAllRanks(*world_, kKind, model()));
  if (shard_size_ == world) {
    shard_group_ = world_;
  } else if (replicate_size_ == world) {
    replicate_group_ = world_;
  } else {
    STRATA_ASSIGN_OR_RETURN(owned_shard_group_,
                            world_->Split(rank / shard_size_, "shard"));
    STRATA_ASSIGN_OR_RETURN(owned_replicate_group_,
                            world_->Split(rank % shard_size_, "replicate"));
    shard_group_ = owned_shard_group_.get();
    replicate_group_ = owned_replicate_group_.get();
  }
  return absl::OkStatus();
}

absl::StatusOr<int64_t> FsdpStrategy::PlanUnits() {
  STRATA_ASSIGN_OR_RETURN(
      std::vector<int> wrapped,
      SelectWrappedUnits(model(), options_.fsdp.wrap_policy));
  STRATA_ASSIGN_OR_RETURN(
      FsdpPlan plan,
      PlanFlatUnits(PlanInputOf(model(), std::move(wrapped), shard_size_)));
  const bool rank0 = world_ == nullptr || world_->rank() == 0;
  if (plan.units.size() == 1 && plan.units[0].root) {
    // Nothing wrapped: the whole model is the root, which stays gathered
    // (gathered once, not around every unit), as DeepSpeed keeps parameters
    // below stage3_param_persistence_threshold whole on every rank.
    root_sharded_ = false;
    const std::vector<int64_t> counts = UnitsNumParameters(model());
    std::vector<std::string> units;
    for (size_t i = 0; i < counts.size(); ++i) {
      const models::UnitInfo& unit = model().units()[i];
      units.push_back(absl::StrCat(unit.name, " (", unit.type, ", ", counts[i],
                                   " parameters)"));
    }
    LOG_IF(WARNING, rank0)
        << "fsdp: the wrap policy (--fsdp_wrap_unit_types, "
           "--fsdp_wrap_min_params or a predicate) wraps no unit, so every "
           "parameter is in the root, kept whole on every rank (gradients "
           "reduce-scattered, masters and optimizer state sharded, as ZeRO-2); "
           "the units are: "
        << absl::StrJoin(units, "; ");
  }
  if (!plan.moved_to_root.empty()) {
    LOG_IF(INFO, rank0)
        << "fsdp: parameters shared between units (tied weights) go to the "
           "root flat parameter, gathered for each unit that reads them: "
        << absl::StrJoin(plan.moved_to_root, ", ");
  }
  if (world_ != nullptr && world_->size() > 1) {
    // Every rank must cut the model the same way, or the collectives below
    // would disagree in size (a Gloo abort): compare before using them.
    STRATA_RETURN_IF_ERROR(CheckSamePlanOnAllRanks(*world_, plan));
  }
  RootReaders root = FindRootReaders(plan, PlanInputOf(model(), {}, 1).units,
                                     model().SharedParameters());
  LOG_IF(INFO, rank0 && root_sharded_ && !root.outside_units.empty())
      << "fsdp: the root stays gathered: code between units may read "
      << absl::StrJoin(root.outside_units, ", ") << " (in no unit)";
  root_sharded_ = root_sharded_ && root.outside_units.empty();
  unit_reads_root_ = root_sharded_ ? std::move(root.reads)
                                   : std::vector<bool>(root.reads.size());
  std::map<std::string, at::Tensor> params;
  for (const auto& item : model().named_parameters()) {
    params[item.key()] = item.value();
  }
  for (FlatUnitPlan& planned : plan.units) {
    std::vector<at::Tensor> unit_params;
    for (const FlatUnitPlan::Entry& e : planned.entries) {
      unit_params.push_back(params.at(e.name));
    }
    auto unit =
        std::make_unique<FlatUnit>(std::move(planned), std::move(unit_params));
    if (unit->root) {
      root_ = unit.get();
    } else {
      wrapped_.push_back(unit.get());
    }
    flat_units_.push_back(std::move(unit));
  }
  flat_of_model_unit_ = std::move(plan.flat_of_model_unit);
  return plan.master_numel;
}

absl::Status FsdpStrategy::BuildOptimizer(
    const optim::LrScheduleOptions& schedule) {
  // One optimizer over every shard: each flat parameter's ranges (matrices
  // decay, frozen parameters never move) cut to this rank's shard; gaps
  // (padding) frozen.
  std::vector<optim::ShardPlacement> placements;
  for (const auto& unit : flat_units_) {
    placements.push_back({UnitDecayRanges(*unit, config_.weight_decay),
                          unit->shard_begin(shard_rank_), unit->shard_numel,
                          unit->master_offset});
  }
  STRATA_ASSIGN_OR_RETURN(optimizer_,
                          CreateOptimizer(config_, master_, grad_shards_,
                                          optim::ConcatenateShardRanges(
                                              placements, master_.numel())));
  STRATA_ASSIGN_OR_RETURN(schedule_, optim::LrSchedule::Create(schedule));
  return absl::OkStatus();
}

void FsdpStrategy::AddHooks() {
  // Gradient readiness: buckets are the wrapped units in reverse forward
  // order (the order their backward completes).
  std::vector<std::vector<size_t>> bucket_entries(wrapped_.size());
  std::vector<bool> requires_grad;
  std::vector<at::Tensor> hook_params;
  for (size_t u = 0; u < wrapped_.size(); ++u) {
    for (size_t i = 0; i < wrapped_[u]->entries.size(); ++i) {
      bucket_entries[wrapped_.size() - 1 - u].push_back(requires_grad.size());
      requires_grad.push_back(wrapped_[u]->entries[i].requires_grad);
      hook_params.push_back(wrapped_[u]->params[i]);
    }
  }
  readiness_ = std::make_unique<BucketReadiness>(std::move(bucket_entries),
                                                 std::move(requires_grad));
  readiness_->AddHooks(hook_params,
                       [this](size_t bucket) { PostBackward(bucket); });
  if (root_sharded_ && root_ != nullptr) {
    root_grad_hooks_ = std::make_unique<GradientArrivalHooks>(
        root_->params, [root = root_] { root->AllocateGrads(); });
  }
  interceptor_ = std::make_shared<Interceptor>(this, flat_of_model_unit_,
                                               unit_reads_root_);
  model().AddInterceptor(interceptor_);
}

// --- Gathering -------------------------------------------------------------

FlatUnit* FsdpStrategy::WrappedAt(int position) {
  if (position < 0 || position >= static_cast<int>(wrapped_.size())) {
    return nullptr;
  }
  return wrapped_[position];
}

int FsdpStrategy::num_units_gathered() const {
  int n = 0;
  for (const auto& unit : flat_units_) {
    if (!unit->root && unit->full_allocated()) ++n;
  }
  return n;
}

void FsdpStrategy::StartGather(FlatUnit& unit, bool prefetch) {
  if (unit.gathered || unit.gather_work != nullptr) return;
  const int limit = options_.fsdp.limit_all_gathers;
  if (prefetch && limit > 0 &&
      static_cast<int>(gathers_in_flight_.size()) >= limit) {
    ++counters_.prefetches_skipped_by_limit;
    return;
  }
  while (limit > 0 && static_cast<int>(gathers_in_flight_.size()) >= limit) {
    WaitGather(*gathers_in_flight_.front());
  }
  unit.full_storage.Allocate();  // No-op when allocated.
  at::Tensor input = master_.narrow(0, unit.master_offset, unit.shard_numel);
  if (input.scalar_type() != param_dtype()) input = input.to(param_dtype());
  if (input.device() != unit.full.device())
    input = input.to(unit.full.device());
  if (unit.root) {
    ++counters_.root_all_gathers;
  } else {
    ++counters_.all_gathers;
    if (prefetch) ++counters_.prefetches;
  }
  if (shard_size_ == 1) {
    at::NoGradGuard no_grad;
    unit.full.copy_(input);
    unit.gathered = true;
  } else {
    unit.gather_input = input;
    unit.gather_work =
        shard_group_->AllGatherAsync(unit.gather_input, unit.full);
    gathers_in_flight_.push_back(&unit);
    counters_.max_all_gathers_in_flight =
        std::max<int64_t>(counters_.max_all_gathers_in_flight,
                          static_cast<int64_t>(gathers_in_flight_.size()));
  }
  counters_.max_units_gathered =
      std::max<int64_t>(counters_.max_units_gathered, num_units_gathered());
}

absl::Status FsdpStrategy::WaitExposed(comm::Work& work) {
  const auto start = std::chrono::steady_clock::now();
  absl::Status status = work.Wait();
  counters_.exposed_communication_ms +=
      std::chrono::duration<double, std::milli>(
          std::chrono::steady_clock::now() - start)
          .count();
  return status;
}

void FsdpStrategy::WaitGather(FlatUnit& unit) {
  if (unit.gather_work == nullptr) return;
  absl::Status status = WaitExposed(*unit.gather_work);
  unit.gather_work.reset();
  unit.gather_input = at::Tensor();
  gathers_in_flight_.erase(
      std::find(gathers_in_flight_.begin(), gathers_in_flight_.end(), &unit));
  if (!status.ok()) {
    LatchError(
        Annotate(status, absl::StrCat("fsdp: all-gather of unit ", unit.name)));
  }
  unit.gathered = true;
}

void FsdpStrategy::Gather(FlatUnit& unit) {
  StartGather(unit, /*prefetch=*/false);
  WaitGather(unit);
}

void FsdpStrategy::Prefetch(FlatUnit* unit) {
  if (unit == nullptr || unit->root) return;
  StartGather(*unit, /*prefetch=*/true);
}

void FsdpStrategy::Reshard(FlatUnit& unit) {
  if ((unit.root && !root_sharded_) || unit.full_aliases_master ||
      shard_size_ == 1 || summoned_) {
    return;
  }
  WaitGather(unit);
  unit.ReleaseFull();
}

// --- Forward and backward --------------------------------------------------

at::Tensor FsdpStrategy::RunUnit(int model_unit, const at::Tensor& input,
                                 const models::UnitForward& forward) {
  FlatUnit* unit = WrappedAt(flat_of_model_unit_[model_unit]);
  const bool root = unit_reads_root_[model_unit];  // Only a sharded root.
  if (root) Gather(*root_);
  if (unit != nullptr) Gather(*unit);
  ThrowIfFailed(latched_error());  // Its parameters hold no data.
  const bool grad_mode = at::GradMode::is_enabled();
  if (unit != nullptr && options_.fsdp.forward_prefetch) {
    Prefetch(WrappedAt(unit->position + 1));
  }
  at::Tensor output = forward(input);
  if (grad_mode && output.requires_grad()) {
    const size_t next_unit = static_cast<size_t>(model_unit) + 1;
    const bool next_reads_root = !root && next_unit < unit_reads_root_.size() &&
                                 unit_reads_root_[next_unit];
    output.register_hook(
        [this, unit, root, next_reads_root](const at::Tensor&) {
          // The next unit's backward, which read the root, is done: free the
          // root before this unit gathers (the next unit's input hook, which
          // also frees it, runs after this one: it was registered later).
          if (next_reads_root) Reshard(*root_);
          if (root) PreBackward(*root_);
          if (unit != nullptr) PreBackward(*unit);
        });
    // The unit's backward has run when its input's gradient is ready: the
    // root can go until the next backward reading it (not the unit before).
    const bool before = model_unit > 0 && unit_reads_root_[model_unit - 1];
    if (root && !before && input.requires_grad()) {
      input.register_hook([this](const at::Tensor&) { Reshard(*root_); });
    }
  }
  if (unit != nullptr && (reshard_after_forward() || !grad_mode)) {
    Reshard(*unit);
  }
  const size_t next = static_cast<size_t>(model_unit) + 1;
  if (root && (next >= unit_reads_root_.size() || !unit_reads_root_[next])) {
    Reshard(*root_);
  }
  if (next >= unit_reads_root_.size()) unit_buffers_.Flush();  // Loss next.
  return output;
}

void FsdpStrategy::PreBackward(FlatUnit& unit) {
  // After an error, backward must stop here: this unit's gradients would be
  // accumulated into storage that is not allocated.
  ThrowIfFailed(latched_error());
  Gather(unit);
  ThrowIfFailed(latched_error());
  // A sharded root's gradients: at their first arrival (root_grad_hooks_).
  if (!unit.root) unit.AllocateGrads();
  if (!unit.root && unit.position == 0) unit_buffers_.Close();  // Last taker.
  if (fsdp_schedule_.backward_prefetch == BackwardPrefetch::kBackwardPre) {
    Prefetch(WrappedAt(unit.position - 1));
  }
}

void FsdpStrategy::PostBackward(size_t bucket) {
  if (!latched_error().ok()) return;
  FlatUnit& unit = *wrapped_[wrapped_.size() - 1 - bucket];
  // A unit with frozen parameters is freed at the end of backward: a node
  // that reads a frozen parameter may still run after its gradients are
  // complete.
  if (!unit.has_frozen) Reshard(unit);
  if (fsdp_schedule_.backward_prefetch == BackwardPrefetch::kBackwardPost) {
    Prefetch(WrappedAt(unit.position - 1));
  }
  CompleteGradients(unit);
}

void FsdpStrategy::CompleteGradients(FlatUnit& unit) {
  if (communicate_ && (last_micro_batch_ || !unit.grad_aliases_shard)) {
    LaunchReduction(unit);
  } else if (unit.grads_allocated && !unit.grad_aliases_shard &&
             param_dtype() != at::kFloat) {
    unit.AccumulateGradsInFp32();
  }
}

void FsdpStrategy::LaunchReduction(FlatUnit& unit) {
  if (!unit.any_requires_grad) return;
  // Every rank reduces every unit with trainable parameters, used or not
  // (unused: zeros), so the collectives match across ranks.
  unit.AllocateGrads();
  auto r = std::make_unique<Reduction>();
  r->unit = &unit;
  const at::ScalarType reduce_dtype = options_.mixed_precision.reduce_dtype;
  if (unit.grad_aliases_shard) {
    // fp32 NO_SHARD: the gradients are the shard; all-reduce them in place.
    r->out = unit.full_grad;
    if (replicate_size_ > 1) {
      r->stage = Reduction::kAllReduce;
      r->work =
          replicate_group_->AllReduceAsync(r->out, comm::ReduceOp::kAverage);
    }
  } else {
    at::Tensor src = unit.full_grad;
    if (unit.grad_accum.defined()) {
      unit.grad_accum.add_(unit.full_grad);
      src = unit.grad_accum;
    }
    if (src.scalar_type() != reduce_dtype) src = src.to(reduce_dtype);
    r->src = src;
    if (shard_size_ > 1) {
      if (!unit.shard_written && src.scalar_type() == at::kFloat &&
          state_device_ == compute_device_) {
        // The step's first reduction of this unit: reduce-scatter straight
        // into the gradient shard (no staging, no add).
        r->out = grad_shards_.narrow(0, unit.master_offset, unit.shard_numel);
        r->into_shard = true;
      } else {
        r->out = at::empty({unit.shard_numel}, src.options());
      }
      r->stage = Reduction::kReduceScatter;
      r->work = shard_group_->ReduceScatterAsync(r->src, r->out,
                                                 comm::ReduceOp::kAverage);
    } else {
      r->out = src;
      if (replicate_size_ > 1) {
        r->stage = Reduction::kAllReduce;
        r->work =
            replicate_group_->AllReduceAsync(r->out, comm::ReduceOp::kAverage);
      }
    }
  }
  unit.shard_written = true;
  ++counters_.reductions;
  reductions_.push_back(std::move(r));
  // Earlier units' reductions have had this unit's backward to finish:
  // complete all but the last reductions_in_flight, so that at most that
  // many units' full gradients wait for communication.
  DrainReductions(static_cast<size_t>(fsdp_schedule_.reductions_in_flight));
}

void FsdpStrategy::DrainReductions(size_t keep) {
  while (reductions_.size() > keep) {
    Reduction& r = *reductions_.front();
    if (r.work != nullptr) {
      absl::Status status = WaitExposed(*r.work);
      r.work.reset();
      if (!status.ok()) {
        LatchError(Annotate(
            status,
            absl::StrCat("fsdp: gradient reduction of unit ", r.unit->name)));
      } else if (r.stage == Reduction::kReduceScatter && replicate_size_ > 1) {
        r.stage = Reduction::kAllReduce;
        r.work =
            replicate_group_->AllReduceAsync(r.out, comm::ReduceOp::kAverage);
        continue;
      }
    }
    FlatUnit& unit = *r.unit;
    if (!unit.grad_aliases_shard) {
      if (latched_error().ok() && !r.into_shard) {
        grad_shards_.narrow(0, unit.master_offset, unit.shard_numel)
            .add_(r.out.to(state_device_));
      }
      unit.ReleaseGrads();
    }
    reductions_.pop_front();
  }
}

absl::Status FsdpStrategy::FinishBackward() {
  if (latched_error().ok()) {
    readiness_->LaunchRemaining(
        [this](size_t bucket) { PostBackward(bucket); });
  }
  readiness_->Disarm();
  for (auto& unit : flat_units_) Reshard(*unit);
  if (root_ != nullptr && latched_error().ok()) CompleteGradients(*root_);
  DrainReductions(0);
  return latched_error();
}

void FsdpStrategy::ZeroGrad() {
  grad_shards_.zero_();
  for (auto& unit : flat_units_) {
    if (unit->grads_allocated && !unit->grad_aliases_shard) {
      unit->full_grad.zero_();
    }
    unit->grad_accum = at::Tensor();
    unit->shard_written = false;
  }
}

absl::Status FsdpStrategy::BeforeMicroBatch(bool last_micro_batch) {
  if (summoned_) {
    return absl::FailedPreconditionError(
        "fsdp: ForwardBackward while full parameters are summoned: call "
        "ReleaseFullParams() first");
  }
  // A unit whose full gradients are its shard (fp32 NO_SHARD) would save
  // no memory by reducing early: it all-reduces once, in the last
  // micro-batch (CompleteGradients).
  last_micro_batch_ = last_micro_batch;
  communicate_ =
      last_micro_batch || options_.fsdp.reduce_scatter_every_micro_step;
  // A sharded root's: at its first gradient (root_grad_hooks_).
  if (root_ != nullptr && !root_sharded_) root_->AllocateGrads();
  readiness_->Arm();
  unit_buffers_.Open();  // Until unit 0's PreBackward, or DoStep.
  in_micro_batch_ = true;
  return absl::OkStatus();
}

absl::Status FsdpStrategy::AfterMicroBatch(bool last_micro_batch,
                                           absl::Status backward) {
  in_micro_batch_ = false;
  if (!backward.ok()) LatchError(backward);
  absl::Status finished = FinishBackward();
  STRATA_RETURN_IF_ERROR(backward);
  return finished;
}

absl::StatusOr<StepResult> FsdpStrategy::DoStep(int64_t step) {
  unit_buffers_.Close();  // Frees what it pooled: between steps, only shards.
  DrainReductions(0);
  STRATA_RETURN_IF_ERROR(latched_error());
  StepResult result;
  result.lr = schedule_->LrAt(step);
  // Gradient shards are disjoint within the shard group and identical
  // across replicas: whether any holds an inf/NaN, and the global sum of
  // squares, are the shard group's.
  STRATA_ASSIGN_OR_RETURN(const bool skip,
                          UnscaleGradients(grad_shards_, shard_group_));
  if (skip) return result;
  STRATA_ASSIGN_OR_RETURN(result.grad_norm, ClipGradients(grad_shards_, config_,
                                                          shard_group_, kKind));
  optimizer_->Step(result.lr);
  STRATA_RETURN_IF_ERROR(RefreshFullParameters());
  return result;
}

absl::Status FsdpStrategy::RefreshFullParameters() {
  for (auto& unit : flat_units_) {
    if (unit->full_aliases_master) continue;
    if ((unit->root && !root_sharded_) || shard_size_ == 1 || summoned_) {
      WaitGather(*unit);
      unit->gathered = false;
      Gather(*unit);
    } else {
      Reshard(*unit);
    }
  }
  return latched_error();
}

absl::Status FsdpStrategy::AfterStateLoaded() {
  DrainReductions(0);
  return RefreshFullParameters();
}

// --- State (the rest: fsdp_state.cc) ---------------------------------------

MemoryReport FsdpStrategy::Memory() const {
  MemoryReport report;
  report.parameter_bytes = master_.nbytes() + unit_buffers_.pooled_bytes();
  report.gradient_bytes = grad_shards_.nbytes();
  for (const auto& unit : flat_units_) {
    report.parameter_bytes += unit->held_parameter_bytes();
    report.gradient_bytes += unit->held_gradient_bytes();
    report.communication_bytes += unit->held_staging_bytes();
  }
  for (const auto& r : reductions_) {
    if (r->out.defined() && !r->into_shard && !r->out.is_same(r->src) &&
        !r->out.is_same(r->unit->full_grad)) {
      report.communication_bytes += r->out.nbytes();
    }
  }
  for (const auto& [name, tensor] : optimizer_->State()) {
    report.optimizer_bytes += tensor.nbytes();
  }
  return report;
}

}  // namespace strata::strategies
