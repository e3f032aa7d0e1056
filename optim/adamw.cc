#include "optim/adamw.h"

#include <ATen/ops/zeros_like.h>
#include <glog/logging.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "base/trace.h"

namespace strata::optim {
namespace {

// How the weight decay of a range applies: decoupled (AdamW, shrinking the
// parameter) or L2 (Adam, added to the gradient).
enum class DecayMode { kDecoupled, kL2 };

// Per-step coefficients of one range, as the float scalars LibTorch's kernels
// use: every double scalar of torch.optim's Adam and AdamW is rounded to
// float before it meets a float tensor.
struct AdamCoefficients {
  float decay;         // AdamW: 1 - lr * wd; exactly 1 for wd == 0 and Adam.
  float weight_decay;  // Adam: wd (the L2 kernel only).
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
// torch.optim's:
//   Adam:  g = g.add(p, alpha=wd)                        (kL2)
//   AdamW: p.mul_(decay)
//   m.mul_(beta1).add_(g, 1 - beta1); v.mul_(beta2).addcmul_(g, g, 1 - beta2);
//   denom = (v.sqrt() / sqrt(bc2)).add_(eps); p.addcdiv_(m, denom, -step_size)
// p * 1.0f is exact, so Adam and no-decay ranges need no decay branch.
template <bool kL2>
void AdamKernel(float* __restrict p, const float* __restrict g,
                float* __restrict m, float* __restrict v, int64_t n,
                const AdamCoefficients& c) {
  const float decay = c.decay;
  const float weight_decay = c.weight_decay;
  const float beta1 = c.beta1;
  const float one_minus_beta1 = c.one_minus_beta1;
  const float beta2 = c.beta2;
  const float one_minus_beta2 = c.one_minus_beta2;
  const float sqrt_bc2 = c.sqrt_bias_correction2;
  const float eps = c.eps;
  const float neg_step_size = c.neg_step_size;
  for (int64_t i = 0; i < n; ++i) {
    float grad = g[i];
    if constexpr (kL2) grad = grad + weight_decay * p[i];
    const float exp_avg = m[i] * beta1 + one_minus_beta1 * grad;
    const float exp_avg_sq = v[i] * beta2 + one_minus_beta2 * grad * grad;
    const float denom = std::sqrt(exp_avg_sq) / sqrt_bc2 + eps;
    p[i] = p[i] * decay + neg_step_size * exp_avg / denom;
    m[i] = exp_avg;
    v[i] = exp_avg_sq;
  }
}

// AdamKernel with ATen operations, for buffers on a CUDA device: a handful
// of kernels per range (the ranges are few: decay and no-decay groups), in
// the same order of operations. The GPU's rounding (fused multiply-adds)
// makes it agree with the CPU kernel to float rounding, not bitwise.
void AdamDeviceUpdate(at::Tensor p, const at::Tensor& g, at::Tensor m,
                      at::Tensor v, const AdamCoefficients& c, bool l2) {
  const at::Tensor grad = l2 ? g.add(p, c.weight_decay) : g;
  m.mul_(c.beta1).add_(grad, c.one_minus_beta1);
  v.mul_(c.beta2).addcmul_(grad, grad, c.one_minus_beta2);
  const at::Tensor denom = v.sqrt().div_(c.sqrt_bias_correction2).add_(c.eps);
  if (c.decay != 1.0f) p.mul_(c.decay);
  p.addcdiv_(m, denom, c.neg_step_size);
}

using AdamKernelFn = void (*)(float*, const float*, float*, float*, int64_t,
                              const AdamCoefficients&);

class Adam final : public Optimizer {
 public:
  Adam(at::Tensor params, at::Tensor grads, std::vector<ParamRange> ranges,
       const AdamWOptions& options, DecayMode mode)
      : Optimizer(std::move(params), std::move(grads), std::move(ranges)),
        options_(options),
        mode_(mode),
        exp_avg_(at::zeros_like(this->params())),
        exp_avg_sq_(at::zeros_like(this->params())) {}

