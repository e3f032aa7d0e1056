#include "strategies/fsdp.h"

#include <ATen/core/grad_mode.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>
#include <ATen/ops/zeros_like.h>
#include <c10/core/Allocator.h>
#include <c10/core/StorageImpl.h>
#include <glog/logging.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <set>
#include <stdexcept>
#include <unordered_map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/fnv.h"
#include "base/status.h"
#include "models/init.h"
#include "optim/adamw.h"
#include "strategies/replicas.h"
#include "strategies/wrap_policy.h"

namespace strata::strategies {
namespace {

constexpr char kKind[] = "fsdp";

// Releases the storage behind `t` and every view of it: tensors stay valid
// objects (sizes, strides, autograd meta) with no memory until
// AllocateStorage (DESIGN.md "Freeing gathered parameters").
void ReleaseStorage(const at::Tensor& t) {
  t.storage().unsafeGetStorageImpl()->reset();
}

bool HasStorage(const at::Tensor& t) {
  return t.defined() && t.storage().nbytes() > 0;
}

// Gives `t`'s (released) storage fresh, uninitialised memory for t.numel()
// elements from the current allocator of its device.
void AllocateStorage(const at::Tensor& t) {
  c10::StorageImpl* impl = t.storage().unsafeGetStorageImpl();
  const size_t nbytes = t.numel() * t.element_size();
  impl->set_data_ptr_noswap(
      c10::GetAllocator(t.device().type())->allocate(nbytes));
  impl->set_nbytes(nbytes);
}

bool IsHybrid(ShardingStrategy s) {
  return s == ShardingStrategy::kHybridShard ||
         s == ShardingStrategy::kHybridShardZero2;
}


}  // namespace

absl::StatusOr<ShardingStrategy> ParseShardingStrategy(const std::string& s) {
  if (s == "full_shard") return ShardingStrategy::kFullShard;
  if (s == "shard_grad_op") return ShardingStrategy::kShardGradOp;
  if (s == "no_shard") return ShardingStrategy::kNoShard;
  if (s == "hybrid_shard") return ShardingStrategy::kHybridShard;
  if (s == "hybrid_shard_zero2") return ShardingStrategy::kHybridShardZero2;
  return absl::InvalidArgumentError(absl::StrCat(
      "--fsdp_sharding must be full_shard, shard_grad_op, no_shard, "
      "hybrid_shard or hybrid_shard_zero2, got '",
      s, "'"));
}

std::string ShardingStrategyName(ShardingStrategy s) {
  switch (s) {
    case ShardingStrategy::kFullShard:
      return "full_shard";
    case ShardingStrategy::kShardGradOp:
      return "shard_grad_op";
    case ShardingStrategy::kNoShard:
      return "no_shard";
    case ShardingStrategy::kHybridShard:
      return "hybrid_shard";
    case ShardingStrategy::kHybridShardZero2:
      return "hybrid_shard_zero2";
  }
  return "?";
}

absl::StatusOr<BackwardPrefetch> ParseBackwardPrefetch(const std::string& s) {
  if (s == "pre") return BackwardPrefetch::kBackwardPre;
  if (s == "post") return BackwardPrefetch::kBackwardPost;
  if (s == "none") return BackwardPrefetch::kNone;
  return absl::InvalidArgumentError(absl::StrCat(
      "--fsdp_backward_prefetch must be pre, post or none, got '", s, "'"));
}

std::string BackwardPrefetchName(BackwardPrefetch p) {
  switch (p) {
    case BackwardPrefetch::kBackwardPre:
      return "pre";
    case BackwardPrefetch::kBackwardPost:
      return "post";
    case BackwardPrefetch::kNone:
      return "none";
  }
  return "?";
}

absl::Status ValidateFsdpOptions(const StrategyOptions& options,
                                 int world_size) {
  const FsdpOptions& f = options.fsdp;
  const int group = f.hybrid_shard_group_size;
  if (IsHybrid(f.sharding)) {
    if (group <= 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--fsdp_hybrid_shard_group_size must be set (> 0) with "
          "--fsdp_sharding=",
          ShardingStrategyName(f.sharding), ": the ranks of one shard group, "
          "e.g. the ranks of a node"));
    }
    if (world_size % group != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--fsdp_hybrid_shard_group_size=", group,
          " does not divide the world size ", world_size,
          ": hybrid sharding needs whole shard groups (use a divisor of ",
          world_size, ")"));
    }
  } else if (group != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--fsdp_hybrid_shard_group_size=", group, " is only used with "
        "--fsdp_sharding=hybrid_shard or hybrid_shard_zero2, got --fsdp_sharding=",
        ShardingStrategyName(f.sharding)));
  }
  if (f.reductions_in_flight < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--fsdp_reductions_in_flight must be >= 0, got ",
        f.reductions_in_flight));
  }
  if (f.limit_all_gathers < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--fsdp_limit_all_gathers must be >= 0 (0: no limit), got ",
                     f.limit_all_gathers));
  }
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------

