// Checkpoints of a training loop (launch glue used by //launch/train:trainer):
// periodic saves under a root directory with `latest` and keep_last, optional
// asynchronous saves, and exact resume — the strategy's model and optimizer
// state plus everything else a run's future depends on:
//   - the step (meta.step: the number of optimizer steps taken),
//   - the LR schedule's state (param_scheduler: named fields,
//     optim/lr_schedule_state.h),
//   - the data sampler's position (extra "sampler.<key>", the sampler's
//     State(), independent of the world size),
//   - every rank's LibTorch default CPU generator state (extras
//     "generator.cpu.rank<r>", launch/train/generator_state.h; at::dropout
//     without a DropoutContext and other random ops draw from it). Each rank
//     restores its own; under another world size the ranks that have a
//     saved state restore it and the others keep their seeded state (both
//     logged). Checkpoints with only the older "generator.cpu" restore it on
//     every rank.
//   - with loss scaling (fp16), the loss scaler's state (extras
//     "loss_scaler.<key>": scale, growth tracker, hysteresis left and its
//     options, optim::LossScaler::State()).
// Resuming at the same world size and strategy continues bitwise as the
// uninterrupted run; under another world size or strategy (sharded or full
// format) it continues at the same global sample.
#ifndef STRATA_LAUNCH_TRAIN_TRAINING_CHECKPOINT_H_
#define STRATA_LAUNCH_TRAIN_TRAINING_CHECKPOINT_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "checkpoint/strategy/checkpoint.h"
#include "comm/group.h"
#include "data/sampler.h"
#include "launch/config/checkpoint_options.h"
#include "models/config.h"
#include "optim/lr_schedule.h"
#include "strategies/strategy.h"

namespace strata::launch {

// Loads the model weights at options.load_weights into `strategy` (a
// collective over `group`, null: one process; the optimizer stays as it
// is): a Strata full or sharded checkpoint, a PyTorch file, a DCP directory,
// or Hugging Face weights (models::IsHfCheckpoint) converted for `config`,
// the model's config. Strictly, unless options.load_weights_strict is false
// or load_weights_revise_keys rename keys (not for Hugging Face weights: an
// error); such a load logs how the keys matched (rank 0: the count loaded, a
// warning listing missing and unexpected keys). Errors name
// --load_weights=<path>.
absl::Status LoadModelWeights(const TrainingCheckpointOptions& options,
                              const models::ModelConfig& config,
                              strategies::Strategy& strategy,
                              comm::Group* group);

// The model weights alone (train --eval_only): those of
// options.load_weights, or else of the options.resume checkpoint ("auto":
// the latest under options.dir), loaded as LoadModelWeights does — nothing
// else of the checkpoint (step, optimizer, sampler, generator) is restored,
// so the batch flags need not be the saving run's. Returns the path loaded.
// Errors name --load_weights or --resume.
absl::StatusOr<std::string> LoadWeightsOnly(
    const TrainingCheckpointOptions& options, const models::ModelConfig& config,
    strategies::Strategy& strategy, comm::Group* group);

class TrainingCheckpoints {
 public:
  // Borrows `strategy`, `sampler` and `group` (null: one process), which must
  // outlive it. A collective over `group` with async_save (the split).
  static absl::StatusOr<std::unique_ptr<TrainingCheckpoints>> Create(
      const TrainingCheckpointOptions& options, strategies::Strategy* strategy,
      data::DistributedSampler* sampler, comm::Group* group);
  ~TrainingCheckpoints();

  // With options.resume set: loads it (a collective) and restores the
  // sampler and generator; returns the step to continue from (0 without
  // resume). "auto" resumes the newest valid checkpoint under options.dir
  // (checkpoint::Resume skips corrupt ones, warning); with none (the first
  // start of a run, or all corrupt) it warns on every rank and returns 0. An
  // explicit path that cannot be loaded is an error. A checkpoint of another
  // optimizer than the strategy's (another
  // --optimizer, or SGD with momentum against SGD without) is an error
  // naming --resume and both optimizers (checkpoint::LoadCheckpoint).
  absl::StatusOr<int64_t> MaybeResume();

  // With options.load_weights set: loads the model weights (LoadModelWeights;
  // a collective; the optimizer, step and data position stay fresh). Hugging
  // Face weights (models::IsHfCheckpoint) are converted for `config`,
  // the run's model config. Errors name --load_weights.
  absl::Status MaybeLoadWeights(const models::ModelConfig& config);

  // After optimizer step `steps_done - 1` completed: saves if due.
  absl::Status AfterStep(int64_t steps_done);

  // Waits for an asynchronous save in flight; call before exiting.
  absl::Status Finish();

  // Seconds the last save stalled training (async: the staging copy; sync:
  // the whole save).
  double last_stall_s() const { return last_stall_s_; }

 private:
  TrainingCheckpoints(const TrainingCheckpointOptions& options,
                      checkpoint::Format format, strategies::Strategy* strategy,
                      data::DistributedSampler* sampler, comm::Group* group);
  // The non-tensor contents of a save after `steps_done` steps; a collective
  // over group_ (every rank's generator state is gathered).
  absl::StatusOr<checkpoint::Contents> Collect(int64_t steps_done) const;
  // Restores this rank's default CPU generator from `extra`
  // (launch/train/generator_state.h), logging (every rank, with its rank)
  // states missing for it or left unused. A collective over group_: an unusable
  // state on any rank fails every rank before any generator changes.
  absl::Status RestoreGenerator(const checkpoint::NamedValues& extra) const;
  // Restores the strategy's loss scaler from the "loss_scaler.*" extras
  // (the same on every rank). Without loss scaling such extras are ignored
  // (logged); a run with loss scaling resuming a checkpoint without them
  // keeps its initial scale (logged). Errors name the key; nothing changes
  // on error.
  absl::Status RestoreLossScaler(const checkpoint::NamedValues& extra) const;
  // The param groups' lr of a save after `steps_done` steps: the next
  // step's.
  double NextLr(int64_t steps_done) const;
  // The sampler state of a checkpoint that has none (a PyTorch file): the
  // position of `step` steps of the global batch; logs what it assumes.
  std::vector<std::pair<std::string, int64_t>> DerivedSamplerState(
      int64_t step) const;

  const TrainingCheckpointOptions options_;
  const checkpoint::Format format_;
  strategies::Strategy* const strategy_;
  data::DistributedSampler* const sampler_;
  comm::Group* const group_;
  std::unique_ptr<comm::Group> async_group_;
  std::unique_ptr<checkpoint::AsyncCheckpointer> async_;
  double last_stall_s_ = 0;
};

}  // namespace strata::launch

#endif  // STRATA_LAUNCH_TRAIN_TRAINING_CHECKPOINT_H_
