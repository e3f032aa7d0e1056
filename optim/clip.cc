#include "optim/clip.h"

#include <ATen/Parallel.h>
#include <ATen/core/grad_mode.h>
#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>
#include <glog/logging.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "base/trace.h"

namespace strata::optim {
namespace {

// Partial results over fixed blocks, combined in block order (ReduceBlocks).
constexpr int64_t kBlock = 16384;

template <typename T>
double AsDouble(T x) {
  if constexpr (std::is_floating_point_v<T>) {
    return static_cast<double>(x);
  } else {
    return static_cast<double>(static_cast<float>(x));  // BFloat16, Half.
  }
}

// Reduces data[0, n) block by block: `of_block(block, size)` gives each
// fixed block's value, `combine` folds them in block order, from 0. The
// result does not depend on how at::parallel_for splits the work.
template <typename T, typename OfBlock, typename Combine>
double ReduceBlocks(const T* data, int64_t n, OfBlock of_block,
                    Combine combine) {
  const int64_t num_blocks = (n + kBlock - 1) / kBlock;
  std::vector<double> partial(num_blocks, 0.0);
  at::parallel_for(0, num_blocks, 1, [&](int64_t begin, int64_t end) {
    for (int64_t b = begin; b < end; ++b) {
      partial[b] =
          of_block(data + b * kBlock, std::min(kBlock, n - b * kBlock));
    }
  });
  double result = 0.0;
  for (double p : partial) result = combine(result, p);
  return result;
}

double Add(double a, double b) { return a + b; }

// The larger of a and b; NaN once either is (x > NaN is false, and then x
// is not NaN).
double MaxOrNan(double a, double b) { return b > a || std::isnan(b) ? b : a; }

// The largest |x| of data[0, n); NaN if any element is NaN.
template <typename T>
double MaxAbsOf(const T* data, int64_t n) {
  return ReduceBlocks(
      data, n,
      [](const T* block, int64_t size) {
        double acc = 0.0;
        for (int64_t i = 0; i < size; ++i) {
          acc = MaxOrNan(acc, std::abs(AsDouble(block[i])));
        }
        return acc;
      },
      MaxOrNan);
}

// The sum of |x|^p of data[0, n).
template <typename T>
double SumOfPowersOf(const T* data, int64_t n, double p) {
  return ReduceBlocks(
      data, n,
      [p](const T* block, int64_t size) {
        double acc = 0.0;
        for (int64_t i = 0; i < size; ++i) {
          acc += std::pow(std::abs(AsDouble(block[i])), p);
        }
        return acc;
      },
      Add);
}

// f(typed data pointer, n) for the gradient dtypes (CHECKed).
template <typename F>
double ForGradDtype(const at::Tensor& grads, F f) {
  const int64_t n = grads.numel();
  switch (grads.scalar_type()) {
    case at::kFloat:
      return f(grads.data_ptr<float>(), n);
    case at::kDouble:
      return f(grads.data_ptr<double>(), n);
    case at::kBFloat16:
      return f(grads.data_ptr<c10::BFloat16>(), n);
    case at::kHalf:
      return f(grads.data_ptr<c10::Half>(), n);
    default:
      LOG(FATAL) << "gradients must be Float, Double, BFloat16 or Half, got "
                 << grads.scalar_type();
  }
}

void CheckGrads(const at::Tensor& grads) {
  CHECK(grads.defined()) << "gradients are an undefined tensor";
  CHECK(grads.is_contiguous()) << "gradients must be contiguous";
  CHECK(grads.is_cuda() || grads.device().is_cpu())
      << "gradients must be on the CPU or CUDA";
}

template <typename T>
double SumOfSquaresOf(const T* data, int64_t n) {
  return ReduceBlocks(
      data, n,
      [](const T* block, int64_t size) {
        // Four accumulators let the compiler keep several adds in flight.
        double acc[4] = {0.0, 0.0, 0.0, 0.0};
        int64_t i = 0;
        for (; i + 4 <= size; i += 4) {
          for (int k = 0; k < 4; ++k) {
            const double x = AsDouble(block[i + k]);
            acc[k] += x * x;
          }
        }
        for (; i < size; ++i) {
          const double x = AsDouble(block[i]);
          acc[0] += x * x;
        }
        return (acc[0] + acc[1]) + (acc[2] + acc[3]);
      },
      Add);
}

}  // namespace

double SumOfSquares(const at::Tensor& grads) {
  CheckGrads(grads);
  if (grads.is_cuda()) {
    // On the device in double (one reduction kernel), then one copy back.
    return grads.to(at::kDouble).square().sum().item<double>();
  }
  return ForGradDtype(grads, [](const auto* data, int64_t n) {
    return SumOfSquaresOf(data, n);
  });
}

bool IsValidNormType(double norm_type) {
  return norm_type > 0 && !std::isnan(norm_type);
}

bool NormPartsAdd(double norm_type) { return !std::isinf(norm_type); }

double NormPart(const at::Tensor& grads, double norm_type) {
  CHECK(IsValidNormType(norm_type)) << "norm_type " << norm_type;
  if (norm_type == 2.0) return SumOfSquares(grads);
  CheckGrads(grads);
  if (grads.numel() == 0) return 0.0;
  if (grads.is_cuda()) {
    const at::Tensor magnitudes = grads.to(at::kDouble).abs();
    return std::isinf(norm_type)
               ? magnitudes.max().item<double>()
               : magnitudes.pow(norm_type).sum().item<double>();
  }
  if (std::isinf(norm_type)) {
    return ForGradDtype(
        grads, [](const auto* data, int64_t n) { return MaxAbsOf(data, n); });
  }
  return ForGradDtype(grads, [norm_type](const auto* data, int64_t n) {
    return SumOfPowersOf(data, n, norm_type);
  });
}

double ClipGradNorm(at::Tensor grads, double max_norm, double norm_type,
                    const std::function<double(double)>& parts_across_shards) {
  CHECK_GT(max_norm, 0) << "ClipGradNorm max_norm";
  trace::Span span("clip gradients", "optim");
  double part = NormPart(grads, norm_type);
  if (parts_across_shards) part = parts_across_shards(part);
  const double norm = std::isinf(norm_type) ? part
                      : norm_type == 2.0    ? std::sqrt(part)
                                            : std::pow(part, 1.0 / norm_type);
  if (!std::isfinite(norm)) return norm;
  const double clip_coef = max_norm / (norm + 1e-6);
  if (clip_coef < 1.0) {
    at::NoGradGuard no_grad;
    grads.mul_(clip_coef);
  }
  return norm;
}

}  // namespace strata::optim
