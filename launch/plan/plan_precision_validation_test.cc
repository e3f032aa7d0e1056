// The planner (plan.h) against the tracking allocator in the trainer's
// reduced precisions, as plan_validation_test.cc does for fp32: every
// strategy (DDP, ZeRO-1, ZeRO-2, FSDP FULL_SHARD over the blocks) at N = 1, 2
// ranks (threads of this process), gpt-tiny and llama-tiny, two AdamW steps of
// 4 x 64 tokens per rank, in
//   - bf16 autocast over fp32 parameters (train --precision=bf16: the
//     AutocastInterceptor, strategies/autocast.h);
//   - bf16 parameters with fp32 masters, gradients reduced in bf16
//     (train --param_dtype=bf16 --reduce_dtype=bf16);
//   - fp16 parameters and buffers with fp32 masters and dynamic loss scaling,
//     gradients reduced in fp32 (train --precision=fp16; LibTorch 2.x only:
//     LibTorch 1.13 has no Half matmul on the CPU, where that case is
//     skipped, naming why).
// The measured figure is each rank's peak of tensor storage during the
// steps less what was live before the model was built, the largest over
// ranks; the prediction must be within 10 % of it (the bound).
#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/torch_compat.h"
#include "base/tracking_allocator.h"
#include "comm/group.h"
#include "comm/testing/multi_rank.h"
#include "gtest/gtest.h"
#include "launch/plan/plan.h"
#include "models/config.h"
#include "models/factory.h"
#include "strategies/autocast.h"
#include "strategies/factory.h"
#include "strategies/mixed_precision.h"
#include "strategies/options.h"
#include "strategies/strategy.h"

