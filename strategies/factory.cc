#include "strategies/factory.h"

#include <glog/logging.h>

#include <utility>

#include "base/status.h"
#include "strategies/activation_checkpointing.h"
#include "strategies/ddp.h"
#include "strategies/fsdp.h"
#include "strategies/single.h"
#include "strategies/zero.h"

namespace strata::strategies {

namespace {

// The strategy options.kind names, before activation checkpointing.
absl::StatusOr<std::unique_ptr<Strategy>> CreateBaseStrategy(
    const StrategyOptions& options, std::shared_ptr<models::UnitModel> model,
    comm::Group* group, const OptimizerConfig& config,
    const optim::LrScheduleOptions& schedule) {
  switch (options.kind) {
    case StrategyKind::kSingle: {
      STRATA_ASSIGN_OR_RETURN(
          std::unique_ptr<SingleStrategy> single,
          SingleStrategy::Create(std::move(model), config, schedule,
                                 options.mixed_precision));
      return std::unique_ptr<Strategy>(std::move(single));
    }
    case StrategyKind::kDdp: {
      STRATA_ASSIGN_OR_RETURN(std::unique_ptr<DdpStrategy> ddp,
                              DdpStrategy::Create(options, std::move(model),
                                                  group, config, schedule));
      return std::unique_ptr<Strategy>(std::move(ddp));
    }
    case StrategyKind::kZero1:
    case StrategyKind::kZero2: {
      STRATA_ASSIGN_OR_RETURN(std::unique_ptr<ZeroStrategy> zero,
                              ZeroStrategy::Create(options, std::move(model),
                                                   group, config, schedule));
      return std::unique_ptr<Strategy>(std::move(zero));
    }
    case StrategyKind::kFsdp: {
      STRATA_ASSIGN_OR_RETURN(std::unique_ptr<FsdpStrategy> fsdp,
                              FsdpStrategy::Create(options, std::move(model),
                                                   group, config, schedule));
      return std::unique_ptr<Strategy>(std::move(fsdp));
    }
  }
  // ValidateStrategyOptions rejected every other value.
  LOG(FATAL) << "unknown StrategyKind " << static_cast<int>(options.kind);
  return nullptr;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Strategy>> CreateStrategy(
    const StrategyOptions& options, std::shared_ptr<models::UnitModel> model,
    comm::Group* group, const OptimizerConfig& config,
    const optim::LrScheduleOptions& schedule) {
  STRATA_RETURN_IF_ERROR(ValidateStrategyOptions(options));
  // Checked against the model's units before the strategy (a collective) is
  // built; added after it, so that it nests inside the strategy's own
  // interceptors (FSDP gathers parameters around the recomputation too).
  std::shared_ptr<ActivationCheckpointing> checkpointing;
  if (!options.checkpoint_units.empty()) {
    if (model == nullptr) {
      return absl::InvalidArgumentError("CreateStrategy: model is null");
    }
    ActivationCheckpointingOptions checkpoint_options;
    checkpoint_options.units = options.checkpoint_units;
    checkpoint_options.every = options.checkpoint_every;
    STRATA_ASSIGN_OR_RETURN(
        checkpointing,
        ActivationCheckpointing::Create(*model, std::move(checkpoint_options)));
  }
  STRATA_ASSIGN_OR_RETURN(
      std::unique_ptr<Strategy> strategy,
      CreateBaseStrategy(options, std::move(model), group, config, schedule));
  if (checkpointing != nullptr) {
    strategy->model().AddInterceptor(std::move(checkpointing));
  }
  return strategy;
}

}  // namespace strata::strategies
