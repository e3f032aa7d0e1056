// A model's weights from a torch.distributed.checkpoint (DCP) directory
// into the model runs a process holds (checkpoint/contents.h's
// TensorState): the loader behind --load_weights=DIR and
// strata_generate's --load_weights for DCP checkpoints.
#ifndef STRATA_CHECKPOINT_DCP_LOAD_H_
#define STRATA_CHECKPOINT_DCP_LOAD_H_

#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
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

// Loads a DCP checkpoint into `live` (model and, with
// `options.load_optimizer`, optimizer runs) as --resume does, and returns
// its contents. Keys are writer.h's: the model's as LoadModel finds them;
// the optimizer's "<param>.<key>" runs from "optim.state.<param>.<key>"
// (get_state_dict's layout) or "strata.optim.<name>"; the int64 "step" from
// the float "optim.state.<param>.step" scalars, which must all be equal
// and whole. Contents come from "strata.meta.*", "strata.param_scheduler.*"
// and "strata.extra.*" when Strata wrote the checkpoint; one PyTorch wrote
// has none of them: its meta.step is the optimizer's step (one optimizer
// step per training step), its optimizer what its param groups show
// (torch_optimizer.h), and it has no schedule state. `optimizer` is the
// live optimizer (Meta::optimizer's values): another saved is an error
// naming both (CheckOptimizer). Missing and unexpected keys are errors
// under `options.strict` (listed, per section), else kept and ignored;
// `options.revise_keys` rename the model section's keys (as found, without
// the "model." of the nested layout) before matching. A collective as
// LoadModel: after an error no rank's state has changed.
absl::StatusOr<Contents> LoadDcp(const std::string& dir,
                                 const TensorState& live,
                                 const ReadOptions& options,
                                 const std::string& optimizer,
                                 comm::Group* group);

// Reads a whole DCP checkpoint into one process (tools: strata_ckpt
// inspect, verify, convert): every model and optimizer tensor whole (offset
// 0) under Strata's names, as LoadDcp maps them, and the contents. Every
// item is read, so every zip CRC-32 is verified.
absl::StatusOr<std::pair<TensorState, Contents>> ReadDcpCheckpoint(
    const std::string& dir);

}  // namespace strata::checkpoint::dcp

#endif  // STRATA_CHECKPOINT_DCP_LOAD_H_
