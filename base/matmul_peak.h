// The machine's achieved matmul throughput, measured in-process: the peak
// that MFU figures (the trainer's progress line, benchmarks) are taken
// against, so that they are measured in the same run as the workload.
#ifndef STRATA_BASE_MATMUL_PEAK_H_
#define STRATA_BASE_MATMUL_PEAK_H_

#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include <cstdint>

namespace strata {

// FLOP/s of repeated n x n x n `at::mm` in `dtype` on `device` (the CPU
// with this thread's current LibTorch/BLAS thread settings, or a CUDA
// device), timed for about `seconds` after one warm-up product. On CUDA the
// products are queued in groups, and the clock is read once each group has
// finished (reading one element of the last product waits for it).
double MeasureMatmulPeakFlops(c10::ScalarType dtype, int64_t n = 1024,
                              double seconds = 0.5,
                              c10::Device device = c10::Device(c10::kCPU));

}  // namespace strata

#endif  // STRATA_BASE_MATMUL_PEAK_H_
