// Dynamic loss scaling for fp16 training, with the semantics of
// torch.cuda.amp.GradScaler, or of DeepSpeed's DynamicLossScaler with
// `hysteresis` and `min_scale` (DeepSpeed's fp16.hysteresis and
// fp16.min_loss_scale; consecutive_hysteresis off, its default).
//
// Each step: multiply the loss by scale() before backward; call
// UnscaleAndCheck on the gradients (after they were reduced across ranks,
// before clipping); if it returned true run the optimizer step, otherwise
// skip it; then call Update with whether infs/NaNs were found. Update backs
// the scale off on a non-finite step and grows it after growth_interval
// consecutive clean steps. Like GradScaler's float32 scale tensor, the scale
// always holds a float32 value, and it does not grow past float32's range.
#ifndef STRATA_OPTIM_LOSS_SCALER_H_
#define STRATA_OPTIM_LOSS_SCALER_H_

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace strata::optim {

struct LossScalerOptions {
  double init_scale = 65536.0;
  // Growth after growth_interval clean steps; 1 disables growth.
  double growth_factor = 2.0;
  // Back-off after a step with infs/NaNs; 1 disables it (with growth_factor
  // 1: a static loss scale).
  double backoff_factor = 0.5;
  int64_t growth_interval = 2000;
  // Steps with infs/NaNs tolerated before a back-off: the first
  // hysteresis - 1 of them are skipped without changing the scale; after
  // that every one backs off, until the next growth restores the allowance
  // (DeepSpeed's delayed_shift). 1: every one backs off (GradScaler).
  int64_t hysteresis = 1;
  // Back-offs never take the scale below this; 0: no floor (GradScaler).
  double min_scale = 0.0;
};

// Checks 0 < init_scale <= float32 max, growth_factor >= 1,
// 0 < backoff_factor <= 1, growth_interval >= 1, hysteresis >= 1,
// 0 <= min_scale <= float32 max; names the field.
absl::Status ValidateLossScalerOptions(const LossScalerOptions& options);

class LossScaler {
 public:
  static absl::StatusOr<std::unique_ptr<LossScaler>> Create(
      const LossScalerOptions& options);

  LossScaler(const LossScaler&) = delete;
  LossScaler& operator=(const LossScaler&) = delete;

  // The factor to multiply the loss by.
  double scale() const { return scale_; }
  // Clean steps since the last growth or step with infs/NaNs.
  int64_t growth_tracker() const { return growth_tracker_; }
  // Steps with infs/NaNs still absorbed before the next back-off, plus one
  // (1: the next one backs off).
  int64_t hysteresis_left() const { return hysteresis_left_; }
  const LossScalerOptions& options() const { return options_; }

  // Multiplies `grads` in place by 1 / scale() (exactly a division for the
  // usual power-of-two scales; GradScaler does the same) and returns true iff
  // every result is finite. With sharded gradients, `any_across_shards`
  // receives whether this rank found an inf/NaN and returns whether any rank
  // did (e.g. an all-reduce with max), so that all ranks agree to skip.
  // `grads`: a defined, contiguous CPU tensor of Float, Double, BFloat16 or
  // Half (CHECKed).
  bool UnscaleAndCheck(
      at::Tensor grads,
      const std::function<bool(bool)>& any_across_shards = nullptr);

  // Ends a step: on `found_inf` (the step was skipped) restarts the count of
  // clean steps and, unless hysteresis absorbs it, multiplies the scale by
  // backoff_factor (not below min_scale); otherwise counts a clean step and,
  // at growth_interval of them, multiplies the scale by growth_factor (unless
  // that leaves float32's range), restores the hysteresis and restarts the
  // count.
  void Update(bool found_inf);

  // Saveable state as named doubles: GradScaler's state_dict ("scale",
  // "growth_factor", "backoff_factor", "growth_interval", "growth_tracker")
  // and "hysteresis", "min_scale", "hysteresis_left".
  std::vector<std::pair<std::string, double>> State() const;

  // Loads State(): every key exactly once, values valid as options, the
  // growth tracker an integer in [0, growth_interval), hysteresis_left an
  // integer in [1, hysteresis]. Replaces the options
  // too (as GradScaler.load_state_dict does). Nothing changes on error.
  absl::Status LoadState(
      const std::vector<std::pair<std::string, double>>& state);

 private:
  explicit LossScaler(const LossScalerOptions& options);

  LossScalerOptions options_;
  double scale_;
  int64_t growth_tracker_ = 0;
  int64_t hysteresis_left_;
};

}  // namespace strata::optim

#endif  // STRATA_OPTIM_LOSS_SCALER_H_
