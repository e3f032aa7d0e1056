// World-size-invariant dropout.
//
// at::dropout draws its mask from the process's generator: the mask a sample
// sees depends on which rank processes it, in which order, and on everything
// that drew from the generator before — so a run's dropout masks change with
// the world size, the strategy, the micro-batch split and after a resume at
// another world size. Here the mask of an element is a pure function of
//
//   (seed, step, global sample index, dropout site, element index in the
//    sample's slice of the activation)
//
// computed with the counter-based Philox4x32-10 generator (Salmon, Moraes,
// Dror, Shaw: "Parallel random numbers: as easy as 1, 2, 3", SC 2011), so the
// same global batch sees the same masks at any world size, under any
// strategy, after N->M resharding, and when activation checkpointing
// recomputes a unit during backward. No generator state exists to save.
//
// A DropoutContext says which step and which global samples the rows of the
// next forwards belong to (UnitModel::SetDropoutContext); the training loop
// sets it before every micro-batch. Without a context, dropout falls back to
// at::dropout (LibTorch's default generator).
#ifndef STRATA_MODELS_DROPOUT_H_
#define STRATA_MODELS_DROPOUT_H_

#include <ATen/core/Tensor.h>

#include <array>
#include <cstdint>
#include <string_view>
#include <vector>

namespace strata::models {

struct DropoutContext {
  // The run's seed (the trainer's --seed).
  uint64_t seed = 0;
  // The optimizer step the forwards belong to (0-based).
  int64_t step = 0;
  // Global index of the sample in each row of the batch, [B] (the sampler's
  // position of the sample in the run's sample order).
  std::vector<int64_t> sample_ids;
};

// A dropout call site: probability, mode, the context (borrowed; null:
// at::dropout) and the site's key (DropoutSiteKey) that tells masks of
// different sites apart.
struct DropoutSpec {
  double p = 0.0;
  bool train = false;
  const DropoutContext* context = nullptr;
  uint64_t site = 0;
};

// A stable 64-bit key for the dropout site `site` ("attn", "resid_mlp", ...)
// of unit `unit` ("blocks.3"): FNV-1a of "unit/site".
uint64_t DropoutSiteKey(std::string_view unit, std::string_view site);

// One Philox4x32-10 block: 4 random 32-bit words for `counter` under `key`.
std::array<uint32_t, 4> Philox4x32(std::array<uint32_t, 4> counter,
                                   std::array<uint32_t, 2> key);

// The uniform in [0, 1) (24 bits) that decides element `element` of sample
// `sample_id` at `site` in `step`: kept iff >= p. Exposed for tests.
float DropoutUniform(uint64_t seed, int64_t step, uint64_t site,
                     int64_t sample_id, int64_t element);

// x * mask / (1 - p), mask[b, e] = DropoutUniform(context.seed, context.step,
// site, context.sample_ids[b], e) >= p, where b indexes dim 0 of `x` and e
// the element within row b (row-major). x must be a CPU tensor with
// x.size(0) == sample_ids.size(). Differentiable (the mask is a constant).
at::Tensor CounterDropout(const at::Tensor& x, double p, uint64_t site,
                          const DropoutContext& context);

// Dropout at a call site: x itself when not training or p == 0; otherwise
// CounterDropout with the spec's context, or at::dropout without one.
at::Tensor Dropout(const at::Tensor& x, const DropoutSpec& spec);

}  // namespace strata::models

#endif  // STRATA_MODELS_DROPOUT_H_
