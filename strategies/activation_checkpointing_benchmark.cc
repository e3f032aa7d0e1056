// Activation checkpointing's trade: forward + backward time and activation
// memory of a reference model, fp32, batch 8 x 256, with no unit
// checkpointed ("plain") and with every transformer block checkpointed
// ("ckpt"). Each iteration runs both models (same weights, same batch) one
// after the other, so the time ratio is measured side by side even on a
// loaded machine. Counters:
//   plain_s, ckpt_s   mean wall-clock seconds of one forward + backward;
//   time_ratio        ckpt_s / plain_s;
//   *_kept_MiB        live tensor storage after forward, minus before: the
//                     activations kept for backward (plus the logits);
//   *_peak_MiB        peak live storage during forward + backward, minus
//                     before (tracking allocator, base/tracking_allocator.h).
//
//   bazel run -c opt //strategies:activation_checkpointing_benchmark
//
// OpenBLAS uses every core for fp32 GEMMs (set OPENBLAS_NUM_THREADS to
// change that).
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/randint.h>
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <string>
#include <utility>

#include "base/tracking_allocator.h"
#include "models/config.h"
#include "models/factory.h"
#include "models/unit.h"
#include "strategies/activation_checkpointing.h"

namespace strata::strategies {
namespace {

constexpr int64_t kBatch = 8;
constexpr int64_t kSeq = 256;
constexpr double kMiB = 1 << 20;

struct Measured {
  double seconds = 0;
  int64_t kept_bytes = 0;
  int64_t peak_bytes = 0;
};

// One forward + backward of `model`, its allocations charged to `tag`.
Measured Run(models::UnitModel& model, const std::string& tag,
             const at::Tensor& inputs, const at::Tensor& targets) {
  MemoryTagScope scope(tag);
  model.zero_grad();
  Measured m;
  const int64_t before = TrackingAllocator::Stats(tag).live_bytes;
  TrackingAllocator::ResetPeak(tag);
  const auto start = std::chrono::steady_clock::now();
  at::Tensor loss = models::UnitModel::Loss(model.Forward(inputs), targets);
  m.kept_bytes = TrackingAllocator::Stats(tag).live_bytes - before;
  loss.backward();
  benchmark::DoNotOptimize(loss.item<float>());
  m.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  m.peak_bytes = TrackingAllocator::Stats(tag).peak_bytes - before;
  return m;
}

void BM_CheckpointBlocks(benchmark::State& state, const std::string& name) {
  if (absl::Status installed = TrackingAllocator::Install(); !installed.ok()) {
    state.SkipWithError(std::string(installed.message()).c_str());
    return;
  }
  absl::StatusOr<models::ModelConfig> config = models::ConfigByName(name);
  if (!config.ok()) {
    state.SkipWithError(std::string(config.status().message()).c_str());
    return;
  }
  // gpt-tiny's context is 128: widen its position table to the benchmark's.
  config->seq_len = std::max(config->seq_len, kSeq);
  absl::StatusOr<std::shared_ptr<models::UnitModel>> plain =
      models::BuildModel(*config, models::BuildOptions());
  absl::StatusOr<std::shared_ptr<models::UnitModel>> ckpt =
      models::BuildModel(*config, models::BuildOptions());
  if (!plain.ok() || !ckpt.ok()) {
    state.SkipWithError("model build failed");
    return;
  }
  ActivationCheckpointingOptions options;
  options.units = {config->family == "gpt" ? "GPTBlock" : "LlamaBlock"};
  const absl::Status applied =
      ApplyActivationCheckpointing(**ckpt, std::move(options));
  if (!applied.ok()) {
    state.SkipWithError(std::string(applied.message()).c_str());
    return;
  }
  at::Generator generator = at::detail::createCPUGenerator(0);
  const at::Tensor data =
      at::randint(config->vocab_size, {kBatch, kSeq + 1}, generator, at::kLong);
  const at::Tensor inputs = data.narrow(1, 0, kSeq);
  const at::Tensor targets = data.narrow(1, 1, kSeq);
  const std::string plain_tag = name + "/plain", ckpt_tag = name + "/ckpt";
  Measured p, c;
  double plain_seconds = 0, ckpt_seconds = 0;
  for (auto _ : state) {
    p = Run(**plain, plain_tag, inputs, targets);
    c = Run(**ckpt, ckpt_tag, inputs, targets);
    plain_seconds += p.seconds;
    ckpt_seconds += c.seconds;
  }
  const double n = static_cast<double>(state.iterations());
  state.counters["plain_s"] = plain_seconds / n;
  state.counters["ckpt_s"] = ckpt_seconds / n;
  state.counters["time_ratio"] = ckpt_seconds / plain_seconds;
  state.counters["plain_kept_MiB"] = p.kept_bytes / kMiB;
  state.counters["ckpt_kept_MiB"] = c.kept_bytes / kMiB;
  state.counters["plain_peak_MiB"] = p.peak_bytes / kMiB;
  state.counters["ckpt_peak_MiB"] = c.peak_bytes / kMiB;
}

BENCHMARK_CAPTURE(BM_CheckpointBlocks, gpt_tiny, std::string("gpt-tiny"))
    ->Unit(benchmark::kMillisecond)
    ->Iterations(10)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_CheckpointBlocks, gpt_small50m,
                  std::string("gpt-small50m"))
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3)
    ->UseRealTime();

}  // namespace
}  // namespace strata::strategies
