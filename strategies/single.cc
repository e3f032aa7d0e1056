#include "strategies/single.h"

#include <ATen/core/grad_mode.h>
#include <ATen/ops/zeros_like.h>
#include <glog/logging.h>

#include <algorithm>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "optim/clip.h"
#include "strategies/mixed_precision.h"
#include "strategies/optimizer_factory.h"

namespace strata::strategies {

absl::StatusOr<SingleStrategy::Parts> SingleStrategy::BuildParts(
    models::UnitModel& model, const OptimizerConfig& config,
    const optim::LrScheduleOptions& lr, bool reverse_order,
    const MixedPrecisionOptions& mixed_precision) {
  STRATA_RETURN_IF_ERROR(ValidateOptimizerConfig(config));
  STRATA_RETURN_IF_ERROR(optim::ValidateLrScheduleOptions(lr));
  std::vector<optim::NamedParameter> named;
  for (const auto& item : model.named_parameters()) {
    named.push_back({item.key(), item.value()});
  }
  if (reverse_order) std::reverse(named.begin(), named.end());
  Parts parts;
  const bool mixed = UsesMasterParameters(mixed_precision);
  if (mixed) parts.master_params = ConcatenateFp32(named, /*align_elems=*/1);
  STRATA_ASSIGN_OR_RETURN(parts.flat, optim::FlatParameters::Create(
                                          std::move(named), /*align_elems=*/1,
                                          mixed_precision.param_dtype));
  CastBuffers(model, mixed_precision.buffer_dtype);
  if (mixed) parts.master_grads = at::zeros_like(parts.master_params);
  STRATA_ASSIGN_OR_RETURN(
      parts.optimizer,
      CreateOptimizer(config,
                      mixed ? parts.master_params : parts.flat->params(),
                      mixed ? parts.master_grads : parts.flat->grads(),
                      parts.flat->MatrixDecayRanges(config.weight_decay)));
  STRATA_ASSIGN_OR_RETURN(parts.schedule, optim::LrSchedule::Create(lr));
  return parts;
}

absl::StatusOr<std::unique_ptr<SingleStrategy>> SingleStrategy::Create(
    std::shared_ptr<models::UnitModel> model, const OptimizerConfig& config,
    const optim::LrScheduleOptions& schedule,
    const MixedPrecisionOptions& mixed_precision) {
  if (model == nullptr) {
    return absl::InvalidArgumentError("strategy 'single': model is null");
  }
  StrategyOptions options;
  options.mixed_precision = mixed_precision;
  STRATA_RETURN_IF_ERROR(ValidateStrategyOptions(options));
  STRATA_ASSIGN_OR_RETURN(Parts parts,
                          BuildParts(*model, config, schedule,
                                     /*reverse_order=*/false, mixed_precision));
  return std::unique_ptr<SingleStrategy>(new SingleStrategy(
      std::move(model), config, std::move(parts), mixed_precision));
}

SingleStrategy::SingleStrategy(std::shared_ptr<models::UnitModel> model,
                               const OptimizerConfig& config, Parts parts,
                               const MixedPrecisionOptions& mixed_precision)
    : Strategy(std::move(model), config, mixed_precision.param_dtype),
      config_(config),
      mixed_precision_(mixed_precision),
      flat_(std::move(parts.flat)),
      optimizer_(std::move(parts.optimizer)),
      schedule_(std::move(parts.schedule)),
      master_params_(std::move(parts.master_params)),
      master_grads_(std::move(parts.master_grads)) {
  CHECK(flat_ != nullptr && optimizer_ != nullptr && schedule_ != nullptr);
  CHECK_EQ(master_params_.defined(), UsesMasterParameters(mixed_precision_));
}

void SingleStrategy::ZeroGrad() {
  flat_->ZeroGrad();
  if (mixed() && master_grads_.defined()) master_grads_.zero_();
}

absl::Status SingleStrategy::AfterMicroBatch(bool, absl::Status backward) {
  STRATA_RETURN_IF_ERROR(backward);
  FoldGradients(0, flat_->padded_numel());
  return absl::OkStatus();
}
absl::Status SingleStrategy::FinishGradients() { return absl::OkStatus(); }

void SingleStrategy::FoldGradients(int64_t offset, int64_t numel) {
  if (!mixed()) return;
  strategies::FoldGradients(flat_->grads().narrow(0, offset, numel),
                            master_grads_.narrow(0, offset, numel));
}

void SingleStrategy::RefreshComputeParameters() {
  if (!mixed()) return;
  at::NoGradGuard no_grad;
  flat_->params().copy_(master_params_);
}

absl::Status SingleStrategy::AfterStateLoaded() {
  RefreshComputeParameters();
  return absl::OkStatus();
}

absl::StatusOr<StepResult> SingleStrategy::DoStep(int64_t step) {
  STRATA_RETURN_IF_ERROR(FinishGradients());
  StepResult result;
  result.lr = schedule_->LrAt(step);
  // DDP's all-reduced gradients are bitwise equal on every rank, but
  // agreeing costs one 4-byte all-reduce and does not rely on it.
  STRATA_ASSIGN_OR_RETURN(const bool skip,
                          UnscaleGradients(accumulated_grads(), step_group()));
  if (skip) return result;
  result.grad_norm = optim::ClipGradNorm(
      accumulated_grads(),
      config_.grad_clip > 0 ? config_.grad_clip
                            : std::numeric_limits<double>::infinity(),
      config_.grad_clip_norm_type);
  optimizer_->Step(result.lr);
  RefreshComputeParameters();
  return result;
}

MemoryReport SingleStrategy::Memory() const {
  MemoryReport report;
  report.parameter_bytes = flat_->params().nbytes();
  report.gradient_bytes = flat_->grads().nbytes();
  if (mixed()) {
    report.parameter_bytes += master_params_.nbytes();
    report.gradient_bytes += master_grads_.nbytes();
  }
  for (const auto& [name, tensor] : optimizer_->State()) {
    report.optimizer_bytes += tensor.nbytes();
  }
  return report;
}

std::vector<ShardedTensor> SingleStrategy::ModelState() const {
  std::vector<ShardedTensor> out;
  for (size_t i = 0; i < flat_->entries().size(); ++i) {
    const optim::FlatParameters::Entry& e = flat_->entries()[i];
    out.push_back(
        {e.name, e.shape, 0,
         mixed() ? master_params_.narrow(0, e.offset, e.numel).view(e.shape)
                 : flat_->parameter(i)});
  }
  return out;
}

std::vector<ShardedTensor> SingleStrategy::OptimizerState() const {
  std::vector<ShardedTensor> out;
  optim::NamedTensors state = optimizer_->State();
  for (const auto& e : flat_->entries()) {
    for (const auto& [key, tensor] : state) {
      if (key == "step") continue;
      out.push_back({absl::StrCat(e.name, ".", key), e.shape, 0,
                     tensor.narrow(0, e.offset, e.numel).view(e.shape)});
    }
  }
  for (const auto& [key, tensor] : state) {
    if (key == "step") out.push_back({"step", {}, 0, tensor});
  }
  return out;
}

}  // namespace strata::strategies
