// Dropout kernels alone, on the attention-probability tensor of one
// gpt-small50m layer at batch 8 x 256 (8 x 10 heads x 256 x 256 floats):
// at::dropout (LibTorch's generator) vs the world-size-invariant
// CounterDropout (models/dropout.h), forward only.
//
//   bazel run -c opt //models:dropout_benchmark
#include <ATen/ATen.h>
#include <benchmark/benchmark.h>

#include <cstdint>
#include <memory>

#include "models/dropout.h"

namespace strata::models {
namespace {

constexpr int64_t kBatch = 8;
constexpr int64_t kRow = 10 * 256 * 256;

void BM_AtenDropout(benchmark::State& state) {
  const at::Tensor x = at::ones({kBatch, kRow});
  for (auto _ : state) {
    benchmark::DoNotOptimize(at::dropout(x, 0.1, /*train=*/true));
  }
  state.SetItemsProcessed(state.iterations() * kBatch * kRow);
}

void BM_CounterDropout(benchmark::State& state) {
  const at::Tensor x = at::ones({kBatch, kRow});
  DropoutContext context;
  context.seed = 1;
  for (int64_t b = 0; b < kBatch; ++b) context.sample_ids.push_back(b);
  for (auto _ : state) {
    benchmark::DoNotOptimize(CounterDropout(x, 0.1, 7, context));
  }
  state.SetItemsProcessed(state.iterations() * kBatch * kRow);
}

BENCHMARK(BM_AtenDropout)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_CounterDropout)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
}  // namespace strata::models
