#include "launch/plan/plan_train.h"

#include <string>

#include "gtest/gtest.h"
#include "launch/config/option_kinds.h"
#include "launch/config/train_options.h"
#include "launch/plan/plan.h"
#include "strategies/options.h"

namespace strata::launch {
namespace {

TEST(PlanInputOfTest, SplitsTheGlobalBatchOverRanksAndMicroBatches) {
  TrainOptions o;
  o.model = "gpt-small50m";
  o.global_batch = 32;
  o.micro_batch = 2;
  o.seq_len = 128;
  o.strategy.kind = strategies::StrategyKind::kFsdp;
  o.strategy.mixed_precision.param_dtype = at::kBFloat16;
  o.strategy.checkpoint_units = {"GPTBlock"};
  auto in = PlanInputOf(o, 4);
  ASSERT_TRUE(in.ok()) << in.status();
  EXPECT_EQ(in->micro_batch, 2);
  EXPECT_EQ(in->grad_accumulation, 32 / 4 / 2);
  EXPECT_EQ(in->strategy, "fsdp");
  EXPECT_EQ(in->precision, "bf16");
  EXPECT_TRUE(in->activation_checkpointing);
  EXPECT_EQ(in->seq_len, 128);
}

TEST(PlanInputOfTest, Fp16PrecisionPlansTwoByteParameters) {
  TrainOptions o;
  o.global_batch = 4;
  o.precision = Precision::kFp16;
  auto in = PlanInputOf(o, 1);
  ASSERT_TRUE(in.ok()) << in.status();
  EXPECT_EQ(in->precision, "fp16");
  EXPECT_FALSE(in->autocast);
}

TEST(PlanInputOfTest, Bf16PrecisionIsAutocastOverTheParameterDtype) {
  TrainOptions o;
  o.global_batch = 4;
  o.precision = Precision::kBf16;
  auto in = PlanInputOf(o, 1);
  ASSERT_TRUE(in.ok()) << in.status();
  EXPECT_EQ(in->precision, "fp32");
  EXPECT_TRUE(in->autocast);
}

TEST(PlanInputOfTest, AWorldThatDoesNotDivideTheBatchNamesTheFlag) {
  TrainOptions o;
  o.global_batch = 6;
  auto in = PlanInputOf(o, 4);
  ASSERT_FALSE(in.ok());
  EXPECT_NE(in.status().message().find("--global_batch"), std::string::npos);
}

TEST(PlanLineTest, SaysThePeakInMiB) {
  TrainOptions o;
  o.model = "gpt-tiny";
  o.global_batch = 8;
  o.seq_len = 64;
  o.strategy.kind = strategies::StrategyKind::kDdp;
  auto in = PlanInputOf(o, 2);
  ASSERT_TRUE(in.ok()) << in.status();
  MemoryPlan plan = PlanMemory(*in);
  plan.peak_bytes = 3 * 1048576;
  EXPECT_EQ(
      PlanLine(*in, plan).rfind("plan: predicted peak 3.0 MiB per rank", 0), 0u)
      << PlanLine(*in, plan);
}

TEST(PlanEndLineTest, ComparesWithTheLargestRanksTrackedPeak) {
  MemoryPlan plan;
  plan.peak_bytes = 11 << 20;  // 11 MiB against a measured 10 MiB: +10 %.
  EXPECT_EQ(PlanEndLine(plan, {int64_t{9} << 20, int64_t{10} << 20},
                        {int64_t{400} << 20, int64_t{390} << 20}),
            "plan: predicted peak 11.00 MiB, measured 10.00 MiB (tensor "
            "storage, tracking allocator; largest rank 1 of 2), error +10.0 "
            "%; peak resident set 400 MiB (largest rank 0)");
}

TEST(PlanEndLineTest, SaysWhenTensorStorageIsNotTracked) {
  MemoryPlan plan;
  plan.peak_bytes = 3 << 20;
  EXPECT_EQ(PlanEndLine(plan, {}, {int64_t{100} << 20}),
            "plan: predicted peak 3.00 MiB, measured: not tracked (tensor "
            "storage needs the tracking allocator, train "
            "--track_tensor_memory, on the CPU); peak resident set 100 MiB "
            "(largest rank 0)");
}

}  // namespace
}  // namespace strata::launch
