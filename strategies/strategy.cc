#include "strategies/strategy.h"

#include <ATen/ops/full.h>
#include <glog/logging.h>

#include <cmath>
#include <limits>
#include <map>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status.h"

namespace strata::strategies {

absl::StatusOr<std::vector<std::pair<std::string, at::Tensor>>>
Strategy::FullModelState() {
  std::map<std::string, at::Tensor> values;
  for (const ShardedTensor& t : ModelState()) {
    int64_t numel = 1;
    for (int64_t d : t.global_shape) numel *= d;
    if (t.offset != 0 || t.local.numel() != numel) {
      return absl::UnimplementedError(
          absl::StrCat("strategy '", name(), "' keeps '", t.name,
                       "' sharded; it must override Strategy::FullModelState"));
    }
    values[t.name] =
        t.local.detach().to(at::kFloat).reshape(t.global_shape).clone();
  }
  std::vector<std::pair<std::string, at::Tensor>> out;
  for (const auto& item : model().named_parameters()) {
    auto it = values.find(item.key());
    if (it == values.end()) {
      return absl::InternalError(
          absl::StrCat("strategy '", name(),
                       "': ModelState() lacks parameter '", item.key(), "'"));
    }
    out.emplace_back(item.key(), it->second);
  }
  return out;
}

Strategy::Strategy(std::shared_ptr<models::UnitModel> model,
                   const OptimizerConfig& config, at::ScalarType param_dtype)
    : model_(std::move(model)), param_dtype_(param_dtype) {
  CHECK(model_ != nullptr);
  if (config.loss_scaling.has_value()) {
    absl::StatusOr<std::unique_ptr<optim::LossScaler>> scaler =
        optim::LossScaler::Create(*config.loss_scaling);
    CHECK(scaler.ok()) << "ValidateOptimizerConfig lets invalid loss scaling "
                          "options through: "
                       << scaler.status();
    loss_scaler_ = *std::move(scaler);
  }
}

absl::StatusOr<double> Strategy::ForwardBackward(const at::Tensor& inputs,
                                                 const at::Tensor& targets,
                                                 double loss_weight,
                                                 bool last_micro_batch) {
  if (!std::isfinite(loss_weight) || loss_weight <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("loss_weight must be finite and > 0, got ", loss_weight));
  }
  STRATA_RETURN_IF_ERROR(latched_error_);
  if (last_micro_batch_done_) {
    // fsdp_test.cc looks for "call Step() first".
    return absl::FailedPreconditionError(absl::StrCat(
        name(),
        ": ForwardBackward called after the step's last micro-batch "
        "(last_micro_batch = true) without Step() in between: call Step() "
        "first"));
  }
  STRATA_RETURN_IF_ERROR(BeforeMicroBatch(last_micro_batch));
  double loss_value = 0;
  const double scale = loss_scaler_ ? loss_scaler_->scale() : 1.0;
  absl::Status backward =
      StatusFromCall(absl::StrCat(name(), " forward/backward"), [&] {
        const bool cast =
            inputs.is_floating_point() && inputs.scalar_type() != param_dtype_;
        at::Tensor loss = model().ForwardLoss(
            cast ? inputs.to(param_dtype_) : inputs, targets);
        loss_value = loss.item<double>();
        (loss * (loss_weight * scale)).backward();
      });
  if (last_micro_batch) last_micro_batch_done_ = true;
  absl::Status after = AfterMicroBatch(last_micro_batch, std::move(backward));
  // An error a hook latched during this micro-batch (a collective that timed
  // out) came first: what forward/backward threw afterwards is a follow-on
  // (e.g. a unit whose all-gather failed has no data).
  STRATA_RETURN_IF_ERROR(latched_error_);
  STRATA_RETURN_IF_ERROR(after);
  return loss_value;
}

absl::StatusOr<StepResult> Strategy::Step(int64_t step) {
  if (step < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("step must be >= 0, got ", step));
  }
  STRATA_RETURN_IF_ERROR(latched_error_);
  if (!last_micro_batch_done_) {
    // ddp_test.cc looks for "last_micro_batch", fsdp_test.cc for "before
    // the step's last micro-batch".
    return absl::FailedPreconditionError(
        absl::StrCat(name(),
                     ": Step() before the step's last micro-batch: call "
                     "ForwardBackward(..., last_micro_batch = true) first"));
  }
  last_micro_batch_done_ = false;
  unscaled_ = false;
  found_inf_ = false;
  const double scale = loss_scaler_ ? loss_scaler_->scale() : 1.0;
  STRATA_ASSIGN_OR_RETURN(StepResult result, DoStep(step));
  result.loss_scale = scale;
  if (loss_scaler_ != nullptr) {
    CHECK(unscaled_) << name()
                     << ": DoStep did not call UnscaleGradients with loss "
                        "scaling on";
    loss_scaler_->Update(found_inf_);
    result.skipped = found_inf_;
    if (found_inf_) {
      result.grad_norm = std::numeric_limits<double>::infinity();
    }
  }
  return result;
}

absl::StatusOr<bool> Strategy::UnscaleGradients(at::Tensor grads,
                                                comm::Group* group) {
  if (loss_scaler_ == nullptr) return false;
  CHECK(!unscaled_) << name() << ": UnscaleGradients called twice in a step";
  unscaled_ = true;
  absl::Status reduce_status;
  found_inf_ = !loss_scaler_->UnscaleAndCheck(
      std::move(grads), [&](bool local_found_inf) {
        if (group == nullptr) return local_found_inf;
        at::Tensor flag =
            at::full({1}, local_found_inf ? 1.0f : 0.0f, at::kFloat);
        reduce_status = group->AllReduce(flag, comm::ReduceOp::kMax);
        // On failure every rank returns the error below; skip meanwhile.
        return !reduce_status.ok() || flag.item<float>() != 0;
      });
  if (!reduce_status.ok()) {
    return Annotate(reduce_status,
                    absl::StrCat(name(),
                                 ": all-reduce of the gradient overflow flag "
                                 "(loss scaling) on rank ",
                                 group->rank()));
  }
  return found_inf_;
}

absl::Status Strategy::BeforeMicroBatch(bool) { return absl::OkStatus(); }

absl::Status Strategy::AfterMicroBatch(bool, absl::Status backward) {
  return backward;
}

void Strategy::LatchError(const absl::Status& status) {
  if (latched_error_.ok()) latched_error_ = status;
}

}  // namespace strata::strategies
