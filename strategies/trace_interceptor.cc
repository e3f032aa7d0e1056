#include "strategies/trace_interceptor.h"

#include <memory>
#include <string>
#include <torch/csrc/autograd/engine.h>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/trace.h"

namespace strata::strategies {
namespace {

// One unit call's backward span, shared by its hooks.
struct BackwardSpan {
  std::string name;
  std::string unit;
  int64_t start_us = -1;
  bool recorded = false;

  void End() {
    if (recorded || start_us < 0) return;
    recorded = true;
    trace::Record(name, "unit", start_us, trace::NowMicros(),
                  {trace::StringArg("unit", unit)});
  }
};

void AttachBackwardSpan(const models::UnitInfo& unit, const at::Tensor& input,
                        const at::Tensor& output) {
  auto span = std::make_shared<BackwardSpan>();
  span->name = absl::StrCat("backward ", unit.name);
  span->unit = unit.name;
  const bool input_has_grad = input.requires_grad();
  output.register_hook([span, input_has_grad](const at::Tensor&) {
    if (!trace::Enabled() || span->start_us >= 0) return;
    span->start_us = trace::NowMicros();
    if (!input_has_grad) {
      torch::autograd::Engine::get_default_engine().queue_callback(
          [span] { span->End(); });
    }
  });
  if (input_has_grad) {
    input.register_hook([span](const at::Tensor&) { span->End(); });
  }
}

}  // namespace

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
  if (output.requires_grad()) AttachBackwardSpan(unit, input, output);
  return output;
}

}  // namespace strata::strategies
