#include "base/kernel_rates.h"

#include <ATen/ops/empty.h>
#include <ATen/ops/mm.h>
#include <ATen/ops/randn.h>
#include <glog/logging.h>

#include <chrono>
#include <functional>
#include <thread>
#include <vector>

namespace strata {
namespace {

using Clock = std::chrono::steady_clock;

// Work units per second of `run_once` (one unit per call) on one thread,
// timed for about `seconds` after one warm-up call.
double UnitsPerSecond(const std::function<void()>& run_once, double seconds) {
  run_once();  // Warm-up: pages, thread pools, kernels.
  int64_t iters = 0;
  const auto start = Clock::now();
  double elapsed_s = 0;
  do {
    run_once();
    ++iters;
    elapsed_s = std::chrono::duration<double>(Clock::now() - start).count();
  } while (elapsed_s < seconds);
  return iters / elapsed_s;
}

// The mean over `threads` threads each running `measure_one` at once.
double MeanOverThreads(int threads,
                       const std::function<double()>& measure_one) {
  CHECK_GE(threads, 1);
  std::vector<double> rates(threads);
  std::vector<std::thread> workers;
  for (int i = 0; i < threads; ++i) {
    workers.emplace_back([&, i] { rates[i] = measure_one(); });
  }
  for (std::thread& w : workers) w.join();
  double sum = 0;
  for (const double r : rates) sum += r;
  return sum / threads;
}

}  // namespace

double MeasureGemmFlops(int64_t m, int64_t k, int64_t n, double seconds,
                        int threads) {
  CHECK(m > 0 && k > 0 && n > 0) << m << " x " << k << " x " << n;
  return MeanOverThreads(threads, [&] {
    const at::Tensor a = at::randn({m, k});
    const at::Tensor b = at::randn({k, n});
    at::Tensor out = at::empty({m, n});
    return 2.0 * m * k * n *
           UnitsPerSecond([&] { at::mm_out(out, a, b); }, seconds);
  });
}

double MeasureMemoryBandwidth(int64_t bytes, double seconds, int threads) {
  CHECK_GE(bytes, 4);
  return MeanOverThreads(threads, [&] {
    const at::Tensor src = at::randn({bytes / 4});
    at::Tensor dst = at::empty({bytes / 4});
    return 2.0 * (bytes / 4) * 4 *
           UnitsPerSecond([&] { dst.copy_(src); }, seconds);
  });
}

}  // namespace strata
