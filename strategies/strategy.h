// strategies::Strategy: how a model is trained across ranks, in the spirit of
// mmengine's strategy `prepare`: a strategy takes a model (and the process
// group), owns its flat parameters, optimizer and gradient communication, and
// runs micro-batches and optimizer steps. Five strategies implement it
// (README.md): "single" (single.h) runs in one process with no communication;
// "ddp" (ddp.h) replicates the model and all-reduces gradients in buckets,
// overlapped with backward; "zero1" and "zero2" (zero.h) shard the optimizer
// state (and, zero2, the gradients) over the ranks; "fsdp" (fsdp.h) shards
// parameters, gradients and optimizer state per unit of the model. Create one
// with CreateStrategy (factory.h).
//
// The contract is enforced here, once, for every strategy (a non-virtual
// interface): ForwardBackward and Step check their arguments and the order of
// micro-batches and steps, convert exceptions thrown by the model or autograd
// into a Status, and report an error latched by a strategy's hooks; the
// strategy implements the work through the protected virtual hooks
// (BeforeMicroBatch, AfterMicroBatch, DoStep).
#ifndef STRATA_STRATEGIES_STRATEGY_H_
#define STRATA_STRATEGIES_STRATEGY_H_

#include <ATen/core/Tensor.h>
#include <c10/core/ScalarType.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "base/sharded_tensor.h"
#include "comm/group.h"
#include "models/unit.h"
#include "optim/loss_scaler.h"
#include "strategies/options.h"

namespace strata::strategies {

struct StepResult {
  // Global L2 norm of the gradients before clipping.
  double grad_norm = 0;
  // The learning rate the step used.
  double lr = 0;
  // With loss scaling: whether the gradients held an inf/NaN on some rank,
  // so that every rank skipped the optimizer step (grad_norm is then
  // infinite and the parameters are unchanged), and the scale this step's
  // losses were multiplied by (1 without loss scaling).
  bool skipped = false;
  double loss_scale = 1;
};

// Per-rank bytes of model state a strategy keeps, counted from the tensors it
// holds.
// With mixed precision, parameter_bytes counts the low-precision compute
// copy and the fp32 master parameters, gradient_bytes the low-precision
// gradients autograd writes and the fp32 accumulation buffer.
struct MemoryReport {
  int64_t parameter_bytes = 0;
  int64_t gradient_bytes = 0;
  int64_t optimizer_bytes = 0;
  int64_t communication_bytes = 0;
  // Gradient storage allocated only during a step and released when its
  // gradients are reduced (ZeRO-2's per-bucket gradients): the most held at
  // once so far (a high-water mark). gradient_bytes counts what is held when
  // Memory() is called.
  int64_t transient_gradient_bytes = 0;
};

class Strategy {
 public:
  virtual ~Strategy() = default;
  Strategy(const Strategy&) = delete;
  Strategy& operator=(const Strategy&) = delete;

  // StrategyKindName of the strategy's kind: "single", "ddp", "zero1",
  // "zero2" or "fsdp". Error messages start with it.
  virtual std::string name() const = 0;
  models::UnitModel& model() { return *model_; }
  const std::shared_ptr<models::UnitModel>& shared_model() const {
    return model_;
  }

  // Before the first micro-batch of a step.
  virtual void ZeroGrad() = 0;

  // Forward + loss + backward of one micro-batch: the model's
  // ForwardLoss(inputs, targets) (token models: inputs and targets [B, T]
  // int64; other models what their ForwardLoss documents, e.g. models/vit.h's
  // images and labels). Floating-point inputs are first cast to the dtype
  // the model's parameters compute in (the param_dtype of mixed precision,
  // else fp32; autocast casts inside the model instead); integer inputs
  // (token ids) and the targets are passed as they are. The loss is multiplied
  // by `loss_weight` before backward: the micro-batch's share of the batch this
  // rank processes in the step (micro-batch size / per-rank batch size; for
  // "single" the per-rank batch is the global batch; data-parallel strategies
  // average gradients across ranks, so equal per-rank batches give the gradient
  // of the global mean loss). Gradients are complete after the backward of the
  // micro-batch with last_micro_batch = true. Returns the unweighted loss. With
  // loss scaling (OptimizerConfig::loss_scaling) backward runs on loss *
  // loss_weight * loss_scaler()->scale().
  //
  // Errors: InvalidArgument for a loss_weight that is not finite and > 0;
  // FailedPrecondition after the step's last micro-batch (call Step()
  // first); an error a hook latched earlier (every later call returns it);
  // the model's or autograd's exception as a Status (StatusFromCall).
  absl::StatusOr<double> ForwardBackward(const at::Tensor& inputs,
                                         const at::Tensor& targets,
                                         double loss_weight,
                                         bool last_micro_batch);

  // Completes gradient communication, clips to grad_clip by global norm and
  // steps the optimizer with the schedule's lr at `step` (>= 0). With loss
  // scaling it first divides the gradients by the scale, skips clipping and
  // the optimizer on every rank when any rank found an inf/NaN
  // (StepResult::skipped), and then updates the scale. Call once
  // per step, after the ForwardBackward with last_micro_batch = true
  // (FailedPrecondition otherwise); the next ForwardBackward starts a new
  // step, whether this Step succeeded or not.
  absl::StatusOr<StepResult> Step(int64_t step);

