// strata_plan as a subprocess: its breakdown equals the library's, the
// ranking lists configurations, and a bad flag is an error naming it.
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "absl/time/time.h"
#include "base/testing/subprocess.h"
#include "base/torch_compat.h"
#include "gtest/gtest.h"
#include "launch/plan/plan.h"
#include "models/config.h"
#include "strategies/options.h"

namespace strata::launch {
namespace {

using ::strata::testing::RunfilePath;
using ::strata::testing::RunResult;

RunResult RunPlan(const std::vector<std::string>& flags) {
  std::vector<std::string> argv = {RunfilePath("launch/plan/strata_plan")};
  argv.insert(argv.end(), flags.begin(), flags.end());
  return ::strata::testing::Run(argv, {}, absl::Seconds(30));
}

// Train's flags mean what they mean to train: --global_batch over the
// ranks, --micro_batch per rank and forward.
TEST(StrataPlanTest, PrintsTheLibrarysBreakdown) {
  const RunResult r =
      RunPlan({"--model=gpt-small50m", "--world_size=4", "--strategy=zero2",
               "--global_batch=16", "--micro_batch=2", "--seq_len=128"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  PlanInput input;
  input.model = *models::ConfigByName("gpt-small50m");
  input.world_size = 4;
  input.strategy = "zero2";
  input.micro_batch = 2;
  input.grad_accumulation = 2;  // 16 sequences / 4 ranks / 2 per forward.
  input.seq_len = 128;
  input.torch_version = torch_compat::TorchVersion();  // The flag's default.
  EXPECT_EQ(r.out, FormatMemoryPlan(input, PlanMemory(input)));
}

TEST(StrataPlanTest, PlansForTheTorchVersionItIsTold) {
  // Llama's norms keep x^2 on LibTorch 1.13, not on 2.6: the two plans
  // differ, and each is the library's for that version.
  PlanInput input;
  input.model = *models::ConfigByName("llama-tiny");
  input.strategy = "fsdp";
  input.micro_batch = 1;
  input.seq_len = 128;  // train's --seq_len default.
  for (const int version : {113, 206}) {
    const RunResult r =
        RunPlan({"--model=llama-tiny", "--strategy=fsdp", "--global_batch=1",
                 absl::StrFormat("--torch_version=%d", version)});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    input.torch_version = version;
    EXPECT_EQ(r.out, FormatMemoryPlan(input, PlanMemory(input))) << version;
  }
  input.torch_version = 113;
  const int64_t old_peak = PlanMemory(input).peak_bytes;
  input.torch_version = 206;
  EXPECT_GT(old_peak, PlanMemory(input).peak_bytes);
}

TEST(StrataPlanTest, RanksWhatFitsFromShapeFlags) {
  const RunResult r = RunPlan(
      {"--layers=4", "--hidden=256", "--heads=4", "--ffn=688", "--vocab=1000",
       "--seq_len=256", "--world_size=8", "--strategy=fsdp",
       "--memory_per_rank_gib=1", "--tflops=1", "--bus_bandwidth_gbps=1"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("configurations that fit 1.0 GiB per rank"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("| 1 | "), std::string::npos) << r.out;
}

// Without a memory bandwidth the terms it prices are 0 s: the output says so,
// and says nothing of it once one is given.
TEST(StrataPlanTest, SaysWhatAMissingMemoryBandwidthLeavesOut) {
  const std::vector<std::string> flags = {
      "--layers=2",   "--hidden=128", "--heads=4",  "--ffn=344",
      "--vocab=1000", "--seq_len=64", "--tflops=1", "--bus_bandwidth_gbps=1"};
  const RunResult without = RunPlan(flags);
  ASSERT_EQ(without.exit_code, 0) << without.err;
  EXPECT_NE(without.out.find("left out: no memory bandwidth"),
            std::string::npos)
      << without.out;
  std::vector<std::string> with = flags;
  with.push_back("--memory_bandwidth_gbps=10");
  const RunResult given = RunPlan(with);
  ASSERT_EQ(given.exit_code, 0) << given.err;
  EXPECT_EQ(given.out.find("left out:"), std::string::npos) << given.out;
}

TEST(StrataPlanTest, BadFlagsNameTheFlag) {
  for (const auto& [flag, name] :
       std::vector<std::pair<std::string, std::string>>{
           {"--world_size=0", "--world_size"},
           {"--strategy=zero3", "--strategy"},
           {"--precision=fp8", "--precision"},
           {"--torch_version=0", "--torch_version"},
           {"--memory_per_rank_gib=80", "--tflops"}}) {
    const RunResult r = RunPlan({"--model=gpt-tiny", flag});
    EXPECT_EQ(r.exit_code, 1) << flag;
    EXPECT_NE(r.err.find(name), std::string::npos) << flag << ": " << r.err;
  }
  const RunResult r = RunPlan({"--layers=2"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("--hidden"), std::string::npos) << r.err;
}

TEST(StrataPlanTest, AModelAndShapeFlagsTogetherNameModel) {
  const RunResult r = RunPlan({"--model=gpt-tiny", "--layers=2", "--hidden=128",
                               "--heads=4", "--ffn=344", "--vocab=1000"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("--model: 'gpt-tiny' and the shape flags"),
            std::string::npos)
      << r.err;
}

// Train's enumerated flags are parsed as train parses them.
TEST(StrataPlanTest, TrainsFlagErrorsAreTrains) {
  const RunResult r = RunPlan({"--fsdp_sharding=half", "--strategy=fsdp"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("half"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace strata::launch
