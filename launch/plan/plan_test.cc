#include "launch/plan/plan.h"

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "glog/logging.h"
#include "gtest/gtest.h"
#include "models/config.h"

namespace strata::launch {
namespace {

// Hardware with the given matmul rate and bus bandwidth, the rest at its
// defaults.
Hardware MakeHardware(double flops_per_s, double bus_bandwidth_bytes_per_s,
                      bool overlap_communication = true) {
  Hardware hw;
  hw.flops_per_s = flops_per_s;
  hw.bus_bandwidth_bytes_per_s = bus_bandwidth_bytes_per_s;
  hw.overlap_communication = overlap_communication;
  return hw;
}

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
  input.torch_version = 206;  // LibTorch 2.6.
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

// gpt-small50m has 9 blocks: every 3rd checkpoints the 3rd, 6th and 9th,
// each keeping only its input; the other 6 keep what a plain block keeps.
TEST(PlanMemoryTest, CheckpointingEveryKthBlockKeepsTheRest) {
  PlanInput input = Input("gpt-small50m", "ddp", 1);
  const int64_t plain = Term(PlanMemory(input), "activations");
  input.activation_checkpointing = true;
  const int64_t all = Term(PlanMemory(input), "activations");
  input.checkpoint_every = 3;
  EXPECT_EQ(CheckpointedBlocks(input), 3);
  // plain = 9 b + h and all = 9 i + h (b: a block's saved bytes, i: its
  // input, h: the head's), so 3 i + 6 b + h = (3 all + 6 plain) / 9.
  EXPECT_EQ(Term(PlanMemory(input), "activations"), (3 * all + 6 * plain) / 9);
  input.checkpoint_every = 10;
  EXPECT_EQ(CheckpointedBlocks(input), 0);
  EXPECT_EQ(Term(PlanMemory(input), "activations"), plain);
  input.checkpoint_every = 0;
  EXPECT_FALSE(ValidatePlanInput(input).ok());
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

TEST(PlanMemoryTest, FsdpNoSyncAccumulationKeepsFourPsiOfGradients) {
  // gpt-small50m, FULL_SHARD on 4 ranks, fp32, 2 micro-batches. By default
  // every micro-batch is reduce-scattered: the plan is one micro-batch's.
  // With no_sync every unit's full fp32 gradients (4 Psi) stay between
  // micro-batches, and the gradients in flight are among them: the peak
  // moves to the head's backward, where the root holds its gathered
  // parameters (4 R) and no gradients of its own.
  PlanInput input = Input("gpt-small50m", "fsdp", 4);
  input.grad_accumulation = 2;
  const MemoryPlan every = PlanMemory(input);
  EXPECT_EQ(every.peak_bytes,
            PlanMemory(Input("gpt-small50m", "fsdp", 4)).peak_bytes);
  EXPECT_EQ(Term(every, "accumulated gradients"), 0);
  input.fsdp_reduce_scatter_every_micro_step = false;
  const MemoryPlan no_sync = PlanMemory(input);
  EXPECT_EQ(Term(no_sync, "accumulated gradients"), 4 * no_sync.num_parameters);
  EXPECT_EQ(no_sync.peak_moment, "head backward");
  const int64_t root = int64_t{8192} * 640 + 256 * 640 + 2 * 640;
  EXPECT_EQ(Term(no_sync, "FSDP root (gathered)"), 4 * root);
  EXPECT_EQ(Term(no_sync, "units in flight"), 0);
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

TEST(PlanMemoryTest, LlamaNormsKeepTheirSquaresBeforeTorch22) {
  // LibTorch 1.13's mean keeps its input: each RMSNorm keeps x^2, one fp32
  // B T C tensor (B = 2, T = 64, C = 64), 2.6's does not. At the head's
  // backward every norm's count: 2 per block (L = 2) and the final one.
  PlanInput input = Input("llama-tiny", "ddp", 1);
  input.torch_version = 113;
  const MemoryPlan old_plan = PlanMemory(input);
  input.torch_version = 206;
  const MemoryPlan new_plan = PlanMemory(input);
  ASSERT_EQ(old_plan.peak_moment, "head backward");
  ASSERT_EQ(new_plan.peak_moment, "head backward");
  EXPECT_EQ(Term(old_plan, "activations") - Term(new_plan, "activations"),
            (2 * 2 + 1) * int64_t{4} * 2 * 64 * 64);
}

TEST(PlanMemoryTest, GptKeepsTheSameOnEveryTorch) {
  PlanInput input = Input("gpt-tiny", "ddp", 1);
  input.torch_version = 113;
  const MemoryPlan old_plan = PlanMemory(input);
  input.torch_version = 206;
  EXPECT_EQ(PlanMemory(input).peak_bytes, old_plan.peak_bytes);
}

TEST(PlanMemoryTest, FsdpShardedRootIsGatheredAfterTheLossBackward) {
  // llama-tiny with V = 4096, B T = 16 x 64: the loss's backward (3 BTV
  // fp32, 12 BTV bytes) outweighs the head matmul's (4 BTV + 4 BTC + 4 VC
  // bytes and the untied root's 8 R, R = 2 VC + C, gathered: 12 BTV > 4 BTV
  // + 4 BTC + 20 VC + 8 C at B T = 1024, C = 64) and the blocks'. FSDP
  // gathers a sharded root on the logits' gradient, after the loss's
  // backward: that moment has no root term.
  PlanInput input = Input("llama-tiny", "fsdp", 2);
  input.model.vocab_size = 4096;
  input.micro_batch = 16;
  const MemoryPlan plan = PlanMemory(input);
  ASSERT_EQ(plan.peak_moment, "loss backward");
  EXPECT_EQ(Term(plan, "logits"), 3 * int64_t{16} * 64 * 4096 * 4);
  EXPECT_EQ(Term(plan, "FSDP root (gathered)"), 0);
  // Kept gathered (SHARD_GRAD_OP), the root is there throughout.
  input.fsdp_sharding = "shard_grad_op";
  const MemoryPlan kept = PlanMemory(input);
  EXPECT_NE(kept.peak_moment, "loss backward");
  EXPECT_GT(Term(kept, "FSDP root (gathered)"), 0);
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
  input = Input("gpt-tiny", "ddp", 2);
  input.torch_version = 0;
  EXPECT_NE(ValidatePlanInput(input).message().find("--torch_version"),
            std::string::npos);
}

TEST(PlanStepTimeTest, DdpComputeBoundHidesItsAllReduce) {
  // 2 Psi 4 bytes (N-1)/N at a bandwidth far above what the backward needs:
  // nothing exposed, the step is the compute.
  PlanInput input = Input("gpt-small50m", "ddp", 4);
  Hardware hw = MakeHardware(1e12, 1e15);
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
  const StepTimePlan plan = PlanStepTime(input, MakeHardware(1e12, 1e9));
  const double psi = models::NumParameters(input.model);
  EXPECT_DOUBLE_EQ(plan.communication_bytes, 3 * 4 * psi * 7 / 8);
  // Communication-bound: exposed = comm - compute (all of it overlappable).
  EXPECT_NEAR(plan.exposed_communication_s,
              plan.communication_s - plan.compute_s, 1e-12);
}

TEST(PlanStepTimeTest, FsdpAccumulationCommunicatesPerMicroBatch) {
  // 3 micro-batches under FULL_SHARD: each gathers the parameters twice
  // (forward, backward) and reduce-scatters the gradients, 3 x 3 Psi; with
  // no_sync only the last reduces, 3 x 2 + 1 Psi. Collectives: L + 1 units
  // (the 2 blocks and the root of gpt-tiny), each gathered twice and
  // reduced once a micro-batch.
  PlanInput input = Input("gpt-tiny", "fsdp", 2);
  input.grad_accumulation = 3;
  const double psi = models::NumParameters(input.model);
  const Hardware hw = MakeHardware(1e12, 1e9);
  StepTimePlan plan = PlanStepTime(input, hw);
  EXPECT_DOUBLE_EQ(plan.communication_bytes, 9 * 4 * psi / 2);
  EXPECT_DOUBLE_EQ(plan.collectives, 3 * 3 * 3);
  input.fsdp_reduce_scatter_every_micro_step = false;
  plan = PlanStepTime(input, hw);
  EXPECT_DOUBLE_EQ(plan.communication_bytes, 7 * 4 * psi / 2);
  EXPECT_DOUBLE_EQ(plan.collectives, 3 * 2 * 3 + 3);
}

TEST(PlanStepTimeTest, WithoutOverlapAllCommunicationIsExposed) {
  PlanInput input = Input("gpt-small50m", "fsdp", 4);
  Hardware hw = MakeHardware(1e12, 1e9);
  hw.overlap_communication = false;
  const StepTimePlan plan = PlanStepTime(input, hw);
  EXPECT_DOUBLE_EQ(plan.exposed_communication_s, plan.communication_s);
  EXPECT_DOUBLE_EQ(plan.step_s, plan.compute_s + plan.communication_s);
}

TEST(PlanStepTimeTest, OneRankCommunicatesNothing) {
  const StepTimePlan plan =
      PlanStepTime(Input("gpt-tiny", "ddp", 1), MakeHardware(1e9, 1e9));
  EXPECT_EQ(plan.communication_bytes, 0);
  EXPECT_EQ(plan.step_s, plan.compute_s);
}

TEST(RankConfigurationsTest, KeepsWhatFitsFastestFirst) {
  // gpt-small50m on 4 ranks with the memory of DDP's peak: DDP itself fits,
  // and everything listed fits and is sorted by step time.
  PlanInput base = Input("gpt-small50m", "ddp", 4);
  const int64_t budget = PlanMemory(base).peak_bytes;
  const std::vector<RankedPlan> ranked =
      RankConfigurations(base, budget, MakeHardware(1e11, 1e9));
  ASSERT_FALSE(ranked.empty());
  bool has_ddp = false;
  for (size_t i = 0; i < ranked.size(); ++i) {
    EXPECT_LE(ranked[i].memory.peak_bytes, budget) << ranked[i].label;
    if (i > 0) {
      EXPECT_LE(ranked[i - 1].time.step_s, ranked[i].time.step_s);
    }
    has_ddp |= ranked[i].label == "ddp";
  }
  EXPECT_TRUE(has_ddp);
}

TEST(RankConfigurationsTest, LabelsSayWhichBlocksAreCheckpointed) {
  // With --checkpoint_every=2 the checkpointed configurations recompute every
  // second block, and their labels say so.
  PlanInput base = Input("gpt-tiny", "ddp", 2);
  base.checkpoint_every = 2;
  bool has_every_second = false;
  for (const RankedPlan& r :
       RankConfigurations(base, int64_t{1} << 40, MakeHardware(1e9, 1e9))) {
    EXPECT_EQ(r.label.find(", checkpointed"), std::string::npos) << r.label;
    has_every_second |= r.label == "ddp, one block in 2 checkpointed";
  }
  EXPECT_TRUE(has_every_second);
}

TEST(RankConfigurationsTest, NothingFitsInOneByte) {
  EXPECT_TRUE(
      RankConfigurations(Input("gpt-tiny", "ddp", 2), 1, MakeHardware(1e9, 1e9))
          .empty());
}

// gpt-tiny, B T = 2 x 64: C = 64, F = 256, H = 4, L = 2, Psi = 124672.
constexpr int64_t kBt = 2 * 64, kC = 64, kF = 256, kH = 4, kLayers = 2;
constexpr int64_t kBtc = kBt * kC, kBtf = kBt * kF, kBhtt = 2 * kH * 64 * 64;
constexpr int64_t kV = 256;  // gpt-tiny's vocabulary.

TEST(PlanMemoryTest, AutocastKeepsLinearActivationsInBf16) {
  // Per GPT block, fp32: 32 BTC + 4 BTF + 4 BHTT + 16 BT bytes; autocast:
  // x and h fp32 (8 BTC), six B T C linear activations in bf16 (12 BTC),
  // 2 BTF, the probabilities fp32 and bf16 (6 BHTT), 16 BT, and the bf16
  // copies of the block's matmul weights but mlp.proj's (2 (4 C^2 + C F):
  // GeluLinear casts that one again in backward). The head's matmul keeps
  // bf16 copies of its input and of the head weight (2 BTC + 2 V C) instead
  // of the fp32 norm output (4 BTC).
  PlanInput fp32 = Input("gpt-tiny", "ddp", 1);
  PlanInput autocast = fp32;
  autocast.autocast = true;
  const int64_t weights = 2 * (4 * kC * kC + kC * kF);
  const int64_t per_block =
      (32 - 20) * kBtc + (4 - 2) * kBtf + (4 - 6) * kBhtt - weights;
  EXPECT_EQ(Term(PlanMemory(fp32), "activations") -
                Term(PlanMemory(autocast), "activations"),
            kLayers * per_block + (4 - 2) * kBtc - 2 * kV * kC);
  // Autocast stores nothing in bf16: the model state is fp32's.
  EXPECT_EQ(State(PlanMemory(autocast)), State(PlanMemory(fp32)));
}

TEST(PlanMemoryTest, TwoByteParametersAccumulateGradientsInFp32) {
  // DDP: 2 Psi bf16 gradients + 4 Psi fp32 accumulated; parameters 2 Psi +
  // 4 Psi masters; AdamW 8 Psi.
  PlanInput input = Input("gpt-tiny", "ddp", 2);
  input.precision = "bf16";
  const MemoryPlan plan = PlanMemory(input);
  const int64_t psi = plan.num_parameters;
  EXPECT_EQ(Term(plan, "gradients"), 6 * psi);
  EXPECT_EQ(Term(plan, "parameters"), 6 * psi);
  EXPECT_EQ(Term(plan, "optimizer state"), 8 * psi);
}

TEST(PlanMemoryTest, Zero2Bf16ReducesIntoA2ByteShard) {
  // ZeRO-2 on 4 ranks: the fp32 gradient shard (4 Psi/N) and, reducing in
  // bf16, the reduce-scatter's bf16 shard (2 Psi/N); fp16 reduces in fp32.
  PlanInput input = Input("gpt-tiny", "zero2", 4);
  input.precision = "bf16";
  const int64_t shard = (PlanMemory(input).num_parameters + 3) / 4;
  EXPECT_EQ(Term(PlanMemory(input), "gradients"), 6 * shard);
  input.precision = "fp16";
  EXPECT_EQ(Term(PlanMemory(input), "gradients"), 4 * shard);
}

TEST(PlanMemoryTest, Zero2AccumulatingInFp32AddsAQuarterBucketOutput) {
  // gpt-tiny, ZeRO-2 on 4 ranks, 2 micro-batches of 2: the peak is in a
  // block's backward, where min(4 Psi, first + 2 buckets) of fp32 bucket
  // storage is held; a later micro-batch's reduce-scatter writes 1/N of it
  // apart before adding it to the shard. Reducing in bf16 it lands in the
  // bf16 shard instead.
  PlanInput input = Input("gpt-tiny", "zero2", 4);
  input.grad_accumulation = 2;
  const MemoryPlan plan = PlanMemory(input);
  ASSERT_EQ(plan.peak_moment.rfind("backward of block", 0), 0u)
      << plan.peak_moment;
  const int64_t buckets =
      std::min(4 * plan.num_parameters,
               input.first_bucket_bytes + 2 * input.bucket_bytes);
  EXPECT_EQ(Term(plan, "communication buffers (gradient buckets)"),
            buckets + buckets / 4);
  input.precision = "bf16";
  const MemoryPlan bf16 = PlanMemory(input);
  ASSERT_EQ(bf16.peak_moment.rfind("backward of block", 0), 0u)
      << bf16.peak_moment;
  EXPECT_EQ(Term(bf16, "communication buffers (gradient buckets)"), buckets);
}

TEST(TrainingGemmShapesTest, CarryTheLinearLayersTrainingFlops) {
  // Forward, input gradient and weight gradient of every linear layer:
  // 2 m k n each, 6 FLOPs per matmul weight per token in all.
  const PlanInput input = Input("gpt-tiny", "ddp", 1);
  double flops = 0;
  for (const GemmShape& g : TrainingGemmShapes(input)) {
    flops += 2.0 * g.m * g.k * g.n * g.count;
  }
  EXPECT_DOUBLE_EQ(flops, 6.0 * models::NumMatmulParameters(input.model) * kBt);
}

TEST(PlanStepTimeTest, OptimizerMovesThirtySixBytesAParameter) {
  // DDP fp32: AdamW's 28 bytes + the norm's 4 per parameter, and ZeroGrad's
  // 4-byte write of the gradient buffer; FSDP on 4 ranks: the same over a
  // quarter (its gradient shard zeroed). At 1 GB/s.
  PlanInput input = Input("gpt-tiny", "ddp", 1);
  Hardware hw = MakeHardware(1e12, 1e9);
  hw.memory_bandwidth_bytes_per_s = 1e9;
  const double psi = models::NumParameters(input.model);
  StepTimePlan plan = PlanStepTime(input, hw);
  EXPECT_DOUBLE_EQ(plan.optimizer_bytes, 36 * psi);
  EXPECT_DOUBLE_EQ(plan.optimizer_s, 36 * psi / 1e9);
  input = Input("gpt-tiny", "fsdp", 4);
  plan = PlanStepTime(input, hw);
  EXPECT_DOUBLE_EQ(plan.optimizer_bytes, 36 * std::ceil(psi / 4));
}

TEST(PlanStepTimeTest, ElementwiseIsEachClassAtItsRate) {
  // gpt-tiny fp32, one rank, 2 micro-batches: each class's work per
  // micro-batch (step_work.h) over its measured rate, twice; the gradient
  // accumulation, 12 bytes a parameter per micro-batch at 2 GB/s.
  PlanInput input = Input("gpt-tiny", "ddp", 1);
  input.grad_accumulation = 2;
  Hardware hw = MakeHardware(1e12, 1e9);
  hw.memory_bandwidth_bytes_per_s = 2e9;
  hw.rates.gelu_elements_per_s = 1e8;
  hw.rates.softmax_elements_per_s = 5e7;
  const double psi = models::NumParameters(input.model);
  const StepTimePlan plan = PlanStepTime(input, hw);
  // GELU: forward twice (GeluLinear's recompute), 7/5 of its passes.
  EXPECT_DOUBLE_EQ(plan.classes.gelu_s, 2.0 * kLayers * kBtf * 7 / 5 / 1e8);
  EXPECT_DOUBLE_EQ(plan.classes.softmax_s, 2 * kLayers * kBhtt / 5e7);
  // Not measured: LayerNorm derived at 5 fp32 passes of the bandwidth.
  EXPECT_DOUBLE_EQ(plan.classes.layer_norm_s,
                   2 * (2 * kLayers + 1) * kBtc / (2e9 / 20));
  EXPECT_DOUBLE_EQ(plan.grad_accumulate_s, 2 * 12 * psi / 2e9);
  EXPECT_DOUBLE_EQ(plan.elementwise_s,
                   plan.classes.ElementwiseS() + plan.grad_accumulate_s);
  EXPECT_DOUBLE_EQ(plan.step_s,
                   plan.compute_s + plan.elementwise_s + plan.optimizer_s);
}

TEST(PlanStepTimeTest, AttentionProductsAtTheirOwnRate) {
  // 12 L C T FLOPs a token at 1e9 FLOP/s, beside the linear layers'.
  PlanInput input = Input("gpt-tiny", "ddp", 1);
  Hardware hw = MakeHardware(1e12, 1e9);
  hw.rates.attention_flops_per_s = 1e9;
  const StepTimePlan plan = PlanStepTime(input, hw);
  const double attention = 12.0 * kLayers * kC * 64 * kBt;
  EXPECT_DOUBLE_EQ(plan.classes.attention_s, attention / 1e9);
  EXPECT_DOUBLE_EQ(plan.compute_s,
                   6.0 * models::NumMatmulParameters(input.model) * kBt / 1e12 +
                       attention / 1e9);
}

TEST(PlanStepTimeTest, AdamWAtItsRateTheRestAtTheBandwidth) {
  // DDP fp32 on one rank: Psi elements at 1e8/s, then the norm's 4 bytes
  // and ZeroGrad's 4 a parameter at 1 GB/s.
  PlanInput input = Input("gpt-tiny", "ddp", 1);
  Hardware hw = MakeHardware(1e12, 1e9);
  hw.memory_bandwidth_bytes_per_s = 1e9;
  hw.rates.adamw_elements_per_s = 1e8;
  const double psi = models::NumParameters(input.model);
  const StepTimePlan plan = PlanStepTime(input, hw);
  EXPECT_DOUBLE_EQ(plan.optimizer_s, psi / 1e8 + 8 * psi / 1e9);
}

TEST(PlanStepTimeTest, FsdpAllocatesThreeUnitBuffersAParameter) {
  // FULL_SHARD on 2 ranks, fp32: each unit gathered twice and its gradient
  // buffer once, 3 x 4 Psi bytes of fresh buffers at 2 GB/s; SHARD_GRAD_OP
  // 2 x 4 Psi; one rank aliases its shard: none.
  PlanInput input = Input("gpt-tiny", "fsdp", 2);
  Hardware hw = MakeHardware(1e12, 1e9);
  hw.rates.fresh_buffer_bytes_per_s = 2e9;
  hw.fresh_buffer_threshold_bytes = 0;  // Every buffer a fresh mapping.
  const double psi = models::NumParameters(input.model);
  StepTimePlan plan = PlanStepTime(input, hw);
  EXPECT_DOUBLE_EQ(plan.fsdp_buffer_bytes, 12 * psi);
  EXPECT_DOUBLE_EQ(plan.fsdp_buffers_s, 12 * psi / 2e9);
  input.fsdp_sharding = "shard_grad_op";
  EXPECT_DOUBLE_EQ(PlanStepTime(input, hw).fsdp_buffer_bytes, 8 * psi);
  EXPECT_EQ(PlanStepTime(Input("gpt-tiny", "fsdp", 1), hw).fsdp_buffers_s, 0);
  // A block's 4 U bytes below the mmap threshold: reused heap, none.
  hw.fresh_buffer_threshold_bytes = int64_t{1} << 30;
  EXPECT_EQ(PlanStepTime(input, hw).fsdp_buffers_s, 0);
}

TEST(PlanStepTimeTest, EachCollectivePaysTheLatency) {
  // FSDP FULL_SHARD, L = 2: 3 L + 3 = 9 collectives at 1 ms each.
  PlanInput input = Input("gpt-tiny", "fsdp", 2);
  Hardware hw = MakeHardware(1e12, 1e9);
  const double without = PlanStepTime(input, hw).communication_s;
  hw.collective_latency_s = 1e-3;
  const StepTimePlan plan = PlanStepTime(input, hw);
  EXPECT_EQ(plan.collectives, 9);
  EXPECT_DOUBLE_EQ(plan.communication_s, without + 9e-3);
}

TEST(CollectivesPerStepTest, DdpOnePerBucket) {
  // 4 Psi bytes of gradients: a first bucket of 1 MiB, then 25 MiB each.
  PlanInput input = Input("gpt-small50m", "ddp", 2);
  const double psi = models::NumParameters(input.model);
  const double expected =
      1 + std::ceil((4 * psi - (1 << 20)) / (25.0 * (1 << 20)));
  EXPECT_EQ(CollectivesPerStep(input), expected);
  input.strategy = "zero2";
  EXPECT_EQ(CollectivesPerStep(input), expected + 1);
  // zero2 reduce-scatters every micro-batch; ddp all-reduces once a step.
  input.grad_accumulation = 3;
  EXPECT_EQ(CollectivesPerStep(input), 3 * expected + 1);
  input.strategy = "ddp";
  EXPECT_EQ(CollectivesPerStep(input), expected);
  EXPECT_EQ(CollectivesPerStep(Input("gpt-small50m", "ddp", 1)), 0);
}

TEST(CollectiveCostTest, TwoPointsGiveLatencyAndBandwidth) {
  // t(S) = 1 ms + S f / 1 GB/s with f = 1: at 1 MB t = 2 ms (busbw 0.5
  // GB/s), at 64 MB t = 65 ms (busbw 64/65 GB/s).
  const CollectiveCost c =
      CollectiveCostFromTwoPoints(1e6, 0.5e9, 64e6, 64e9 / 65, 1.0);
  EXPECT_NEAR(c.bus_bandwidth_bytes_per_s, 1e9, 1e-3);
  EXPECT_NEAR(c.latency_s, 1e-3, 1e-15);
  // An all-reduce's bus factor 2 (N-1)/N = 1 at N = 2 reads the same; at
  // f = 1.5 the same busbw points mean 1.5x the times, so 1.5 ms latency.
  EXPECT_NEAR(
      CollectiveCostFromTwoPoints(1e6, 0.5e9, 64e6, 64e9 / 65, 1.5).latency_s,
      1.5e-3, 1e-15);
}

TEST(CollectiveCostTest, NegativeLatencyIsClampedToTheLargePoint) {
  // The small message faster per byte than the large one: noise; latency 0
  // and the large point's bandwidth.
  const CollectiveCost c =
      CollectiveCostFromTwoPoints(1e6, 2e9, 64e6, 1e9, 1.0);
  EXPECT_EQ(c.latency_s, 0);
  EXPECT_EQ(c.bus_bandwidth_bytes_per_s, 1e9);
}

TEST(PlanStepTimeTest, NoMemoryBandwidthLeavesTheMemoryBoundWorkOut) {
  const StepTimePlan plan =
      PlanStepTime(Input("gpt-tiny", "ddp", 1), MakeHardware(1e9, 1e9));
  EXPECT_EQ(plan.elementwise_s, 0);
  EXPECT_EQ(plan.optimizer_s, 0);
}

}  // namespace
}  // namespace strata::launch
