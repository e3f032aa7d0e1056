// The trainer's progress records as TensorBoard scalars (--tensorboard_dir).
#ifndef STRATA_LAUNCH_OBSERVE_TENSORBOARD_SCALARS_H_
#define STRATA_LAUNCH_OBSERVE_TENSORBOARD_SCALARS_H_

#include "absl/status/status.h"
#include "launch/observe/progress_logger.h"
#include "launch/observe/tensorboard.h"

namespace strata::launch {

// Appends `record`'s scalars at step record.step to `writer` (borrowed) and
// flushes it, so the file is current at every progress line:
//   train/loss, lr, grad_norm, tokens_per_s, mfu;
//   eval/loss when the record has an evaluation;
//   exposed_comm_share (comm_wait_s / (forward_backward_s + step_s)) when it
//   has phase times and they are not all zero;
//   loss_scale and skipped_steps with loss scaling (--precision=fp16);
//   memory/peak_resident_mib/rank<r> for each rank of peak_resident_bytes.
// Values are stored as float. Error: the writer's, naming its file.
absl::Status WriteProgressScalars(const ProgressRecord& record,
                                  TensorBoardWriter& writer);

}  // namespace strata::launch

#endif  // STRATA_LAUNCH_OBSERVE_TENSORBOARD_SCALARS_H_
