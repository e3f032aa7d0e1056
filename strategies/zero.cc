#include "strategies/zero.h"

#include <ATen/ATen.h>
#include <glog/logging.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status.h"
#include "optim/adamw.h"
#include "optim/clip.h"
#include "optim/flat_parameters.h"
#include "strategies/replicas.h"

namespace strata::strategies {

struct ZeroStrategy::Layout {
  std::vector<Bucket> buckets;
  std::vector<std::unique_ptr<optim::Optimizer>> optimizers;
  optim::LrSchedule* schedule = nullptr;
  std::vector<optim::Optimizer*> all_optimizers;
  at::Tensor grad_shard;
  at::Tensor staging;
};

namespace {

int64_t RoundUp(int64_t n, int64_t multiple) {
  return (n + multiple - 1) / multiple * multiple;
}

// Buckets of `flat` as in zero.h: ends at multiples of `world`, sizes capped
// as DDP's (first_bucket_bytes, then bucket_bytes), with the parameters
// overlapping each and this rank's shard of it.
std::vector<ZeroStrategy::Bucket> BuildBuckets(
    const optim::FlatParameters& flat, const StrategyOptions& options,
    int world, int rank) {
  const auto& entries = flat.entries();
  const int64_t elem = flat.params().element_size();
  const int64_t total = flat.padded_numel();
  CHECK_EQ(total % world, 0);
  // Natural (DDP) ends, rounded up to multiples of the world size.
  std::vector<int64_t> ends;
  int64_t start = 0, cap = options.first_bucket_bytes;
  for (const auto& e : entries) {
    const int64_t end = e.offset + e.numel;
    if (end > start && (end - start) * elem > cap && e.offset > start) {
      const int64_t cut = RoundUp(e.offset, world);
      ends.push_back(cut);
      start = cut;
      cap = options.bucket_bytes;
    }
  }
  if (ends.empty() || ends.back() < total) ends.push_back(total);
  std::vector<ZeroStrategy::Bucket> buckets;
  int64_t begin = 0, buffer_offset = 0;
  for (int64_t end : ends) {
    end = std::min(end, total);
    if (end <= begin) continue;
    ZeroStrategy::Bucket b;
    b.offset = begin;
    b.numel = end - begin;
    CHECK_EQ(b.numel % world, 0);
    b.shard_offset = begin + rank * (b.numel / world);
    b.buffer_offset = buffer_offset;
    buffer_offset += b.numel / world;
    for (size_t i = 0; i < entries.size(); ++i) {
      const auto& e = entries[i];
      if (e.numel > 0 && e.offset < end && e.offset + e.numel > begin) {
        b.entries.push_back(i);
      }
    }
    buckets.push_back(std::move(b));
    begin = end;
  }
  CHECK_EQ(begin, total);
  CHECK_EQ(buffer_offset * world, total);
  return buckets;
}

}  // namespace

absl::StatusOr<std::unique_ptr<ZeroStrategy>> ZeroStrategy::Create(
    const StrategyOptions& options, std::shared_ptr<models::UnitModel> model,
    comm::Group* group, const OptimizerConfig& config,
    const optim::LrScheduleOptions& schedule) {
  STRATA_RETURN_IF_ERROR(ValidateStrategyOptions(options));
  if (options.kind != "zero1" && options.kind != "zero2") {
    return absl::InvalidArgumentError(
        absl::StrCat("ZeroStrategy: --strategy must be zero1 or zero2, got '",
                     options.kind, "'"));
  }
  if (group == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--strategy ", options.kind, " needs a process group, got none"));
  }
  if (model == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("strategy '", options.kind, "': model is null"));
  }
  STRATA_RETURN_IF_ERROR(ValidateOptimizerConfig(config));
  STRATA_RETURN_IF_ERROR(optim::ValidateLrScheduleOptions(schedule));
  const int world = group->size();
  const int rank = group->rank();

  std::vector<optim::NamedParameter> named;
  for (const auto& item : model->named_parameters()) {
    named.push_back({item.key(), item.value()});
  }
  STRATA_RETURN_IF_ERROR(
      CheckSameModelOnAllRanks(*group, options.kind, *model));
  std::reverse(named.begin(), named.end());
  Parts parts;
  STRATA_ASSIGN_OR_RETURN(parts.flat,
                          optim::FlatParameters::Create(std::move(named),
                                                        /*align_elems=*/world));
  STRATA_ASSIGN_OR_RETURN(parts.schedule, optim::LrSchedule::Create(schedule));

  // Rank 0's weights everywhere.
  STRATA_RETURN_IF_ERROR(BroadcastFromRankZero(*group, options.kind, *model,
                                               parts.flat->params()));

