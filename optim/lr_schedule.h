// Learning-rate schedules, each a closed-form function of the step:
//
// Linear warm-up, then constant, cosine, linear or step decay — what
// mmengine's LinearLR warm-up followed by ConstantLR, CosineAnnealingLR,
// LinearLR or StepLR gives. Steps count from 0 (the first optimizer step
// uses LrAt(0)):
//   s < warmup_steps:   base_lr * (s + 1) / warmup_steps
//   then, with t = s - warmup_steps and T = total_steps - warmup_steps:
//   constant:           base_lr
//   cosine:             min_lr + (base_lr - min_lr) * (1 + cos(pi * t / T)) / 2
//   linear:             min_lr + (base_lr - min_lr) * (1 - t / T)
//   step:               base_lr * gamma^floor(t / step_size)
// cosine and linear stay at min_lr from step total_steps on.
//
// DeepSpeed's WarmupLR, WarmupDecayLR and WarmupCosineLR
// (deepspeed/runtime/lr_schedules.py), exactly: the same expressions in the
// same order of operations, and DeepSpeed's timing. DeepSpeed (its current
// sources; older releases left the optimizer's lr for the first step) sets
// the lr of the first step when the scheduler is built and steps the
// scheduler after each optimizer step, so step s >= 1 runs at the
// schedule's value for i = s - 1 (DeepSpeed's last_batch_iteration). With
// W = max(2, warmup_steps), T = total_steps and the warm-up fraction
//   g(i) = (1 / ln W) * ln(i + 1)   (warmup_type "log", DeepSpeed's default)
//   g(i) = i / W                    (warmup_type "linear"):
//   warmup_lr:        s = 0: min_lr; i < W: min_lr + (base_lr - min_lr) g(i);
//                     then base_lr
//   warmup_decay_lr:  as warmup_lr, then from i = W
//                     min_lr + (base_lr - min_lr)
//                              * max(0, (T - i) / max(1, T - W))
//   warmup_cosine_lr: s = 0: 0; i < W: base_lr * (r0 + g(i) * (1 - r0));
//                     then base_lr * max(0, r1 + (1 - r1)
//                              * (1 + cos(pi (i - W + 1) / (T - W))) / 2)
//                     with r0 = warmup_min_ratio and r1 = min_ratio
//                     (DeepSpeed's cos_min_ratio); base_lr is the
//                     optimizer's lr. Like DeepSpeed's, the cosine is not
//                     clamped after T.
// (DeepSpeed's WarmupCosineLR sets 0 for the first step in the first param
// group only; Strata's two groups share one lr, as DeepSpeed's single group
// of model.parameters() does.)
#ifndef STRATA_OPTIM_LR_SCHEDULE_H_
#define STRATA_OPTIM_LR_SCHEDULE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace strata::optim {

// The schedule's shape: the lr after linear warm-up, or one of DeepSpeed's
// warm-up schedules. The values are the codes State() saves as "kind".
enum class LrScheduleKind {
  kConstant = 0,
  kCosine = 1,
  kLinear = 2,
  kStep = 3,
  kWarmupLr = 4,        // "warmup_lr": DeepSpeed's WarmupLR.
  kWarmupDecayLr = 5,   // "warmup_decay_lr": DeepSpeed's WarmupDecayLR.
  kWarmupCosineLr = 6,  // "warmup_cosine_lr": DeepSpeed's WarmupCosineLR.
};

// "constant", "cosine", "linear", "step", "warmup_lr", "warmup_decay_lr" or
// "warmup_cosine_lr" (the train binary's --lr_schedule, the saved state's
// names). Anything else is InvalidArgument "<what>: must be ..., got '<name>'".
// Pure functions, callable from any thread.
absl::StatusOr<LrScheduleKind> ParseLrScheduleKind(
    absl::string_view name, absl::string_view what = "--lr_schedule");
// The spelling ParseLrScheduleKind takes (Parse(Name(k)) == k).
absl::string_view LrScheduleKindName(LrScheduleKind kind);
// kWarmupLr, kWarmupDecayLr or kWarmupCosineLr.
bool IsDeepSpeedSchedule(LrScheduleKind kind);

struct LrScheduleOptions {
  LrScheduleKind kind = LrScheduleKind::kCosine;
  double base_lr = 3e-4;
  // Linear warm-up from 0 to base_lr over this many steps (0: none);
  // DeepSpeed's kinds: warmup_num_steps (at least 2 are taken).
  int64_t warmup_steps = 0;
  // cosine and linear: the step at which the lr reaches min_lr; DeepSpeed's
  // kinds: total_num_steps.
  int64_t total_steps = 0;
  // cosine and linear: the final lr, in [0, base_lr]; warmup_lr and
  // warmup_decay_lr: warmup_min_lr, where the warm-up starts (and the decay
  // ends).
  double min_lr = 0.0;
  // step: multiply the lr by gamma every step_size steps after warm-up.
  int64_t step_size = 0;
  double gamma = 0.1;
  // DeepSpeed's kinds: the warm-up curve, "log" or "linear" (the other kinds
  // warm up linearly and take only "linear").
  std::string warmup_type = "linear";
  // warmup_cosine_lr: the warm-up starts at warmup_min_ratio * base_lr and
  // the cosine ends at min_ratio * base_lr; each in [0, 1].
  double warmup_min_ratio = 0.0;
  double min_ratio = 0.0;
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
  // (LrScheduleKind's value: 0 constant, 1 cosine, 2 linear, 3 step, 4
  // warmup_lr, 5 warmup_decay_lr, 6 warmup_cosine_lr), "base_lr",
  // "warmup_steps", "total_steps", "min_lr", "step_size", "gamma", "last_step",
  // "warmup_type" (0 linear, 1 log), "warmup_min_ratio", "min_ratio".
  std::vector<std::pair<std::string, double>> State(int64_t last_step) const;

  // Restores a schedule from State(): every key exactly once (a state saved
  // before the last three keys existed may lack all three: their defaults),
  // integer fields integral, then the options validated as by
  // ValidateLrScheduleOptions.
  static absl::StatusOr<RestoredLrSchedule> FromState(
      const std::vector<std::pair<std::string, double>>& saved);

  // Restores a schedule from its options and last step (the typed form of
  // State(), which checkpoints store as named fields): the options
  // validated as by ValidateLrScheduleOptions, last_step >= -1.
  static absl::StatusOr<RestoredLrSchedule> FromOptions(
      const LrScheduleOptions& options, int64_t last_step);

 private:
  explicit LrSchedule(const LrScheduleOptions& options);
  // DeepSpeed's kinds.
  double DeepSpeedLrAt(int64_t step) const;

  LrScheduleOptions options_;
};

}  // namespace strata::optim

#endif  // STRATA_OPTIM_LR_SCHEDULE_H_
