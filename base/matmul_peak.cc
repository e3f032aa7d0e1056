#include "base/matmul_peak.h"

#include <ATen/ops/mm.h>
#include <ATen/ops/randn.h>
#include <glog/logging.h>

#include <chrono>

namespace strata {

double MeasureMatmulPeakFlops(c10::ScalarType dtype, int64_t n, double seconds,
                              c10::Device device) {
  CHECK_GT(n, 0);
  using Clock = std::chrono::steady_clock;
  const at::Tensor a = at::randn({n, n}).to(device, dtype);
  const at::Tensor b = at::randn({n, n}).to(device, dtype);
  // Products per clock reading: one on the CPU (each mm returns when done),
  // enough on a GPU that waiting for the queue to drain costs little.
  const int group = device.is_cuda() ? 10 : 1;
  auto wait = [](const at::Tensor& t) { t.select(0, 0).select(0, 0).item(); };
  wait(at::mm(a, b));  // Warm-up: thread pools, oneDNN / cuBLAS kernels.
  int64_t iters = 0;
  const auto start = Clock::now();
  double elapsed_s = 0;
  do {
    at::Tensor out;
    for (int k = 0; k < group; ++k) out = at::mm(a, b);
    wait(out);
    iters += group;
    elapsed_s = std::chrono::duration<double>(Clock::now() - start).count();
  } while (elapsed_s < seconds);
  return 2.0 * n * n * n * iters / elapsed_s;
}

}  // namespace strata
