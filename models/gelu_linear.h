// linear(gelu_tanh(h), weight, bias) that keeps only h for backward: the
// GELU's output, which at::linear's backward would keep for the weight's
// gradient, is recomputed in backward instead. A GPT block's MLP keeps its
// fc output and its GELU output, BTF elements each (B x T tokens, F the
// hidden width); this keeps one of them: a fifth of the block's activations
// at GPT-2's widths (F = 4C), for one more GELU per step.
//
// Forward is at::linear(at::gelu(h, "tanh"), weight, bias), exactly (the same
// ops, under autocast too). Backward computes what autograd computes for
// that forward, with the same ATen calls (addmm's backward for a row-major
// input and a transposed weight, then gelu_backward), so gradients are
// bitwise those of the unfused ops (gelu_linear_test checks it).
#ifndef STRATA_MODELS_GELU_LINEAR_H_
#define STRATA_MODELS_GELU_LINEAR_H_

#include <ATen/core/Tensor.h>

namespace strata::models {

// h [..., in], weight [out, in], bias [out] (required) -> [..., out].
at::Tensor GeluLinear(const at::Tensor& h, const at::Tensor& weight,
                      const at::Tensor& bias);

}  // namespace strata::models

#endif  // STRATA_MODELS_GELU_LINEAR_H_
