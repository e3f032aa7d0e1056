#include "strategies/optimizer_factory.h"

#include <glog/logging.h>

#include <utility>

#include "base/status.h"
#include "optim/adamw.h"
#include "optim/sgd.h"

namespace strata::strategies {

absl::StatusOr<std::unique_ptr<optim::Optimizer>> CreateOptimizer(
    const OptimizerConfig& config, at::Tensor params, at::Tensor grads,
    std::vector<optim::ParamRange> ranges) {
  STRATA_RETURN_IF_ERROR(ValidateOptimizerConfig(config));
  switch (config.kind) {
    case OptimizerKind::kAdamW:
      return optim::CreateAdamW(std::move(params), std::move(grads),
                                std::move(ranges), config.adamw);
    case OptimizerKind::kAdam:
      return optim::CreateAdam(std::move(params), std::move(grads),
                               std::move(ranges), config.adamw);
    case OptimizerKind::kSgd:
      return optim::CreateSgd(std::move(params), std::move(grads),
                              std::move(ranges), config.sgd);
  }
  // ValidateOptimizerConfig rejects kinds outside the enum.
  LOG(FATAL) << "unreachable: OptimizerKind " << static_cast<int>(config.kind);
}

}  // namespace strata::strategies
