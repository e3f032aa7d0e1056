// A model's weights from a torch.distributed.checkpoint (DCP) directory
// into the model runs a process holds (checkpoint/contents.h's
// TensorState): the loader behind --load_weights=DIR and
// strata_generate's --load_weights for DCP checkpoints.
#ifndef STRATA_CHECKPOINT_DCP_LOAD_H_
#define STRATA_CHECKPOINT_DCP_LOAD_H_

#include <string>

#include "absl/status/status.h"
#include "checkpoint/contents.h"
#include "comm/group.h"

namespace strata::checkpoint::dcp {

// The prefix of the model's keys in a checkpoint saved from
// {"model": model_state_dict, "optim": ...} (get_state_dict's users,
// torchtitan): DCP joins nested keys with ".".
inline constexpr char kModelPrefix[] = "model.";

// Loads the model tensors of the DCP checkpoint `dir` into the model runs
// of `live` (each rank its own runs; the optimizer runs are not touched).
// The checkpoint's keys are the model's parameter names, either at the top
// level (`dcp.save(model.state_dict())`) or under "model." (the
// {"model": ..., "optim": ...} layout; keys outside "model." are then not
// read). Strictly: a parameter no key holds (missing), a model key no rank
// holds (unexpected), another shape or another dtype is an error naming the
// key. Each rank reads only its runs' element ranges (Reader::ReadRange).
// A collective over `group` (null: one process); every rank reads and
// checks everything it needs, the ranks agree, and only then are the runs
// written: after an error no rank's state has changed.
absl::Status LoadModel(const std::string& dir, const TensorState& live,
                       comm::Group* group);

}  // namespace strata::checkpoint::dcp

#endif  // STRATA_CHECKPOINT_DCP_LOAD_H_
