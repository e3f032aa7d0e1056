// CreateStrategy: builds the strategy StrategyOptions::kind names (any of the
// five: README.md), with activation checkpointing when
// StrategyOptions::checkpoint_units is set.
//
// Usage (each rank; the group from comm/group.h, e.g. a Gloo group of all
// ranks; "single" takes a null group):
//
//   StrategyOptions options;
//   options.kind = StrategyKind::kFsdp;  // Or ParseStrategyKind(flag).
//   std::unique_ptr<comm::Group> group = ...;
//   STRATA_ASSIGN_OR_RETURN(
//       std::unique_ptr<Strategy> strategy,
//       CreateStrategy(options, model, group.get(), OptimizerConfig(),
//                      schedule));
//   for (int64_t step = 0; step < num_steps; ++step) {
//     strategy->ZeroGrad();
//     for (int m = 0; m < micro_batches; ++m) {
//       STRATA_ASSIGN_OR_RETURN(
//           double loss,
//           strategy->ForwardBackward(inputs[m], targets[m],
//                                     1.0 / micro_batches,
//                                     m + 1 == micro_batches));
//     }
//     STRATA_ASSIGN_OR_RETURN(StepResult result, strategy->Step(step));
//   }
#ifndef STRATA_STRATEGIES_FACTORY_H_
#define STRATA_STRATEGIES_FACTORY_H_

#include <memory>

#include "absl/status/statusor.h"
#include "comm/group.h"
#include "models/unit.h"
#include "optim/lr_schedule.h"
#include "strategies/strategy.h"

namespace strata::strategies {

// kSingle (SingleStrategy), kDdp (DdpStrategy), kZero1 / kZero2
// (ZeroStrategy) or kFsdp (FsdpStrategy); every kind but kSingle is a
// collective over `group`. `group` is borrowed and must outlive the
// strategy; it may be null for kSingle, and for kFsdp (a world of one);
// DDP and ZeRO need one. `model` is shared with the strategy, which
// rewrites its parameters (views of its flat buffers). Errors
// (ValidateStrategyOptions and each strategy's Create) name the bad option.
absl::StatusOr<std::unique_ptr<Strategy>> CreateStrategy(
    const StrategyOptions& options, std::shared_ptr<models::UnitModel> model,
    comm::Group* group, const OptimizerConfig& config,
    const optim::LrScheduleOptions& schedule);

}  // namespace strata::strategies

#endif  // STRATA_STRATEGIES_FACTORY_H_
