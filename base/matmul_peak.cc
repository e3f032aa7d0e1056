#include "base/matmul_peak.h"

#include <ATen/ops/mm.h>
#include <ATen/ops/randn.h>
#include <glog/logging.h>

#include <chrono>

namespace strata {

double MeasureMatmulPeakFlops(c10::ScalarType dtype, int64_t n,
                              double seconds) {
  CHECK_GT(n, 0);
  using Clock = std::chrono::steady_clock;
  const at::Tensor a = at::randn({n, n}).to(dtype);
  const at::Tensor b = at::randn({n, n}).to(dtype);
  at::mm(a, b);  // Warm-up: thread pools, oneDNN kernels.
  int64_t iters = 0;
  const auto start = Clock::now();
  double elapsed_s = 0;
  do {
    at::mm(a, b);
    ++iters;
    elapsed_s = std::chrono::duration<double>(Clock::now() - start).count();
  } while (elapsed_s < seconds);
  return 2.0 * n * n * n * iters / elapsed_s;
}

}  // namespace strata
