// Forward + backward time of the reference GPTs on CPU, fp32, batch 8 x
// sequence 256: tokens/s, seconds per token and the achieved training
// FLOP/s (TrainingFlopsPerToken, models/config.h). The *_dropout rows run
// with dropout 0.1 on every site, drawn by at::dropout (LibTorch's generator)
// or by the world-size-invariant counter-based dropout (models/dropout.h,
// with a DropoutContext as the trainer sets it): their ratio is the cost of
// world-size-invariant masks.
//
//   bazel run -c opt //models:model_benchmark
//   bazel run -c opt //models:model_benchmark -- --benchmark_filter=dropout
//
// OpenBLAS uses every core for fp32 GEMMs (set OPENBLAS_NUM_THREADS to
// change that), so times are wall-clock.
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <benchmark/benchmark.h>

#include <algorithm>
#include <memory>
#include <string>

#include "models/config.h"
#include "models/dropout.h"
#include "models/factory.h"
#include "models/unit.h"

namespace strata::models {
namespace {

constexpr int64_t kBatch = 8;
constexpr int64_t kSeq = 256;

enum class DropoutKind { kNone, kAten, kCounter };

void BM_ForwardBackward(benchmark::State& state, const std::string& name,
                        DropoutKind dropout = DropoutKind::kNone) {
  absl::StatusOr<ModelConfig> config = ConfigByName(name);
  if (!config.ok()) {
    state.SkipWithError(std::string(config.status().message()).c_str());
    return;
  }
  // gpt-tiny's context is 128: widen its position table to the benchmark's.
  config->seq_len = std::max(config->seq_len, kSeq);
  if (dropout != DropoutKind::kNone) config->dropout = 0.1;
  absl::StatusOr<std::shared_ptr<UnitModel>> model =
      BuildModel(*config, BuildOptions());
  if (!model.ok()) {
    state.SkipWithError(std::string(model.status().message()).c_str());
    return;
  }
  at::Generator generator = at::detail::createCPUGenerator(0);
  const at::Tensor data =
      at::randint(config->vocab_size, {kBatch, kSeq + 1}, generator, at::kLong);
  const at::Tensor inputs = data.narrow(1, 0, kSeq);
  const at::Tensor targets = data.narrow(1, 1, kSeq);
  if (dropout == DropoutKind::kCounter) {
    auto context = std::make_shared<DropoutContext>();
    context->seed = 1;
    for (int64_t b = 0; b < kBatch; ++b) context->sample_ids.push_back(b);
    (*model)->SetDropoutContext(context);
  }
  for (auto _ : state) {
    (*model)->zero_grad();
    at::Tensor loss = UnitModel::Loss((*model)->Forward(inputs), targets);
    loss.backward();
    benchmark::DoNotOptimize(loss.item<float>());
  }
  const double tokens = static_cast<double>(kBatch * kSeq);
  state.counters["tokens/s"] =
      benchmark::Counter(tokens, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["s/token"] =
      benchmark::Counter(tokens, benchmark::Counter::kIsIterationInvariantRate |
                                     benchmark::Counter::kInvert);
  state.counters["FLOP/s"] =
      benchmark::Counter(tokens * TrainingFlopsPerToken(*config, kSeq),
                         benchmark::Counter::kIsIterationInvariantRate);
  state.counters["params"] = static_cast<double>(NumParameters(*config));
}

BENCHMARK_CAPTURE(BM_ForwardBackward, gpt_tiny, std::string("gpt-tiny"))
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_ForwardBackward, gpt_small50m, std::string("gpt-small50m"))
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->MinTime(10.0);
BENCHMARK_CAPTURE(BM_ForwardBackward, gpt_small50m_aten_dropout,
                  std::string("gpt-small50m"), DropoutKind::kAten)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->MinTime(10.0);
BENCHMARK_CAPTURE(BM_ForwardBackward, gpt_small50m_counter_dropout,
                  std::string("gpt-small50m"), DropoutKind::kCounter)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->MinTime(10.0);

}  // namespace
}  // namespace strata::models
