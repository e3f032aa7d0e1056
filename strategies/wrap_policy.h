// Auto-wrap policies: which of a model's units (models/unit.h) become FSDP
// units, each with its own flat parameter, gathered and freed on its own
// (PyTorch FSDP's auto_wrap_policy: by module type, by parameter count, or a
// user predicate). The parameters of the units left out, and parameters
// shared between units (tied weights), belong to the root flat parameter,
// gathered around the units that read it (see fsdp.h).
#ifndef STRATA_STRATEGIES_WRAP_POLICY_H_
#define STRATA_STRATEGIES_WRAP_POLICY_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "models/unit.h"
#include "strategies/options.h"

namespace strata::strategies {

// The number of elements of each unit's parameters, in model.units() order
// (the parameter sizes read once).
std::vector<int64_t> UnitsNumParameters(const models::UnitModel& model);

// Indices (into model.units(), increasing) of the units `policy` wraps: a
// unit is wrapped when any criterion that is set accepts it; with no
// criterion set, every unit is. A policy may wrap no unit (every unit below
// min_num_params, as DeepSpeed's stage3_param_persistence_threshold on a
// small model): FSDP then keeps the whole model in its root (fsdp.h).
// Errors (InvalidArgument, naming the flag the trainer sets): a unit type
// that no unit has (listing the model's types), min_num_params < 0.
absl::StatusOr<std::vector<int>> SelectWrappedUnits(
    const models::UnitModel& model, const WrapPolicy& policy);

}  // namespace strata::strategies

#endif  // STRATA_STRATEGIES_WRAP_POLICY_H_
