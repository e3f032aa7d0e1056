// The work of one micro-batch's forward and backward on one rank, by kernel
// class, and the rates that turn it into time: the step-time planner's
// (launch/plan/plan.h PlanStepTime) compute and elementwise terms. Each class
// is counted from what models/gpt.cc and models/llama.cc run (models/layers.cc
// for attention and the norms); its rate is measured at the model's shapes
// (launch/plan/kernel_rates.h, launch/plan/plan_rates.h) or derived from a FLOP
// rate and a memory bandwidth (DerivedKernelRates) on machines not measured.
#ifndef STRATA_LAUNCH_PLAN_STEP_WORK_H_
#define STRATA_LAUNCH_PLAN_STEP_WORK_H_

#include <cstdint>

#include "models/config.h"

namespace strata::launch {

// Rates of the kernel classes, forward and backward, per rank; units as
// named. 0: that class is left out of the step time.
struct KernelRates {
  double attention_flops_per_s = 0;         // Q K^T and probs V.
  double layer_norm_elements_per_s = 0;     // Rows x dim per norm.
  double gelu_elements_per_s = 0;           // B T F (Llama: SiLU).
  double softmax_elements_per_s = 0;        // B H T T.
  double cross_entropy_elements_per_s = 0;  // B T V.
  double add_elements_per_s = 0;            // Per residual add.
  double head_copy_elements_per_s = 0;      // B T C per head split/merge.
  double embedding_elements_per_s = 0;      // Table elements.
  double adamw_elements_per_s = 0;          // Optimizer share elements.
  // Bytes/s of fresh buffers (allocate, write once, free): FSDP's gathered
  // units and unit gradient buffers.
  double fresh_buffer_bytes_per_s = 0;
};

// The rates of the classes `measured` leaves at 0, derived from a matmul
// FLOP rate and a memory bandwidth (bytes/s; 0 leaves the memory-bound
// classes at 0) for `bytes_per_element` activations (4 fp32, 2 bf16),
// each class taken as bound by the bytes it moves, forward + backward:
//   attention products: at flops_per_s, as the linear layers;
//   LayerNorm, GELU, softmax: forward reads x, writes y; backward reads dy
//     and x (or y), writes dx: 5 passes (softmax always fp32: 5 x 4 bytes);
//   cross-entropy: log-softmax's 2 passes, the NLL gradient's dense write
//     and log-softmax's backward 3: 6 passes of fp32;
//   residual add: reads 2, writes 1 (its backward passes the gradient
//     through): 3 passes;
//   head split/merge: a copy each way, 4 passes;
//   embedding: the dense table gradient written once, 1 pass;
//   AdamW: 7 fp32 values read or written per element (28 bytes);
//   fresh buffers: one write, at the memory bandwidth (the page faults of
//     a fresh mapping are not derivable from it: measure them).
// Elements per second = memory bandwidth / (passes x bytes per element).
// On one CPU thread GELU, softmax and the cross-entropy are bound by their
// exp / tanh, not by memory: these derivations are for GPUs and other
// machines where they are memory-bound.
KernelRates DerivedKernelRates(const KernelRates& measured, double flops_per_s,
                               double memory_bandwidth_bytes_per_s,
                               int64_t bytes_per_element);

// The work of one micro-batch (forward and backward) of `micro_batch`
// sequences of `seq_len` tokens on one rank.
struct MicroBatchWork {
  double linear_flops = 0;     // 6 x matmul parameters x B T.
  double attention_flops = 0;  // 12 L C T x B T (the two products, 3x).
  double layer_norm_elements = 0;
  double gelu_elements = 0;
  double softmax_elements = 0;
  double cross_entropy_elements = 0;
  double add_elements = 0;
  double head_copy_elements = 0;
  double embedding_elements = 0;
  // Bytes of matmul outputs that are fresh buffers (at least
  // fresh_threshold_bytes; FreshMatmulBytes), timed at
  // KernelRates::fresh_buffer_bytes_per_s.
  double fresh_bytes = 0;
};

// The bytes of one micro-batch's matmul outputs that are fresh mappings:
// those of at least `threshold_bytes` (glibc's mmap threshold; train
// --malloc_mmap_threshold_bytes) among each linear layer's weight gradient
// (in x out x param_bytes; count per micro-batch as TrainingGemmShapes) and
// the head's B T V logits (fp32). The GEMM rate is measured into
// preallocated outputs and the embedding's and the loss's rates include
// their own fresh gradients, so these are the fresh pages no rate has
// counted. threshold_bytes < 0: none (a caching allocator, GPUs).
double FreshMatmulBytes(const models::ModelConfig& model, int64_t micro_batch,
                        int64_t seq_len, int64_t param_bytes,
                        int64_t threshold_bytes);

// Counted from the models' forward (each class once per forward call, its
// backward in the class's rate):
//   GPT: per block two LayerNorms (B T C each), GELU over B T F (its
//     forward twice: GeluLinear recomputes it in backward), softmax
//     over B H T T (none with fused attention), 4 head split/merge copies
//     (q, k, v, the output: B T C each), two residual adds (B T C); once
//     the final LayerNorm, the token + position embedding add, the
//     cross-entropy over B T V, the embedding tables' dense gradients
//     (V C + T_max C);
//   Llama: RMSNorm at LayerNorm's rate (2 per block + the final one), SiLU
//     at GELU's rate and the gate product at the add rate (B T F each),
//     the rotary embedding of q and k as 4 adds each (4 products and 2
//     sums over half the elements, and the stack's copy: B T C and B T
//     kv), GQA's repeat of k and v as 2 head copies, softmax, 4 head
//     copies, two residual adds per block; the cross-entropy and the token
//     table's gradient (V C; an untied head's gradient comes from its
//     matmul). RMSNorm is a few elementwise ops, rated as one LayerNorm:
//     an approximation (the measured classes are GPT's kernels).
// With activation checkpointing a checkpointed block's forward runs twice:
// its matmul FLOPs gain 1/3 (forward is 1 of 3 products), its elementwise
// classes 2/5 (forward moves 2 of the 5 passes). `checkpointed_fraction`:
// the fraction of the blocks checkpointed, in [0, 1].
MicroBatchWork MicroBatchWorkOf(const models::ModelConfig& model,
                                int64_t micro_batch, int64_t seq_len,
                                bool fused_attention,
                                double checkpointed_fraction);

// The time of `work` at `rates` (each class's work / rate; a class whose
// rate is 0 counts 0), by class.
struct ClassTimes {
  double attention_s = 0, layer_norm_s = 0, gelu_s = 0, softmax_s = 0,
         cross_entropy_s = 0, add_s = 0, head_copy_s = 0, embedding_s = 0;
  // Every class but attention (which is compute).
  double fresh_s = 0;  // MicroBatchWork::fresh_bytes.
  double ElementwiseS() const {
    return layer_norm_s + gelu_s + softmax_s + cross_entropy_s + add_s +
           head_copy_s + embedding_s + fresh_s;
  }
};
ClassTimes TimesOf(const MicroBatchWork& work, const KernelRates& rates);

}  // namespace strata::launch

#endif  // STRATA_LAUNCH_PLAN_STEP_WORK_H_
