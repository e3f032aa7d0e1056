// The fused, chunked linear + cross-entropy (models/chunked_loss.h) against
// the unfused head (logits in full, then UnitModel::Loss), side by side in
// one run: time of forward + backward and the peak of tensor storage above
// what was live before (the tracking allocator, base/tracking_allocator.h),
// as counter peak_MB.
//
//   BM_Head/<vocab>/<chunk>: the head alone, hidden [2048, 768] (8 x 256
//     tokens, GPT-2 small's width) against vocabularies of 8192 (gpt-100m)
//     and 50257 (gpt2); chunk 0 is unfused. The peak includes the gradients
//     of hidden and weight (2048 x 768 + vocab x 768 floats), the same on
//     both sides.
//   BM_Gpt2Step/<chunk>: a training step (ForwardLoss + backward) of gpt2
//     (124M parameters, vocab 50257) on 4 x 256 tokens, gradients already
//     allocated: the peak is the step's activations.
//
//   bazel run -c opt //models:chunked_loss_benchmark
#include <ATen/ATen.h>
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdint>
#include <memory>

#include "base/tracking_allocator.h"
#include "glog/logging.h"
#include "models/chunked_loss.h"
#include "models/config.h"
#include "models/factory.h"
#include "models/init.h"
#include "models/unit.h"

namespace strata::models {
namespace {

constexpr int64_t kHeadTokens = 2048;
constexpr int64_t kHidden = 768;

// Runs `step` and returns the peak of live tensor bytes above those live
// before it, in MB.
template <typename F>
double PeakAboveLiveMb(F&& step) {
  const int64_t base = TrackingAllocator::Total().live_bytes;
  TrackingAllocator::ResetTotalPeak();
  step();
  return static_cast<double>(TrackingAllocator::Total().peak_bytes - base) /
         1e6;
}

void BM_Head(benchmark::State& state) {
  const int64_t vocab = state.range(0);
  const int64_t chunk = state.range(1);
  at::Generator generator = at::detail::createCPUGenerator(1);
  const at::Tensor hidden =
      at::randn({kHeadTokens, kHidden}, generator).requires_grad_(true);
  const at::Tensor weight =
      (at::randn({vocab, kHidden}, generator) * 0.02).requires_grad_(true);
  const at::Tensor targets =
      at::randint(vocab, {kHeadTokens}, generator, at::kLong);
  double peak_mb = 0;
  for (auto _ : state) {
    hidden.mutable_grad().reset();
    weight.mutable_grad().reset();
    peak_mb = std::max(
        peak_mb, PeakAboveLiveMb([&] {
          at::Tensor loss =
              chunk == 0
                  ? UnitModel::Loss(at::linear(hidden.unsqueeze(0), weight),
                                    targets.unsqueeze(0))
                  : ChunkedLinearCrossEntropy(hidden, weight, targets, chunk);
          loss.backward();
        }));
  }
  state.counters["peak_MB"] = peak_mb;
  state.SetItemsProcessed(state.iterations() * kHeadTokens);
}

void BM_Gpt2Step(benchmark::State& state) {
  absl::StatusOr<ModelConfig> config = ConfigByName("gpt2");
  CHECK(config.ok()) << config.status();
  config->loss_chunk_tokens = state.range(0);
  BuildOptions options;
  options.seed = 1;
  absl::StatusOr<std::shared_ptr<UnitModel>> model =
      BuildModel(*config, options);
  CHECK(model.ok()) << model.status();
  at::Generator generator = at::detail::createCPUGenerator(2);
  const at::Tensor data =
      at::randint(config->vocab_size, {4, 257}, generator, at::kLong);
  const at::Tensor tokens = data.narrow(1, 0, 256).contiguous();
  const at::Tensor targets = data.narrow(1, 1, 256).contiguous();
  // Allocates the gradients, so that the measured peaks are activations.
  (*model)->ForwardLoss(tokens, targets).backward();
  double peak_mb = 0;
  for (auto _ : state) {
    for (at::Tensor& p : (*model)->parameters()) p.mutable_grad().zero_();
    peak_mb = std::max(peak_mb, PeakAboveLiveMb([&] {
                         (*model)->ForwardLoss(tokens, targets).backward();
                       }));
  }
  state.counters["peak_MB"] = peak_mb;
  state.SetItemsProcessed(state.iterations() * tokens.numel());
}

BENCHMARK(BM_Head)
    ->ArgNames({"vocab", "chunk"})
    ->ArgsProduct({{8192, 50257}, {0, 256, 1024}})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(BM_Gpt2Step)
    ->ArgNames({"chunk"})
    ->Args({0})
    ->Args({256})
    ->Iterations(2)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace
}  // namespace strata::models

int main(int argc, char** argv) {
  const absl::Status installed = strata::TrackingAllocator::Install();
  CHECK(installed.ok()) << installed;
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  return 0;
}