  // The loss scaler (OptimizerConfig::loss_scaling), owned; null without
  // loss scaling. The mutable one may be changed between steps only (e.g.
  // LoadState from a checkpoint); the same on every rank.
  const optim::LossScaler* loss_scaler() const { return loss_scaler_.get(); }
  optim::LossScaler* mutable_loss_scaler() { return loss_scaler_.get(); }

  virtual MemoryReport Memory() const = 0;
  // The optimizer the strategy runs (CreateOptimizer): its kind and options.
  virtual const OptimizerConfig& optimizer_config() const = 0;
  // Parameter names as in the model; with mixed precision, the fp32 master
  // values (the model's own parameters are low-precision copies of them).
  virtual std::vector<ShardedTensor> ModelState() const = 0;
  // "<param>.<key>" per parameter for each state tensor of the optimizer
  // (AdamW and Adam: exp_avg, exp_avg_sq; SGD with momentum:
  // momentum_buffer), and "step".
  virtual std::vector<ShardedTensor> OptimizerState() const = 0;

  // Every parameter's full fp32 value, in the model's named_parameters()
  // order, on every rank (e.g. to save a state dict). A collective for
  // strategies whose state is sharded; call between steps. The default
  // copies ModelState(), which must then hold whole tensors (Unimplemented
  // otherwise).
  virtual absl::StatusOr<std::vector<std::pair<std::string, at::Tensor>>>
  FullModelState();

  // Call after writing new values into the tensors of ModelState() and
  // OptimizerState() (a checkpoint load), on every rank, before the next
  // ForwardBackward: re-derives what depends on them (low-precision compute
  // copies, gathered or replicated parameters). A collective for strategies
  // that communicate. The default does nothing.
  virtual absl::Status AfterStateLoaded() { return absl::OkStatus(); }

 protected:
  // `config` must be valid (ValidateOptimizerConfig; CHECKed): its
  // loss_scaling makes the loss scaler. `param_dtype`: the dtype the
  // model's parameters compute in (MixedPrecisionOptions::param_dtype),
  // which ForwardBackward casts floating-point inputs to.
  Strategy(std::shared_ptr<models::UnitModel> model,
           const OptimizerConfig& config,
           at::ScalarType param_dtype = at::kFloat);

  // The hooks ForwardBackward and Step call once their guards passed, on the
  // training thread.
  //
  // Before a micro-batch's forward. An error is returned at once (nothing
  // ran; the micro-batch does not count). The default does nothing.
  virtual absl::Status BeforeMicroBatch(bool last_micro_batch);
  // After the micro-batch's forward and backward with their outcome
  // `backward` (OK, or the exception they threw as a Status); returns the
  // micro-batch's status. Called whenever BeforeMicroBatch succeeded. The
  // default returns `backward`.
  virtual absl::Status AfterMicroBatch(bool last_micro_batch,
                                       absl::Status backward);
  // Step's work: `step` >= 0, the step's last micro-batch has run. With loss
  // scaling it must call UnscaleGradients once, on the reduced gradients
  // before clipping, and when that returns true (skip) neither clip nor step
  // the optimizer; Step updates the scale afterwards.
  virtual absl::StatusOr<StepResult> DoStep(int64_t step) = 0;

  // For DoStep. Without loss scaling: returns false and touches nothing.
  // With it: divides `grads` (this rank's reduced gradients: all of them, or
  // its shard; fp32/bf16/fp16, contiguous) in place by the step's scale and
  // returns whether any rank found an inf/NaN, agreed by an all-reduce (max)
  // over `group` (borrowed; null: this process alone, or gradients already
  // identical on every rank). A collective when `group` is set: every rank
  // of it calls it in the same step. Errors name the strategy and the rank.
  absl::StatusOr<bool> UnscaleGradients(at::Tensor grads, comm::Group* group);

  // Latches the first error of a hook that runs outside ForwardBackward's and
  // Step's control (autograd hooks, interceptors): every later
  // ForwardBackward and Step returns it. Later errors are dropped.
  void LatchError(const absl::Status& status);
  // The latched error, or OK.
  const absl::Status& latched_error() const { return latched_error_; }
  // Whether the step's last micro-batch has run and Step() not yet.
  bool last_micro_batch_done() const { return last_micro_batch_done_; }

 private:
  std::shared_ptr<models::UnitModel> model_;
  at::ScalarType param_dtype_;
  // The step's last micro-batch has run (successfully or not) and Step() has
  // not been called since.
  bool last_micro_batch_done_ = false;
  absl::Status latched_error_;
  std::unique_ptr<optim::LossScaler> loss_scaler_;
  // This step's UnscaleGradients ran, and what it found.
  bool unscaled_ = false;
  bool found_inf_ = false;
};

}  // namespace strata::strategies

#endif  // STRATA_STRATEGIES_STRATEGY_H_
