// The memory / step-time planner behind `strata_plan` (plan_main.cc): from a
// model's shape, a world size and a strategy's options it predicts each
// rank's peak tensor memory, broken down into parameters, gradients,
// optimizer state, communication buffers and units in flight, activations
// and logits, and a step's time (compute at a FLOP rate, communication over a
// bus bandwidth, the part of it that hides behind compute). Nothing is
// allocated: a 7B model on 1 024 ranks is planned instantly.
//
// The memory model is that of Strata's CPU strategies as they allocate today
// (strategies/ddp.h, zero.h, fsdp.h; BENCHMARKS.md "Peak per-rank memory"):
// what the tracking allocator (base/tracking_allocator.h) counts. It is
// validated against the allocator's measured peak in plan_validation_test.cc
// (every strategy, N = 1..4, gpt-tiny and llama-tiny, within 10 %) and in
// plan_precision_validation_test.cc (bf16 autocast, bf16 parameters; fp16
// under LibTorch 2.x; N = 1, 2), on LibTorch 1.13 and 2.6: what autograd
// keeps differs between versions (PlanInput::torch_version), and
// plan_activations_test.cc checks the saved tensors to the byte on each.
//
// The peak is the largest of a few moments of a training step, each a sum
// of terms (a Moment in plan.cc): the head's backward (all activations
// saved, the logits and their gradient alive) and each transformer block's
// backward (activations of the blocks before it, FSDP's units in flight). The
// moment with the largest total is reported, term by term, with each term's
// formula.
#ifndef STRATA_LAUNCH_PLAN_PLAN_H_
#define STRATA_LAUNCH_PLAN_PLAN_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "launch/plan/step_work.h"
#include "models/config.h"

