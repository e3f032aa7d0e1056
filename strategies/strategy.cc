#include "strategies/strategy.h"

#include <glog/logging.h>

#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"

namespace strata::strategies {

absl::Status ValidateStrategyOptions(const StrategyOptions& options) {
  if (options.kind != "single" && options.kind != "ddp" &&
      options.kind != "zero1" && options.kind != "zero2") {
    // The message predates zero1/zero2; single_test.cc asserts it verbatim.
    return absl::InvalidArgumentError(
        absl::StrCat("--strategy must be single, ddp, zero1 or zero2, got '",
                     options.kind, "'"));
  }
  if (options.bucket_bytes <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--bucket_bytes must be > 0, got ", options.bucket_bytes));
  }
  if (options.first_bucket_bytes <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--first_bucket_bytes must be > 0, got ", options.first_bucket_bytes));
  }
  return absl::OkStatus();
}

absl::Status ValidateOptimizerConfig(const OptimizerConfig& config) {
  if (!std::isfinite(config.weight_decay) || config.weight_decay < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--weight_decay must be finite and >= 0, got ", config.weight_decay));
  }
  if (!std::isfinite(config.grad_clip) || config.grad_clip < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--grad_clip must be finite and >= 0 (0 = off), got ",
                     config.grad_clip));
  }
  return optim::ValidateAdamWOptions(config.adamw);
}

Strategy::Strategy(std::shared_ptr<models::UnitModel> model)
    : model_(std::move(model)) {
  CHECK(model_ != nullptr);
}

}  // namespace strata::strategies
