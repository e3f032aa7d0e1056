#include "launch/plan.h"

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "glog/logging.h"
#include "gtest/gtest.h"
#include "models/config.h"

namespace strata::launch {
namespace {

PlanInput Input(const std::string& model, const std::string& strategy,
                int64_t world_size) {
  auto config = models::ConfigByName(model);
  CHECK(config.ok()) << config.status();
  PlanInput input;
  input.model = *config;
  input.strategy = strategy;
  input.world_size = world_size;
  input.micro_batch = 2;
  input.seq_len = 64;
  return input;
}

int64_t Term(const MemoryPlan& plan, const std::string& name) {
  int64_t bytes = 0;
  for (const PlanTerm& t : plan.terms) {
    if (t.name == name) bytes += t.bytes;
  }
  return bytes;
}

int64_t State(const MemoryPlan& plan) {
  return Term(plan, "parameters") + Term(plan, "gradients") +
         Term(plan, "optimizer state");
}

TEST(PlanMemoryTest, DdpStateIsSixteenPsi) {
  const MemoryPlan plan = PlanMemory(Input("gpt-small50m", "ddp", 8));
  EXPECT_EQ(State(plan), 16 * plan.num_parameters);
}

TEST(PlanMemoryTest, FsdpStateIsSixteenPsiOverN) {
  // gpt-small50m's Psi is not a multiple of 8; the shard rounds up.
  const MemoryPlan plan = PlanMemory(Input("gpt-small50m", "fsdp", 8));
  EXPECT_EQ(State(plan), 16 * ((plan.num_parameters + 7) / 8));
}

TEST(PlanMemoryTest, FsdpCpuOffloadKeepsNoStateOnTheDevice) {
  PlanInput input = Input("gpt-small50m", "fsdp", 8);
  input.cpu_offload = true;
  EXPECT_EQ(State(PlanMemory(input)), 0);
}

TEST(PlanMemoryTest, Zero2StateIsFourPsiPlusTwelvePsiOverN) {
  // Psi padded to a multiple of N = 4: P; parameters 4 P, gradient shard and
  // AdamW state 12 P / N, staging 4 P / N.
  const MemoryPlan plan = PlanMemory(Input("gpt-small50m", "zero2", 4));
  const int64_t padded = (plan.num_parameters + 3) / 4 * 4;
  EXPECT_EQ(State(plan), 4 * padded + 12 * padded / 4);
  EXPECT_EQ(Term(plan, "communication buffers"), 4 * padded / 4);
}

TEST(PlanMemoryTest, Zero1KeepsFullGradients) {
  const MemoryPlan plan = PlanMemory(Input("gpt-small50m", "zero1", 4));
  const int64_t padded = (plan.num_parameters + 3) / 4 * 4;
  EXPECT_EQ(Term(plan, "gradients"), 4 * padded);
  EXPECT_EQ(Term(plan, "optimizer state"), 8 * padded / 4);
}

TEST(PlanMemoryTest, UnchunkedLogitsAreThreeFp32CopiesOfBtv) {
  // gpt-small50m at B T = 8 x 64 = 512 tokens: 3 B T V = 12.6M elements
  // exceeds B T V + B T C + V C = 4.2M + 0.3M + 5.2M.
  PlanInput input = Input("gpt-small50m", "ddp", 1);
  input.micro_batch = 8;
  const MemoryPlan plan = PlanMemory(input);
  EXPECT_EQ(plan.peak_moment, "head backward");
  EXPECT_EQ(Term(plan, "logits"), int64_t{3} * 512 * 8192 * 4);
}

TEST(PlanMemoryTest, ChunkingShrinksTheLogits) {
  PlanInput input = Input("gpt-small50m", "ddp", 1);
  input.model.loss_chunk_tokens = 16;
  // Three fp32 chunks of 16 x V plus the head weight's gradient V C.
  EXPECT_EQ(Term(PlanMemory(input), "logits"),
            int64_t{3} * 16 * 8192 * 4 + int64_t{4} * 8192 * 640);
}

TEST(PlanMemoryTest, CheckpointingLowersTheActivations) {
  PlanInput input = Input("gpt-small50m", "ddp", 1);
  const int64_t plain = Term(PlanMemory(input), "activations");
  input.activation_checkpointing = true;
  EXPECT_LT(Term(PlanMemory(input), "activations"), plain);
}

TEST(PlanMemoryTest, FsdpRootIsItsOwnTerm) {
  // gpt-small50m's root: the tied embedding V C, positions T C and ln_f
  // 2 C, fp32. FULL_SHARD gathers its parameters only for the embedding
  // and the head; its full gradients live from the head's backward on, so
  // at a block's backward (the peak moment here) the term is R gradients.
  const int64_t root = int64_t{8192} * 640 + 256 * 640 + 2 * 640;
  const MemoryPlan plan = PlanMemory(Input("gpt-small50m", "fsdp", 4));
  ASSERT_EQ(plan.peak_moment, "backward of block 7");
  EXPECT_EQ(Term(plan, "FSDP root (gathered)"), 4 * root);
  PlanInput grad_op = Input("gpt-small50m", "fsdp", 4);
  grad_op.fsdp_sharding = "shard_grad_op";
  const MemoryPlan kept = PlanMemory(grad_op);
  EXPECT_EQ(Term(kept, "FSDP root (gathered)"), 2 * 4 * root);
}

TEST(PlanMemoryTest, FsdpRootIsShardedOnlyUnderFullAndHybridShard) {
  EXPECT_FALSE(FsdpRootStaysGathered("full_shard"));
  EXPECT_FALSE(FsdpRootStaysGathered("hybrid_shard"));
  EXPECT_TRUE(FsdpRootStaysGathered("shard_grad_op"));
  EXPECT_TRUE(FsdpRootStaysGathered("hybrid_shard_zero2"));
  EXPECT_TRUE(FsdpRootStaysGathered("no_shard"));
}

TEST(PlanMemoryTest, FsdpOnOneRankGathersNothing) {
  // One rank, fp32: the full parameters and gradients alias the shards, so
  // FSDP's peak is DDP's.
  EXPECT_EQ(PlanMemory(Input("gpt-small50m", "fsdp", 1)).peak_bytes,
            PlanMemory(Input("gpt-small50m", "ddp", 1)).peak_bytes);
}

TEST(PlanMemoryTest, FusedAttentionKeepsNoProbabilities) {
  // One block's B H T T probabilities (fp32) replaced by a B H T fp32
  // log-sum-exp: gpt-small50m, B = 2, H = 10, T = 64, at the head's
  // backward every one of the 9 blocks' activations counts.
  PlanInput input = Input("gpt-small50m", "ddp", 1);
  const int64_t plain = Term(PlanMemory(input), "activations");
  input.fused_attention = true;
  const MemoryPlan fused = PlanMemory(input);
  ASSERT_EQ(fused.peak_moment, "head backward");
  EXPECT_EQ(plain - Term(fused, "activations"),
            9 * (int64_t{2} * 10 * 64 * 64 * 4 - int64_t{2} * 10 * 64 * 4));
}

TEST(PlanMemoryTest, PeakIsTheSumOfTerms) {
  const MemoryPlan plan = PlanMemory(Input("llama-tiny", "fsdp", 2));
  int64_t sum = 0;
  for (const PlanTerm& t : plan.terms) sum += t.bytes;
  EXPECT_EQ(plan.peak_bytes, sum);
}

TEST(PlanValidateTest, ErrorsNameTheFlag) {
  PlanInput input = Input("gpt-tiny", "ddp", 0);
  EXPECT_NE(ValidatePlanInput(input).message().find("--world_size"),
            std::string::npos);
  input = Input("gpt-tiny", "zero3", 2);
  EXPECT_NE(ValidatePlanInput(input).message().find("--strategy"),
            std::string::npos);
  input = Input("gpt-tiny", "fsdp", 4);
  input.fsdp_sharding = "hybrid_shard";
  input.hybrid_shard_group_size = 3;
  EXPECT_NE(
      ValidatePlanInput(input).message().find("--fsdp_hybrid_shard_group_size"),
      std::string::npos);
  input = Input("gpt-tiny", "ddp", 2);
  input.precision = "fp8";
  EXPECT_NE(ValidatePlanInput(input).message().find("--precision"),
            std::string::npos);
}

TEST(PlanStepTimeTest, DdpComputeBoundHidesItsAllReduce) {
  // 2 Psi 4 bytes (N-1)/N at a bandwidth far above what the backward needs:
  // nothing exposed, the step is the compute.
  PlanInput input = Input("gpt-small50m", "ddp", 4);
  Hardware hw{1e12, 1e15};
  const StepTimePlan plan = PlanStepTime(input, hw);
  const double psi = models::NumParameters(input.model);
  EXPECT_DOUBLE_EQ(plan.communication_bytes, 2 * 4 * psi * 3 / 4);
  EXPECT_DOUBLE_EQ(plan.exposed_communication_s, 0);
  EXPECT_DOUBLE_EQ(plan.step_s, plan.compute_s);
  EXPECT_DOUBLE_EQ(
      plan.compute_s,
      models::TrainingFlopsPerToken(input.model, 64) * 2 * 64 / 1e12);
}

TEST(PlanStepTimeTest, FsdpMovesThreePsi) {
  PlanInput input = Input("gpt-small50m", "fsdp", 8);
  const StepTimePlan plan = PlanStepTime(input, Hardware{1e12, 1e9});
  const double psi = models::NumParameters(input.model);
  EXPECT_DOUBLE_EQ(plan.communication_bytes, 3 * 4 * psi * 7 / 8);
  // Communication-bound: exposed = comm - compute (all of it overlappable).
  EXPECT_NEAR(plan.exposed_communication_s,
              plan.communication_s - plan.compute_s, 1e-12);
}

TEST(PlanStepTimeTest, WithoutOverlapAllCommunicationIsExposed) {
  PlanInput input = Input("gpt-small50m", "fsdp", 4);
  Hardware hw{1e12, 1e9};
  hw.overlap_communication = false;
  const StepTimePlan plan = PlanStepTime(input, hw);
  EXPECT_DOUBLE_EQ(plan.exposed_communication_s, plan.communication_s);
  EXPECT_DOUBLE_EQ(plan.step_s, plan.compute_s + plan.communication_s);
}

TEST(PlanStepTimeTest, OneRankCommunicatesNothing) {
  const StepTimePlan plan =
      PlanStepTime(Input("gpt-tiny", "ddp", 1), Hardware{1e9, 1e9});
  EXPECT_EQ(plan.communication_bytes, 0);
  EXPECT_EQ(plan.step_s, plan.compute_s);
}

TEST(RankConfigurationsTest, KeepsWhatFitsFastestFirst) {
  // gpt-small50m on 4 ranks with the memory of DDP's peak: DDP itself fits,
  // and everything listed fits and is sorted by step time.
  PlanInput base = Input("gpt-small50m", "ddp", 4);
  const int64_t budget = PlanMemory(base).peak_bytes;
  const std::vector<RankedPlan> ranked =
      RankConfigurations(base, budget, Hardware{1e11, 1e9});
  ASSERT_FALSE(ranked.empty());
  bool has_ddp = false;
  for (size_t i = 0; i < ranked.size(); ++i) {
    EXPECT_LE(ranked[i].memory.peak_bytes, budget) << ranked[i].label;
    if (i > 0) EXPECT_LE(ranked[i - 1].time.step_s, ranked[i].time.step_s);
    has_ddp |= ranked[i].label == "ddp";
  }
  EXPECT_TRUE(has_ddp);
}

TEST(RankConfigurationsTest, NothingFitsInOneByte) {
  EXPECT_TRUE(
      RankConfigurations(Input("gpt-tiny", "ddp", 2), 1, Hardware{1e9, 1e9})
          .empty());
}

}  // namespace
}  // namespace strata::launch