  Layout layout;
  layout.buckets = BuildBuckets(*parts.flat, options, world, rank);
  const int64_t shard_numel = parts.flat->padded_numel() / world;
  layout.staging = at::zeros({shard_numel}, parts.flat->params().options());
  const bool stage2 = options.kind == "zero2";
  if (stage2) {
    layout.grad_shard = at::zeros({shard_numel}, parts.flat->grads().options());
  }
  const std::vector<optim::ParamRange> ranges =
      parts.flat->MatrixDecayRanges(config.weight_decay);
  for (const Bucket& b : layout.buckets) {
    const int64_t n = b.numel / world;
    at::Tensor p = parts.flat->params().narrow(0, b.shard_offset, n);
    at::Tensor g = stage2 ? layout.grad_shard.narrow(0, b.buffer_offset, n)
                          : parts.flat->grads().narrow(0, b.shard_offset, n);
    STRATA_ASSIGN_OR_RETURN(
        std::unique_ptr<optim::Optimizer> optimizer,
        optim::CreateAdamW(p, g,
                           optim::SliceParamRanges(ranges, b.shard_offset, n),
                           config.adamw));
    layout.all_optimizers.push_back(optimizer.get());
    layout.optimizers.push_back(std::move(optimizer));
  }
  CHECK(!layout.optimizers.empty());
  parts.optimizer = std::move(layout.optimizers.front());
  layout.schedule = parts.schedule.get();
  std::unique_ptr<ZeroStrategy> strategy(
      new ZeroStrategy(std::move(model), config, std::move(parts),
                       std::move(layout), options, group));
  VLOG(1) << options.kind << ": rank " << rank << ": "
          << strategy->buckets_.size() << " buckets, shard of " << shard_numel
          << " elements";
  return strategy;
}

ZeroStrategy::ZeroStrategy(std::shared_ptr<models::UnitModel> model,
                           const OptimizerConfig& config, Parts parts,
                           Layout layout, const StrategyOptions& options,
                           comm::Group* group)
    : SingleStrategy(std::move(model), config, std::move(parts)),
      options_(options),
      config_(config),
      group_(group),
      schedule_(layout.schedule),
      optimizers_(std::move(layout.all_optimizers)),
      buckets_(std::move(layout.buckets)),
      grad_shard_(std::move(layout.grad_shard)),
      staging_(std::move(layout.staging)) {
  CHECK(schedule_ != nullptr);
  CHECK_EQ(optimizers_.size(), buckets_.size());
  // layout.optimizers[0] was moved to SingleStrategy (parts.optimizer).
  for (size_t k = 0; k < layout.optimizers.size(); ++k) {
    if (k == 0) {
      CHECK(layout.optimizers[0] == nullptr);
      continue;
    }
    owned_optimizers_.push_back(std::move(layout.optimizers[k]));
  }
  const int world = group_->size();
  std::vector<std::vector<size_t>> bucket_entries;
  for (size_t k = 0; k < buckets_.size(); ++k) {
    const Bucket& b = buckets_[k];
    bucket_entries.push_back(b.entries);
    grad_views_.push_back(flat().grads().narrow(0, b.offset, b.numel));
    if (stage2()) {
      shard_views_.push_back(
          grad_shard_.narrow(0, b.buffer_offset, b.numel / world));
    }
  }
  readiness_ = BucketReadiness::ForFlatParameters(
      flat(), std::move(bucket_entries),
      [this](size_t bucket) { LaunchBucket(bucket, /*from_backward=*/true); });
}

ZeroStrategy::~ZeroStrategy() {
  readiness_.reset();  // Removes the hooks first.
  for (auto& work : works_) {
    absl::Status status = work->Wait();
    if (!status.ok()) LOG(WARNING) << name() << ": at destruction: " << status;
  }
}

absl::Status ZeroStrategy::BeforeMicroBatch(bool last_micro_batch) {
  return readiness_->BeforeMicroBatch(name(), last_micro_batch);
}

absl::Status ZeroStrategy::AfterBackward(bool last_micro_batch) {
  readiness_->AfterBackward(last_micro_batch);
  return absl::OkStatus();
}

void ZeroStrategy::LaunchBucket(size_t bucket, bool from_backward) {
  ++(from_backward ? launched_in_backward_ : launched_at_step_);
  if (stage2()) {
    works_.push_back(group_->ReduceScatterAsync(
        grad_views_[bucket], shard_views_[bucket], comm::ReduceOp::kAverage));
  } else {
    works_.push_back(
        group_->AllReduceAsync(grad_views_[bucket], comm::ReduceOp::kAverage));
  }
}

void ZeroStrategy::ResetStep() {
  readiness_->ResetStep();
  works_.clear();
}

