// The Adam family over flat fp32 buffers (see optimizer.h): AdamW and Adam,
// with exactly the semantics of PyTorch's torch.optim.AdamW and
// torch.optim.Adam (amsgrad=False). For each element of a range with weight
// decay wd, at step t (counting from 1):
//
//   AdamW:  p *= 1 - lr * wd      (decoupled decay; skipped if wd = 0)
//   Adam:   g  = g + wd * p       (L2 decay, into the gradient; skipped if
//                                  wd = 0)
//   then, for both:
//   m  = beta1 * m + (1 - beta1) * g
//   v  = beta2 * v + (1 - beta2) * g * g
//   p -= lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
//
// computed in one fused pass over memory by one kernel (the decay mode is
// its only switch), in float, in LibTorch's order of operations (results
// match torch.optim to ~1e-7).
#ifndef STRATA_OPTIM_ADAMW_H_
#define STRATA_OPTIM_ADAMW_H_

#include <ATen/core/Tensor.h>

#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "optim/optimizer.h"

namespace strata::optim {

// The options of AdamW and Adam.
struct AdamWOptions {
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
};

// Checks 0 <= beta1, beta2 < 1 and a finite eps >= 0. Errors name the field
// ("AdamW beta1 must be in [0, 1), got 1"), or with a `flag_prefix` the
// flag ("--beta1 must be in [0, 1), got 1" for "--").
absl::Status ValidateAdamWOptions(const AdamWOptions& options,
                                  absl::string_view flag_prefix = "");

// An AdamW optimizer updating `params` from `grads` (1-D fp32 contiguous
// CPU tensors with the same numel, borrowed: they must outlive it). `ranges`
// as in NormalizeParamRanges. State: "exp_avg", "exp_avg_sq" (zeros, like
// params), "step". name() "adamw".
absl::StatusOr<std::unique_ptr<Optimizer>> CreateAdamW(
    at::Tensor params, at::Tensor grads, std::vector<ParamRange> ranges,
    const AdamWOptions& options);

// As CreateAdamW, with Adam's L2 weight decay (torch.optim.Adam): each
// range's weight decay is added to the gradient instead of shrinking the
// parameter. The same state. name() "adam".
absl::StatusOr<std::unique_ptr<Optimizer>> CreateAdam(
    at::Tensor params, at::Tensor grads, std::vector<ParamRange> ranges,
    const AdamWOptions& options);

}  // namespace strata::optim

#endif  // STRATA_OPTIM_ADAMW_H_
