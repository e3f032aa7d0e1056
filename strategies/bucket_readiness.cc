#include "strategies/bucket_readiness.h"

#include <glog/logging.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace strata::strategies {

class BucketReadiness::ReadyHook : public torch::autograd::FunctionPostHook {
 public:
  ReadyHook(BucketReadiness* owner, size_t entry)
      : owner_(owner), entry_(entry) {}
  torch::autograd::variable_list operator()(
      const torch::autograd::variable_list& outputs,
      const torch::autograd::variable_list& inputs) override {
    // An accumulator called without a gradient (a parameter of a
    // recomputed unit that the recomputation did not use) is not ready.
    if (inputs.empty() || !inputs[0].defined()) return outputs;
    owner_->MarkReady(entry_, owner_->hook_launch_);
    return outputs;
  }

 private:
  BucketReadiness* const owner_;
  const size_t entry_;
};

BucketReadiness::BucketReadiness(
    std::vector<std::vector<size_t>> bucket_entries,
    std::vector<bool> requires_grad)
    : bucket_entries_(std::move(bucket_entries)),
      requires_grad_(std::move(requires_grad)),
      buckets_of_entry_(requires_grad_.size()),
      entry_ready_(requires_grad_.size(), false),
      pending_(bucket_entries_.size(), 0) {
  for (size_t k = 0; k < bucket_entries_.size(); ++k) {
    for (size_t i : bucket_entries_[k]) {
      CHECK_LT(i, requires_grad_.size());
      buckets_of_entry_[i].push_back(k);
    }
  }
}

std::unique_ptr<BucketReadiness> BucketReadiness::ForFlatParameters(
    const optim::FlatParameters& flat,
    std::vector<std::vector<size_t>> bucket_entries, LaunchFn launch) {
  std::vector<bool> requires_grad;
  std::vector<at::Tensor> parameters;
  for (size_t i = 0; i < flat.entries().size(); ++i) {
    requires_grad.push_back(flat.entries()[i].requires_grad);
    parameters.push_back(flat.parameter(i));
  }
  auto readiness = std::make_unique<BucketReadiness>(std::move(bucket_entries),
                                                     std::move(requires_grad));
  readiness->AddHooks(parameters, std::move(launch));
  return readiness;
}

BucketReadiness::~BucketReadiness() { RemoveHooks(); }

void BucketReadiness::AddHooks(const std::vector<at::Tensor>& parameters,
                               LaunchFn launch) {
  CHECK(hooks_.empty());
  CHECK_EQ(parameters.size(), requires_grad_.size());
  hook_launch_ = std::move(launch);
  for (size_t i = 0; i < parameters.size(); ++i) {
    if (!requires_grad_[i]) continue;
    std::shared_ptr<torch::autograd::Node> accumulator =
        torch::autograd::impl::grad_accumulator(parameters[i]);
    CHECK(accumulator != nullptr) << "entry " << i;
    const uintptr_t key =
        accumulator->add_post_hook(std::make_unique<ReadyHook>(this, i));
    hooks_.emplace_back(std::move(accumulator), key);
  }
}

void BucketReadiness::RemoveHooks() {
  for (const auto& [node, key] : hooks_) node->del_post_hook(key);
  hooks_.clear();
}

void BucketReadiness::Arm() {
  std::fill(entry_ready_.begin(), entry_ready_.end(), false);
  for (size_t k = 0; k < bucket_entries_.size(); ++k) {
    pending_[k] = 0;
    for (size_t i : bucket_entries_[k]) {
      if (requires_grad_[i]) ++pending_[k];
    }
  }
  next_bucket_ = 0;
  armed_ = true;
}

void BucketReadiness::MarkReady(size_t entry, const LaunchFn& launch) {
  if (!armed_ || entry_ready_[entry]) return;
  entry_ready_[entry] = true;
  for (size_t k : buckets_of_entry_[entry]) --pending_[k];
  while (next_bucket_ < pending_.size() && pending_[next_bucket_] == 0) {
    launch(next_bucket_++);
  }
}

void BucketReadiness::LaunchRemaining(const LaunchFn& launch) {
  while (next_bucket_ < pending_.size()) launch(next_bucket_++);
}

std::vector<size_t> BucketReadiness::UnreadyEntries() const {
  std::vector<size_t> unready;
  for (size_t i = 0; i < entry_ready_.size(); ++i) {
    if (requires_grad_[i] && !entry_ready_[i]) unready.push_back(i);
  }
  return unready;
}

absl::Status BucketReadiness::BeforeMicroBatch(const std::string& owner,
                                               bool last_micro_batch) {
  if (complete_ || armed_) {
    return absl::FailedPreconditionError(absl::StrCat(
        owner,
        ": ForwardBackward called after the step's last micro-batch "
        "(last_micro_batch = true) without Step() in between"));
  }
  if (last_micro_batch) Arm();
  return absl::OkStatus();
}

void BucketReadiness::AfterBackward(bool last_micro_batch) {
  if (!last_micro_batch) return;
  armed_ = false;
  complete_ = true;
}

void BucketReadiness::ResetStep() {
  armed_ = false;
  complete_ = false;
}

absl::Status BucketReadiness::CompleteStep(
    const std::string& owner, bool allow_unused,
    const std::function<std::string(size_t entry)>& entry_name,
    const LaunchFn& launch) {
  if (!complete()) {
    // A backward that threw leaves the readiness armed; the owner resets it.
    return absl::FailedPreconditionError(absl::StrCat(
        owner,
        ": Step() needs a completed ForwardBackward with last_micro_batch = "
        "true first"));
  }
  std::vector<std::string> unused;
  for (size_t i : UnreadyEntries()) unused.push_back(entry_name(i));
  if (!unused.empty() && !allow_unused) {
    return absl::FailedPreconditionError(absl::StrCat(
        owner, ": parameters got no gradient in the last backward: ",
        absl::StrJoin(unused, ", "),
        "; use them in the loss, set requires_grad = false, or set "
        "allow_unused_parameters (--allow_unused_parameters) to reduce their "
        "zero gradients at Step()"));
  }
  LaunchRemaining(launch);
  return absl::OkStatus();
}

}  // namespace strata::strategies
