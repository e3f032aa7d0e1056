// The options of a run's checkpoints (the --ckpt_* flags, --save_every,
// --keep_last, --async_save, --resume, --load_weights) and their validation:
// configuration only, used by launch/config/train_options (which fills them
// from TrainOptions) and by launch/train/training_checkpoint (which saves and
// resumes with them).
#ifndef STRATA_LAUNCH_CONFIG_CHECKPOINT_OPTIONS_H_
#define STRATA_LAUNCH_CONFIG_CHECKPOINT_OPTIONS_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "checkpoint/format.h"
#include "optim/lr_schedule.h"

namespace strata::launch {

struct TrainingCheckpointOptions {
  // --ckpt_format.
  checkpoint::Format format = checkpoint::Format::kSharded;
  // Root directory of the run's checkpoints (step_<n>, latest).
  std::string dir;
  // Save after every this many steps; 0: never.
  int64_t save_every = 0;
  // Keep the newest this many checkpoints; 0: all.
  int keep_last = 0;
  // Write in the background (AsyncCheckpointer) on a group split off the
  // training group.
  bool async_save = false;
  // "" (none), a checkpoint path, or "auto" (the newest valid one under
  // dir; none: start fresh). A file saved
  // by PyTorch without sampler state resumes at the data position of its
  // meta.step (step * global batch; logged).
  std::string resume;
  // "" (none) or a checkpoint (full, sharded, PyTorch, Hugging Face
  // safetensors) whose model weights start the run; exclusive with `resume`.
  std::string load_weights;
  // --ckpt_exclude_frozen_parameters: saves leave out parameters with
  // requires_grad false (checkpoint::SaveOptions); a resume keeps their
  // values.
  bool exclude_frozen_parameters = false;
  // --load_weights_strict: every model tensor in the checkpoint and every
  // checkpoint tensor in the model (else an error listing the keys); false:
  // missing tensors keep their initial values and unexpected ones are
  // ignored, both listed in a warning (mmengine's load_checkpoint(strict)).
  bool load_weights_strict = true;
  // --load_weights_revise_keys: "REGEX=REPLACEMENT" rules separated by ';',
  // applied in order to the checkpoint's model keys before matching
  // (mmengine's revise_keys, e.g. "^module\.=" strips DDP's prefix); each
  // rule splits at its last '=', so a replacement holds no '=' or ';'.
  std::string load_weights_revise_keys;
  // Recorded in meta: the seed, and the model's config as
  // models::ModelConfigRecord gives it (a registered name or config.json
  // text).
  uint64_t seed = 0;
  std::string model_config;
  // The schedule in use (its State() is saved; on resume a saved schedule
  // with other options is reported). Full checkpoints' param groups record
  // its lr of the next step, with the strategy's optimizer hyperparameters.
  optim::LrScheduleOptions schedule;
};

// Checks the options; errors name the flags (--save_every, --keep_last,
// --resume, --load_weights, --load_weights_strict,
// --load_weights_revise_keys).
absl::Status ValidateTrainingCheckpointOptions(
    const TrainingCheckpointOptions& options);

// The (regex, replacement) rules of --load_weights_revise_keys, in order;
// empty for "". Errors name the flag and the rule: a rule without '=', an
// empty regex, a regex that does not compile.
absl::StatusOr<std::vector<std::pair<std::string, std::string>>>
ParseReviseKeys(const std::string& rules);

}  // namespace strata::launch

#endif  // STRATA_LAUNCH_CONFIG_CHECKPOINT_OPTIONS_H_
