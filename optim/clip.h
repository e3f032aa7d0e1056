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

// Clips gradients by their global L2 norm, with the semantics of
// torch.nn.utils.clip_grad_norm_ (norm_type 2): computes
//   norm = sqrt(sum of squares of all gradients)
// in double and, when norm > max_norm (precisely: when
// max_norm / (norm + 1e-6) < 1), scales `grads` in place by
// max_norm / (norm + 1e-6). Returns the norm before clipping.
//
// `grads` is the flat gradient buffer or this rank's shard of it (see
// SumOfSquares for the dtypes). With shards, `sum_squares_across_shards`
// receives the local sum of squares and returns the global one (e.g. through
// an all-reduce); every rank then clips by the same factor.
//
// A non-finite norm (an inf or NaN gradient) is returned as is and leaves
// `grads` untouched (torch would scale them by 0 or NaN): the caller decides,
// e.g. skips the step. `max_norm` must be > 0 (CHECKed).
double ClipGradNorm(
    at::Tensor grads, double max_norm,
    const std::function<double(double)>& sum_squares_across_shards = nullptr);

}  // namespace strata::optim

#endif  // STRATA_OPTIM_CLIP_H_
