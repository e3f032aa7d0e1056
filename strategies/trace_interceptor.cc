#include "strategies/trace_interceptor.h"

#include <torch/csrc/autograd/engine.h>

#include <memory>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/trace.h"

namespace strata::strategies {
namespace {

void AttachBackwardSpan(const models::UnitInfo& unit, const at::Tensor& input,
                        const at::Tensor& output,
                        std::shared_ptr<internal::BackwardSpan> span,
                        std::shared_ptr<internal::BackwardSpan> previous) {
  span->name = absl::StrCat("backward ", unit.name);
  span->unit = unit.name;
  const bool input_has_grad = input.requires_grad();
  output.register_hook([span, input_has_grad](const at::Tensor&) {
    if (!trace::Enabled() || span->start_us >= 0) return;
    const int64_t now = trace::NowMicros();
    // The unit after this one, whose input is this output, ends now: before
    // the other hooks on this tensor (FSDP's pre-backward gather) run.
    if (span->next != nullptr) span->next->End(now);
    span->start_us = now;
    if (!input_has_grad) {
      torch::autograd::Engine::get_default_engine().queue_callback(
          [span] { span->End(trace::NowMicros()); });
    }
  });
  if (previous != nullptr) {
    previous->next = std::move(span);
  } else if (input_has_grad) {
    input.register_hook(
        [span](const at::Tensor&) { span->End(trace::NowMicros()); });
  }
}

}  // namespace

namespace internal {

void BackwardSpan::End(int64_t end_us) {
  if (recorded || start_us < 0) return;
  recorded = true;
  trace::Record(name, "unit", start_us, end_us,
                {trace::StringArg("unit", unit)});
}

}  // namespace internal

at::Tensor TraceInterceptor::Run(const models::UnitInfo& unit,
                                 const at::Tensor& input,
                                 const models::UnitForward& forward) {
  if (!trace::Enabled()) return forward(input);
  const int64_t start_us = trace::NowMicros();
  at::Tensor output = forward(input);
  trace::Record(absl::StrCat("forward ", unit.name), "unit", start_us,
                trace::NowMicros(),
                {trace::StringArg("unit", unit.name),
                 trace::IntArg("index", unit.index)});
  if (!output.requires_grad()) return output;
  auto span = std::make_shared<internal::BackwardSpan>();
  // The previous unit's output is this unit's input when the model calls
  // its units in sequence: its backward start is this unit's backward end.
  std::shared_ptr<internal::BackwardSpan> previous;
  if (auto last = last_output_.lock();
      last.get() == input.unsafeGetTensorImpl()) {
    previous = last_span_.lock();
  }
  AttachBackwardSpan(unit, input, output, span, std::move(previous));
  last_output_ = Weak(output.getIntrusivePtr());
  last_span_ = span;
  return output;
}

}  // namespace strata::strategies