namespace strata::launch {

// FSDP's root flat parameter (everything outside the wrapped blocks: the
// token embedding / tied head, GPT's position table, the final norm, an
// untied output head). With FULL_SHARD and HYBRID_SHARD it is sharded like
// every unit and gathered only around the units that read it (the embedding
// and the head; strategies/fsdp.h "Layout"); its full gradient buffer lives
// from the head's backward to the end of backward. SHARD_GRAD_OP, NO_SHARD
// and HYBRID_SHARD_ZERO2 keep it gathered for the whole run. The one place
// this fact lives.
bool FsdpRootStaysGathered(const std::string& fsdp_sharding);

struct PlanInput {
  models::ModelConfig model;  // Shape; model.loss_chunk_tokens is used.
  int64_t world_size = 1;
  // "single", "ddp", "zero1", "zero2" or "fsdp".
  std::string strategy = "ddp";
  // FSDP: "full_shard", "shard_grad_op", "no_shard", "hybrid_shard",
  // "hybrid_shard_zero2"; hybrid_shard_group_size ranks per shard group.
  std::string fsdp_sharding = "full_shard";
  int64_t hybrid_shard_group_size = 0;
  // FSDP: whether the next block is gathered while the current one runs
  // backward (--fsdp_backward_prefetch=pre; with post it is gathered after
  // the current block's parameters are freed), and how many gradient
  // reductions stay in flight (--fsdp_reductions_in_flight), both as
  // resolved for the device (strategies::ResolveFsdpSchedule).
  bool fsdp_backward_prefetch = true;
  int64_t fsdp_reductions_in_flight = 1;
  // FSDP with grad_accumulation > 1: reduce-scatter every micro-batch (true,
  // the default: --fsdp_reduce_scatter_every_micro_step) or keep every
  // unit's full fp32 gradients until the last one (false, no_sync).
  bool fsdp_reduce_scatter_every_micro_step = true;
  int64_t micro_batch = 1;  // Sequences per rank per micro-batch.
  int64_t seq_len = 0;      // Tokens per sequence; 0: model.seq_len.
  int64_t grad_accumulation = 1;
  // The parameters' dtype: "fp32"; "bf16" (train --param_dtype=bf16
  // --reduce_dtype=bf16: bf16 parameters, gradients and reductions, fp32
  // masters); "fp16" (train --precision=fp16: fp16 parameters and gradients,
  // fp32 masters, gradients reduced in fp32, loss scaling).
  std::string precision = "fp32";
  // bf16 autocast inside every unit (train --precision=bf16,
  // strategies/autocast.h) over `precision`'s parameters.
  bool autocast = false;
  // Activation checkpointing of the transformer blocks: every
  // checkpoint_every-th block (train --checkpoint_every; 1: every block).
  bool activation_checkpointing = false;
  int checkpoint_every = 1;
  // Attention as a fused kernel (LibTorch >= 2 on CUDA,
  // models/layers.cc CausalAttention): the B H T T probabilities never
  // exist; it keeps a B H T fp32 log-sum-exp instead. false: the explicit
  // path of CPU builds (what plan_validation_test measures).
  bool fused_attention = false;
  // The LibTorch the run uses, as major * 100 + minor (113 for 1.13, 206 for
  // 2.6: base/torch_compat.h TorchVersion() of the binary). What autograd
  // keeps for backward differs between versions (RMSNorm's mean keeps its
  // input before 2.2); see PlanActivations. Required: values below 100 are
  // rejected, so that no caller plans for a version by accident.
  int torch_version = 0;
  // FSDP only: master shards, gradient shards and optimizer state on the
  // host (device memory excludes them; host memory is not planned).
  bool cpu_offload = false;
  // DDP / ZeRO gradient buckets (StrategyOptions defaults).
  int64_t bucket_bytes = int64_t{25} << 20;
  int64_t first_bucket_bytes = int64_t{1} << 20;
};

// Checks `input`; errors name the field as its strata_plan flag (--world_size
// must be >= 1, --strategy must be one of ..., --fsdp_sharding ...).
absl::Status ValidatePlanInput(const PlanInput& input);

// The transformer blocks `input` checkpoints: none without activation
// checkpointing, else num_layers / checkpoint_every (the every-th, 2
// every-th, ... block, as ActivationCheckpointingOptions::every selects).
int64_t CheckpointedBlocks(const PlanInput& input);

// One line of the breakdown: bytes per rank and how they were computed.
struct PlanTerm {
  std::string name;  // "parameters", "gradients", "optimizer state", ...
  int64_t bytes = 0;
  std::string formula;  // One line, e.g. "16 Psi / N = 16 * 124672 / 2".
};

struct MemoryPlan {
  int64_t num_parameters = 0;  // Psi.
  // The moment of the step at which the peak occurs ("head backward",
  // "backward of block 3").
  std::string peak_moment;
  std::vector<PlanTerm> terms;  // At the peak moment.
  int64_t peak_bytes = 0;       // Sum of terms.
};

// The per-rank peak memory of one training step under `input`; `input` must
// be valid (ValidatePlanInput).
MemoryPlan PlanMemory(const PlanInput& input);

// What autograd keeps from one micro-batch's forward for its backward on one
// rank, without activation checkpointing: one transformer block's saved
// tensors (its input included) and the head's (the final norm, its input
// included, and the head matmul's operands; the loss's log-probabilities are
// the peak's "logits" term). Derived tensor by tensor in plan.cc, per
// LibTorch version (PlanInput::torch_version), and checked to the byte
// against the tracking allocator in plan_activations_test.cc.
struct ActivationPlan {
  int64_t block_bytes = 0;
  int64_t head_bytes = 0;
};
ActivationPlan PlanActivations(const PlanInput& input);

// Hardware for the step-time prediction.
struct Hardware {
  double flops_per_s = 0;                // Sustained matmul FLOP/s of one rank.
  double bus_bandwidth_bytes_per_s = 0;  // Collectives' bus bandwidth.
  // Whether communication runs beside compute (GPUs: NCCL on its own
  // stream). false: it takes the compute's time (CPU-only ranks, where
  // Gloo's rings run on the cores that do the matmuls): all of it exposed.
  bool overlap_communication = true;
  // Memory bandwidth of one rank (launch/plan/kernel_rates.h
  // MeasureMemoryBandwidth, all ranks at once), for the memory-bound work:
  // elementwise ops and the optimizer. 0: that work is left out.
  double memory_bandwidth_bytes_per_s = 0;
  // Fixed cost of one collective (the latency of a latency + size /
  // bandwidth form, CollectiveCostFromTwoPoints); 0: none. With it,
  // bus_bandwidth_bytes_per_s is that form's asymptotic bandwidth.
  double collective_latency_s = 0;
  // Buffers at least this large are fresh mappings, page-faulted when
  // first written (glibc's mmap threshold, train
  // --malloc_mmap_threshold_bytes, 4 MiB by default; CPU ranks): FSDP's
  // unit buffers and large matmul outputs (FreshMatmulBytes) are timed at
  // rates.fresh_buffer_bytes_per_s. < 0: none (GPUs' caching allocator).
  int64_t fresh_buffer_threshold_bytes = -1;
  // Rates of the kernel classes beside the linear layers' matmuls
  // (launch/plan/step_work.h), measured (strata_plan --measure,
  // launch/plan/plan_rates.h); each 0 is derived (DerivedKernelRates) from
  // flops_per_s and memory_bandwidth_bytes_per_s.
  KernelRates rates;
};

// The latency and asymptotic bus bandwidth of t(S) = latency + S f / bw
// through two points of //benchmarks:collectives: message sizes s1 < s2
// bytes at bus bandwidths busbw1, busbw2 (bytes/s), for a collective of bus
// factor f (2 (N-1)/N all-reduce, (N-1)/N all-gather / reduce-scatter):
// busbw = S f / t, so t_i = S_i f / busbw_i. Then bw = f (s2 - s1) / (t2 -
// t1) = (s2 - s1) / (s2 / busbw2 - s1 / busbw1) and latency = t1 - s1 f /
// bw = f (s1 / busbw1 - s1 / bw). Needs s2 / busbw2 > s1 / busbw1; a
// latency below 0 (noise) is clamped to 0 with bw the large point's.
struct CollectiveCost {
  double latency_s = 0;
  double bus_bandwidth_bytes_per_s = 0;
};
CollectiveCost CollectiveCostFromTwoPoints(double s1_bytes,
                                           double busbw1_bytes_per_s,
                                           double s2_bytes,
                                           double busbw2_bytes_per_s,
                                           double bus_factor);

// The bus factor f of `input`'s collectives (busbw = S f / t): DDP and
// ZeRO's all-reduce 2 (N-1)/N, FSDP's all-gathers and reduce-scatters
// (N-1)/N; 0 on one rank.
double BusFactor(const PlanInput& input);

// How many collectives one optimizer step of `input` issues on each rank
// (for Hardware::collective_latency_s): DDP / ZeRO, one per gradient bucket
// (the first of first_bucket_bytes, then bucket_bytes each, over the 4 Psi
// fp32 gradient buffer), ZeRO one parameter all-gather more; FSDP FULL_SHARD
// and HYBRID_SHARD two all-gathers (forward, backward) and one
// reduce-scatter per block, the root's gathers for the embedding and the
// head and its reduce-scatter (3 L + 3); SHARD_GRAD_OP, NO_SHARD and
// HYBRID_SHARD_ZERO2 one gather and one reduction per unit (2 (L + 1)).
// 0 on one rank.
double CollectivesPerStep(const PlanInput& input);

// The matmuls of one micro-batch's forward and backward on one rank, for
// measuring the FLOP rate at the model's own shapes (strata_plan --measure;
// launch/plan/kernel_rates.h MeasureGemmFlops): each linear layer's forward
// (BT x in by in x out), its input gradient (BT x out by out x in) and its
// weight gradient (in x BT by BT x out), `count` times per micro-batch.
// Attention's batched products are left out (their FLOPs are rated at the
// linear layers' rate).
struct GemmShape {
  int64_t m = 0, k = 0, n = 0;
  int64_t count = 0;
};
std::vector<GemmShape> TrainingGemmShapes(const PlanInput& input);

struct StepTimePlan {
  // The linear layers' FLOPs / flops_per_s (with recompute), plus
  // attention's batched products at their rate (classes.attention_s).
  double compute_s = 0;
  // The kernel classes' times per step (launch/plan/step_work.h), the
  // elementwise ones summed into elementwise_s with grad_accumulate_s, the
  // parameter gradients' accumulation into the flat buffers (12 bytes a
  // fp32 parameter per micro-batch at the memory bandwidth).
  ClassTimes classes;
  double grad_accumulate_s = 0;
  double elementwise_s = 0;
  // AdamW at its rate plus the rest of the optimizer's bytes (clipping's
  // norm, ZeroGrad, refreshing 2-byte parameters) at the memory bandwidth.
  double optimizer_s = 0;
  double optimizer_bytes = 0;  // Per rank per step, AdamW's 28 included.
  // FSDP's fresh buffers: bytes of gathered units and unit gradient buffers
  // allocated per step, at KernelRates::fresh_buffer_bytes_per_s.
  double fsdp_buffer_bytes = 0;
  double fsdp_buffers_s = 0;
  double collectives = 0;      // CollectivesPerStep.
  double communication_s = 0;  // Bus bytes / bus bandwidth + latencies.
  double exposed_communication_s = 0;
  // compute_s + elementwise_s + optimizer_s + fsdp_buffers_s +
  // exposed_communication_s.
  double step_s = 0;
  double communication_bytes = 0;  // Per rank per step, bus bytes.
  std::string formula;             // How they were computed.
};

// The time of one optimizer step (grad_accumulation micro-batches) under
// `input` on `hardware` (both positive). Compute: TrainingFlopsPerToken x
// tokens per rank (plus one forward, 1/3 of it, per checkpointed block with
// activation checkpointing). Communication, in bus bytes per rank
// ((N-1)/N of the payload per all-gather / reduce-scatter, twice that per
// all-reduce) with payload P = Psi x bytes per element: DDP all-reduce
// (2P), ZeRO-1 all-reduce + parameter all-gather (3P), ZeRO-2
// reduce-scatter + parameter all-gather (2P), FSDP FULL_SHARD two
// all-gathers and a reduce-scatter (3P), SHARD_GRAD_OP and NO_SHARD 2P.
// Overlap: DDP / ZeRO gradient reductions hide behind the backward (2/3 of
// the compute), ZeRO's parameter all-gather after the optimizer is exposed,
// FSDP's collectives hide behind all of forward and backward: exposed =
// the exposed all-gather + max(0, the rest - overlappable compute). The
// bus bandwidth is NCCL-tests' busbw (//benchmarks:collectives); with
// collective_latency_s, each of CollectivesPerStep adds it. The rest of the
// step, per micro-batch (launch/plan/step_work.h): each kernel class's work at
// its rate (measured, or derived from flops_per_s and the memory bandwidth:
// DerivedKernelRates; the memory-bound classes are left out when neither is
// given), and the gradients' accumulation into the flat buffers (3 p bytes
// a parameter: AccumulateGrad adds into the buffer's views); per step, the
// optimizer, AdamW's share at its rate (28 bytes an element at the memory
// bandwidth when derived) plus clipping's norm (4 bytes), refreshing 2-byte
// parameters (6) and ZeroGrad's write of the gradient buffer at the memory
// bandwidth; FSDP's fresh buffers when it gathers (FSDP's strategies:
// every unit's parameters allocated for each gather, its gradient buffer
// allocated zeroed; FULL_SHARD / HYBRID_SHARD gather each block twice, the
// root for the embedding and the head: 3 p (L U + R) bytes; the others
// once: 2 p (L U + R); per micro-batch; none with one rank per shard group,
// fp32 and no offload, where the full unit is a view of the shard, and
// none when a block's p U bytes are below
// Hardware::fresh_buffer_threshold_bytes, or it is < 0: reused heap). The
// reduce-scatter lands straight in the gradient shard (no staging copy).
// Not modelled: FSDP's --fsdp_reuse_buffers (off by default).
// step = compute + elementwise + optimizer + FSDP buffers + exposed.
// flops_per_s is best measured at the model's own GEMM shapes
// (TrainingGemmShapes; strata_plan --measure): a micro-batch of few tokens
// runs far below the 1024^3 peak.
StepTimePlan PlanStepTime(const PlanInput& input, const Hardware& hardware);

// The breakdown as an aligned text table (MiB, with formulas).
std::string FormatMemoryPlan(const PlanInput& input, const MemoryPlan& plan);

// One candidate configuration of RankConfigurations.
struct RankedPlan {
  std::string label;  // "fsdp full_shard, checkpointed, loss chunks 1024".
  PlanInput input;
  MemoryPlan memory;
  StepTimePlan time;
};

// Every configuration derived from `base` by varying the strategy (ddp,
// zero1, zero2, fsdp full_shard, fsdp shard_grad_op; single too on one
// rank), activation checkpointing (off, on) and loss chunking (off, 1024
// tokens), keeping base's model, world size, micro-batch, sequence length,
// precision and offload; those whose predicted peak fits
// `memory_per_rank_bytes`, fastest predicted step first.
std::vector<RankedPlan> RankConfigurations(const PlanInput& base,
                                           int64_t memory_per_rank_bytes,
                                           const Hardware& hardware);

}  // namespace strata::launch

#endif  // STRATA_LAUNCH_PLAN_PLAN_H_
