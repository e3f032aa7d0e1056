// Measures the step-time planner's inputs on this machine for a planned
// configuration (strata_plan --measure): the matmul FLOP rate at the
// model's own GEMM shapes, the memory bandwidth, and every kernel class of
// launch/plan/step_work.h at the model's shapes (launch/plan/kernel_rates.h),
// with `threads` copies at once, as that many ranks share the machine (run with
// OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1, as the launcher starts ranks).
#ifndef STRATA_LAUNCH_PLAN_PLAN_RATES_H_
#define STRATA_LAUNCH_PLAN_PLAN_RATES_H_

#include <cstdint>
#include <string>

#include "launch/plan/plan.h"
#include "launch/plan/step_work.h"

namespace strata::launch {

struct MeasuredRates {
  double gemm_flops_per_s = 0;  // Over TrainingGemmShapes, FLOP-weighted.
  double memory_bandwidth_bytes_per_s = 0;  // 64 MiB copies.
  KernelRates kernels;
};

// Each rate timed for about `seconds` per shape after a warm-up.
MeasuredRates MeasureRates(const PlanInput& input, int threads,
                           double seconds = 0.2);

// Elements per second of optim::CreateAdamW's step over flat fp32 buffers
// of `elements` (weight decay 0.1; above the last-level cache: the rate per
// element does not depend on the size there).
double MeasureAdamWRate(int64_t elements, double seconds = 0.2,
                        int threads = 1);

// One line per rate, for strata_plan's output and BENCHMARKS.md.
std::string FormatRates(const MeasuredRates& rates, int threads);

}  // namespace strata::launch

#endif  // STRATA_LAUNCH_PLAN_PLAN_RATES_H_