struct FsdpStrategy::FlatUnit {
  struct Entry {
    std::string name;
    at::Tensor param;  // The model's parameter (a view of `full`).
    std::vector<int64_t> shape;
    int64_t offset = 0;  // Elements, in the flat parameter.
    int64_t numel = 0;
    bool requires_grad = false;
  };

  std::string name;
  bool root = false;
  int position = -1;  // Among wrapped units, in forward order.
  std::vector<Entry> entries;
  int64_t numel = 0;
  int64_t padded_numel = 0;
  int64_t shard_numel = 0;
  int64_t master_offset = 0;  // Of this rank's shard in master_.
  bool has_frozen = false;
  bool any_requires_grad = false;

  at::Tensor full;       // [padded_numel], param dtype.
  at::Tensor full_grad;  // [padded_numel], param dtype.
  at::Tensor grad_accum;  // fp32 [padded_numel] (mixed precision only).
  bool full_aliases_master = false;
  bool grad_aliases_shard = false;

  bool gathered = false;
  std::unique_ptr<comm::Work> gather_work;
  at::Tensor gather_input;  // Kept alive while gather_work runs.
  bool grads_allocated = false;
  // This step's gradient shard already holds a reduced gradient (later
  // reductions of the step add to it).
  bool shard_written = false;
};

struct FsdpStrategy::Reduction {
  enum Stage { kReduceScatter, kAllReduce, kLocal };
  FlatUnit* unit = nullptr;
  Stage stage = kLocal;
  at::Tensor src;  // Reduce-scatter input (kept alive).
  at::Tensor out;  // This rank's reduced gradient (shard).
  bool into_shard = false;  // `out` is the gradient shard itself.
  std::unique_ptr<comm::Work> work;
};

class FsdpStrategy::Interceptor : public models::UnitInterceptor {
 public:
  Interceptor(FsdpStrategy* strategy, std::vector<int> flat_of_model_unit)
      : strategy_(strategy), flat_of_model_unit_(std::move(flat_of_model_unit)) {}

  void Detach() { strategy_ = nullptr; }

  at::Tensor Run(const models::UnitInfo& unit, const at::Tensor& input,
                 const models::UnitForward& forward) override {
    const bool wrapped = unit.index >= 0 &&
                         unit.index < static_cast<int>(flat_of_model_unit_.size()) &&
                         flat_of_model_unit_[unit.index] >= 0;
    if (!wrapped) return forward(input);
    if (strategy_ == nullptr) {
      throw std::runtime_error(absl::StrCat(
          "unit '", unit.name, "' was sharded by an FSDP strategy that has "
          "been destroyed: its parameters are gone. Keep the strategy alive "
          "while using the model, or copy FsdpStrategy::FullModelState() into "
          "a fresh model first"));
    }
    return strategy_->RunUnit(unit.index, input, forward);
  }

 private:
  FsdpStrategy* strategy_;
  const std::vector<int> flat_of_model_unit_;
};

// ---------------------------------------------------------------------------

