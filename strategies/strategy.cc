#include "strategies/strategy.h"

#include <glog/logging.h>

#include <cmath>
#include <map>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"

namespace strata::strategies {

absl::Status ValidateStrategyOptions(const StrategyOptions& options) {
  if (options.kind != "single" && options.kind != "ddp" &&
      options.kind != "zero1" && options.kind != "zero2" &&
      options.kind != "fsdp") {
    // single_test.cc asserts this message verbatim.
    return absl::InvalidArgumentError(absl::StrCat(
        "--strategy must be single, ddp, zero1, zero2 or fsdp, got '",
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
  const std::pair<const char*, at::ScalarType> dtypes[] = {
      {"param_dtype", options.mixed_precision.param_dtype},
      {"reduce_dtype", options.mixed_precision.reduce_dtype},
      {"buffer_dtype", options.mixed_precision.buffer_dtype}};
  for (const auto& [flag, dtype] : dtypes) {
    if (dtype != at::kFloat && dtype != at::kBFloat16) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--", flag, " must be fp32 or bf16, got ", c10::toString(dtype)));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<at::ScalarType> ParseMixedPrecisionDtype(
    const std::string& flag, const std::string& value) {
  if (value == "fp32") return at::kFloat;
  if (value == "bf16") return at::kBFloat16;
  return absl::InvalidArgumentError(
      absl::StrCat("--", flag, " must be fp32 or bf16, got '", value, "'"));
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

absl::StatusOr<std::vector<std::pair<std::string, at::Tensor>>>
Strategy::FullModelState() {
  std::map<std::string, at::Tensor> values;
  for (const ShardedTensor& t : ModelState()) {
    int64_t numel = 1;
    for (int64_t d : t.global_shape) numel *= d;
    if (t.offset != 0 || t.local.numel() != numel) {
      return absl::UnimplementedError(absl::StrCat(
          "strategy '", name(), "' keeps '", t.name,
          "' sharded; it must override Strategy::FullModelState"));
    }
    values[t.name] =
        t.local.detach().to(at::kFloat).reshape(t.global_shape).clone();
  }
  std::vector<std::pair<std::string, at::Tensor>> out;
  for (const auto& item : model().named_parameters()) {
    auto it = values.find(item.key());
    if (it == values.end()) {
      return absl::InternalError(absl::StrCat(
          "strategy '", name(), "': ModelState() lacks parameter '",
          item.key(), "'"));
    }
    out.emplace_back(item.key(), it->second);
  }
  return out;
}

Strategy::Strategy(std::shared_ptr<models::UnitModel> model)
    : model_(std::move(model)) {
  CHECK(model_ != nullptr);
}

}  // namespace strata::strategies
