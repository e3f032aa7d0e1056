// The checkpoint API, in the spirit of mmengine's runner: save a strategy's
// model and optimizer state plus metadata, the LR schedule's state and extra
// values in one of four formats, load it back (strictly or not, renaming
// keys), resume, and manage the checkpoints of a run (a `latest` pointer,
// keeping the last few, asynchronous saves).
//
// Formats (see checkpoint/full.h, local.h, sharded.h, dcp/):
//   full     one PyTorch file written by rank 0 (Python's torch.load reads
//            it); loads under any world size and strategy.
//   local    one file per rank as the strategy keeps its state; loads only
//            under the same world size and strategy.
//   sharded  one data file per rank written in parallel plus metadata;
//            loads under any world size and strategy, each rank reading only
//            what it needs.
//   dcp      PyTorch's torch.distributed.checkpoint directory (one .distcp
//            file per rank plus .metadata); loads under any world size and
//            strategy, and PyTorch's dcp.load reads it.
//
// Every function taking a `group` is a collective over it (null: one
// process); each rank passes its own strategy. Errors are the same on every
// rank, and a failed load leaves every rank's state as it was.
//
// Example (every rank; see checkpoint/README.md for the formats and paths):
//
//   SaveOptions save;
//   save.format = Format::kSharded;
//   Contents contents;
//   contents.meta.step = step;
//   STRATA_RETURN_IF_ERROR(SaveCheckpointToRoot(root, step, /*keep_last=*/3,
//                                               strategy, group, contents,
//                                               save));
//   // Later, under any strategy and world size:
//   STRATA_ASSIGN_OR_RETURN(Contents resumed,
//                           Resume("auto", strategy, group, true, true, root));
#ifndef STRATA_CHECKPOINT_STRATEGY_CHECKPOINT_H_
#define STRATA_CHECKPOINT_STRATEGY_CHECKPOINT_H_

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "checkpoint/contents.h"
#include "checkpoint/format.h"
#include "checkpoint/sharded.h"
#include "checkpoint/torch_optimizer.h"
#include "comm/group.h"
#include "models/config.h"
#include "strategies/strategy.h"

