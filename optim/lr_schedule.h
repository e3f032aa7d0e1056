// Learning-rate schedules: linear warm-up, then constant, cosine, linear or
// step decay — what mmengine's LinearLR warm-up followed by ConstantLR,
// CosineAnnealingLR, LinearLR or StepLR gives, as a closed-form function of
// the step.
//
// Steps count from 0 (the first optimizer step uses LrAt(0)):
//   s < warmup_steps:   base_lr * (s + 1) / warmup_steps
//   then, with t = s - warmup_steps and T = total_steps - warmup_steps:
//   constant:           base_lr
//   cosine:             min_lr + (base_lr - min_lr) * (1 + cos(pi * t / T)) / 2
//   linear:             min_lr + (base_lr - min_lr) * (1 - t / T)
//   step:               base_lr * gamma^floor(t / step_size)
// cosine and linear stay at min_lr from step total_steps on.
#ifndef STRATA_OPTIM_LR_SCHEDULE_H_
#define STRATA_OPTIM_LR_SCHEDULE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace strata::optim {

struct LrScheduleOptions {
  // "constant", "cosine", "linear" or "step".
  std::string kind = "cosine";
  double base_lr = 3e-4;
  // Linear warm-up from 0 to base_lr over this many steps (0: none).
  int64_t warmup_steps = 0;
  // cosine and linear: the step at which the lr reaches min_lr.
  int64_t total_steps = 0;
  // cosine and linear: the final lr, in [0, base_lr].
  double min_lr = 0.0;
  // step: multiply the lr by gamma every step_size steps after warm-up.
  int64_t step_size = 0;
  double gamma = 0.1;
};

// Checks the options; errors name the field and what was expected, e.g.
// "lr_schedule 'cosine' needs total_steps > warmup_steps, got total_steps 10
// and warmup_steps 10".
absl::Status ValidateLrScheduleOptions(const LrScheduleOptions& options);

class LrSchedule;

// A schedule restored from its saved state, and the last step it had given a
// learning rate for (-1: none yet).
struct RestoredLrSchedule {
  std::unique_ptr<LrSchedule> schedule;
  int64_t last_step = -1;
};

class LrSchedule {
 public:
  static absl::StatusOr<std::unique_ptr<LrSchedule>> Create(
      const LrScheduleOptions& options);

  LrSchedule(const LrSchedule&) = delete;
  LrSchedule& operator=(const LrSchedule&) = delete;

  // The learning rate of step `step` (>= 0, CHECKed).
  double LrAt(int64_t step) const;

  const LrScheduleOptions& options() const { return options_; }

  // Saveable state, mmengine-style: the options plus `last_step` (the last
  // step whose lr was used, -1 before the first) as named doubles: "kind"
  // (0 constant, 1 cosine, 2 linear, 3 step), "base_lr", "warmup_steps",
  // "total_steps", "min_lr", "step_size", "gamma", "last_step".
  std::vector<std::pair<std::string, double>> State(int64_t last_step) const;

  // Restores a schedule from State(): every key exactly once, integer fields
  // integral, then the options validated as by ValidateLrScheduleOptions.
  static absl::StatusOr<RestoredLrSchedule> FromState(
      const std::vector<std::pair<std::string, double>>& state);

  // Restores a schedule from its options and last step (the typed form of
  // State(), which checkpoints store as named fields): the options
  // validated as by ValidateLrScheduleOptions, last_step >= -1.
  static absl::StatusOr<RestoredLrSchedule> FromOptions(
      const LrScheduleOptions& options, int64_t last_step);

 private:
  enum class Kind { kConstant = 0, kCosine = 1, kLinear = 2, kStep = 3 };

  LrSchedule(const LrScheduleOptions& options, Kind kind);

  LrScheduleOptions options_;
  Kind kind_;
};

}  // namespace strata::optim

#endif  // STRATA_OPTIM_LR_SCHEDULE_H_
