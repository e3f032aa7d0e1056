#include "base/matmul_peak.h"

#include <gtest/gtest.h>

namespace strata {
namespace {

TEST(MeasureMatmulPeakFlopsTest, ReturnsAPlausibleRate) {
  // Any CPU that runs LibTorch does 256^3 products at well over 10 MFLOP/s
  // and under 100 TFLOP/s; a unit error (FLOP vs FLOP/s, missing factor of
  // 2n^3) lands far outside.
  const double flops = MeasureMatmulPeakFlops(at::kFloat, 256, 0.05);
  EXPECT_GT(flops, 1e7);
  EXPECT_LT(flops, 1e14);
}

}  // namespace
}  // namespace strata
