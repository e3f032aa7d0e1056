// Rates of the kernels a training step is made of, measured in-process, as
// inputs of the step-time planner (launch/plan.h): matmul FLOP/s at given
// GEMM shapes (the model's, which run far below the 1024^3 peak of
// base/matmul_peak.h when a micro-batch has few tokens) and the memory
// bandwidth that bounds elementwise work and the optimizer.
//
// `threads` copies of a measurement run at once, one on each of that many
// threads, and the mean over them is returned: the rate one of `threads`
// ranks sharing this machine gets (run with OMP_NUM_THREADS=1
// OPENBLAS_NUM_THREADS=1, as the launcher starts ranks, so that each
// product runs on its own thread).
#ifndef STRATA_BASE_KERNEL_RATES_H_
#define STRATA_BASE_KERNEL_RATES_H_

#include <cstdint>

namespace strata {

// FLOP/s (2 m k n per product) of repeated fp32 at::mm of an m x k by a
// k x n matrix, timed for about `seconds` after one warm-up product.
double MeasureGemmFlops(int64_t m, int64_t k, int64_t n, double seconds = 0.2,
                        int threads = 1);

// Bytes/s of repeated copies between two fp32 buffers of `bytes` each, a
// read and a write of `bytes` per copy (STREAM's "copy" counts 2 x bytes),
// timed for about `seconds` after one warm-up copy. `bytes` well above the
// last-level cache measures DRAM.
double MeasureMemoryBandwidth(int64_t bytes = int64_t{64} << 20,
                              double seconds = 0.3, int threads = 1);

}  // namespace strata

#endif  // STRATA_BASE_KERNEL_RATES_H_
