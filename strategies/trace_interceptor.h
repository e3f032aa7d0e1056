// The timeline trace's unit spans (base/trace.h): "forward <unit>" around
// each unit's forward and "backward <unit>" from the moment the gradient of
// the unit's output is ready (a hook on the output) to the moment the
// gradient of its input is. When the input is the previous unit's output
// (units called in sequence) that moment is the previous unit's backward
// start, taken in one hook so that the spans abut and never cross; otherwise
// a hook on the input ends it. Hooks on one tensor run in the order they were
// registered and this innermost interceptor registers first, so a unit's
// backward span includes FSDP's pre-backward all-gather wait for the unit
// (its own hook on the output runs next). A unit whose input needs no
// gradient (the first unit: token ids) ends its backward span when the
// backward pass ends (an autograd engine callback queued from the output's
// hook): nothing of the model runs after it.
//
// Add it after the strategy has added its own interceptors: interceptors
// nest with the first added outermost, so this one is innermost and its
// forward span is the unit's computation alone; FSDP's all-gather wait
// before it and free after it stay outside, and appear as the collectives'
// spans instead. Under activation checkpointing the unit's first forward
// (without autograd) gets a forward span and no backward hooks; the
// recomputation during backward gets a forward span and the backward span.
// Works for every strategy: it only sees unit calls. When tracing is off Run
// costs one relaxed load and a branch more than calling forward.
#ifndef STRATA_STRATEGIES_TRACE_INTERCEPTOR_H_
#define STRATA_STRATEGIES_TRACE_INTERCEPTOR_H_

#include <ATen/core/Tensor.h>
#include <c10/util/intrusive_ptr.h>

#include <cstdint>
#include <memory>
#include <string>

#include "models/unit.h"

namespace strata::strategies {

namespace internal {
// One unit call's backward span, shared by its hooks.
struct BackwardSpan {
  std::string name;
  std::string unit;
  int64_t start_us = -1;
  bool recorded = false;
  // The span of the unit whose input is this unit's output: it ends when
  // this one starts.
  std::shared_ptr<BackwardSpan> next;
  void End(int64_t end_us);
};
}  // namespace internal

class TraceInterceptor final : public models::UnitInterceptor {
 public:
  at::Tensor Run(const models::UnitInfo& unit, const at::Tensor& input,
                 const models::UnitForward& forward) override;

 private:
  using Weak =
      c10::weak_intrusive_ptr<c10::TensorImpl, c10::UndefinedTensorImpl>;
  // The last unit output with backward hooks, and its span (not owned: a
  // freed activation is not kept alive).
  Weak last_output_{
      c10::intrusive_ptr<c10::TensorImpl, c10::UndefinedTensorImpl>()};
  std::weak_ptr<internal::BackwardSpan> last_span_;
};

}  // namespace strata::strategies

#endif  // STRATA_STRATEGIES_TRACE_INTERCEPTOR_H_