namespace strata::launch {
namespace {

constexpr int64_t kBatch = 4;
constexpr int64_t kSeqLen = 64;
constexpr int kSteps = 2;

// A precision as the train binary sets it up.
struct PrecisionCase {
  std::string name;            // "autocast", "bf16", "fp16".
  std::string plan_precision;  // PlanInput::precision.
  bool autocast = false;       // PlanInput::autocast.
  at::ScalarType param_dtype = at::kFloat;
  at::ScalarType reduce_dtype = at::kFloat;
  bool loss_scaling = false;
};

PrecisionCase PrecisionNamed(const std::string& name) {
  PrecisionCase p;
  p.name = name;
  if (name == "autocast") {
    p.plan_precision = "fp32";
    p.autocast = true;
  } else if (name == "bf16") {
    p.plan_precision = "bf16";
    p.param_dtype = p.reduce_dtype = at::kBFloat16;
  } else {
    CHECK_EQ(name, "fp16");
    p.plan_precision = "fp16";
    p.param_dtype = at::kHalf;
    p.loss_scaling = true;
  }
  return p;
}

// The per-rank peak (bytes) over ranks of `kSteps` steps.
int64_t MeasuredPeakBytes(const std::string& model_name,
                          const std::string& strategy,
                          const PrecisionCase& prec, int world_size) {
  auto config = models::ConfigByName(model_name);
  CHECK(config.ok()) << config.status();
  std::mutex mu;
  int64_t peak = 0;
  const absl::Status formed =
      comm::testing::RunOnRanks(world_size, [&](comm::Group& group) {
        const std::string tag =
            absl::StrCat("plan_", prec.name, strategy, world_size, model_name,
                         "_r", group.rank());
        MemoryTagScope scope(tag);
        at::manual_seed(100 + group.rank());
        const at::Tensor tokens =
            at::randint(config->vocab_size, {kBatch, kSeqLen + 1}, at::kLong);
        const at::Tensor inputs = tokens.narrow(1, 0, kSeqLen);
        const at::Tensor targets = tokens.narrow(1, 1, kSeqLen);
        const int64_t base = TrackingAllocator::Stats(tag).live_bytes;
        models::BuildOptions build;
        build.seed = 1;
        auto model = models::BuildModel(*config, build);
        ASSERT_TRUE(model.ok()) << model.status();
        if (prec.autocast) {
          (*model)->AddInterceptor(
              std::make_shared<strategies::AutocastInterceptor>());
        }
        strategies::StrategyOptions options;
        auto kind = strategies::ParseStrategyKind(strategy);
        ASSERT_TRUE(kind.ok()) << kind.status();
        options.kind = *kind;
        options.fsdp.wrap_policy.unit_types = {
            config->family == "gpt" ? "GPTBlock" : "LlamaBlock"};
        options.mixed_precision.param_dtype = prec.param_dtype;
        options.mixed_precision.reduce_dtype = prec.reduce_dtype;
        options.mixed_precision.buffer_dtype =
            prec.param_dtype == at::kHalf ? at::kHalf : at::kFloat;
        strategies::OptimizerConfig optimizer;
        if (prec.loss_scaling) optimizer.loss_scaling.emplace();
        optim::LrScheduleOptions schedule;
        schedule.kind = optim::LrScheduleKind::kConstant;
        schedule.base_lr = 1e-3;
        schedule.total_steps = 100;
        auto created = strategies::CreateStrategy(options, *model, &group,
                                                  optimizer, schedule);
        ASSERT_TRUE(created.ok()) << created.status();
        std::unique_ptr<strategies::Strategy> s = *std::move(created);
        model->reset();  // The strategy holds what it needs.
        TrackingAllocator::ResetPeak(tag);
        for (int step = 0; step < kSteps; ++step) {
          s->ZeroGrad();
          ASSERT_TRUE(s->ForwardBackward(inputs, targets, 1.0, true).ok());
          ASSERT_TRUE(s->Step(step).ok());
        }
        const int64_t rank_peak =
            TrackingAllocator::Stats(tag).peak_bytes - base;
        std::lock_guard<std::mutex> lock(mu);
        peak = std::max(peak, rank_peak);
      });
  CHECK(formed.ok()) << formed;
  return peak;
}

class PlanPrecisionValidationTest
    : public ::testing::TestWithParam<
          std::tuple<std::string, std::string, std::string>> {
 protected:
  static void SetUpTestSuite() {
    CHECK(TrackingAllocator::Install().ok());
    at::set_num_threads(1);
  }
};

TEST_P(PlanPrecisionValidationTest, PredictedPeakWithinTenPercentOfMeasured) {
  const auto& [precision_name, model_name, strategy] = GetParam();
  const PrecisionCase prec = PrecisionNamed(precision_name);
  if (prec.param_dtype == at::kHalf) {
    const absl::Status can = strategies::CheckCpuComputeDtype(at::kHalf);
    if (!can.ok()) GTEST_SKIP() << can.message();
  }
  for (int n = 1; n <= 2; ++n) {
    PlanInput input;
    auto config = models::ConfigByName(model_name);
    ASSERT_TRUE(config.ok());
    input.model = *config;
    input.world_size = n;
    input.strategy = strategy;
    input.micro_batch = kBatch;
    input.seq_len = kSeqLen;
    // FSDP's defaults on the CPU (strategies::ResolveFsdpSchedule).
    input.fsdp_backward_prefetch = false;
    input.fsdp_reductions_in_flight = 0;
    // What autograd keeps differs between LibTorch versions: plan for the
    // one this test runs on.
    input.torch_version = torch_compat::TorchVersion();
    input.precision = prec.plan_precision;
    input.autocast = prec.autocast;
    ASSERT_TRUE(ValidatePlanInput(input).ok()) << ValidatePlanInput(input);
    const MemoryPlan plan = PlanMemory(input);
    const int64_t measured = MeasuredPeakBytes(model_name, strategy, prec, n);
    const double error =
        static_cast<double>(plan.peak_bytes - measured) / measured;
    std::printf("| %s | %s | %s | %d | %.3f | %.3f | %+.1f%% |\n",
                model_name.c_str(), prec.name.c_str(), strategy.c_str(), n,
                plan.peak_bytes / 1048576.0, measured / 1048576.0, 100 * error);
    std::printf("%s", FormatMemoryPlan(input, plan).c_str());
    EXPECT_LE(std::abs(error), 0.10)
        << model_name << " " << prec.name << " " << strategy << " N=" << n
        << ": predicted " << plan.peak_bytes << " bytes, measured " << measured;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Precisions, PlanPrecisionValidationTest,
    ::testing::Combine(::testing::Values("autocast", "bf16", "fp16"),
                       ::testing::Values("gpt-tiny", "llama-tiny"),
                       ::testing::Values("ddp", "zero1", "zero2", "fsdp")));

}  // namespace
}  // namespace strata::launch
