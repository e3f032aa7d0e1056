// AdamW over flat fp32 buffers (see optimizer.h), with exactly the
// semantics of PyTorch's torch.optim.AdamW (amsgrad=False): for each element
// of a range with weight decay wd, at step t (counting from 1),
//
//   p  *= 1 - lr * wd                       (decoupled decay; skipped if wd =
//   0) m   = beta1 * m + (1 - beta1) * g v   = beta2 * v + (1 - beta2) * g * g
//   p  -= lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
//
// computed in one fused pass over memory, in float, in LibTorch's order of
// operations (results match torch::optim::AdamW to ~1e-7).
#ifndef STRATA_OPTIM_ADAMW_H_
#define STRATA_OPTIM_ADAMW_H_

#include <ATen/core/Tensor.h>

#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "optim/optimizer.h"

namespace strata::optim {

struct AdamWOptions {
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
};

// Checks 0 <= beta1, beta2 < 1 and eps >= 0; names the field.
absl::Status ValidateAdamWOptions(const AdamWOptions& options);

// An AdamW optimizer updating `params` from `grads` (1-D fp32 contiguous
// CPU tensors with the same numel, borrowed: they must outlive it). `ranges`
// as in NormalizeParamRanges. State: "exp_avg", "exp_avg_sq" (zeros, like
// params), "step".
absl::StatusOr<std::unique_ptr<Optimizer>> CreateAdamW(
    at::Tensor params, at::Tensor grads, std::vector<ParamRange> ranges,
    const AdamWOptions& options);

}  // namespace strata::optim

#endif  // STRATA_OPTIM_ADAMW_H_
