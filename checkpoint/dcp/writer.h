// Writes a torch.distributed.checkpoint (DCP) directory as PyTorch 2.6's
// dcp.save with FileSystemWriter does (metadata.h has the layout), from the
// tensors each rank holds: PyTorch's dcp.load reads it at any world size,
// into a plain, DTensor or FSDP2 state dict, and so does Strata's own
// reader (reader.h, load.h).
//
// Keys: the layout torch.distributed.checkpoint.state_dict.get_state_dict
// gives a model and its optimizer (torchtitan's), flattened with "." as DCP
// does:
//   model.<param>                      the model's tensors
//   optim.state.<param>.<key>          exp_avg, exp_avg_sq (AdamW, Adam),
//                                      momentum_buffer (SGD with momentum)
//   optim.state.<param>.step           a float32 scalar: the step, per
//                                      trainable parameter, as PyTorch's
//                                      optimizers keep it
//   optim.param_groups.<g>.<key>       the groups' hyperparameters, and
//                                      "params": their parameters' names
//                                      (torch_optimizer.h's groups)
// and Strata's own, which PyTorch's loads leave alone unless asked for:
//   strata.optim.<name>                optimizer tensors of no parameter
//   strata.meta.<field>                Meta (step, seed, strategy, ...)
//   strata.param_scheduler.<field>     the LR schedule's state
//   strata.extra.<key>                 extra values (bytes: uint8 tensors)
// Every tensor chunk is one item: a torch.save archive of the chunk; a
// value is torch.save'd. Rank r writes `__<r>_0.distcp`.
#ifndef STRATA_CHECKPOINT_DCP_WRITER_H_
#define STRATA_CHECKPOINT_DCP_WRITER_H_

#include <cstdint>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "checkpoint/contents.h"
#include "checkpoint/dcp/metadata.h"
#include "checkpoint/torch_optimizer.h"
#include "comm/group.h"

namespace strata::checkpoint::dcp {

struct WriteOptions {
  // The model's parameters in named_parameters() order (the param groups'
  // order). Empty: the model tensors in the order of rank 0's runs.
  std::vector<std::string> parameter_order;
  // Parameters with requires_grad false: in no param group, without state.
  std::set<std::string> frozen;
  // The param groups' values (the class is the contents' meta.optimizer).
  OptimizerHyperparameters hyper;
  // Test hook: called on every rank after its data file is synced, before
  // the checkpoint is committed.
  std::function<void()> before_commit;
};

// A box of a tensor: `offsets` and `sizes` per dimension, whose elements
// are [begin, begin + numel) of the tensor flattened (row-major).
struct Box {
  std::vector<int64_t> offsets;
  std::vector<int64_t> sizes;
  int64_t begin = 0;
};

// The fewest boxes (at most 2 * ndim - 1) that together are the elements
// [begin, begin + numel) of a tensor of `shape` flattened, in element
// order, each contiguous in memory. A 0-d tensor is one box of no
// dimensions. Pure.
std::vector<Box> BoxesOfRange(const std::vector<int64_t>& shape, int64_t begin,
                              int64_t numel);

// A collective over `group` (null: one process): every rank calls it with
// the tensors it holds (the model runs; the optimizer runs as
// Strategy::OptimizerState names them: "<param>.<key>" and an int64 scalar
// "step"); `contents` is taken from rank 0. Elements held by several ranks
// are written once (save_plan.h). Replaces an existing checkpoint at `dir`
// atomically: the data files, then `.metadata`, then the directory is
// renamed into place (io.h). Errors, the same on every rank, name the
// directory, the file and the rank.
absl::Status SaveDcp(const std::string& dir, const TensorState& state,
                     const Contents& contents, comm::Group* group,
                     const WriteOptions& options = WriteOptions());

}  // namespace strata::checkpoint::dcp

#endif  // STRATA_CHECKPOINT_DCP_WRITER_H_
