#include "strategies/ddp.h"

#include <ATen/ATen.h>
#include <glog/logging.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status.h"
#include "strategies/replicas.h"

namespace strata::strategies {
namespace {}  // namespace

class DdpStrategy::ReadyHook : public torch::autograd::FunctionPostHook {
 public:
  ReadyHook(DdpStrategy* owner, size_t entry) : owner_(owner), entry_(entry) {}
  torch::autograd::variable_list operator()(
      const torch::autograd::variable_list& outputs,
      const torch::autograd::variable_list& /*inputs*/) override {
    owner_->MarkReady(entry_);
    return outputs;
  }

 private:
  DdpStrategy* const owner_;
  const size_t entry_;
};

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
  STRATA_ASSIGN_OR_RETURN(Parts parts, BuildParts(*model, config, schedule,
                                                  /*reverse_order=*/true));
  STRATA_RETURN_IF_ERROR(
      BroadcastFromRankZero(*group, "ddp", *model, parts.flat->params()));
  std::unique_ptr<DdpStrategy> strategy(new DdpStrategy(
      std::move(model), config, std::move(parts), options, group));
  strategy->BuildBuckets();
  strategy->AddHooks();
  return strategy;
}

DdpStrategy::DdpStrategy(std::shared_ptr<models::UnitModel> model,
                         const OptimizerConfig& config, Parts parts,
                         const StrategyOptions& options, comm::Group* group)
    : SingleStrategy(std::move(model), config, std::move(parts)),
      options_(options),
      group_(group) {}

DdpStrategy::~DdpStrategy() {
  for (const auto& [node, key] : hooks_) node->del_post_hook(key);
  for (auto& work : works_) {
    absl::Status status = work->Wait();
    if (!status.ok()) LOG(WARNING) << "ddp: at destruction: " << status;
  }
}

void DdpStrategy::BuildBuckets() {
  const auto& entries = flat().entries();
  const int64_t elem = flat().grads().element_size();
  bucket_of_entry_.assign(entries.size(), 0);
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
    bucket_of_entry_[i] = buckets_.size();
  }
  if (!current.entries.empty()) buckets_.push_back(std::move(current));
  // Padding (none with align 1) would belong to no bucket.
  CHECK_EQ(buckets_.back().offset + buckets_.back().numel, flat().numel());
  for (const Bucket& b : buckets_) {
    bucket_views_.push_back(flat().grads().narrow(0, b.offset, b.numel));
  }
  pending_.assign(buckets_.size(), 0);
  entry_ready_.assign(entries.size(), false);
  VLOG(1) << "ddp: " << buckets_.size() << " buckets over " << entries.size()
          << " parameters";
}

void DdpStrategy::AddHooks() {
  for (size_t i = 0; i < flat().entries().size(); ++i) {
    if (!flat().entries()[i].requires_grad) continue;
    std::shared_ptr<torch::autograd::Node> accumulator =
        torch::autograd::impl::grad_accumulator(flat().parameter(i));
    CHECK(accumulator != nullptr) << flat().entries()[i].name;
    const uintptr_t key =
        accumulator->add_post_hook(std::make_unique<ReadyHook>(this, i));
    hooks_.emplace_back(std::move(accumulator), key);
  }
}

absl::Status DdpStrategy::BeforeMicroBatch(bool last_micro_batch) {
  if (gradients_ready_ || armed_) {
    return absl::FailedPreconditionError(
        "ddp: ForwardBackward called after the step's last micro-batch "
        "(last_micro_batch = true) without Step() in between");
  }
  if (!last_micro_batch) return absl::OkStatus();
  std::fill(entry_ready_.begin(), entry_ready_.end(), false);
  for (size_t b = 0; b < buckets_.size(); ++b) {
    pending_[b] = 0;
    for (size_t i : buckets_[b].entries) {
      if (flat().entries()[i].requires_grad) ++pending_[b];
    }
  }
  next_bucket_ = 0;
  armed_ = true;
  return absl::OkStatus();
}

absl::Status DdpStrategy::AfterBackward(bool last_micro_batch) {
  if (!last_micro_batch) return absl::OkStatus();
  armed_ = false;
  gradients_ready_ = true;
  return absl::OkStatus();
}

void DdpStrategy::MarkReady(size_t entry) {
  if (!armed_ || entry_ready_[entry]) return;
  entry_ready_[entry] = true;
  --pending_[bucket_of_entry_[entry]];
  while (next_bucket_ < buckets_.size() && pending_[next_bucket_] == 0) {
    LaunchBucket(next_bucket_++, /*from_backward=*/true);
  }
}

void DdpStrategy::LaunchBucket(size_t bucket, bool from_backward) {
  works_.push_back(
      group_->AllReduceAsync(bucket_views_[bucket], comm::ReduceOp::kAverage));
  ++(from_backward ? launched_in_backward_ : launched_at_step_);
}

void DdpStrategy::ResetStep() {
  armed_ = false;
  gradients_ready_ = false;
  works_.clear();
}

absl::Status DdpStrategy::FinishGradients() {
  if (!gradients_ready_) {
    // A backward that threw leaves armed_ set: start the next step afresh.
    for (auto& work : works_) work->Wait().IgnoreError();
    ResetStep();
    return absl::FailedPreconditionError(
        "ddp: Step() needs a completed ForwardBackward with "
        "last_micro_batch = true first");
  }
  std::vector<std::string> unused;
  for (size_t i = 0; i < entry_ready_.size(); ++i) {
    if (flat().entries()[i].requires_grad && !entry_ready_[i]) {
      unused.push_back(flat().entries()[i].name);
    }
  }
  absl::Status status;
  if (!unused.empty() && !options_.allow_unused_parameters) {
    status = absl::FailedPreconditionError(absl::StrCat(
        "ddp: parameters got no gradient in the last backward: ",
        absl::StrJoin(unused, ", "),
        "; use them in the loss, set requires_grad = false, or set "
        "allow_unused_parameters (--allow_unused_parameters) to reduce their "
        "zero gradients at Step()"));
  } else {
    while (next_bucket_ < buckets_.size()) {
      LaunchBucket(next_bucket_++, /*from_backward=*/false);
    }
  }
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
  ResetStep();
  return status;
}

}  // namespace strata::strategies
