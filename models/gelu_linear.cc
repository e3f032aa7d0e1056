#include "models/gelu_linear.h"

#include <ATen/ops/gelu.h>
#include <ATen/ops/gelu_backward.h>
#include <ATen/ops/linear.h>
#include <ATen/ops/mm.h>
#include <ATen/ops/sum.h>
#include <glog/logging.h>
#include <torch/csrc/autograd/custom_function.h>

namespace strata::models {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

class GeluLinearFunction
    : public torch::autograd::Function<GeluLinearFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& h,
                            const at::Tensor& weight, const at::Tensor& bias) {
    ctx->save_for_backward({h, weight});
    // Autocast (when on) casts as it does for the unfused ops; the output's
    // dtype is the one the matmul ran in.
    at::Tensor out = at::linear(at::gelu(h, "tanh"), weight, bias);
    ctx->saved_data["matmul_dtype"] = out.scalar_type();
    return out;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const variable_list saved = ctx->get_saved_variables();
    const at::Tensor& h = saved[0];
    const at::Tensor& weight = saved[1];
    const at::ScalarType dtype = ctx->saved_data["matmul_dtype"].toScalarType();
    // The matmul's operands as the forward's at::linear read them (cast
    // by autocast where their dtype differs), the GELU recomputed.
    at::Tensor g = CastTo(at::gelu(h, "tanh"), dtype);
    const at::Tensor grad = grads[0].reshape({-1, grads[0].size(-1)});
    // at::linear on [N, in] rows is addmm(bias, g2d, weight.t()). Its
    // backward, for a row-major mat1 and the column-major mat2 = weight.t():
    // mat1: grad.mm(mat2.t()); mat2: grad.t().mm(mat1).t(), whose .t() is
    // the weight's gradient; bias: grad summed over the rows (sum_to).
    // Gradients of cast operands are cast back (autocast's casts' backward;
    // autograd casts those of the weight and the bias to the leaves' dtype).
    const at::Tensor grad_weight = grad.t().mm(g.reshape({-1, g.size(-1)}));
    g = at::Tensor();  // Freed before grad_g: at most two [N, in] at once.
    const at::Tensor grad_bias =
        grad.sum({0}, /*keepdim=*/true).view({grad.size(1)});
    const at::Tensor grad_g =
        CastTo(grad.mm(CastTo(weight, dtype)).view(h.sizes()), h.scalar_type());
    const at::Tensor grad_h = at::gelu_backward(grad_g, h, "tanh");
    return {grad_h, grad_weight, grad_bias};
  }

 private:
  static at::Tensor CastTo(const at::Tensor& t, at::ScalarType dtype) {
    return t.scalar_type() == dtype ? t : t.to(dtype);
  }
};

}  // namespace

at::Tensor GeluLinear(const at::Tensor& h, const at::Tensor& weight,
                      const at::Tensor& bias) {
  CHECK(bias.defined()) << "GeluLinear: the bias is required";
  return GeluLinearFunction::apply(h, weight, bias);
}

}  // namespace strata::models
