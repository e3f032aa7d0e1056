#include "launch/plan/plan_rates.h"

#include <ATen/Parallel.h>

#include <cmath>
#include <string>

#include "gtest/gtest.h"
#include "launch/plan/plan.h"
#include "models/config.h"

namespace strata::launch {
namespace {

// Bounds, not figures (machine and load dependent): AdamW over 64 K
// elements runs above 1 M elements/s (a core does ~1e9 simple flops/s and
// AdamW ~20 a element) and below 1e12 (no CPU core does 20 flops in 20
// picoseconds).
TEST(PlanRatesTest, AdamWRateIsPlausible) {
  at::set_num_threads(1);
  const double rate = MeasureAdamWRate(int64_t{1} << 16, 0.02);
  EXPECT_GT(rate, 1e6);
  EXPECT_LT(rate, 1e12);
}

// Every kernel class of gpt-tiny (2 x 64 tokens) gets a finite positive
// rate, and the planner with them predicts a step longer than the linear
// layers' compute alone (every class adds time).
TEST(PlanRatesTest, EveryClassOfTheModelIsMeasured) {
  at::set_num_threads(1);
  PlanInput in;
  in.model = *models::ConfigByName("gpt-tiny");
  in.strategy = "ddp";
  in.micro_batch = 2;
  in.seq_len = 64;
  in.torch_version = 206;  // Required; the step time does not depend on it.
  const MeasuredRates r = MeasureRates(in, 1, 0.01);
  const KernelRates& k = r.kernels;
  for (const double rate :
       {r.gemm_flops_per_s, r.memory_bandwidth_bytes_per_s,
        k.attention_flops_per_s, k.layer_norm_elements_per_s,
        k.gelu_elements_per_s, k.softmax_elements_per_s,
        k.cross_entropy_elements_per_s, k.add_elements_per_s,
        k.head_copy_elements_per_s, k.embedding_elements_per_s,
        k.adamw_elements_per_s, k.fresh_buffer_bytes_per_s}) {
    EXPECT_TRUE(std::isfinite(rate));
    EXPECT_GT(rate, 0);
  }
  Hardware hw;
  hw.flops_per_s = r.gemm_flops_per_s;
  hw.bus_bandwidth_bytes_per_s = 1e9;
  hw.memory_bandwidth_bytes_per_s = r.memory_bandwidth_bytes_per_s;
  hw.rates = k;
  const StepTimePlan plan = PlanStepTime(in, hw);
  EXPECT_GT(plan.classes.gelu_s, 0);
  EXPECT_GT(plan.step_s, plan.compute_s);
  EXPECT_NE(FormatRates(r, 1).find("GELU"), std::string::npos);
}

}  // namespace
}  // namespace strata::launch
