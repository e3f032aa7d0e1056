#include "launch/plan/kernel_rates.h"

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

// The autograd kernel classes at small shapes: each rate is finite and
// positive, and below 1e12 units/s (a kernel call with its autograd node
// costs more than a microsecond, and each does at least 4096 units).
TEST(KernelRatesTest, AutogradKernelRatesArePositiveAndFinite) {
  at::set_num_threads(1);
  const double s = 0.02;
  for (const double rate :
       {MeasureLayerNormRate(64, 64, s), MeasureGeluRate(4096, s),
        MeasureSoftmaxRate(4, 32, s),
        MeasureAttentionProductsFlops(4, 32, 16, s),
        MeasureCrossEntropyRate(64, 64, s), MeasureAddRate(4096, s),
        MeasureHeadCopyRate(1, 32, 4, 32, s),
        MeasureEmbeddingRate(64, 64, 8, s),
        MeasureFreshBufferRate(int64_t{1} << 20, s)}) {
    EXPECT_TRUE(std::isfinite(rate));
    EXPECT_GT(rate, 0);
    EXPECT_LT(rate, 1e12);
  }
}

// Rates are per element. With 64x the elements a call takes at least as
// long (large / small <= 64) and at most 512x as long (no more than 8x the
// time per element once the tensors leave the L1 cache, GELU being bound by
// its tanh: large / small >= 1 / 8). A rate that forgot the element count
// would read about 64x lower at the larger size (per-element time
// dominates at 262144 elements), below 1 / 8.
TEST(KernelRatesTest, GeluRateScalesWithTheElements) {
  at::set_num_threads(1);
  const double small = MeasureGeluRate(4096, 0.05);
  const double large = MeasureGeluRate(262144, 0.05);
  EXPECT_GT(large, small / 8);
  EXPECT_LT(large, small * 64);
}

}  // namespace
}  // namespace strata
