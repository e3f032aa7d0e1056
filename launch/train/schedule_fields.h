// The LR schedule's state in a checkpoint (Contents::param_scheduler): named
// fields with their own types, as a PyTorch or mmengine scheduler's
// state_dict() holds them — {"kind": "cosine", "base_lr": 3e-4,
// "warmup_steps": 100, "total_steps": 1000, "min_lr": 3e-5, "step_size": 0,
// "gamma": 0.1, "last_step": 41, "warmup_type": "linear",
// "warmup_min_ratio": 0.0, "min_ratio": 0.0}. Counts are integers, rates
// doubles, the kind and warm-up type their names (--lr_schedule,
// --lr_warmup_type).
#ifndef STRATA_LAUNCH_TRAIN_SCHEDULE_FIELDS_H_
#define STRATA_LAUNCH_TRAIN_SCHEDULE_FIELDS_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "checkpoint/contents.h"
#include "optim/lr_schedule.h"

namespace strata::launch {

// The fields of the schedule `options` whose last used step is `last_step`
// (-1 before the first step).
checkpoint::NamedValues ScheduleFields(const optim::LrScheduleOptions& options,
                                       int64_t last_step);

// The schedule those fields describe. Also reads checkpoints written before
// the fields were typed (every field a double, "kind" a numeric code) and
// before DeepSpeed's schedules (no warmup_type, warmup_min_ratio,
// min_ratio: their defaults).
// InvalidArgument naming the field for a missing, repeated or unknown field,
// a field of the wrong type, or options ValidateLrScheduleOptions rejects.
absl::StatusOr<optim::RestoredLrSchedule> ScheduleFromFields(
    const checkpoint::NamedValues& fields);

}  // namespace strata::launch

#endif  // STRATA_LAUNCH_TRAIN_SCHEDULE_FIELDS_H_