absl::StatusOr<std::unique_ptr<FsdpStrategy>> FsdpStrategy::Create(
    const StrategyOptions& options, std::shared_ptr<models::UnitModel> model,
    comm::Group* group, const OptimizerConfig& config,
    const optim::LrScheduleOptions& schedule) {
  if (model == nullptr) {
    return absl::InvalidArgumentError("strategy 'fsdp': model is null");
  }
  if (options.kind != kKind) {
    return absl::InvalidArgumentError(absl::StrCat(
        "FsdpStrategy::Create: options.kind must be 'fsdp', got '",
        options.kind, "'"));
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
    : Strategy(std::move(model)),
      options_(options),
      config_(config),
      world_(world) {}

FsdpStrategy::~FsdpStrategy() {
  if (interceptor_ != nullptr) interceptor_->Detach();
  for (auto& reduction : reductions_) {
    if (reduction->work != nullptr) {
      absl::Status status = reduction->work->Wait();
      LOG_IF(WARNING, !status.ok())
          << "fsdp: a gradient reduction failed while the strategy was "
             "destroyed: " << status;
    }
  }
  for (FlatUnit* unit : gathers_in_flight_) {
    absl::Status status = unit->gather_work->Wait();
    LOG_IF(WARNING, !status.ok())
        << "fsdp: an all-gather failed while the strategy was destroyed: "
        << status;
  }
}

bool FsdpStrategy::reshard_after_forward() const {
  const ShardingStrategy s = options_.fsdp.sharding;
  return s == ShardingStrategy::kFullShard ||
         s == ShardingStrategy::kHybridShard;
}

absl::Status FsdpStrategy::Build(const optim::LrScheduleOptions& schedule) {
  const FsdpOptions& f = options_.fsdp;
  const int world = world_ == nullptr ? 1 : world_->size();
  const int rank = world_ == nullptr ? 0 : world_->rank();

  // Process groups.
  switch (f.sharding) {
    case ShardingStrategy::kFullShard:
    case ShardingStrategy::kShardGradOp:
      shard_size_ = world;
      break;
    case ShardingStrategy::kNoShard:
      shard_size_ = 1;
      break;
    case ShardingStrategy::kHybridShard:
    case ShardingStrategy::kHybridShardZero2:
      shard_size_ = f.hybrid_shard_group_size;
      break;
  }
  replicate_size_ = world / shard_size_;
  shard_rank_ = rank % shard_size_;
  if (world > 1) {
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
  }
  if (f.cpu_offload) {
    LOG_IF(INFO, rank == 0)
        << "fsdp: --fsdp_cpu_offload: parameter shards, gradient shards and "
           "optimizer state stay in host memory; on this CPU build the "
           "compute device is the host, so this changes nothing";
  }

  // Which parameters go where.
  STRATA_ASSIGN_OR_RETURN(std::vector<int> wrapped,
                          SelectWrappedUnits(model(), f.wrap_policy));
  std::set<std::string> shared;
  for (const auto& [name, readers] : model().SharedParameters()) {
    shared.insert(name);
  }
  std::unordered_map<std::string, at::Tensor> params;
  for (const auto& item : model().named_parameters()) {
    params[item.key()] = item.value();
  }
  std::set<std::string> in_wrapped;
  std::vector<std::unique_ptr<FlatUnit>> units;
  flat_of_model_unit_.assign(model().units().size(), -1);
  auto add_entry = [&](FlatUnit& unit, const std::string& name) {
    FlatUnit::Entry e;
    e.name = name;
    e.param = params.at(name);
    e.shape = e.param.sizes().vec();
    e.numel = e.param.numel();
    e.offset = unit.numel;
    e.requires_grad = e.param.requires_grad();
    unit.numel += e.numel;
    unit.has_frozen = unit.has_frozen || !e.requires_grad;
    unit.any_requires_grad = unit.any_requires_grad || e.requires_grad;
    unit.entries.push_back(std::move(e));
  };
  std::vector<std::string> moved_to_root;
  for (int index : wrapped) {
    const models::UnitInfo& info = model().units()[index];
    auto unit = std::make_unique<FlatUnit>();
    unit->name = info.name;
    unit->position = static_cast<int>(units.size());
    for (const std::string& name : info.parameters) {
      if (shared.count(name) > 0) {
        moved_to_root.push_back(name);
        continue;
      }
      add_entry(*unit, name);
      in_wrapped.insert(name);
    }
    if (unit->entries.empty()) continue;  // Only shared parameters.
    flat_of_model_unit_[index] = unit->position;
    units.push_back(std::move(unit));
  }
  if (units.empty()) {
    return absl::InvalidArgumentError(
        "fsdp: every parameter of the wrapped units is shared with another "
        "unit (tied weights), so nothing would be sharded; wrap other units "
        "(--fsdp_wrap_unit_types)");
  }
  auto root = std::make_unique<FlatUnit>();
  root->name = "root";
  root->root = true;
  for (const auto& item : model().named_parameters()) {
    if (in_wrapped.count(item.key()) == 0) add_entry(*root, item.key());
  }
  if (!moved_to_root.empty()) {
    LOG_IF(INFO, rank == 0)
        << "fsdp: parameters shared between units (tied weights) go to the "
           "root flat parameter, which stays gathered: "
        << absl::StrJoin(moved_to_root, ", ");
  }
  if (!root->entries.empty()) {
    root_ = root.get();
    flat_units_.push_back(std::move(root));
  }
  for (auto& unit : units) {
    wrapped_.push_back(unit.get());
    flat_units_.push_back(std::move(unit));
  }

  // Layout and master buffers.
  int64_t master_numel = 0;
  uint64_t hash = kFnv1aOffset;
  for (auto& unit : flat_units_) {
    unit->padded_numel =
        (unit->numel + shard_size_ - 1) / shard_size_ * shard_size_;
    unit->shard_numel = unit->padded_numel / shard_size_;
    unit->master_offset = master_numel;
    master_numel += unit->shard_numel;
    hash = Fnv1a(hash, unit->name.data(), unit->name.size() + 1);
    for (const auto& e : unit->entries) {
      hash = Fnv1a(hash, e.name.data(), e.name.size() + 1);
      hash = Fnv1a(hash, &e.numel, sizeof(e.numel));
    }
  }
  if (world > 1) {
    // Every rank must cut the model the same way, or the collectives below
    // would disagree in size (a Gloo abort): compare before using them.
    at::Tensor mine = at::empty({3}, at::kLong);
    mine[0] = static_cast<int64_t>(flat_units_.size());
    mine[1] = master_numel;
    mine[2] = static_cast<int64_t>(hash);
    at::Tensor all = at::empty({world * 3}, at::kLong);
    STRATA_RETURN_IF_ERROR(Annotate(world_->AllGather(mine, all),
                                    "fsdp: exchanging the flat-parameter layout"));
    const int64_t* d = all.data_ptr<int64_t>();
    for (int r = 1; r < world; ++r) {
      if (d[3 * r] != d[0] || d[3 * r + 1] != d[1] || d[3 * r + 2] != d[2]) {
        return absl::InvalidArgumentError(absl::StrCat(
            "fsdp: rank ", r, " cut the model into different flat parameters "
            "than rank 0 (", d[3 * r], " vs ", d[0], " flat parameters, ",
            d[3 * r + 1], " vs ", d[1], " shard elements): every rank must "
            "use the same wrap policy and model"));
      }
    }
  }
  // Devices: the model computes where its parameters are (meta: the host);
  // shards and optimizer state live there too, or on the host with
  // cpu_offload. On this CPU build both are the host.
  compute_device_ = at::Device(at::kCPU);
  for (const auto& item : model().named_parameters()) {
    if (!item.value().is_meta()) compute_device_ = item.value().device();
    break;
  }
  state_device_ = f.cpu_offload ? at::Device(at::kCPU) : compute_device_;
  master_ = at::zeros({master_numel}, at::TensorOptions()
                                           .dtype(at::kFloat)
                                           .device(state_device_));
  grad_shards_ = at::zeros_like(master_);

  bool deferred = false;
  for (const auto& item : model().named_parameters()) {
    deferred = deferred || item.value().is_meta();
  }
  STRATA_RETURN_IF_ERROR(InitializeShards(deferred));

  // Buffers: cast to buffer_dtype and take rank 0's.
  for (const auto& item : model().named_buffers()) {
    at::Tensor buffer = item.value();
    if (!buffer.is_floating_point()) continue;
    if (buffer.scalar_type() != options_.mixed_precision.buffer_dtype) {
      buffer.set_data(buffer.to(options_.mixed_precision.buffer_dtype));
    }
    if (world > 1) {
      at::Tensor b = buffer.contiguous();
      STRATA_RETURN_IF_ERROR(Annotate(world_->Broadcast(b, 0),
                                      absl::StrCat("fsdp: broadcasting buffer ",
                                                   item.key())));
      buffer.set_data(b);
    }
  }

  // One AdamW over every shard: each flat parameter's ranges (matrices
  // decay, frozen parameters never move) cut to this rank's shard; gaps
  // (padding) frozen.
  std::vector<optim::ParamRange> ranges;
  for (const auto& unit : flat_units_) {
    std::vector<optim::ParamRange> unit_ranges;
    for (const auto& e : unit->entries) {
      const bool frozen = !e.requires_grad;
      const double wd =
          !frozen && e.shape.size() >= 2 ? config_.weight_decay : 0.0;
      unit_ranges.push_back({e.offset, e.numel, wd, frozen});
    }
    for (const optim::ParamRange& r : optim::SliceParamRanges(
             unit_ranges, shard_rank_ * unit->shard_numel, unit->shard_numel)) {
      if (r.numel == 0) continue;
      const int64_t offset = unit->master_offset + r.offset;
      const int64_t cursor =
          ranges.empty() ? 0 : ranges.back().offset + ranges.back().numel;
      if (offset > cursor) {
        ranges.push_back({cursor, offset - cursor, 0.0, /*frozen=*/true});
      }
      ranges.push_back({offset, r.numel, r.weight_decay, r.frozen});
    }
  }
  const int64_t covered =
      ranges.empty() ? 0 : ranges.back().offset + ranges.back().numel;
  if (covered < master_numel) {
    ranges.push_back({covered, master_numel - covered, 0.0, /*frozen=*/true});
  }
  STRATA_ASSIGN_OR_RETURN(
      optimizer_,
      optim::CreateAdamW(master_, grad_shards_, ranges, config_.adamw));
  STRATA_ASSIGN_OR_RETURN(schedule_, optim::LrSchedule::Create(schedule));

  // Gradient readiness: buckets are the wrapped units in reverse forward
  // order (the order their backward completes).
  std::vector<std::vector<size_t>> bucket_entries(wrapped_.size());
  std::vector<bool> requires_grad;
  std::vector<at::Tensor> hook_params;
  for (size_t u = 0; u < wrapped_.size(); ++u) {
    for (const auto& e : wrapped_[u]->entries) {
      bucket_entries[wrapped_.size() - 1 - u].push_back(requires_grad.size());
      requires_grad.push_back(e.requires_grad);
      hook_params.push_back(e.param);
    }
  }
  readiness_ = std::make_unique<BucketReadiness>(std::move(bucket_entries),
                                                 std::move(requires_grad));
  readiness_->AddHooks(hook_params,
                       [this](size_t bucket) { PostBackward(bucket); });

  interceptor_ = std::make_shared<Interceptor>(this, flat_of_model_unit_);
  model().AddInterceptor(interceptor_);
  if (rank == 0) {
    int64_t wrapped_numel = 0;
    for (const FlatUnit* unit : wrapped_) wrapped_numel += unit->numel;
    LOG(INFO) << "fsdp: " << ShardingStrategyName(f.sharding) << ", "
              << wrapped_.size() << " wrapped units (" << wrapped_numel
              << " parameters) + root (" << (root_ ? root_->numel : 0)
              << " parameters, kept gathered), shard group " << shard_size_
              << " x replicas " << replicate_size_ << ", param "
              << c10::toString(param_dtype()) << " / reduce "
              << c10::toString(options_.mixed_precision.reduce_dtype)
              << (deferred ? ", deferred init" : "");
  }
  return absl::OkStatus();
}

absl::Status FsdpStrategy::InitializeShards(bool deferred) {
  const int world = world_ == nullptr ? 1 : world_->size();
  const bool every_micro = options_.fsdp.reduce_scatter_every_micro_step;
  for (auto& unit_ptr : flat_units_) {
    FlatUnit& unit = *unit_ptr;
    at::Tensor master = master_.narrow(0, unit.master_offset, unit.shard_numel);
    const int64_t shard_begin = shard_rank_ * unit.shard_numel;
    const int64_t shard_end = shard_begin + unit.shard_numel;
    if (deferred) {
      // Each parameter's full value exists only while its overlap with this
      // rank's shard is copied: peak = the shards + one parameter.
      for (const auto& e : unit.entries) {
        at::Tensor value;
        if (e.param.is_meta()) {
          absl::StatusOr<at::Tensor> initial =
              model().InitialParameter(e.name, options_.fsdp.init_seed);
          if (!initial.ok()) {
            return Annotate(initial.status(),
                            absl::StrCat("fsdp: materialising ", e.name));
          }
          value = *std::move(initial);
          if (value.sizes().vec() != e.shape) {
            return absl::InternalError(absl::StrCat(
                "fsdp: the model's initial value of ", e.name, " has shape ",
                c10::str(value.sizes()), ", expected [",
                absl::StrJoin(e.shape, ", "), "]"));
          }
        } else {
          value = e.param.detach();
        }
        const int64_t begin = std::max(e.offset, shard_begin);
        const int64_t end = std::min(e.offset + e.numel, shard_end);
        if (begin < end) {
          master.narrow(0, begin - shard_begin, end - begin)
              .copy_(value.reshape(-1).narrow(0, begin - e.offset, end - begin));
        }
      }
    } else {
      // sync_module_states: every rank starts from rank 0's values.
      at::Tensor staging = at::zeros(
          {unit.padded_numel},
          at::TensorOptions().dtype(at::kFloat).device(compute_device_));
      for (const auto& e : unit.entries) {
        staging.narrow(0, e.offset, e.numel).copy_(e.param.detach().reshape(-1));
      }
      if (world > 1) {
        STRATA_RETURN_IF_ERROR(Annotate(
            world_->Broadcast(staging, 0),
            absl::StrCat("fsdp: broadcasting rank 0's parameters of ",
                         unit.name)));
      }
      master.copy_(staging.narrow(0, shard_begin, unit.shard_numel)
                       .to(state_device_));
    }

    // The model's parameters become views of the full buffer.
    if (shard_size_ == 1 && param_dtype() == at::kFloat &&
        state_device_ == compute_device_) {
      unit.full = master;
      unit.full_aliases_master = true;
    } else {
      unit.full = at::empty(
          {unit.padded_numel},
          at::TensorOptions().dtype(param_dtype()).device(compute_device_));
    }
    if (unit.full_aliases_master &&
        options_.mixed_precision.reduce_dtype == at::kFloat && !every_micro) {
      unit.full_grad =
          grad_shards_.narrow(0, unit.master_offset, unit.shard_numel);
      unit.grad_aliases_shard = true;
      unit.grads_allocated = true;
    } else {
      unit.full_grad = at::zeros_like(unit.full);
      unit.grads_allocated = true;
    }
    for (auto& e : unit.entries) {
      at::Tensor view = unit.full.narrow(0, e.offset, e.numel).view(e.shape);
      models::ReplaceParameterData(e.param, view);
      if (e.requires_grad) {
        e.param.mutable_grad() =
            unit.full_grad.narrow(0, e.offset, e.numel).view(e.shape);
      }
    }
    if (!unit.grad_aliases_shard) {
      ReleaseStorage(unit.full_grad);
      unit.grads_allocated = false;
    }
    if (unit.full_aliases_master) {
      unit.gathered = true;
    } else if (unit.root || shard_size_ == 1) {
      Gather(unit);  // Stays gathered.
    } else {
      ReleaseStorage(unit.full);
      unit.gathered = false;
    }
    STRATA_RETURN_IF_ERROR(TakeHookStatus());
  }
  return absl::OkStatus();
}

// --- Gathering -------------------------------------------------------------

FsdpStrategy::FlatUnit* FsdpStrategy::WrappedAt(int position) {
  if (position < 0 || position >= static_cast<int>(wrapped_.size())) {
    return nullptr;
  }
  return wrapped_[position];
}

int FsdpStrategy::num_units_gathered() const {
  int n = 0;
  for (const auto& unit : flat_units_) {
    if (!unit->root && !unit->full_aliases_master && HasStorage(unit->full)) {
      ++n;
    }
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
  if (!HasStorage(unit.full)) AllocateStorage(unit.full);
  at::Tensor input = master_.narrow(0, unit.master_offset, unit.shard_numel);
  if (input.scalar_type() != param_dtype()) input = input.to(param_dtype());
  if (input.device() != unit.full.device()) input = input.to(unit.full.device());
  if (!unit.root) {
    ++counters_.all_gathers;
    if (prefetch) ++counters_.prefetches;
  }
  if (shard_size_ == 1) {
    at::NoGradGuard no_grad;
    unit.full.copy_(input);
    unit.gathered = true;
  } else {
    unit.gather_input = input;
    unit.gather_work = shard_group_->AllGatherAsync(unit.gather_input, unit.full);
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
    Fail(Annotate(status,
                  absl::StrCat("fsdp: all-gather of unit ", unit.name)));
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
  if (unit.root || unit.full_aliases_master || shard_size_ == 1 || summoned_) {
    return;
  }
  WaitGather(unit);
  if (HasStorage(unit.full)) ReleaseStorage(unit.full);
  unit.gathered = false;
}

void FsdpStrategy::AllocateGrads(FlatUnit& unit) {
  if (unit.grads_allocated) return;
  AllocateStorage(unit.full_grad);
  unit.full_grad.zero_();
  unit.grads_allocated = true;
}

// --- Forward and backward --------------------------------------------------

at::Tensor FsdpStrategy::RunUnit(int model_unit, const at::Tensor& input,
                                 const models::UnitForward& forward) {
  FlatUnit& unit = *wrapped_[flat_of_model_unit_[model_unit]];
  Gather(unit);
  const bool grad_mode = at::GradMode::is_enabled();
  if (options_.fsdp.forward_prefetch) Prefetch(WrappedAt(unit.position + 1));
  at::Tensor output = forward(input);
  if (grad_mode && output.requires_grad()) {
    FlatUnit* u = &unit;
    output.register_hook([this, u](const at::Tensor&) { PreBackward(*u); });
  }
  if (reshard_after_forward() || !grad_mode) Reshard(unit);
  return output;
}

void FsdpStrategy::PreBackward(FlatUnit& unit) {
  if (!hook_status_.ok()) return;
  Gather(unit);
  AllocateGrads(unit);
  if (options_.fsdp.backward_prefetch == BackwardPrefetch::kBackwardPre) {
    Prefetch(WrappedAt(unit.position - 1));
  }
}

void FsdpStrategy::PostBackward(size_t bucket) {
  if (!hook_status_.ok()) return;
  FlatUnit& unit = *wrapped_[wrapped_.size() - 1 - bucket];
  // A unit with frozen parameters is freed at the end of backward: a node
  // that reads a frozen parameter may still run after its gradients are
  // complete.
  if (!unit.has_frozen) Reshard(unit);
  if (options_.fsdp.backward_prefetch == BackwardPrefetch::kBackwardPost) {
    Prefetch(WrappedAt(unit.position - 1));
  }
  CompleteGradients(unit);
}

void FsdpStrategy::CompleteGradients(FlatUnit& unit) {
  if (communicate_) {
    LaunchReduction(unit);
  } else if (unit.grads_allocated && !unit.grad_aliases_shard &&
             param_dtype() != at::kFloat) {
    // Accumulation in fp32 across micro-batches.
    if (!unit.grad_accum.defined()) {
      unit.grad_accum = unit.full_grad.to(at::kFloat);
    } else {
      unit.grad_accum.add_(unit.full_grad);
    }
    unit.full_grad.zero_();
  }
}

void FsdpStrategy::LaunchReduction(FlatUnit& unit) {
  if (!unit.any_requires_grad) return;
  // Every rank reduces every unit with trainable parameters, used or not
  // (unused: zeros), so the collectives match across ranks.
  AllocateGrads(unit);
  auto r = std::make_unique<Reduction>();
  r->unit = &unit;
  const at::ScalarType reduce_dtype = options_.mixed_precision.reduce_dtype;
  if (unit.grad_aliases_shard) {
    // fp32 NO_SHARD: the gradients are the shard; all-reduce them in place.
    r->out = unit.full_grad;
    if (replicate_size_ > 1) {
      r->stage = Reduction::kAllReduce;
      r->work = replicate_group_->AllReduceAsync(r->out, comm::ReduceOp::kAverage);
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
  DrainReductions(static_cast<size_t>(options_.fsdp.reductions_in_flight));
}

void FsdpStrategy::DrainReductions(size_t keep) {
  while (reductions_.size() > keep) {
    Reduction& r = *reductions_.front();
    if (r.work != nullptr) {
      absl::Status status = WaitExposed(*r.work);
      r.work.reset();
      if (!status.ok()) {
        Fail(Annotate(status, absl::StrCat("fsdp: gradient reduction of unit ",
                                           r.unit->name)));
      } else if (r.stage == Reduction::kReduceScatter && replicate_size_ > 1) {
        r.stage = Reduction::kAllReduce;
        r.work =
            replicate_group_->AllReduceAsync(r.out, comm::ReduceOp::kAverage);
        continue;
      }
    }
    FlatUnit& unit = *r.unit;
    if (!unit.grad_aliases_shard) {
      if (hook_status_.ok() && !r.into_shard) {
        grad_shards_.narrow(0, unit.master_offset, unit.shard_numel)
            .add_(r.out.to(state_device_));
      }
      ReleaseStorage(unit.full_grad);
      unit.grads_allocated = false;
      unit.grad_accum = at::Tensor();
    }
    reductions_.pop_front();
  }
}

void FsdpStrategy::Fail(const absl::Status& status) {
  if (hook_status_.ok()) hook_status_ = status;
}

absl::Status FsdpStrategy::TakeHookStatus() { return hook_status_; }

absl::Status FsdpStrategy::FinishBackward() {
  if (hook_status_.ok()) {
    readiness_->LaunchRemaining(
        [this](size_t bucket) { PostBackward(bucket); });
  }
  readiness_->Disarm();
  for (FlatUnit* unit : wrapped_) Reshard(*unit);
  if (root_ != nullptr && hook_status_.ok()) CompleteGradients(*root_);
  DrainReductions(0);
  return hook_status_;
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

absl::StatusOr<double> FsdpStrategy::ForwardBackward(
    const at::Tensor& inputs, const at::Tensor& targets, double loss_weight,
    bool last_micro_batch) {
  if (!std::isfinite(loss_weight) || loss_weight <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("loss_weight must be finite and > 0, got ", loss_weight));
  }
  STRATA_RETURN_IF_ERROR(TakeHookStatus());
  if (grads_complete_) {
    return absl::FailedPreconditionError(
        "fsdp: ForwardBackward after the step's last micro-batch: call Step() "
        "first");
  }
  if (summoned_) {
    return absl::FailedPreconditionError(
        "fsdp: ForwardBackward while full parameters are summoned: call "
        "ReleaseFullParams() first");
  }
  communicate_ =
      last_micro_batch || options_.fsdp.reduce_scatter_every_micro_step;
  if (root_ != nullptr) AllocateGrads(*root_);
  readiness_->Arm();
  in_micro_batch_ = true;
  double loss_value = 0;
  absl::Status status =
      StatusFromCall(absl::StrCat(name(), " forward/backward"), [&] {
        at::Tensor loss =
            models::UnitModel::Loss(model().Forward(inputs), targets);
        loss_value = loss.item<double>();
        (loss * loss_weight).backward();
      });
  in_micro_batch_ = false;
  if (!status.ok()) Fail(status);
  absl::Status finished = FinishBackward();
  STRATA_RETURN_IF_ERROR(status);
  STRATA_RETURN_IF_ERROR(finished);
  if (last_micro_batch) grads_complete_ = true;
  return loss_value;
}

absl::StatusOr<StepResult> FsdpStrategy::Step(int64_t step) {
  if (step < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("step must be >= 0, got ", step));
  }
  STRATA_RETURN_IF_ERROR(TakeHookStatus());
  if (!grads_complete_) {
    return absl::FailedPreconditionError(
        "fsdp: Step() before the step's last micro-batch: call "
        "ForwardBackward(..., last_micro_batch = true) first");
  }
  DrainReductions(0);
  STRATA_RETURN_IF_ERROR(TakeHookStatus());
  StepResult result;
  // Gradient shards are disjoint within the shard group and identical
  // across replicas: the global sum of squares is the shard group's.
  STRATA_ASSIGN_OR_RETURN(
      result.grad_norm,
      ClipGradients(grad_shards_, config_.grad_clip, shard_group_, kKind));
  result.lr = schedule_->LrAt(step);
  optimizer_->Step(result.lr);
  grads_complete_ = false;
  STRATA_RETURN_IF_ERROR(RefreshFullParameters());
  return result;
}

absl::Status FsdpStrategy::RefreshFullParameters() {
  for (auto& unit : flat_units_) {
    if (unit->full_aliases_master) continue;
    if (unit->root || shard_size_ == 1 || summoned_) {
      WaitGather(*unit);
      unit->gathered = false;
      Gather(*unit);
    } else {
      Reshard(*unit);
    }
  }
  return TakeHookStatus();
}

absl::Status FsdpStrategy::AfterStateLoaded() {
  DrainReductions(0);
  return RefreshFullParameters();
}

// --- State -----------------------------------------------------------------

MemoryReport FsdpStrategy::Memory() const {
  MemoryReport report;
  report.parameter_bytes = master_.nbytes();
  report.gradient_bytes = grad_shards_.nbytes();
  for (const auto& unit : flat_units_) {
    if (!unit->full_aliases_master && HasStorage(unit->full)) {
      report.parameter_bytes += unit->full.nbytes();
    }
    if (!unit->grad_aliases_shard && HasStorage(unit->full_grad)) {
      report.gradient_bytes += unit->full_grad.nbytes();
    }
    if (unit->grad_accum.defined()) {
      report.gradient_bytes += unit->grad_accum.nbytes();
    }
    if (unit->gather_input.defined() &&
        unit->gather_input.scalar_type() != at::kFloat) {
      report.communication_bytes += unit->gather_input.nbytes();
    }
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

namespace {

// The runs of `unit`'s parameters in this rank's shard of `flat` (a tensor
// aligned with the master shards), calling fn(entry, offset in the
// parameter, run).
template <typename Unit, typename Fn>
void ForEachRun(const Unit& unit, int shard_rank, const at::Tensor& flat,
                const Fn& fn) {
  const int64_t shard_begin = shard_rank * unit.shard_numel;
  const int64_t shard_end = shard_begin + unit.shard_numel;
  for (const auto& e : unit.entries) {
    const int64_t begin = std::max(e.offset, shard_begin);
    const int64_t end = std::min(e.offset + e.numel, shard_end);
    if (begin >= end) continue;
    fn(e, begin - e.offset,
       flat.narrow(0, unit.master_offset + begin - shard_begin, end - begin));
  }
}

}  // namespace

std::vector<ShardedTensor> FsdpStrategy::ModelState() const {
  std::vector<ShardedTensor> out;
  for (const auto& unit : flat_units_) {
    ForEachRun(*unit, shard_rank_, master_,
               [&](const FlatUnit::Entry& e, int64_t offset, at::Tensor run) {
                 out.push_back({e.name, e.shape, offset, std::move(run)});
               });
  }
  return out;
}

std::vector<ShardedTensor> FsdpStrategy::OptimizerState() const {
  std::vector<ShardedTensor> out;
  optim::NamedTensors state = optimizer_->State();
  for (const auto& unit : flat_units_) {
    for (const auto& [key, tensor] : state) {
      if (key == "step") continue;
      ForEachRun(*unit, shard_rank_, tensor,
                 [&](const FlatUnit::Entry& e, int64_t offset, at::Tensor run) {
                   out.push_back({absl::StrCat(e.name, ".", key), e.shape,
                                  offset, std::move(run)});
                 });
    }
  }
  for (const auto& [key, tensor] : state) {
    if (key == "step") out.push_back({"step", {}, 0, tensor});
  }
  return out;
}

absl::StatusOr<std::vector<std::pair<std::string, at::Tensor>>>
FsdpStrategy::FullModelState() {
  if (in_micro_batch_) {
    return absl::FailedPreconditionError(
        "fsdp: FullModelState during a micro-batch");
  }
  std::map<std::string, at::Tensor> values;
  for (auto& unit : flat_units_) {
    at::Tensor master = master_.narrow(0, unit->master_offset, unit->shard_numel);
    at::Tensor full;
    if (shard_size_ > 1) {
      full = at::empty({unit->padded_numel}, at::kFloat);
      STRATA_RETURN_IF_ERROR(Annotate(
          shard_group_->AllGather(master, full),
          absl::StrCat("fsdp: gathering the full state of unit ", unit->name)));
    } else {
      full = master;
    }
    for (const auto& e : unit->entries) {
      values[e.name] = full.narrow(0, e.offset, e.numel).view(e.shape).clone();
    }
  }
  std::vector<std::pair<std::string, at::Tensor>> out;
  for (const auto& item : model().named_parameters()) {
    out.emplace_back(item.key(), values.at(item.key()));
  }
  return out;
}

absl::Status FsdpStrategy::SummonFullParams() {
  if (in_micro_batch_ || grads_complete_) {
    return absl::FailedPreconditionError(
        "fsdp: SummonFullParams between a step's micro-batches; call it "
        "before the first micro-batch or after Step()");
  }
  if (summoned_) return absl::OkStatus();
  for (auto& unit : flat_units_) Gather(*unit);
  summoned_ = true;
  return TakeHookStatus();
}

absl::Status FsdpStrategy::ReleaseFullParams(bool writeback) {
  if (!summoned_) {
    return absl::FailedPreconditionError(
        "fsdp: ReleaseFullParams without SummonFullParams");
  }
  if (writeback && param_dtype() != at::kFloat) {
    return absl::FailedPreconditionError(absl::StrCat(
        "fsdp: ReleaseFullParams(writeback = true) needs fp32 parameters; the "
        "model computes in ",
        c10::toString(param_dtype()),
        " and its values are rounded copies of the fp32 masters"));
  }
  summoned_ = false;
  for (auto& unit : flat_units_) {
    if (writeback && !unit->full_aliases_master) {
      at::NoGradGuard no_grad;
      master_.narrow(0, unit->master_offset, unit->shard_numel)
          .copy_(unit->full.narrow(0, shard_rank_ * unit->shard_numel,
                                   unit->shard_numel));
    }
    if (!unit->root) Reshard(*unit);
  }
  return TakeHookStatus();
}

std::vector<FsdpStrategy::FlatUnitInfo> FsdpStrategy::flat_units() const {
  std::vector<FlatUnitInfo> out;
  for (const auto& unit : flat_units_) {
    FlatUnitInfo info;
    info.name = unit->name;
    info.root = unit->root;
    for (const auto& e : unit->entries) info.parameters.push_back(e.name);
    info.numel = unit->numel;
    info.padded_numel = unit->padded_numel;
    out.push_back(std::move(info));
  }
  return out;
}

}  // namespace strata::strategies
