#include "strategies/ddp.h"

#include <ATen/ATen.h>
#include <glog/logging.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status.h"
#include "strategies/replicas.h"

namespace strata::strategies {
absl::StatusOr<std::unique_ptr<DdpStrategy>> DdpStrategy::Create(
    const StrategyOptions& options, std::shared_ptr<models::UnitModel> model,
    comm::Group* group, const OptimizerConfig& config,
    const optim::LrScheduleOptions& schedule) {
  STRATA_RETURN_IF_ERROR(ValidateStrategyOptions(options));
  if (group == nullptr) {
    return absl::InvalidArgumentError(
        "--strategy ddp needs a process group, got none");
  }
  if (model == nullptr) {
    return absl::InvalidArgumentError("strategy 'ddp': model is null");
  }
  STRATA_RETURN_IF_ERROR(ValidateOptimizerConfig(config));
  STRATA_RETURN_IF_ERROR(optim::ValidateLrScheduleOptions(schedule));

  STRATA_RETURN_IF_ERROR(CheckSameModelOnAllRanks(*group, "ddp", *model));
  STRATA_ASSIGN_OR_RETURN(
      Parts parts, BuildParts(*model, config, schedule, /*reverse_order=*/true,
                              options.mixed_precision));
  // With mixed precision the fp32 masters are broadcast and the bf16
  // parameters derived from them, so every rank's compute copy is the same.
  STRATA_RETURN_IF_ERROR(BroadcastFromRankZero(*group, "ddp", *model,
                                               parts.master_params.defined()
                                                   ? parts.master_params
                                                   : parts.flat->params()));
  std::unique_ptr<DdpStrategy> strategy(new DdpStrategy(
      std::move(model), config, std::move(parts), options, group));
  strategy->RefreshComputeParameters();
  strategy->BuildBuckets();
  return strategy;
}

DdpStrategy::DdpStrategy(std::shared_ptr<models::UnitModel> model,
                         const OptimizerConfig& config, Parts parts,
                         const StrategyOptions& options, comm::Group* group)
    : SingleStrategy(std::move(model), config, std::move(parts),
                     options.mixed_precision),
      options_(options),
      group_(group) {}

DdpStrategy::~DdpStrategy() {
  readiness_.reset();  // Removes the hooks first.
  for (auto& work : works_) {
    absl::Status status = work->Wait();
    if (!status.ok()) LOG(WARNING) << "ddp: at destruction: " << status;
  }
}

void DdpStrategy::BuildBuckets() {
  const auto& entries = flat().entries();
  // Caps count bytes as communicated (reduce_dtype).
  const int64_t elem = c10::elementSize(options_.mixed_precision.reduce_dtype);
  Bucket current;
  int64_t cap = options_.first_bucket_bytes;
  for (size_t i = 0; i < entries.size(); ++i) {
    const auto& e = entries[i];
    if (!current.entries.empty() && (current.numel + e.numel) * elem > cap) {
      buckets_.push_back(std::move(current));
      current = Bucket();
      current.offset = e.offset;
      cap = options_.bucket_bytes;
    }
    if (current.entries.empty()) current.offset = e.offset;
    CHECK_EQ(current.offset + current.numel, e.offset);
    current.numel += e.numel;
    current.entries.push_back(i);
  }
  if (!current.entries.empty()) buckets_.push_back(std::move(current));
  // Padding (none with align 1) would belong to no bucket.
  CHECK_EQ(buckets_.back().offset + buckets_.back().numel, flat().numel());
  // What is communicated: the fp32 accumulated gradients themselves, or
  // with reduce_dtype bf16 a bf16 copy of them, in the bf16 gradient buffer
  // autograd writes (free once folded) or, for fp32 parameters, in a bf16
  // buffer of our own.
  const at::Tensor accumulated = accumulated_grads();
  at::Tensor communicated = accumulated;
  if (options_.mixed_precision.reduce_dtype != accumulated.scalar_type()) {
    if (flat().grads().scalar_type() == options_.mixed_precision.reduce_dtype) {
      communicated = flat().grads();
    } else {
      reduce_buffer_ = at::zeros(
          {flat().padded_numel()},
          accumulated.options().dtype(options_.mixed_precision.reduce_dtype));
      communicated = reduce_buffer_;
    }
  }
  cast_for_reduce_ = !communicated.is_same(accumulated);
  for (const Bucket& b : buckets_) {
    bucket_views_.push_back(communicated.narrow(0, b.offset, b.numel));
    accumulated_views_.push_back(accumulated.narrow(0, b.offset, b.numel));
  }
  std::vector<std::vector<size_t>> bucket_entries;
  for (const Bucket& b : buckets_) bucket_entries.push_back(b.entries);
  readiness_ = BucketReadiness::ForFlatParameters(
      flat(), std::move(bucket_entries),
      [this](size_t bucket) { LaunchBucket(bucket, /*from_backward=*/true); });
  VLOG(1) << "ddp: " << buckets_.size() << " buckets over " << entries.size()
          << " parameters";
}

absl::Status DdpStrategy::BeforeMicroBatch(bool last_micro_batch) {
  return readiness_->BeforeMicroBatch(name(), last_micro_batch);
}

absl::Status DdpStrategy::AfterMicroBatch(bool last_micro_batch,
                                          absl::Status backward) {
  STRATA_RETURN_IF_ERROR(backward);
  readiness_->AfterBackward(last_micro_batch);
  // The last micro-batch's gradients are folded bucket by bucket at launch.
  if (!last_micro_batch) FoldGradients(0, flat().padded_numel());
  return absl::OkStatus();
}

void DdpStrategy::LaunchBucket(size_t bucket, bool from_backward) {
  const Bucket& b = buckets_[bucket];
  FoldGradients(b.offset, b.numel);
  if (cast_for_reduce_) {
    at::NoGradGuard no_grad;
    bucket_views_[bucket].copy_(accumulated_views_[bucket]);
  }
  works_.push_back(
      group_->AllReduceAsync(bucket_views_[bucket], comm::ReduceOp::kAverage));
  ++(from_backward ? launched_in_backward_ : launched_at_step_);
}

void DdpStrategy::ResetStep() {
  readiness_->ResetStep();
  works_.clear();
}

absl::Status DdpStrategy::FinishGradients() {
  absl::Status status = readiness_->CompleteStep(
      absl::StrCat("ddp on rank ", group_->rank()),
      options_.allow_unused_parameters,
      [this](size_t entry) { return flat().entries()[entry].name; },
      [this](size_t bucket) { LaunchBucket(bucket, /*from_backward=*/false); });
  for (size_t k = 0; k < works_.size(); ++k) {
    absl::Status wait = works_[k]->Wait();
    if (!wait.ok() && status.ok()) {
      const Bucket& b = buckets_[k];
      status = Annotate(
          wait, absl::StrCat("ddp: all-reduce of gradient bucket ", k, " of ",
                             buckets_.size(), " (elements [", b.offset, ", ",
                             b.offset + b.numel, "), parameters '",
                             flat().entries()[b.entries.front()].name, "' .. '",
                             flat().entries()[b.entries.back()].name, "')"));
    }
  }
  if (status.ok() && cast_for_reduce_) {
    at::NoGradGuard no_grad;
    for (size_t k = 0; k < buckets_.size(); ++k) {
      accumulated_views_[k].copy_(bucket_views_[k]);
    }
  }
  ResetStep();
  return status;
}

MemoryReport DdpStrategy::Memory() const {
  MemoryReport report = SingleStrategy::Memory();
  if (reduce_buffer_.defined()) {
    report.communication_bytes += reduce_buffer_.nbytes();
  }
  return report;
}

}  // namespace strata::strategies
