// The machine's achieved matmul throughput, measured in-process: the peak
// that MFU figures (the trainer's progress line, benchmarks) are taken
// against, so that they are measured in the same run as the workload.
#ifndef STRATA_BASE_MATMUL_PEAK_H_
#define STRATA_BASE_MATMUL_PEAK_H_

#include <c10/core/ScalarType.h>

#include <cstdint>

namespace strata {

// FLOP/s of repeated n x n x n `at::mm` in `dtype` on the CPU, with this
// thread's current LibTorch/BLAS thread settings, timed for about `seconds`
// after one warm-up product.
double MeasureMatmulPeakFlops(c10::ScalarType dtype, int64_t n = 1024,
                              double seconds = 0.5);

}  // namespace strata

#endif  // STRATA_BASE_MATMUL_PEAK_H_
