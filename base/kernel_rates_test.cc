#include "base/kernel_rates.h"

#include <ATen/Parallel.h>

#include <cmath>

#include "gtest/gtest.h"

namespace strata {
namespace {

// Bounds, not figures (the rates depend on the machine and its load): any
// machine this builds on does a 64 x 64 x 64 fp32 product at more than
// 10 MFLOP/s and below 100 TFLOP/s on one core, and copies at more than
// 10 MB/s and below 10 TB/s. A unit slip (per ms for per s, elements for
// bytes) or an iteration count lost lands outside them.
TEST(KernelRatesTest, GemmFlopsAreAPlausibleRate) {
  at::set_num_threads(1);
  const double flops = MeasureGemmFlops(64, 64, 64, /*seconds=*/0.02);
  EXPECT_GT(flops, 1e7);
  EXPECT_LT(flops, 1e14);
}

TEST(KernelRatesTest, MemoryBandwidthIsAPlausibleRate) {
  at::set_num_threads(1);
  const double bytes_per_s =
      MeasureMemoryBandwidth(int64_t{1} << 20, /*seconds=*/0.02);
  EXPECT_GT(bytes_per_s, 1e7);
  EXPECT_LT(bytes_per_s, 1e13);
}

// Two threads at once each get a share of the machine: each rate is
// positive and the mean is finite (the threads were joined and counted).
TEST(KernelRatesTest, ThreadsShareTheMeasurement) {
  at::set_num_threads(1);
  const double flops = MeasureGemmFlops(64, 64, 64, 0.02, /*threads=*/2);
  EXPECT_TRUE(std::isfinite(flops));
  EXPECT_GT(flops, 1e7);
}

}  // namespace
}  // namespace strata
