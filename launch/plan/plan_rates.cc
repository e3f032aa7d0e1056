#include "launch/plan/plan_rates.h"

#include <ATen/ops/randn.h>
#include <ATen/ops/zeros.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/str_format.h"
#include "glog/logging.h"
#include "launch/plan/kernel_rates.h"
#include "optim/adamw.h"
#include "optim/optimizer.h"

namespace strata::launch {

double MeasureAdamWRate(int64_t elements, double seconds, int threads) {
  CHECK_GT(elements, 0);
  return elements *
         MeasureCallsPerSecond(
             [&] {
               const at::Tensor params = at::randn({elements});
               const at::Tensor grads = at::randn({elements});
               absl::StatusOr<std::unique_ptr<optim::Optimizer>> adamw =
                   optim::CreateAdamW(params, grads, {{0, elements, 0.1}},
                                      optim::AdamWOptions());
               CHECK(adamw.ok()) << adamw.status();
               std::shared_ptr<optim::Optimizer> shared = std::move(*adamw);
               // The optimizer keeps the buffers borrowed: the closure owns
               // them with it.
               return std::function<void()>(
                   [shared, params, grads] { shared->Step(1e-4); });
             },
             seconds, threads);
}

MeasuredRates MeasureRates(const PlanInput& in, int threads, double seconds) {
  const models::ModelConfig& m = in.model;
  const int64_t t = in.seq_len > 0 ? in.seq_len : m.seq_len;
  const int64_t b = in.micro_batch, bt = b * t;
  const int64_t heads = m.num_heads, head_dim = m.dim / m.num_heads;
  MeasuredRates r;
  double flops = 0, gemm_s = 0;
  for (const GemmShape& g : TrainingGemmShapes(in)) {
    const double f = 2.0 * g.m * g.k * g.n * g.count;
    flops += f;
    gemm_s += f / MeasureGemmFlops(g.m, g.k, g.n, seconds, threads);
  }
  r.gemm_flops_per_s = flops / gemm_s;
  r.memory_bandwidth_bytes_per_s =
      MeasureMemoryBandwidth(int64_t{64} << 20, seconds, threads);
  KernelRates& k = r.kernels;
  k.attention_flops_per_s =
      MeasureAttentionProductsFlops(b * heads, t, head_dim, seconds, threads);
  k.layer_norm_elements_per_s =
      MeasureLayerNormRate(bt, m.dim, seconds, threads);
  k.gelu_elements_per_s = MeasureGeluRate(bt * m.ffn_dim, seconds, threads);
  if (!in.fused_attention) {
    k.softmax_elements_per_s =
        MeasureSoftmaxRate(b * heads, t, seconds, threads);
  }
  k.cross_entropy_elements_per_s =
      MeasureCrossEntropyRate(bt, m.vocab_size, seconds, threads);
  k.add_elements_per_s = MeasureAddRate(bt * m.dim, seconds, threads);
  k.head_copy_elements_per_s =
      MeasureHeadCopyRate(b, t, heads, head_dim, seconds, threads);
  k.embedding_elements_per_s =
      MeasureEmbeddingRate(m.vocab_size, m.dim, bt, seconds, threads);
  // AdamW over the rank's optimizer share, at most 16 M elements (64 MiB a
  // buffer, far above the cache: the rate per element is DRAM's there).
  const int64_t psi = models::NumParameters(m);
  const int64_t share = in.strategy == "single" || in.strategy == "ddp"
                            ? psi
                            : (psi + in.world_size - 1) / in.world_size;
  k.adamw_elements_per_s = MeasureAdamWRate(
      std::min<int64_t>(share, int64_t{16} << 20), seconds, threads);
  // FSDP's fresh buffers are a block's parameters (p U bytes).
  const int64_t p = in.precision == "fp32" ? 4 : 2;
  const int64_t unit_bytes =
      p * (psi - m.vocab_size * m.dim) / std::max<int64_t>(1, m.num_layers);
  k.fresh_buffer_bytes_per_s = MeasureFreshBufferRate(
      std::max<int64_t>(unit_bytes, 4), seconds, threads);
  return r;
}

std::string FormatRates(const MeasuredRates& r, int threads) {
  const KernelRates& k = r.kernels;
  return absl::StrFormat(
      "measured on %d thread(s) at once: %.2f GFLOP/s per rank at the "
      "model's GEMM shapes, %.2f GB/s memory bandwidth per rank\n"
      "  kernel rates per rank (forward + backward): attention products "
      "%.2f GFLOP/s; LayerNorm %.1f, GELU %.1f, softmax %.1f, "
      "cross-entropy %.1f, add %.1f, head copy %.1f, embedding %.1f, AdamW "
      "%.1f M elements/s; fresh buffers %.2f GB/s\n",
      threads, r.gemm_flops_per_s / 1e9, r.memory_bandwidth_bytes_per_s / 1e9,
      k.attention_flops_per_s / 1e9, k.layer_norm_elements_per_s / 1e6,
      k.gelu_elements_per_s / 1e6, k.softmax_elements_per_s / 1e6,
      k.cross_entropy_elements_per_s / 1e6, k.add_elements_per_s / 1e6,
      k.head_copy_elements_per_s / 1e6, k.embedding_elements_per_s / 1e6,
      k.adamw_elements_per_s / 1e6, k.fresh_buffer_bytes_per_s / 1e9);
}

}  // namespace strata::launch
