#include "optim/sgd.h"

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

// Float scalars, as LibTorch's kernels use them.
struct SgdCoefficients {
  float weight_decay;
  float momentum;
  float one_minus_dampening;
  float neg_lr;
};

// The fused update of n elements, in torch::optim::SGD's order of operations:
//   d = g.add(p, wd); buf.mul_(momentum).add_(d, 1 - dampening) (or
//   buf = d.clone() on the first step); d = nesterov ? d.add(buf, momentum)
//   : buf; p.add_(d, -lr).
template <bool kWeightDecay, bool kMomentum, bool kFirstStep, bool kNesterov>
void SgdKernel(float* __restrict p, const float* __restrict g,
               float* __restrict buf, int64_t n, const SgdCoefficients& c) {
  const float weight_decay = c.weight_decay;
  const float momentum = c.momentum;
  const float one_minus_dampening = c.one_minus_dampening;
  const float neg_lr = c.neg_lr;
  for (int64_t i = 0; i < n; ++i) {
    float d = g[i];
    if constexpr (kWeightDecay) d = d + weight_decay * p[i];
    if constexpr (kMomentum) {
      float b;
      if constexpr (kFirstStep) {
        b = d;
      } else {
        b = buf[i] * momentum + one_minus_dampening * d;
      }
      buf[i] = b;
      if constexpr (kNesterov) {
        d = d + momentum * b;
      } else {
        d = b;
      }
    }
    p[i] = p[i] + neg_lr * d;
  }
}

// SgdKernel with ATen operations, for buffers on a CUDA device (`buf`
// undefined without momentum); agrees with it to float rounding.
void SgdDeviceUpdate(at::Tensor p, const at::Tensor& g, at::Tensor buf,
                     const SgdCoefficients& c, bool weight_decay,
                     bool first_step, bool nesterov) {
  at::Tensor d = weight_decay ? g.add(p, c.weight_decay) : g;
  if (buf.defined()) {
    if (first_step) {
      buf.copy_(d);
    } else {
      buf.mul_(c.momentum).add_(d, c.one_minus_dampening);
    }
    d = nesterov ? d.add(buf, c.momentum) : buf;
  }
  p.add_(d, c.neg_lr);
}

using SgdKernelFn = void (*)(float*, const float*, float*, int64_t,
                             const SgdCoefficients&);

template <bool kWeightDecay>
SgdKernelFn SelectKernel(bool momentum, bool first_step, bool nesterov) {
  if (!momentum) return &SgdKernel<kWeightDecay, false, false, false>;
  if (first_step) {
    return nesterov ? &SgdKernel<kWeightDecay, true, true, true>
                    : &SgdKernel<kWeightDecay, true, true, false>;
  }
  return nesterov ? &SgdKernel<kWeightDecay, true, false, true>
                  : &SgdKernel<kWeightDecay, true, false, false>;
}

class Sgd final : public Optimizer {
 public:
  Sgd(at::Tensor params, at::Tensor grads, std::vector<ParamRange> ranges,
      const SgdOptions& options)
      : Optimizer(std::move(params), std::move(grads), std::move(ranges)),
        options_(options) {
    if (options_.momentum != 0) {
      momentum_buffer_ = at::zeros_like(this->params());
    }
  }

  void Step(double lr) override {
    trace::Span span("optimizer step", "optim");
    CHECK(std::isfinite(lr) && lr >= 0) << "SGD learning rate " << lr;
    const bool first_step = IncrementStep() == 1;
    const bool momentum = options_.momentum != 0;
    std::vector<SgdCoefficients> coefficients(ranges().size());
    std::vector<SgdKernelFn> kernels(ranges().size());
    for (size_t i = 0; i < ranges().size(); ++i) {
      const double wd = ranges()[i].weight_decay;
      coefficients[i] = {
          static_cast<float>(wd), static_cast<float>(options_.momentum),
          static_cast<float>(1 - options_.dampening), static_cast<float>(-lr)};
      kernels[i] =
          wd != 0
              ? SelectKernel<true>(momentum, first_step, options_.nesterov)
              : SelectKernel<false>(momentum, first_step, options_.nesterov);
    }
    if (params().is_cuda()) {
      for (size_t i = 0; i < ranges().size(); ++i) {
        const ParamRange& r = ranges()[i];
        if (r.frozen || r.numel == 0) continue;
        SgdDeviceUpdate(params().narrow(0, r.offset, r.numel),
                        grads().narrow(0, r.offset, r.numel),
                        momentum ? momentum_buffer_.narrow(0, r.offset, r.numel)
                                 : at::Tensor(),
                        coefficients[i], ranges()[i].weight_decay != 0,
                        first_step, options_.nesterov);
      }
      return;
    }
    float* p = params().data_ptr<float>();
    const float* g = grads().data_ptr<float>();
    float* buf = momentum ? momentum_buffer_.data_ptr<float>() : nullptr;
    ParallelForEachRange([&](size_t range, int64_t begin, int64_t end) {
      kernels[range](p + begin, g + begin,
                     buf == nullptr ? nullptr : buf + begin, end - begin,
                     coefficients[range]);
    });
  }

  NamedTensors State() override {
    if (!momentum_buffer_.defined()) return {{"step", step_tensor()}};
    return {{"momentum_buffer", momentum_buffer_}, {"step", step_tensor()}};
  }

  std::string name() const override { return "sgd"; }

 private:
  const SgdOptions options_;
  at::Tensor momentum_buffer_;  // Undefined without momentum.
};

}  // namespace

absl::Status ValidateSgdOptions(const SgdOptions& options,
                                absl::string_view flag_prefix) {
  // The subject of a message is named in full ("SGD momentum"); the fields
  // it mentions after it only need the flag prefix, if any.
  auto name = [&](absl::string_view field) {
    return OptionName("SGD", field, flag_prefix);
  };
  auto mention = [&](absl::string_view field) {
    return absl::StrCat(flag_prefix, field);
  };
  if (!(options.momentum >= 0 && std::isfinite(options.momentum))) {
    return absl::InvalidArgumentError(absl::StrCat(
        name("momentum"), " must be >= 0, got ", options.momentum));
  }
  if (!std::isfinite(options.dampening)) {
    return absl::InvalidArgumentError(absl::StrCat(
        name("dampening"), " must be finite, got ", options.dampening));
  }
  if (options.nesterov && !(options.momentum > 0 && options.dampening == 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat(name("nesterov"), " needs ", mention("momentum"),
                     " > 0 and ", mention("dampening"), " == 0, got ",
                     mention("momentum"), " ", options.momentum, " and ",
                     mention("dampening"), " ", options.dampening));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Optimizer>> CreateSgd(
    at::Tensor params, at::Tensor grads, std::vector<ParamRange> ranges,
    const SgdOptions& options) {
  STRATA_RETURN_IF_ERROR(ValidateSgdOptions(options));
  STRATA_RETURN_IF_ERROR(ValidateFlatBuffers(params, grads));
  STRATA_ASSIGN_OR_RETURN(
      std::vector<ParamRange> normalized,
      NormalizeParamRanges(std::move(ranges), params.numel()));
  return std::unique_ptr<Optimizer>(new Sgd(std::move(params), std::move(grads),
                                            std::move(normalized), options));
}

}  // namespace strata::optim
