// BucketReadiness: the per-step bookkeeping shared by the bucketed,
// backward-overlapped gradient communication of DdpStrategy (ddp.h) and
// ZeroStrategy (zero.h).
//
// A strategy cuts its flat parameters ("entries", indices into
// FlatParameters::entries()) into buckets; an entry belongs to one bucket
// (DDP) or, when it straddles a bucket boundary, to several (ZeRO). During the
// backward of a step's last micro-batch a post-hook on every requires_grad
// parameter's gradient accumulator marks its entry ready; a bucket is complete
// when all its requires_grad entries are ready, and buckets are launched
// strictly in bucket order, each as soon as it and every bucket before it are
// complete, so that the launch order is the same on every rank. What "launch"
// means (all-reduce, reduce-scatter) is the strategy's: it passes a callback.
//
// Per-step lifecycle, driven by the strategy:
//   BeforeMicroBatch(owner, last)  every micro-batch; arms on the last one.
//   AfterBackward(last)            every micro-batch; on the last one disarms
//                                  and records that the gradients are complete.
//   complete(), UnreadyEntries(), LaunchRemaining(launch)  at Step().
//   ResetStep()                    at the end of Step(), or after a failure.
// Arm() and Disarm() are the primitives BeforeMicroBatch and AfterBackward
// use; they may also be called directly.
//
// Threading: not thread-safe. All methods, including the hooks (which autograd
// runs on the thread that calls backward, on CPU), must be called from the
// training thread.
#ifndef STRATA_STRATEGIES_BUCKET_READINESS_H_
#define STRATA_STRATEGIES_BUCKET_READINESS_H_

#include <ATen/core/Tensor.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "optim/flat_parameters.h"

namespace torch::autograd {
struct Node;
}  // namespace torch::autograd

namespace strata::strategies {

class BucketReadiness {
 public:
  // Called with a bucket index to start that bucket's communication.
  using LaunchFn = std::function<void(size_t bucket)>;

  // bucket_entries[k]: the entries of bucket k; an entry may appear in
  // several buckets. requires_grad[i]: whether entry i gets a gradient (only
  // those are waited for). Every entry index must be < requires_grad.size().
  BucketReadiness(std::vector<std::vector<size_t>> bucket_entries,
                  std::vector<bool> requires_grad);
  // Removes the hooks (RemoveHooks()).
  ~BucketReadiness();

  BucketReadiness(const BucketReadiness&) = delete;
  BucketReadiness& operator=(const BucketReadiness&) = delete;

  // A BucketReadiness over flat.entries() (requires_grad from each entry)
  // with hooks on flat's parameters launching with `launch`. `flat` is only
  // read here; its parameters must outlive the result's hooks.
  static std::unique_ptr<BucketReadiness> ForFlatParameters(
      const optim::FlatParameters& flat,
      std::vector<std::vector<size_t>> bucket_entries, LaunchFn launch);

  size_t num_buckets() const { return pending_.size(); }

  // Adds a post-hook to the gradient accumulator of parameters[i] for every
  // requires_grad entry i (parameters has one tensor per entry; those of
  // entries without requires_grad are not used). Each hook calls
  // MarkReady(i, launch). The hooks point to this object: it keeps the
  // accumulators alive and removes the hooks at RemoveHooks() or destruction.
  // Call at most once.
  void AddHooks(const std::vector<at::Tensor>& parameters, LaunchFn launch);
  // Removes the hooks added by AddHooks(), if any; idempotent.
  void RemoveHooks();

  // Starts counting: every entry unready, every bucket pending on its
  // requires_grad entries, no bucket launched.
  void Arm();
  // Stops counting: MarkReady() does nothing until the next Arm().
  void Disarm() { armed_ = false; }
  bool armed() const { return armed_; }

  // Marks `entry` ready (once per Arm(); no-op while disarmed) and calls
  // launch(k) for each next bucket k, in order, while it is complete.
  void MarkReady(size_t entry, const LaunchFn& launch);
  // Calls launch(k) for every bucket not launched yet, in order.
  void LaunchRemaining(const LaunchFn& launch);
  // The requires_grad entries not marked ready since the last Arm().
  std::vector<size_t> UnreadyEntries() const;

  // Step lifecycle. BeforeMicroBatch fails (FailedPrecondition, message
  // prefixed with "<owner>: ") when called after the step's last micro-batch
  // without ResetStep() in between; otherwise it arms on the last micro-batch.
  absl::Status BeforeMicroBatch(const std::string& owner,
                                bool last_micro_batch);
  // On the last micro-batch: disarms and marks the gradients complete.
  void AfterBackward(bool last_micro_batch);
  // Whether the last micro-batch's backward finished since ResetStep().
  bool complete() const { return complete_; }
  // Disarms and forgets completion: the next step starts afresh.
  void ResetStep();

  // Ends the step's gradient phase at Step(), before the owner waits for its
  // bucket work and calls ResetStep(). FailedPrecondition (prefixed with
  // "<owner>: ") if the step's last micro-batch did not complete, or if
  // requires_grad entries got no gradient and !allow_unused (naming them via
  // `entry_name`); otherwise launches every bucket not launched yet. On error
  // the owner still waits for (and drops) the work already launched.
  absl::Status CompleteStep(
      const std::string& owner, bool allow_unused,
      const std::function<std::string(size_t entry)>& entry_name,
      const LaunchFn& launch);

 private:
  class ReadyHook;

  const std::vector<std::vector<size_t>> bucket_entries_;
  const std::vector<bool> requires_grad_;
  // Per entry: the buckets it belongs to.
  std::vector<std::vector<size_t>> buckets_of_entry_;
  // The callback the hooks launch with; set by AddHooks().
  LaunchFn hook_launch_;
  // Gradient accumulators kept alive, with the keys of our hooks.
  std::vector<std::pair<std::shared_ptr<torch::autograd::Node>, uintptr_t>>
      hooks_;

  // Per-step state.
  bool armed_ = false;     // In the last micro-batch's backward.
  bool complete_ = false;  // Its backward finished.
  std::vector<bool> entry_ready_;
  std::vector<int64_t> pending_;  // Per bucket: entries not yet ready.
  size_t next_bucket_ = 0;        // Next bucket to launch.
};

}  // namespace strata::strategies

#endif  // STRATA_STRATEGIES_BUCKET_READINESS_H_
