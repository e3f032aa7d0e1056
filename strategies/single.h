// SingleStrategy: one process, no communication. The model's parameters
// become views of one flat buffer (optim::FlatParameters), updated by the
// optimizer OptimizerConfig names (AdamW, Adam or SGD; weight decay on
// matrices only), with global-norm clipping and an lr schedule: the
// reference every other strategy is checked against.
//
// Mixed precision (MixedPrecisionOptions::param_dtype bf16): the flat buffer
// (and so the model's parameters and the gradients autograd writes) is bf16;
// the optimizer runs on an fp32 master copy of it with fp32 state.
// After every micro-batch's backward the bf16 gradients are added into an
// fp32 accumulation buffer and zeroed, so accumulation across micro-batches
// is fp32; clipping and the step read the fp32 buffer, and after the step
// the bf16 parameters are re-derived from the masters. ModelState() is the
// fp32 masters. This "bf16 single" is the reference for mixed-precision
// DDP and ZeRO.
//
// DdpStrategy and ZeroStrategy derive from it: they lay the flat buffer out
// in another order and communicate gradients through Strategy's hooks
// (BeforeMicroBatch, AfterMicroBatch) and FinishGradients below.
#ifndef STRATA_STRATEGIES_SINGLE_H_
#define STRATA_STRATEGIES_SINGLE_H_

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "models/unit.h"
#include "optim/flat_parameters.h"
#include "optim/lr_schedule.h"
#include "optim/optimizer.h"
#include "strategies/strategy.h"

namespace strata::strategies {

class SingleStrategy : public Strategy {
 public:
  // Flattens `model`'s parameters (in registration order) and builds the
  // optimizer and schedule. Errors name the bad option.
  static absl::StatusOr<std::unique_ptr<SingleStrategy>> Create(
      std::shared_ptr<models::UnitModel> model, const OptimizerConfig& config,
      const optim::LrScheduleOptions& schedule,
      const MixedPrecisionOptions& mixed_precision = {});

  std::string name() const override { return "single"; }
  void ZeroGrad() override;
  MemoryReport Memory() const override;
  const OptimizerConfig& optimizer_config() const override { return config_; }
  std::vector<ShardedTensor> ModelState() const override;
  std::vector<ShardedTensor> OptimizerState() const override;
  // Mixed precision: re-derives the model's bf16 parameters from the fp32
  // masters. Otherwise nothing to do.
  absl::Status AfterStateLoaded() override;

  // The flat buffer the model's parameters are views of (bf16 with mixed
  // precision).
  const optim::FlatParameters& flat() const { return *flat_; }
  const MixedPrecisionOptions& mixed_precision() const {
    return mixed_precision_;
  }
  bool mixed() const { return master_params_.defined(); }

 protected:
  // The parts a strategy over one flat buffer is made of.
  struct Parts {
    std::unique_ptr<optim::FlatParameters> flat;
    std::unique_ptr<optim::Optimizer> optimizer;
    std::unique_ptr<optim::LrSchedule> schedule;
    // Mixed precision only (undefined otherwise): the fp32 master
    // parameters (the whole flat buffer, or this rank's shard of it for
    // ZeRO) and the full-size fp32 gradient accumulation buffer (ZeRO-2
    // releases its memory between steps).
    at::Tensor master_params;
    at::Tensor master_grads;
  };
  // Casts `model`'s buffers to mixed_precision.buffer_dtype, flattens its
  // parameters, in registration order or, with `reverse_order`, the reverse
  // of it (in param_dtype, with fp32 masters below fp32), and builds the
  // optimizer (CreateOptimizer, over the fp32 buffers) and the schedule.
  static absl::StatusOr<Parts> BuildParts(
      models::UnitModel& model, const OptimizerConfig& config,
      const optim::LrScheduleOptions& lr, bool reverse_order,
      const MixedPrecisionOptions& mixed_precision);

  SingleStrategy(std::shared_ptr<models::UnitModel> model,
                 const OptimizerConfig& config, Parts parts,
                 const MixedPrecisionOptions& mixed_precision);

  // Strategy's hook: after a successful backward, folds the gradients
  // (mixed precision). Derived strategies that communicate override it.
  absl::Status AfterMicroBatch(bool last_micro_batch,
                               absl::Status backward) override;
  // Completes gradient communication, then clips and steps the optimizer.
  absl::StatusOr<StepResult> DoStep(int64_t step) override;
  // Called by DoStep before clipping, to complete gradient communication.
  // The default does nothing.
  virtual absl::Status FinishGradients();
  // The group DoStep agrees on gradient overflow over (loss scaling;
  // Strategy::UnscaleGradients): null for one process (the default).
  virtual comm::Group* step_group() const { return nullptr; }

  optim::FlatParameters& mutable_flat() { return *flat_; }

  // The fp32 master parameters: Parts::master_params with mixed precision,
  // else flat().params().
  at::Tensor master_params() const {
    return mixed() ? master_params_ : flat_->params();
  }
  // The full-size fp32 buffer gradients are accumulated in and clipped from:
  // Parts::master_grads with mixed precision, else flat().grads().
  at::Tensor accumulated_grads() const {
    return mixed() ? master_grads_ : flat_->grads();
  }
  // Mixed precision: adds flat().grads()'s elements [offset, offset + numel)
  // into accumulated_grads() and zeroes them. No-op otherwise.
  void FoldGradients(int64_t offset, int64_t numel);
  // Mixed precision: flat().params() = master_params(), cast. No-op
  // otherwise (ZeRO overrides AfterStateLoaded: its masters are a shard).
  void RefreshComputeParameters();

 private:
  OptimizerConfig config_;
  MixedPrecisionOptions mixed_precision_;
  std::unique_ptr<optim::FlatParameters> flat_;
  std::unique_ptr<optim::Optimizer> optimizer_;
  std::unique_ptr<optim::LrSchedule> schedule_;
  at::Tensor master_params_;
  at::Tensor master_grads_;
};

}  // namespace strata::strategies

#endif  // STRATA_STRATEGIES_SINGLE_H_
