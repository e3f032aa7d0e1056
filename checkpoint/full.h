// The full checkpoint format: one PyTorch file (the zip format Python's
// torch.load reads), written by rank 0, in mmengine's layout:
//
//   {"meta": {"seed", "time", "strata_version", "git_hash", "step",
//             "world_size", "strategy", "model_config", "optimizer",
//             "checksums": {"<record key>": CRC-32C, ...}},
//    "state_dict": {"<parameter>": tensor, ...},
//    "optimizer": the state_dict() layout of torch.optim.AdamW, Adam or SGD
//                 (meta "optimizer" says which; torch_optimizer.h):
//                 {"state", "param_groups", "param_names"},
//    "param_schedulers": [{"<key>": value, ...}],
//    <extra keys>...}
//
// The optimizer part is what torch.optim.AdamW(...).state_dict() (or
// Adam's, or SGD's: the class of Contents' meta.optimizer) writes for
// Strata's param groups (weight decay for matrices and embeddings, none for
// biases and norms; frozen parameters in no group), so that a PyTorch user
// loads it with load_state_dict and continues; "param_names" (ignored by
// PyTorch) names each index. Extra values: int, float, str; Bytes become
// uint8 tensors.
//
// Saving gathers one tensor at a time to rank 0 (point-to-point from the
// ranks that hold its pieces) and writes it as the archive's next record
// before gathering the next: rank 0's extra memory is bounded by the largest
// tensor, not the model. Each tensor's CRC-32C goes into meta "checksums"
// (keys "state_dict/<name>", "optimizer/<name>"), verified on load (files
// saved by Python have none and load unverified). The file is written under
// a temporary name, fsynced, renamed and its directory fsynced
// (AtomicFileWriter): a crash leaves the previous file or none.
//
// Loading parses the pickle (every record the loader reads has its zip
// CRC-32 verified, serialization/zip_reader.h), then reads the tensors this
// rank's runs need one at a time (TorchFileReader::Materialize), verifies
// each against its checksum and keeps only the runs' ranges: a rank's extra
// memory is the largest tensor plus its own runs, not the file. Nothing is
// copied into the live state until every rank validated everything. A file that
// is a plain state dict (Python's `torch.save(model.state_dict(), path)`) loads
// as the model part.
#ifndef STRATA_CHECKPOINT_FULL_H_
#define STRATA_CHECKPOINT_FULL_H_

#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "checkpoint/contents.h"
#include "checkpoint/torch_optimizer.h"
#include "comm/group.h"

namespace strata::checkpoint {

struct FullOptions {
  // Model parameter names in the model's order: the state dict's order and
  // the optimizer's parameter indices. Empty: the order of the saved state.
  std::vector<std::string> parameter_order;
  // Parameters with requires_grad false: in no param group, without state
  // (torch_optimizer.h); loading gives them zero moments.
  std::set<std::string> frozen;
  // The param groups' hyperparameters (saving; the class is the contents'
  // meta.optimizer).
  OptimizerHyperparameters hyper;
  // Loading the optimizer: the live optimizer (Meta::optimizer's values).
  // When set, a file whose optimizer differs (its meta "optimizer", or for
  // files without one what its param groups show) is an error naming both,
  // before anything is staged (CheckOptimizer). Empty: not checked.
  std::string optimizer;
};

// A collective over `group` (null: one process); `contents` from rank 0.
// Errors are the same on every rank.
absl::Status SaveFull(const std::string& path, const TensorState& state,
                      const Contents& contents, comm::Group* group,
                      const FullOptions& options = FullOptions());

// A collective over `group` (null: one process). As LoadSharded (sharded.h):
// nothing changes unless every rank validated everything. Errors name the
// path and: not a PyTorch file / not a checkpoint, a tensor whose checksum
// does not match (its record key), missing or unexpected keys under strict,
// shapes (key and both shapes), another optimizer (FullOptions::optimizer).
// The returned meta.optimizer is the file's, or for a file without one
// (saved by PyTorch) the SGD kind its param groups show.
absl::StatusOr<Contents> LoadFull(const std::string& path,
                                  const TensorState& live,
                                  const ReadOptions& options,
                                  comm::Group* group,
                                  const FullOptions& full = FullOptions());

// Reads a whole full checkpoint (verifying the checksums it carries) as one
// process's state: every tensor whole (offset 0), model tensors in the
// file's order, optimizer tensors named as in OptimizerState ("<param>.
// exp_avg", ..., "step"). For tools (inspect, verify, convert).
struct ReadCheckpoint {
  TensorState state;
  Contents contents;
  std::vector<std::string> parameter_order;
};
absl::StatusOr<ReadCheckpoint> ReadFullCheckpoint(const std::string& path);

}  // namespace strata::checkpoint

#endif  // STRATA_CHECKPOINT_FULL_H_