  void Step(double lr) override {
    trace::Span span("optimizer step", "optim");
    CHECK(std::isfinite(lr) && lr >= 0) << name() << " learning rate " << lr;
    const int64_t step = IncrementStep();
    const double bias_correction1 =
        1 - std::pow(options_.beta1, static_cast<double>(step));
    const double bias_correction2 =
        1 - std::pow(options_.beta2, static_cast<double>(step));
    AdamCoefficients base;
    base.decay = 1.0f;
    base.weight_decay = 0.0f;
    base.beta1 = static_cast<float>(options_.beta1);
    base.one_minus_beta1 = static_cast<float>(1 - options_.beta1);
    base.beta2 = static_cast<float>(options_.beta2);
    base.one_minus_beta2 = static_cast<float>(1 - options_.beta2);
    base.sqrt_bias_correction2 =
        static_cast<float>(std::sqrt(bias_correction2));
    base.eps = static_cast<float>(options_.eps);
    base.neg_step_size = static_cast<float>(-(lr / bias_correction1));
    std::vector<AdamCoefficients> coefficients(ranges().size(), base);
    std::vector<AdamKernelFn> kernels(ranges().size(), &AdamKernel<false>);
    for (size_t i = 0; i < ranges().size(); ++i) {
      const double wd = ranges()[i].weight_decay;
      if (wd == 0) continue;  // Both modes skip a zero decay, as PyTorch.
      if (mode_ == DecayMode::kDecoupled) {
        coefficients[i].decay = static_cast<float>(1 - lr * wd);
      } else {
        coefficients[i].weight_decay = static_cast<float>(wd);
        kernels[i] = &AdamKernel<true>;
      }
    }
    if (params().is_cuda()) {
      for (size_t i = 0; i < ranges().size(); ++i) {
        const ParamRange& r = ranges()[i];
        if (r.frozen || r.numel == 0) continue;
        AdamDeviceUpdate(params().narrow(0, r.offset, r.numel),
                         grads().narrow(0, r.offset, r.numel),
                         exp_avg_.narrow(0, r.offset, r.numel),
                         exp_avg_sq_.narrow(0, r.offset, r.numel),
                         coefficients[i], kernels[i] == &AdamKernel<true>);
      }
      return;
    }
    float* p = params().data_ptr<float>();
    const float* g = grads().data_ptr<float>();
    float* m = exp_avg_.data_ptr<float>();
    float* v = exp_avg_sq_.data_ptr<float>();
    ParallelForEachRange([&](size_t range, int64_t begin, int64_t end) {
      kernels[range](p + begin, g + begin, m + begin, v + begin, end - begin,
                     coefficients[range]);
    });
  }

  NamedTensors State() override {
    return {{"exp_avg", exp_avg_},
            {"exp_avg_sq", exp_avg_sq_},
            {"step", step_tensor()}};
  }

  std::string name() const override {
    return mode_ == DecayMode::kDecoupled ? "adamw" : "adam";
  }

 private:
  const AdamWOptions options_;
  const DecayMode mode_;
  at::Tensor exp_avg_;
  at::Tensor exp_avg_sq_;
};

// ValidateAdamWOptions with errors naming `optimizer`'s fields ("Adam beta1")
// or, with a flag_prefix, the flags.
absl::Status ValidateOptions(const AdamWOptions& options,
                             absl::string_view optimizer,
                             absl::string_view flag_prefix) {
  auto name = [&](absl::string_view field) {
    return OptionName(optimizer, field, flag_prefix);
  };
  if (!(options.beta1 >= 0 && options.beta1 < 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat(name("beta1"), " must be in [0, 1), got ", options.beta1));
  }
  if (!(options.beta2 >= 0 && options.beta2 < 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat(name("beta2"), " must be in [0, 1), got ", options.beta2));
  }
  if (!(options.eps >= 0 && std::isfinite(options.eps))) {
    return absl::InvalidArgumentError(
        absl::StrCat(name("eps"), " must be >= 0, got ", options.eps));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Optimizer>> Create(
    at::Tensor params, at::Tensor grads, std::vector<ParamRange> ranges,
    const AdamWOptions& options, DecayMode mode) {
  STRATA_RETURN_IF_ERROR(ValidateOptions(
      options, mode == DecayMode::kDecoupled ? "AdamW" : "Adam", ""));
  STRATA_RETURN_IF_ERROR(ValidateFlatBuffers(params, grads));
  STRATA_ASSIGN_OR_RETURN(
      std::vector<ParamRange> normalized,
      NormalizeParamRanges(std::move(ranges), params.numel()));
  return std::unique_ptr<Optimizer>(
      new Adam(std::move(params), std::move(grads), std::move(normalized),
               options, mode));
}

}  // namespace

absl::Status ValidateAdamWOptions(const AdamWOptions& options,
                                  absl::string_view flag_prefix) {
  return ValidateOptions(options, "AdamW", flag_prefix);
}

absl::StatusOr<std::unique_ptr<Optimizer>> CreateAdamW(
    at::Tensor params, at::Tensor grads, std::vector<ParamRange> ranges,
    const AdamWOptions& options) {
  return Create(std::move(params), std::move(grads), std::move(ranges), options,
                DecayMode::kDecoupled);
}

absl::StatusOr<std::unique_ptr<Optimizer>> CreateAdam(
    at::Tensor params, at::Tensor grads, std::vector<ParamRange> ranges,
    const AdamWOptions& options) {
  return Create(std::move(params), std::move(grads), std::move(ranges), options,
                DecayMode::kL2);
}

}  // namespace strata::optim
