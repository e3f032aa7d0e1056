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

// Partial sums over fixed blocks, added in block order: the result does not
// depend on how at::parallel_for splits the work.
constexpr int64_t kBlock = 16384;

template <typename T>
double AsDouble(T x) {
  if constexpr (std::is_floating_point_v<T>) {
    return static_cast<double>(x);
  } else {
    return static_cast<double>(static_cast<float>(x));  // BFloat16, Half.
  }
}

template <typename T>
double SumOfSquaresOf(const T* data, int64_t n) {
  const int64_t num_blocks = (n + kBlock - 1) / kBlock;
  std::vector<double> partial(num_blocks, 0.0);
  at::parallel_for(0, num_blocks, 1, [&](int64_t begin, int64_t end) {
    for (int64_t b = begin; b < end; ++b) {
      const T* block = data + b * kBlock;
      const int64_t size = std::min(kBlock, n - b * kBlock);
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
      partial[b] = (acc[0] + acc[1]) + (acc[2] + acc[3]);
    }
  });
  double sum = 0.0;
  for (double p : partial) sum += p;
  return sum;
}

}  // namespace

double SumOfSquares(const at::Tensor& grads) {
  CHECK(grads.defined()) << "gradients are an undefined tensor";
  CHECK(grads.is_contiguous()) << "gradients must be contiguous";
  if (grads.is_cuda()) {
    // On the device in double (one reduction kernel), then one copy back.
    return grads.to(at::kDouble).square().sum().item<double>();
  }
  CHECK(grads.device().is_cpu()) << "gradients must be on the CPU or CUDA";
  const int64_t n = grads.numel();
  switch (grads.scalar_type()) {
    case at::kFloat:
      return SumOfSquaresOf(grads.data_ptr<float>(), n);
    case at::kDouble:
      return SumOfSquaresOf(grads.data_ptr<double>(), n);
    case at::kBFloat16:
      return SumOfSquaresOf(grads.data_ptr<c10::BFloat16>(), n);
    case at::kHalf:
      return SumOfSquaresOf(grads.data_ptr<c10::Half>(), n);
    default:
      LOG(FATAL) << "gradients must be Float, Double, BFloat16 or Half, got "
                 << grads.scalar_type();
  }
}

double ClipGradNorm(
    at::Tensor grads, double max_norm,
    const std::function<double(double)>& sum_squares_across_shards) {
  CHECK_GT(max_norm, 0) << "ClipGradNorm max_norm";
  trace::Span span("clip gradients", "optim");
  double sum_squares = SumOfSquares(grads);
  if (sum_squares_across_shards) {
    sum_squares = sum_squares_across_shards(sum_squares);
  }
  const double norm = std::sqrt(sum_squares);
  if (!std::isfinite(norm)) return norm;
  const double clip_coef = max_norm / (norm + 1e-6);
  if (clip_coef < 1.0) {
    at::NoGradGuard no_grad;
    grads.mul_(clip_coef);
  }
  return norm;
}

}  // namespace strata::optim
