#include "launch/config/checkpoint_options.h"

#include "absl/strings/str_cat.h"

namespace strata::launch {

absl::Status ValidateTrainingCheckpointOptions(
    const TrainingCheckpointOptions& o) {
  if (o.save_every < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--save_every must be >= 0 (0: no checkpoints), got ", o.save_every));
  }
  if (o.keep_last < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--keep_last must be >= 0 (0: keep all), got ", o.keep_last));
  }
  if (!o.resume.empty() && !o.load_weights.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--resume=", o.resume, " and --load_weights=", o.load_weights,
        " are exclusive: --resume continues a run (weights, optimizer, "
        "step), --load_weights starts a fresh one from weights"));
  }
  if ((o.save_every > 0 || o.resume == "auto") && o.dir.empty()) {
    return absl::InvalidArgumentError(
        "checkpoints need a directory (--output_dir)");
  }
  return absl::OkStatus();
}

}  // namespace strata::launch
