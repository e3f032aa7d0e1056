// The timeline trace's unit spans (base/trace.h): "forward <unit>" around
// each unit's forward and "backward <unit>" from the moment the gradient of
// the unit's output is ready (a hook on the output) to the moment the
// gradient of its input is (a hook on the input). A unit whose input needs no
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

#include "models/unit.h"

namespace strata::strategies {

class TraceInterceptor final : public models::UnitInterceptor {
 public:
  at::Tensor Run(const models::UnitInfo& unit, const at::Tensor& input,
                 const models::UnitForward& forward) override;
};

}  // namespace strata::strategies

#endif  // STRATA_STRATEGIES_TRACE_INTERCEPTOR_H_
