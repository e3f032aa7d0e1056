// SGD over flat fp32 buffers (see optimizer.h), with exactly the semantics of
// PyTorch's torch.optim.SGD: for each element of a range with weight decay
// wd,
//
//   d = g + wd * p                           (L2 decay; skipped if wd = 0)
//   b = d                                    (first step)
//   b = momentum * b + (1 - dampening) * d   (later steps)
//   d = nesterov ? d + momentum * b : b      (only when momentum != 0)
//   p -= lr * d
//
// computed in one fused pass over memory, in float.
#ifndef STRATA_OPTIM_SGD_H_
#define STRATA_OPTIM_SGD_H_

#include <ATen/core/Tensor.h>

#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "optim/optimizer.h"

namespace strata::optim {

struct SgdOptions {
  double momentum = 0.0;
  double dampening = 0.0;
  bool nesterov = false;
};

// Checks momentum >= 0, a finite dampening, and that nesterov has
// momentum > 0 and dampening == 0. Errors name the field ("SGD momentum must
// be >= 0, got -1"), or with a `flag_prefix` the flags ("--momentum must be
// >= 0, got -1" for "--").
absl::Status ValidateSgdOptions(const SgdOptions& options,
                                absl::string_view flag_prefix = "");

// An SGD optimizer updating `params` from `grads` (1-D fp32 contiguous CPU
// tensors with the same numel, borrowed: they must outlive it). `ranges` as
// in NormalizeParamRanges. State: "momentum_buffer" (only with momentum != 0;
// meaningful once a step was taken) and "step".
absl::StatusOr<std::unique_ptr<Optimizer>> CreateSgd(
    at::Tensor params, at::Tensor grads, std::vector<ParamRange> ranges,
    const SgdOptions& options);

}  // namespace strata::optim

#endif  // STRATA_OPTIM_SGD_H_
