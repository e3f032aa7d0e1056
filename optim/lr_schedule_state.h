// The LR schedule's state as a checkpoint stores it (its param_scheduler):
// named fields with their own types, as a PyTorch or mmengine scheduler's
// state_dict() holds them — {"kind": "cosine", "base_lr": 3e-4,
// "warmup_steps": 100, "total_steps": 1000, "min_lr": 3e-5, "step_size": 0,
// "gamma": 0.1, "last_step": 41, "warmup_type": "linear",
// "warmup_min_ratio": 0.0, "min_ratio": 0.0}. Counts are integers, rates
// doubles, the kind and warm-up type their names (--lr_schedule,
// --lr_warmup_type).
#ifndef STRATA_OPTIM_LR_SCHEDULE_STATE_H_
#define STRATA_OPTIM_LR_SCHEDULE_STATE_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "base/named_state.h"
#include "optim/lr_schedule.h"

namespace strata::optim {

// The fields of the schedule `options` whose last used step is `last_step`
// (-1 before the first step).
NamedValues LrScheduleFields(const LrScheduleOptions& options,
                             int64_t last_step);

// The schedule those fields describe. Also reads checkpoints written before
// the fields were typed (every field a double, "kind" a numeric code) and
// before DeepSpeed's schedules (no warmup_type, warmup_min_ratio,
// min_ratio: their defaults).
// InvalidArgument naming the field for a missing, repeated or unknown field,
// a field of the wrong type, or options ValidateLrScheduleOptions rejects.
absl::StatusOr<RestoredLrSchedule> LrScheduleFromFields(
    const NamedValues& fields);

}  // namespace strata::optim

#endif  // STRATA_OPTIM_LR_SCHEDULE_STATE_H_
