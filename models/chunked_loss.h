// Fused, chunked linear + cross-entropy: the mean next-token loss of a
// model's head computed `chunk_tokens` rows at a time, forward and backward,
// so that the logits [N, V] and their gradient never exist in full (one
// chunk's [chunk_tokens, V] at a time). This is what the head of Gpt and
// Llama runs when ModelConfig::loss_chunk_tokens > 0 (UnitModel::ForwardLoss).
//
// Numerics (chunked_loss_test.cc checks each): against the unfused
// `at::cross_entropy_loss(at::linear(hidden, weight).to(fp32), targets)`
// (UnitModel::Loss), each chunk runs the unfused path's kernels on its rows
// and the per-token losses are reduced by the same nll_loss reduction over
// all N tokens, so the loss is bitwise equal wherever the BLAS computes a
// row of a product the same whatever the number of rows (it is, for every
// chunk size tested with this build's OpenBLAS). The gradients sum in
// another order where the BLAS takes another kernel for a chunk (the hidden
// gradient, for chunks of 1-2 rows) or where chunks add up (the weight
// gradient, one sum per chunk): within a few fp32 ulps of the sums (the
// bounds are derived in the test); with one chunk (chunk_tokens >= N) they
// were bitwise equal in this build (the in-place exp of the backward, see
// chunked_loss.cc, matching log_softmax's backward kernel).
#ifndef STRATA_MODELS_CHUNKED_LOSS_H_
#define STRATA_MODELS_CHUNKED_LOSS_H_

#include <ATen/core/Tensor.h>

#include <cstdint>

namespace strata::models {

// Mean cross-entropy of logits = hidden @ weight^T against `targets`, as
// at::cross_entropy_loss (mean over the targets that are not -100, the
// ignore index; targets outside [0, V) otherwise throw as there), returned as
// an fp32 scalar that is differentiable with respect to `hidden` [N, H] and
// `weight` [V, H]; `targets` is [N] int64. The logits are computed in the
// dtype of `hidden` and `weight` (which must match), or in CPU autocast's
// dtype while autocast is on (as at::linear would), and the softmax in fp32.
// chunk_tokens >= 1 rows of logits exist at a time, forward and backward
// (backward recomputes them; it keeps `hidden` and `weight`, borrowed: they
// must not be modified in place before backward). Bad shapes or dtypes throw
// std::invalid_argument naming the argument.
at::Tensor ChunkedLinearCrossEntropy(const at::Tensor& hidden,
                                     const at::Tensor& weight,
                                     const at::Tensor& targets,
                                     int64_t chunk_tokens);

}  // namespace strata::models

#endif  // STRATA_MODELS_CHUNKED_LOSS_H_