absl::Status ZeroStrategy::FinishGradients() {
  absl::Status status = readiness_->CompleteStep(
      absl::StrCat(name(), " on rank ", group_->rank()),
      options_.allow_unused_parameters,
      [this](size_t entry) { return flat().entries()[entry].name; },
      [this](size_t bucket) { LaunchBucket(bucket, /*from_backward=*/false); });
  for (size_t k = 0; k < works_.size(); ++k) {
    absl::Status wait = works_[k]->Wait();
    if (!wait.ok() && status.ok()) {
      const Bucket& b = buckets_[k];
      status = Annotate(
          wait,
          absl::StrCat(name(), ": ", stage2() ? "reduce-scatter" : "all-reduce",
                       " of gradient bucket ", k, " of ", buckets_.size(),
                       " (elements [", b.offset, ", ", b.offset + b.numel,
                       ")) on rank ", group_->rank()));
    }
  }
  ResetStep();
  return status;
}

absl::Status ZeroStrategy::GatherParameters() {
  at::NoGradGuard no_grad;
  const int64_t world = group_->size();
  std::vector<at::Tensor> outputs;
  std::vector<std::unique_ptr<comm::Work>> works;
  for (const Bucket& b : buckets_) {
    const int64_t n = b.numel / world;
    at::Tensor staged = staging_.narrow(0, b.buffer_offset, n);
    staged.copy_(flat().params().narrow(0, b.shard_offset, n));
    outputs.push_back(flat().params().narrow(0, b.offset, b.numel));
    works.push_back(group_->AllGatherAsync(staged, outputs.back()));
  }
  absl::Status status;
  for (size_t k = 0; k < works.size(); ++k) {
    absl::Status wait = works[k]->Wait();
    if (!wait.ok() && status.ok()) {
      status = Annotate(wait, absl::StrCat(name(),
                                           ": all-gather of parameter "
                                           "bucket ",
                                           k, " of ", buckets_.size(),
                                           " on rank ", group_->rank()));
    }
  }
  return status;
}

absl::StatusOr<StepResult> ZeroStrategy::Step(int64_t step) {
  if (step < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("step must be >= 0, got ", step));
  }
  STRATA_RETURN_IF_ERROR(FinishGradients());
  const double max_norm = config_.grad_clip > 0
                              ? config_.grad_clip
                              : std::numeric_limits<double>::infinity();
  StepResult result;
  if (stage2()) {
    absl::Status reduce_status;
    result.grad_norm =
        optim::ClipGradNorm(grad_shard_, max_norm, [&](double local) {
          at::Tensor sum = at::full({1}, local, at::kDouble);
          reduce_status = group_->AllReduce(sum, comm::ReduceOp::kSum);
          return reduce_status.ok() ? sum.item<double>()
                                    : std::numeric_limits<double>::quiet_NaN();
        });
    STRATA_RETURN_IF_ERROR(
        Annotate(reduce_status, absl::StrCat(name(),
                                             ": all-reduce of the gradient "
                                             "norm on rank ",
                                             group_->rank())));
  } else {
    // Gradients are replicated after the all-reduce: the local norm is the
    // global one.
    result.grad_norm = optim::ClipGradNorm(flat().grads(), max_norm);
  }
  result.lr = schedule_->LrAt(step);
  for (optim::Optimizer* optimizer : optimizers_) optimizer->Step(result.lr);
  STRATA_RETURN_IF_ERROR(GatherParameters());
  return result;
}

MemoryReport ZeroStrategy::Memory() const {
  MemoryReport report;
  report.parameter_bytes = flat().params().nbytes();
  // The full flat gradient buffer stays allocated (autograd accumulates into
  // it); zero2 adds its gradient shard buffer.
  report.gradient_bytes = flat().grads().nbytes();
  if (grad_shard_.defined()) report.gradient_bytes += grad_shard_.nbytes();
  for (optim::Optimizer* optimizer : optimizers_) {
    for (const auto& [key, tensor] : optimizer->State()) {
      report.optimizer_bytes += tensor.nbytes();
    }
  }
  report.communication_bytes = staging_.nbytes();
  return report;
}

std::vector<ShardedTensor> ZeroStrategy::OptimizerState() const {
  std::vector<ShardedTensor> out;
  const int64_t world = group_->size();
  for (size_t k = 0; k < buckets_.size(); ++k) {
    const Bucket& b = buckets_[k];
    const int64_t begin = b.shard_offset, end = begin + b.numel / world;
    optim::NamedTensors state = optimizers_[k]->State();
    for (size_t i : b.entries) {
      const optim::FlatParameters::Entry& e = flat().entries()[i];
      const int64_t lo = std::max(begin, e.offset);
      const int64_t hi = std::min(end, e.offset + e.numel);
      if (lo >= hi) continue;
      for (const auto& [key, tensor] : state) {
        if (key == "step") continue;
        out.push_back({absl::StrCat(e.name, ".", key), e.shape, lo - e.offset,
                       tensor.narrow(0, lo - begin, hi - lo)});
      }
    }
  }
  for (const auto& [key, tensor] : optimizers_.front()->State()) {
    if (key == "step") out.push_back({"step", {}, 0, tensor});
  }
  return out;
}

}  // namespace strata::strategies
