// CreateStrategy: builds the strategy StrategyOptions::kind names.
#ifndef STRATA_STRATEGIES_FACTORY_H_
#define STRATA_STRATEGIES_FACTORY_H_

#include <memory>

#include "absl/status/statusor.h"
#include "comm/group.h"
#include "models/unit.h"
#include "optim/lr_schedule.h"
#include "strategies/strategy.h"

namespace strata::strategies {

// "single" (SingleStrategy) or "ddp" (DdpStrategy; a collective over
// `group`). `group` is borrowed and must outlive the strategy; it may be
// null only for "single". Errors name the bad option.
absl::StatusOr<std::unique_ptr<Strategy>> CreateStrategy(
    const StrategyOptions& options, std::shared_ptr<models::UnitModel> model,
    comm::Group* group, const OptimizerConfig& config,
    const optim::LrScheduleOptions& schedule);

}  // namespace strata::strategies

#endif  // STRATA_STRATEGIES_FACTORY_H_
