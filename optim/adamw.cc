#include "optim/adamw.h"

#include <ATen/ops/zeros_like.h>
#include <glog/logging.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status.h"

namespace strata::optim {
namespace {

// Per-step coefficients, as the float scalars LibTorch's kernels use: every
// double scalar of torch::optim::AdamW is rounded to float before it meets a
// float tensor.
struct AdamWCoefficients {
  float decay;  // 1 - lr * wd, or exactly 1 when wd == 0.
  float beta1;
  float one_minus_beta1;
  float beta2;
  float one_minus_beta2;
  float sqrt_bias_correction2;
  float eps;
  float neg_step_size;  // -lr / bias_correction1.
};

// The fused update of n elements. Plain float loops: with -fno-math-errno
// (see BUILD) GCC vectorises them, sqrt included. The operation order is
// torch::optim::AdamW's:
//   p.mul_(decay); m.mul_(beta1).add_(g, 1 - beta1);
//   v.mul_(beta2).addcmul_(g, g, 1 - beta2);
//   denom = (v.sqrt() / sqrt(bc2)).add_(eps); p.addcdiv_(m, denom, -step_size)
void AdamWKernel(float* __restrict p, const float* __restrict g,
                 float* __restrict m, float* __restrict v, int64_t n,
                 const AdamWCoefficients& c) {
  const float decay = c.decay;
  const float beta1 = c.beta1;
  const float one_minus_beta1 = c.one_minus_beta1;
  const float beta2 = c.beta2;
  const float one_minus_beta2 = c.one_minus_beta2;
  const float sqrt_bc2 = c.sqrt_bias_correction2;
  const float eps = c.eps;
  const float neg_step_size = c.neg_step_size;
  for (int64_t i = 0; i < n; ++i) {
    const float grad = g[i];
    const float exp_avg = m[i] * beta1 + one_minus_beta1 * grad;
    const float exp_avg_sq = v[i] * beta2 + one_minus_beta2 * grad * grad;
    const float denom = std::sqrt(exp_avg_sq) / sqrt_bc2 + eps;
    p[i] = p[i] * decay + neg_step_size * exp_avg / denom;
    m[i] = exp_avg;
    v[i] = exp_avg_sq;
  }
}

class AdamW final : public Optimizer {
 public:
  AdamW(at::Tensor params, at::Tensor grads, std::vector<ParamRange> ranges,
        const AdamWOptions& options)
      : Optimizer(std::move(params), std::move(grads), std::move(ranges)),
        options_(options),
        exp_avg_(at::zeros_like(this->params())),
        exp_avg_sq_(at::zeros_like(this->params())) {}

  void Step(double lr) override {
    CHECK(std::isfinite(lr) && lr >= 0) << "AdamW learning rate " << lr;
    const int64_t step = IncrementStep();
    const double bias_correction1 =
        1 - std::pow(options_.beta1, static_cast<double>(step));
    const double bias_correction2 =
        1 - std::pow(options_.beta2, static_cast<double>(step));
    AdamWCoefficients base;
    base.decay = 1.0f;
    base.beta1 = static_cast<float>(options_.beta1);
    base.one_minus_beta1 = static_cast<float>(1 - options_.beta1);
    base.beta2 = static_cast<float>(options_.beta2);
    base.one_minus_beta2 = static_cast<float>(1 - options_.beta2);
    base.sqrt_bias_correction2 =
        static_cast<float>(std::sqrt(bias_correction2));
    base.eps = static_cast<float>(options_.eps);
    base.neg_step_size = static_cast<float>(-(lr / bias_correction1));
    std::vector<AdamWCoefficients> coefficients(ranges().size(), base);
    for (size_t i = 0; i < ranges().size(); ++i) {
      const double wd = ranges()[i].weight_decay;
      // p * 1.0f is exact, so no-decay ranges need no branch in the kernel.
      if (wd != 0) coefficients[i].decay = static_cast<float>(1 - lr * wd);
    }
    float* p = params().data_ptr<float>();
    const float* g = grads().data_ptr<float>();
    float* m = exp_avg_.data_ptr<float>();
    float* v = exp_avg_sq_.data_ptr<float>();
    ParallelForEachRange([&](size_t range, int64_t begin, int64_t end) {
      AdamWKernel(p + begin, g + begin, m + begin, v + begin, end - begin,
                  coefficients[range]);
    });
  }

  NamedTensors State() override {
    return {{"exp_avg", exp_avg_},
            {"exp_avg_sq", exp_avg_sq_},
            {"step", step_tensor()}};
  }

  std::string name() const override { return "adamw"; }

 private:
  const AdamWOptions options_;
  at::Tensor exp_avg_;
  at::Tensor exp_avg_sq_;
};

}  // namespace

absl::Status ValidateAdamWOptions(const AdamWOptions& options) {
  if (!(options.beta1 >= 0 && options.beta1 < 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("AdamW beta1 must be in [0, 1), got ", options.beta1));
  }
  if (!(options.beta2 >= 0 && options.beta2 < 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("AdamW beta2 must be in [0, 1), got ", options.beta2));
  }
  if (!(options.eps >= 0 && std::isfinite(options.eps))) {
    return absl::InvalidArgumentError(
        absl::StrCat("AdamW eps must be >= 0, got ", options.eps));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Optimizer>> CreateAdamW(
    at::Tensor params, at::Tensor grads, std::vector<ParamRange> ranges,
    const AdamWOptions& options) {
  STRATA_RETURN_IF_ERROR(ValidateAdamWOptions(options));
  STRATA_RETURN_IF_ERROR(ValidateFlatBuffers(params, grads));
  STRATA_ASSIGN_OR_RETURN(
      std::vector<ParamRange> normalized,
      NormalizeParamRanges(std::move(ranges), params.numel()));
  return std::unique_ptr<Optimizer>(new AdamW(
      std::move(params), std::move(grads), std::move(normalized), options));
}

}  // namespace strata::optim
