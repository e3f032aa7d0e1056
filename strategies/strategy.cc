#include "strategies/strategy.h"

#include <glog/logging.h>

#include <cmath>
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

Strategy::Strategy(std::shared_ptr<models::UnitModel> model)
    : model_(std::move(model)) {
  CHECK(model_ != nullptr);
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
  absl::Status backward =
      StatusFromCall(absl::StrCat(name(), " forward/backward"), [&] {
        at::Tensor loss =
            models::UnitModel::Loss(model().Forward(inputs), targets);
        loss_value = loss.item<double>();
        (loss * loss_weight).backward();
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
  return DoStep(step);
}

absl::Status Strategy::BeforeMicroBatch(bool) { return absl::OkStatus(); }

absl::Status Strategy::AfterMicroBatch(bool, absl::Status backward) {
  return backward;
}

void Strategy::LatchError(const absl::Status& status) {
  if (latched_error_.ok()) latched_error_ = status;
}

}  // namespace strata::strategies
