// bf16 autocast around each unit's forward: --precision=bf16 of the train
// binary. The matmuls of every unit (blocks, embeddings, head) run in bf16
// (through oneDNN on CPU) while the weights stay fp32 and the loss and the
// whole backward run outside autocast. Unlike MixedPrecisionOptions
// (strategies/mixed_precision.h), nothing is stored in bf16.
#ifndef STRATA_STRATEGIES_AUTOCAST_H_
#define STRATA_STRATEGIES_AUTOCAST_H_

#include <ATen/core/Tensor.h>

#include "models/unit.h"

namespace strata::strategies {

// Turns the autocast of the unit's device (its input's: CPU or CUDA) on with
// dtype bf16 for the duration of each unit's forward and restores the
// previous autocast state (enabled flag and dtype) afterwards, clearing
// autocast's cast cache when autocast was off before. Going through the unit
// protocol keeps it right when another interceptor re-runs a forward
// (recomputation during backward). Stateless: one instance
// may be shared by several models; Run is called on the thread running the
// forward and changes that thread's autocast state only while it runs.
class AutocastInterceptor final : public models::UnitInterceptor {
 public:
  at::Tensor Run(const models::UnitInfo& unit, const at::Tensor& input,
                 const models::UnitForward& forward) override;
};

}  // namespace strata::strategies

#endif  // STRATA_STRATEGIES_AUTOCAST_H_
