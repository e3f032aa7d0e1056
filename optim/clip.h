// Global gradient-norm clipping over flat gradient buffers or shards of them.
#ifndef STRATA_OPTIM_CLIP_H_
#define STRATA_OPTIM_CLIP_H_

#include <ATen/core/Tensor.h>

#include <functional>

namespace strata::optim {

// The sum of the squares of `grads`' elements, accumulated in double.
// `grads`: a defined, contiguous CPU tensor of Float, Double, BFloat16 or
// Half (CHECKed). Deterministic: the summation order does not depend on the
// number of threads.
double SumOfSquares(const at::Tensor& grads);

// Whether `norm_type` names a p-norm clipping can use: p > 0 finite, or
// +infinity (the largest |x|).
bool IsValidNormType(double norm_type);

// This rank's part of the `norm_type`-norm of `grads` (a p-norm, p > 0 or
// +infinity; IsValidNormType CHECKed): the sum of |x|^p for a finite p
// (SumOfSquares for p = 2), the largest |x| for p = infinity, accumulated in
// double, deterministically (see SumOfSquares for the dtypes). Shards' parts
// combine by their sum for a finite p and by their largest for infinity
// (NormPartsAdd).
double NormPart(const at::Tensor& grads, double norm_type);

// True when shards' NormParts combine by summing (finite p), false when the
// largest is taken (p = infinity).
bool NormPartsAdd(double norm_type);

// Clips gradients by their global p-norm (p = `norm_type`: 2, infinity, or
// any p > 0), with the semantics of torch.nn.utils.clip_grad_norm_:
// computes
//   norm = (sum of |g|^p over all gradients)^(1/p)  (the largest |g| for inf)
// in double and, when norm > max_norm (precisely: when
// max_norm / (norm + 1e-6) < 1), scales `grads` in place by
// max_norm / (norm + 1e-6). Returns the norm before clipping.
//
// `grads` is the flat gradient buffer or this rank's shard of it (see
// SumOfSquares for the dtypes). With shards, `parts_across_shards` receives
// this rank's NormPart and returns the combined one (e.g. an all-reduce:
// a sum, or a max for infinity; NormPartsAdd); every rank then clips by the
// same factor.
//
// A non-finite norm (an inf or NaN gradient) is returned as is and leaves
// `grads` untouched (torch would scale them by 0 or NaN): the caller decides,
// e.g. skips the step. `max_norm` must be > 0 (CHECKed).
double ClipGradNorm(
    at::Tensor grads, double max_norm, double norm_type = 2.0,
    const std::function<double(double)>& parts_across_shards = nullptr);

}  // namespace strata::optim

#endif  // STRATA_OPTIM_CLIP_H_
