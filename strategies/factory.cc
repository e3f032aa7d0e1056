#include "strategies/factory.h"

#include <utility>

#include "base/status.h"
#include "strategies/ddp.h"
#include "strategies/single.h"
#include "strategies/zero.h"

namespace strata::strategies {

absl::StatusOr<std::unique_ptr<Strategy>> CreateStrategy(
    const StrategyOptions& options, std::shared_ptr<models::UnitModel> model,
    comm::Group* group, const OptimizerConfig& config,
    const optim::LrScheduleOptions& schedule) {
  STRATA_RETURN_IF_ERROR(ValidateStrategyOptions(options));
  if (options.kind == "single") {
    STRATA_ASSIGN_OR_RETURN(
        std::unique_ptr<SingleStrategy> single,
        SingleStrategy::Create(std::move(model), config, schedule));
    return std::unique_ptr<Strategy>(std::move(single));
  }
  if (options.kind == "zero1" || options.kind == "zero2") {
    STRATA_ASSIGN_OR_RETURN(std::unique_ptr<ZeroStrategy> zero,
                            ZeroStrategy::Create(options, std::move(model),
                                                 group, config, schedule));
    return std::unique_ptr<Strategy>(std::move(zero));
  }
  STRATA_ASSIGN_OR_RETURN(
      std::unique_ptr<DdpStrategy> ddp,
      DdpStrategy::Create(options, std::move(model), group, config, schedule));
  return std::unique_ptr<Strategy>(std::move(ddp));
}

}  // namespace strata::strategies