namespace strata::checkpoint {

struct SaveOptions {
  Format format = Format::kSharded;
  bool save_optimizer = true;
  // Keep Contents::param_scheduler (otherwise it is dropped).
  bool save_param_scheduler = true;
  // Leave out parameters with requires_grad false (and their optimizer
  // state).
  bool exclude_frozen_parameters = false;
  // Added to Contents::extra.
  NamedValues extra;
  // Called on every rank with the contents just before they are written
  // (mmengine's before-save callback): may add or change entries.
  std::function<void(Contents&)> callback;
  // Sharded format: checksum block size, split size, test hooks.
  WriteOptions write;
  // Full format: the learning rate its param groups record, the next
  // step's (PyTorch's group lr after the scheduler stepped). The class and
  // the other hyperparameters are the strategy's OptimizerConfig's
  // (checkpoint/torch_optimizer.h).
  double optimizer_lr = 3e-4;
};

// The model's parameters as the full format lists them: names in
// named_parameters() order and those with requires_grad false.
struct ModelParameters {
  std::vector<std::string> order;
  std::set<std::string> frozen;
};
ModelParameters ParametersOf(strategies::Strategy& strategy);

struct LoadOptions {
  bool strict = true;
  // (regex, replacement) applied to the checkpoint's model keys.
  std::vector<std::pair<std::string, std::string>> revise_keys;
  bool load_optimizer = true;
  // Borrowed, may be null: how the model's keys matched (ReadOptions).
  KeyReport* model_keys = nullptr;
  // Parameters (and their optimizer state) a strict load tolerates being
  // absent (ReadOptions::may_be_missing).
  std::set<std::string> may_be_missing;
};

// The state SaveCheckpoint writes: the strategy's model (and optimizer)
// runs, filtered as `options` say. The tensors alias the live state.
TensorState CollectState(strategies::Strategy& strategy,
                         const SaveOptions& options);

// Fills in meta defaults (time, version, git hash; world size and strategy
// when unset), the strategy's optimizer (meta.optimizer:
// strategies::OptimizerStateName), and applies options (extra, scheduler,
// callback).
Contents PrepareContents(Contents contents, strategies::Strategy& strategy,
                         comm::Group* group, const SaveOptions& options);

// The hyperparameters the full format's param groups record for
// `config`, with learning rate `lr`.
OptimizerHyperparameters HyperparametersOf(
    const strategies::OptimizerConfig& config, double lr);

// Writes a collected state (CollectState) in `format`: the common back end
// of SaveCheckpoint and the asynchronous saver. The full format's param
// groups are of contents.meta.optimizer's class with `hyperparameters`.
absl::Status SaveState(const std::string& path, const TensorState& state,
                       const Contents& contents, const std::string& strategy,
                       const ModelParameters& parameters,
                       const OptimizerHyperparameters& hyperparameters,
                       comm::Group* group, const SaveOptions& options);

// mmengine's save_checkpoint: writes `path` (a file for full, a directory
// otherwise), atomically.
absl::Status SaveCheckpoint(const std::string& path,
                            strategies::Strategy& strategy, comm::Group* group,
                            Contents contents,
                            const SaveOptions& options = SaveOptions());

// mmengine's load_checkpoint: detects the format from `path`, loads the
// model (and optimizer) state into the strategy — all or nothing, on every
// rank — then calls strategy.AfterStateLoaded(). Returns the contents.
// Loading the optimizer from a checkpoint of another optimizer (its
// meta.optimizer against the strategy's OptimizerStateName: another kind,
// or SGD with momentum against SGD without) is an error naming the
// checkpoint and both optimizers, before anything is loaded. A PyTorch
// torch.distributed.checkpoint (DCP) directory loads its model weights
// only (checkpoint/dcp/load.h; strict, no revise_keys) and returns empty
// contents (step 0); with `load_optimizer` it is Unimplemented, saying so.
absl::StatusOr<Contents> LoadCheckpoint(
    const std::string& path, strategies::Strategy& strategy, comm::Group* group,
    const LoadOptions& options = LoadOptions());

// Loads Hugging Face weights (`path`: a .safetensors file or a directory,
// single or sharded; models/hf_layout.h) into the strategy's model, strictly,
// converted from Hugging Face's layout for `config` (the model's config;
// its family picks GPT-2 or Llama). A config.json beside the weights must
// describe the same architecture (models::CheckHfConfig). Every rank maps the
// files and copies only its runs; errors are agreed across ranks and nothing is
// copied unless every rank succeeds.
absl::Status LoadHfWeights(const std::string& path,
                           const models::ModelConfig& config,
                           strategies::Strategy& strategy, comm::Group* group);

// mmengine's resume: a strict load of the model and, with
// `resume_optimizer`, the optimizer; Contents::param_scheduler is cleared
// unless `resume_param_scheduler`. `path` may be "auto" with `root` set: the
// newest valid checkpoint under `root`. The checkpoints are tried newest
// first (CheckpointsNewestFirst); one that fails to load and is corrupt
// (rank 0's VerifyCheckpoint fails: a truncated or missing file, a checksum
// mismatch) is skipped with a warning on every rank naming it and why, and
// nothing of it is loaded; a sound one that fails to load (another model or
// optimizer) is the error. NotFound naming `root` when no checkpoint is left
// (none, or every one corrupt: the message counts those skipped).
// `may_be_missing`: parameters the checkpoint may lack (frozen ones it
// excluded; LoadOptions::may_be_missing).
absl::StatusOr<Contents> Resume(
    const std::string& path, strategies::Strategy& strategy, comm::Group* group,
    bool resume_optimizer = true, bool resume_param_scheduler = true,
    const std::string& root = "",
    const std::set<std::string>& may_be_missing = {});

// --- The checkpoints of a run, under one root directory. ---
//
// <root>/step_<step, 8 digits> (a directory, or a file ending ".pth" for
// the full format) and <root>/latest, a text file naming the newest
// committed one, replaced atomically after the checkpoint itself is
// committed.

std::string CheckpointPathForStep(const std::string& root, int64_t step,
                                  Format format);

// The checkpoint `latest` names if it exists; otherwise the newest complete
// step_* entry (a directory with metadata, or a full file). NotFound naming
// `root` when there is none.
absl::StatusOr<std::string> FindLatest(const std::string& root);

// The complete checkpoints under `root`, newest first: the one `latest`
// names (when it is complete), then the step_* entries of earlier steps by
// decreasing step (all of them without a usable `latest`). Empty when there
// is none or `root` is not a directory.
std::vector<std::string> CheckpointsNewestFirst(const std::string& root);

// Reads the whole checkpoint at `path` (any format) and checks every
// checksum, without loading it into a model: OK, or the first problem (a
// missing or truncated file, a checksum mismatch, unreadable metadata)
// naming the file. What `strata_ckpt verify` checks.
absl::Status VerifyCheckpoint(const std::string& path);

// Saves step `step` under `root`, updates `latest`, then deletes all but the
// newest `keep_last` checkpoints (0: keep all).
absl::Status SaveCheckpointToRoot(const std::string& root, int64_t step,
                                  int keep_last, strategies::Strategy& strategy,
                                  comm::Group* group, Contents contents,
                                  const SaveOptions& options = SaveOptions());

// Asynchronous saves: Save copies the state into staging buffers (reused
// across saves) — the only time training waits — and a background thread
// writes it while training continues. The next Save, Wait or the destructor
// waits for the save in flight.
//
// The background thread runs collectives, so it needs a group of its own:
// `group` must not be used by anything else while a save is in flight (e.g.
// a Split of the training group made for checkpoints); borrowed, may be null
// for one process. Methods are called from one thread.
class AsyncCheckpointer {
 public:
  explicit AsyncCheckpointer(comm::Group* group);
  ~AsyncCheckpointer();
  AsyncCheckpointer(const AsyncCheckpointer&) = delete;
  AsyncCheckpointer& operator=(const AsyncCheckpointer&) = delete;

  // As SaveCheckpointToRoot, in the background. Returns the previous save's
  // error, if any (after waiting for it), or a staging error.
  absl::Status SaveToRoot(const std::string& root, int64_t step, int keep_last,
                          strategies::Strategy& strategy, Contents contents,
                          const SaveOptions& options = SaveOptions());
  // Waits for the save in flight; returns its status.
  absl::Status Wait();
  // Seconds the last SaveToRoot spent copying the state (the training
  // stall).
  double last_stage_s() const { return last_stage_s_; }

 private:
  comm::Group* const group_;
  TensorState staging_;
  std::thread thread_;
  absl::Status status_;
  double last_stage_s_ = 0;
};

}  // namespace strata::checkpoint

#endif  // STRATA_CHECKPOINT_STRATEGY_CHECKPOINT_H_
