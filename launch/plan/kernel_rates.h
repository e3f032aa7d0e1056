// Rates of the kernels a training step is made of, measured in-process, as
// inputs of the step-time planner (launch/plan/plan.h): matmul FLOP/s at given
// GEMM shapes (the model's, which run far below the 1024^3 peak of
// base/matmul_peak.h when a micro-batch has few tokens) and the memory
// bandwidth that bounds elementwise work and the optimizer.
//
// `threads` copies of a measurement run at once, one on each of that many
// threads, and the mean over them is returned: the rate one of `threads`
// ranks sharing this machine gets (run with OMP_NUM_THREADS=1
// OPENBLAS_NUM_THREADS=1, as the launcher starts ranks, so that each
// product runs on its own thread).
#ifndef STRATA_LAUNCH_PLAN_KERNEL_RATES_H_
#define STRATA_LAUNCH_PLAN_KERNEL_RATES_H_

#include <cstdint>
#include <functional>

namespace strata {

// FLOP/s (2 m k n per product) of repeated fp32 at::mm of an m x k by a
// k x n matrix, timed for about `seconds` after one warm-up product.
double MeasureGemmFlops(int64_t m, int64_t k, int64_t n, double seconds = 0.2,
                        int threads = 1);

// Bytes/s of repeated copies between two fp32 buffers of `bytes` each, a
// read and a write of `bytes` per copy (STREAM's "copy" counts 2 x bytes),
// timed for about `seconds` after one warm-up copy. `bytes` well above the
// last-level cache measures DRAM.
double MeasureMemoryBandwidth(int64_t bytes = int64_t{64} << 20,
                              double seconds = 0.3, int threads = 1);

// The kernel classes of a transformer's step beside its linear layers, each
// timed as one forward and one backward through autograd (so the backward
// kernels and autograd's own work are in the time), fp32, at the shapes
// given (a model's own: launch/plan/plan_rates.h). Each returns work units per
// second, the unit named per function; `seconds` and `threads` as above.

// Rows x dim elements per second of at::layer_norm over [rows, dim] with a
// weight and a bias (their gradients included).
double MeasureLayerNormRate(int64_t rows, int64_t dim, double seconds = 0.2,
                            int threads = 1);

// Elements per second of at::gelu(x, "tanh") (GPT-2's variant).
double MeasureGeluRate(int64_t elements, double seconds = 0.2, int threads = 1);

// batch_heads x seq x seq elements per second of the fp32 softmax over the
// last dimension of causally masked scores (-inf above the diagonal).
double MeasureSoftmaxRate(int64_t batch_heads, int64_t seq,
                          double seconds = 0.2, int threads = 1);

// FLOP/s of attention's two batched products at [batch_heads, seq,
// head_dim]: at::baddbmm(mask, q, k^T) and at::bmm(probs, v), forward and
// backward, counted as 3 x their forward FLOPs (2 x 2 batch_heads seq^2
// head_dim), as models::TrainingFlopsPerToken counts them.
double MeasureAttentionProductsFlops(int64_t batch_heads, int64_t seq,
                                     int64_t head_dim, double seconds = 0.2,
                                     int threads = 1);

// tokens x vocab elements per second of at::cross_entropy of [tokens, vocab]
// logits against int64 targets (mean reduction).
double MeasureCrossEntropyRate(int64_t tokens, int64_t vocab,
                               double seconds = 0.2, int threads = 1);

// Elements per second of a + b (a residual add), both operands requiring
// gradients.
double MeasureAddRate(int64_t elements, double seconds = 0.2, int threads = 1);

// batch x seq x heads x head_dim elements per second of splitting heads:
// a [batch, seq, heads * head_dim] tensor viewed as [batch, seq, heads,
// head_dim], transposed to [batch, heads, seq, head_dim] and reshaped to
// [batch * heads, seq, head_dim] (a copy), as attention does for q, k, v
// and, transposed back, for its output.
double MeasureHeadCopyRate(int64_t batch, int64_t seq, int64_t heads,
                           int64_t head_dim, double seconds = 0.2,
                           int threads = 1);

// vocab x dim weight elements per second of at::embedding of `tokens`
// indices into a [vocab, dim] table: the backward writes a dense [vocab,
// dim] gradient, which dominates when tokens << vocab.
double MeasureEmbeddingRate(int64_t vocab, int64_t dim, int64_t tokens,
                            double seconds = 0.2, int threads = 1);

// Bytes per second of fresh buffers: allocating `bytes` (at::empty), writing
// them once (zero_) and freeing them, as FSDP does for each unit it gathers
// and each unit gradient buffer. Above the process's malloc mmap threshold
// (train --malloc_mmap_threshold_bytes) every such buffer is a fresh
// mapping: the time is mostly the kernel's page faults, not the write.
double MeasureFreshBufferRate(int64_t bytes, double seconds = 0.2,
                              int threads = 1);

// Work units per second of `run_once` (one unit per call), `threads` copies
// at once, each built by `make_run` on its own thread (its tensors its own)
// and timed for about `seconds` after one warm-up call: the mean over the
// threads. For rates of kernels outside base/ (the optimizer's step,
// launch/plan/plan_rates.h).
double MeasureCallsPerSecond(
    const std::function<std::function<void()>()>& make_run, double seconds,
    int threads);

}  // namespace strata

#endif  // STRATA_LAUNCH_PLAN_KERNEL_RATES_H_
