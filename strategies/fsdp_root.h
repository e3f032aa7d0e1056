// Which units of a model read FsdpStrategy's root flat parameter (fsdp.h,
// fsdp_plan.h), so that a sharded root is gathered around exactly those
// units. Pure logic over the plan and the model's unit protocol; no tensors.
//
// A unit reads the root when one of its own parameters is in the root (an
// unwrapped unit, such as GPT's embed and head under the transformer-block
// policy) or when it is declared a reader of a shared parameter that the
// plan put in the root (UnitModel::SharedParameters: GPT's head reads the
// tied wte.weight even when the head is wrapped). Code between units never
// reads parameters (models/README.md: a unit's forward reads only its input,
// its parameters and its declared shared parameters), so these units are
// the only readers. A root parameter that no unit owns or declares reading
// (a parameter outside every unit) may be read by code between units: then
// the root cannot be sharded, and FsdpStrategy keeps it gathered.
#ifndef STRATA_STRATEGIES_FSDP_ROOT_H_
#define STRATA_STRATEGIES_FSDP_ROOT_H_

#include <string>
#include <utility>
#include <vector>

#include "strategies/fsdp_plan.h"

namespace strata::strategies {

// As UnitModel::SharedParameters: a parameter's full name and the names of
// the units, besides its owner, whose forward reads it.
using SharedReaders =
    std::vector<std::pair<std::string, std::vector<std::string>>>;

struct RootReaders {
  // Per unit of the model (forward order): whether its forward reads a
  // parameter of the root. All false when the plan has no root.
  std::vector<bool> reads;
  // Root parameters that no unit owns or declares reading, in root order.
  std::vector<std::string> outside_units;
};

// The readers of `plan`'s root among `units` (the model's, forward order).
RootReaders FindRootReaders(const FsdpPlan& plan,
                            const std::vector<PlanUnit>& units,
                            const SharedReaders& shared);

}  // namespace strata::strategies

#endif  // STRATA_STRATEGIES_FSDP_ROOT_H_
