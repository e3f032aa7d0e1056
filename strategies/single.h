// SingleStrategy: one process, no communication. The model's parameters
// become views of one flat buffer (optim::FlatParameters), updated by AdamW
// (weight decay on matrices only), with global-norm clipping and an lr
// schedule: the reference every other strategy is checked against.
//
// DdpStrategy derives from it: it lays the flat buffer out in another order
// and communicates gradients through the protected hooks below.
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
      const optim::LrScheduleOptions& schedule);

  std::string name() const override { return "single"; }
  void ZeroGrad() override;
  absl::StatusOr<double> ForwardBackward(const at::Tensor& inputs,
                                         const at::Tensor& targets,
                                         double loss_weight,
                                         bool last_micro_batch) override;
  absl::StatusOr<StepResult> Step(int64_t step) override;
  MemoryReport Memory() const override;
  std::vector<ShardedTensor> ModelState() const override;
  std::vector<ShardedTensor> OptimizerState() const override;

  const optim::FlatParameters& flat() const { return *flat_; }

 protected:
  // The parts a strategy over one flat buffer is made of.
  struct Parts {
    std::unique_ptr<optim::FlatParameters> flat;
    std::unique_ptr<optim::Optimizer> optimizer;
    std::unique_ptr<optim::LrSchedule> schedule;
  };
  // Flattens `model`'s parameters, in registration order or, with
  // `reverse_order`, the reverse of it, and builds AdamW and the schedule.
  static absl::StatusOr<Parts> BuildParts(const models::UnitModel& model,
                                          const OptimizerConfig& config,
                                          const optim::LrScheduleOptions& lr,
                                          bool reverse_order);

  SingleStrategy(std::shared_ptr<models::UnitModel> model,
                 const OptimizerConfig& config, Parts parts);

  // Called before the forward of a micro-batch, after its backward (only
  // when forward and backward succeeded), and by Step before clipping (to
  // complete gradient communication). Defaults do nothing.
  virtual absl::Status BeforeMicroBatch(bool last_micro_batch);
  virtual absl::Status AfterBackward(bool last_micro_batch);
  virtual absl::Status FinishGradients();

  optim::FlatParameters& mutable_flat() { return *flat_; }

 private:
  OptimizerConfig config_;
  std::unique_ptr<optim::FlatParameters> flat_;
  std::unique_ptr<optim::Optimizer> optimizer_;
  std::unique_ptr<optim::LrSchedule> schedule_;
};

}  // namespace strata::strategies

#endif  // STRATA_STRATEGIES_SINGLE_H_
