#include "launch/plan/step_work.h"

#include <cstdint>

#include "gtest/gtest.h"
#include "models/config.h"

namespace strata::launch {
namespace {

// gpt-tiny: V 256, T_max 128, L 2, H 4, C 64, F 256; 2 sequences of 64
// tokens: B T = 128.
constexpr double kBt = 128, kC = 64, kF = 256, kH = 4, kT = 64, kL = 2;
constexpr double kV = 256, kTmax = 128;

models::ModelConfig Model(const char* name) {
  return *models::ConfigByName(name);
}

TEST(MicroBatchWorkTest, GptCountsEachKernelClassOfItsForward) {
  const MicroBatchWork w =
      MicroBatchWorkOf(Model("gpt-tiny"), 2, 64, false, 0.0);
  // ln_1, ln_2 per block and ln_f; GELU over B T F per block, its forward
  // (2 of its 5 passes) once more in backward (GeluLinear); softmax over
  // B H T T per block; q, k, v and the output's head copies; two residual
  // adds per block and the embedding's wte + wpe; B T V log-probabilities;
  // the two tables' dense gradients.
  EXPECT_DOUBLE_EQ(w.layer_norm_elements, (2 * kL + 1) * kBt * kC);
  EXPECT_DOUBLE_EQ(w.gelu_elements, kL * kBt * kF * 7 / 5);
  EXPECT_DOUBLE_EQ(w.softmax_elements, kL * kBt * kH * kT);
  EXPECT_DOUBLE_EQ(w.head_copy_elements, 4 * kL * kBt * kC);
  EXPECT_DOUBLE_EQ(w.add_elements, (2 * kL + 1) * kBt * kC);
  EXPECT_DOUBLE_EQ(w.cross_entropy_elements, kBt * kV);
  EXPECT_DOUBLE_EQ(w.embedding_elements, (kV + kTmax) * kC);
  // 6 FLOPs a matmul parameter a token; 12 L C T a token for attention.
  EXPECT_DOUBLE_EQ(
      w.linear_flops,
      6 * static_cast<double>(models::NumMatmulParameters(Model("gpt-tiny"))) *
          kBt);
  EXPECT_DOUBLE_EQ(w.attention_flops, 12 * kL * kC * kT * kBt);
}

TEST(MicroBatchWorkTest, FusedAttentionHasNoSoftmaxOverScores) {
  EXPECT_EQ(
      MicroBatchWorkOf(Model("gpt-tiny"), 2, 64, true, 0.0).softmax_elements,
      0);
}

TEST(MicroBatchWorkTest, CheckpointingRecomputesTheBlocksForward) {
  const models::ModelConfig m = Model("gpt-tiny");
  const MicroBatchWork plain = MicroBatchWorkOf(m, 2, 64, false, 0.0);
  const MicroBatchWork ac = MicroBatchWorkOf(m, 2, 64, false, 1.0);
  // Blocks' elementwise classes x 7/5 (GELU: 3 forwards and a backward,
  // 9/5, against 7/5); the final norm, the embedding add, the loss and the
  // tables once.
  EXPECT_DOUBLE_EQ(ac.gelu_elements, plain.gelu_elements * 9 / 7);
  EXPECT_DOUBLE_EQ(ac.layer_norm_elements,
                   2 * kL * kBt * kC * 7 / 5 + kBt * kC);
  EXPECT_DOUBLE_EQ(ac.cross_entropy_elements, plain.cross_entropy_elements);
  // Attention's products x 4/3; the blocks' linear FLOPs + 1/3, the
  // head's once.
  EXPECT_DOUBLE_EQ(ac.attention_flops, plain.attention_flops * 4 / 3);
  const double block_flops =
      6 * static_cast<double>(models::NumMatmulParameters(m) - kV * kC) * kBt;
  EXPECT_DOUBLE_EQ(ac.linear_flops, plain.linear_flops + block_flops / 3);
}

// Checkpointing a fraction of the blocks (--checkpoint_every) adds that
// fraction of the recomputation: every class is linear in it.
TEST(MicroBatchWorkTest, HalfTheBlocksCheckpointedAddHalfTheRecompute) {
  const models::ModelConfig m = Model("gpt-tiny");
  const MicroBatchWork none = MicroBatchWorkOf(m, 2, 64, false, 0.0);
  const MicroBatchWork all = MicroBatchWorkOf(m, 2, 64, false, 1.0);
  const MicroBatchWork half = MicroBatchWorkOf(m, 2, 64, false, 0.5);
  EXPECT_DOUBLE_EQ(half.linear_flops,
                   (none.linear_flops + all.linear_flops) / 2);
  EXPECT_DOUBLE_EQ(half.attention_flops,
                   (none.attention_flops + all.attention_flops) / 2);
  EXPECT_DOUBLE_EQ(half.layer_norm_elements,
                   (none.layer_norm_elements + all.layer_norm_elements) / 2);
  EXPECT_DOUBLE_EQ(half.gelu_elements,
                   (none.gelu_elements + all.gelu_elements) / 2);
  EXPECT_DOUBLE_EQ(half.add_elements,
                   (none.add_elements + all.add_elements) / 2);
}

TEST(MicroBatchWorkTest, LlamaAddsGateRotaryAndGqaCopies) {
  // llama-tiny: V 256, L 2, H 4, 2 kv heads of 16 (kv = 32), C 64, F 172.
  const models::ModelConfig m = Model("llama-tiny");
  const double bt = 128, c = 64, f = 172, kv = 32, l = 2;
  const MicroBatchWork w = MicroBatchWorkOf(m, 2, 64, false, 0.0);
  EXPECT_DOUBLE_EQ(w.add_elements,
                   l * (2 * bt * c + bt * f + 4 * (bt * c + bt * kv)));
  EXPECT_DOUBLE_EQ(w.head_copy_elements, l * 6 * bt * c);
  EXPECT_DOUBLE_EQ(w.embedding_elements, 256 * c);
}

TEST(FreshMatmulBytesTest, CountsWeightGradientsAndLogitsAboveTheThreshold) {
  // gpt-tiny fp32: weight gradients qkv 3 C C 4 = 49152 bytes, proj C C 4
  // = 16384, fc and proj C F 4 = 65536 each (L = 2 of each); the head V C 4
  // = 65536; the logits B T V 4 = 131072.
  const models::ModelConfig m = Model("gpt-tiny");
  EXPECT_DOUBLE_EQ(FreshMatmulBytes(m, 2, 64, 4, 0),
                   2 * (49152 + 16384 + 2 * 65536) + 65536 + 131072);
  // At 65536 only fc, proj2, the head and the logits.
  EXPECT_DOUBLE_EQ(FreshMatmulBytes(m, 2, 64, 4, 65536),
                   2 * 2 * 65536 + 65536 + 131072);
  EXPECT_EQ(FreshMatmulBytes(m, 2, 64, 4, 1 << 30), 0);
  EXPECT_EQ(FreshMatmulBytes(m, 2, 64, 4, -1), 0);
}

TEST(DerivedKernelRatesTest, MemoryBoundClassesAtTheirPassesOfBandwidth) {
  // 1.2e11 B/s, fp32: elements/s = bandwidth / (passes x 4 bytes).
  const KernelRates r = DerivedKernelRates({}, 1e12, 1.2e11, 4);
  EXPECT_DOUBLE_EQ(r.attention_flops_per_s, 1e12);
  EXPECT_DOUBLE_EQ(r.layer_norm_elements_per_s, 1.2e11 / 20);
  EXPECT_DOUBLE_EQ(r.gelu_elements_per_s, 1.2e11 / 20);
  EXPECT_DOUBLE_EQ(r.softmax_elements_per_s, 1.2e11 / 20);
  EXPECT_DOUBLE_EQ(r.cross_entropy_elements_per_s, 1.2e11 / 24);
  EXPECT_DOUBLE_EQ(r.add_elements_per_s, 1.2e11 / 12);
  EXPECT_DOUBLE_EQ(r.head_copy_elements_per_s, 1.2e11 / 16);
  EXPECT_DOUBLE_EQ(r.embedding_elements_per_s, 1.2e11 / 4);
  EXPECT_DOUBLE_EQ(r.adamw_elements_per_s, 1.2e11 / 28);
  EXPECT_DOUBLE_EQ(r.fresh_buffer_bytes_per_s, 1.2e11);
}

TEST(DerivedKernelRatesTest, MeasuredRatesAreKept) {
  KernelRates measured;
  measured.gelu_elements_per_s = 3e8;
  const KernelRates r = DerivedKernelRates(measured, 1e12, 1.2e11, 2);
  EXPECT_DOUBLE_EQ(r.gelu_elements_per_s, 3e8);
  EXPECT_DOUBLE_EQ(r.layer_norm_elements_per_s, 1.2e11 / 10);  // bf16.
}

TEST(DerivedKernelRatesTest, NoBandwidthLeavesTheMemoryBoundClassesOut) {
  const KernelRates r = DerivedKernelRates({}, 1e12, 0, 4);
  EXPECT_EQ(r.layer_norm_elements_per_s, 0);
  EXPECT_EQ(r.adamw_elements_per_s, 0);
  const ClassTimes t =
      TimesOf(MicroBatchWorkOf(Model("gpt-tiny"), 2, 64, false, 0.0), r);
  EXPECT_EQ(t.ElementwiseS(), 0);
  EXPECT_GT(t.attention_s, 0);
}

TEST(TimesOfTest, EachClassIsItsWorkOverItsRate) {
  MicroBatchWork w;
  w.attention_flops = 6e9;
  w.gelu_elements = 4e6;
  w.softmax_elements = 3e6;
  KernelRates r;
  r.attention_flops_per_s = 2e10;
  r.gelu_elements_per_s = 1e8;
  r.softmax_elements_per_s = 1e8;
  const ClassTimes t = TimesOf(w, r);
  EXPECT_DOUBLE_EQ(t.attention_s, 0.3);
  EXPECT_DOUBLE_EQ(t.gelu_s, 0.04);
  EXPECT_DOUBLE_EQ(t.softmax_s, 0.03);
  EXPECT_DOUBLE_EQ(t.ElementwiseS(), 0.07);
}

}  // namespace
}  // namespace strata::launch
