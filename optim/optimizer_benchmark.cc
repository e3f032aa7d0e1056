// Strata's fused flat optimizers (one pass over memory: adamw.h, sgd.h)
// against LibTorch's torch::optim classes (a chain of tensor ops with
// temporaries per step) on one fp32 buffer of 10M and 50M elements, with
// weight decay: AdamW, Adam (L2 decay) and SGD with momentum 0.9.
//
//   bazel run -c opt //optim:optimizer_benchmark
//   bazel run -c opt //optim:optimizer_benchmark -- --benchmark_filter=Vs
//
// BM_FusedVsTorch/<optimizer> runs both in every iteration and reports their
// mean step times and the ratio measured in the same run: torch_over_fused.
// bytes_per_second counts the memory the fused step must move: AdamW and
// Adam read params, grads, exp_avg, exp_avg_sq and write params, exp_avg,
// exp_avg_sq (28 bytes per element); SGD with momentum reads params, grads,
// the buffer and writes params and the buffer (20 bytes per element).

#include <ATen/ATen.h>
#include <benchmark/benchmark.h>
#include <glog/logging.h>
#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/optim/sgd.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include "optim/adamw.h"
#include "optim/sgd.h"

namespace strata::optim {
namespace {

constexpr double kLr = 1e-4;
constexpr double kWeightDecay = 0.01;
constexpr double kMomentum = 0.9;

enum class Kind { kAdamW, kAdam, kSgd };

int64_t BytesPerElement(Kind kind) {
  return (kind == Kind::kSgd ? 5 : 7) * sizeof(float);
}

std::unique_ptr<Optimizer> MakeFused(Kind kind, const at::Tensor& params,
                                     const at::Tensor& grads) {
  const std::vector<ParamRange> ranges = {{0, params.numel(), kWeightDecay}};
  absl::StatusOr<std::unique_ptr<Optimizer>> created;
  switch (kind) {
    case Kind::kAdamW:
      created = CreateAdamW(params, grads, ranges, AdamWOptions());
      break;
    case Kind::kAdam:
      created = CreateAdam(params, grads, ranges, AdamWOptions());
      break;
    case Kind::kSgd: {
      SgdOptions options;
      options.momentum = kMomentum;
      created = CreateSgd(params, grads, ranges, options);
      break;
    }
  }
  CHECK(created.ok()) << created.status();
  return *std::move(created);
}

std::unique_ptr<torch::optim::Optimizer> MakeTorch(Kind kind,
                                                   at::Tensor& params,
                                                   const at::Tensor& grads) {
  params.requires_grad_();
  params.mutable_grad() = grads;
  const std::vector<at::Tensor> p = {params};
  switch (kind) {
    case Kind::kAdamW:
      return std::make_unique<torch::optim::AdamW>(
          p, torch::optim::AdamWOptions(kLr).weight_decay(kWeightDecay));
    case Kind::kAdam:
      return std::make_unique<torch::optim::Adam>(
          p, torch::optim::AdamOptions(kLr).weight_decay(kWeightDecay));
    case Kind::kSgd:
      return std::make_unique<torch::optim::SGD>(
          p, torch::optim::SGDOptions(kLr).momentum(kMomentum).weight_decay(
                 kWeightDecay));
  }
  LOG(FATAL) << "unknown kind";
}

void BM_Fused(benchmark::State& state, Kind kind) {
  const int64_t n = state.range(0);
  at::Tensor params = at::randn({n});
  at::Tensor grads = at::randn({n});
  std::unique_ptr<Optimizer> fused = MakeFused(kind, params, grads);
  fused->Step(kLr);  // Past SGD's first (buffer-initialising) step.
  for (auto _ : state) fused->Step(kLr);
  state.SetBytesProcessed(state.iterations() * n * BytesPerElement(kind));
}

void BM_Torch(benchmark::State& state, Kind kind) {
  const int64_t n = state.range(0);
  at::Tensor params = at::randn({n});
  std::unique_ptr<torch::optim::Optimizer> torch_optimizer =
      MakeTorch(kind, params, at::randn({n}));
  torch_optimizer->step();  // Allocates the state.
  for (auto _ : state) torch_optimizer->step();
  state.SetBytesProcessed(state.iterations() * n * BytesPerElement(kind));
}

void BM_FusedVsTorch(benchmark::State& state, Kind kind) {
  using Clock = std::chrono::steady_clock;
  const int64_t n = state.range(0);
  at::Tensor fused_params = at::randn({n});
  at::Tensor torch_params = fused_params.clone();
  at::Tensor grads = at::randn({n});
  std::unique_ptr<Optimizer> fused = MakeFused(kind, fused_params, grads);
  std::unique_ptr<torch::optim::Optimizer> torch_optimizer =
      MakeTorch(kind, torch_params, grads);
  fused->Step(kLr);
  torch_optimizer->step();
  double fused_seconds = 0;
  double torch_seconds = 0;
  for (auto _ : state) {
    const auto t0 = Clock::now();
    fused->Step(kLr);
    const auto t1 = Clock::now();
    torch_optimizer->step();
    const auto t2 = Clock::now();
    fused_seconds += std::chrono::duration<double>(t1 - t0).count();
    torch_seconds += std::chrono::duration<double>(t2 - t1).count();
    state.SetIterationTime(std::chrono::duration<double>(t2 - t0).count());
  }
  const double iterations = static_cast<double>(state.iterations());
  state.counters["fused_ms"] = 1e3 * fused_seconds / iterations;
  state.counters["torch_ms"] = 1e3 * torch_seconds / iterations;
  state.counters["torch_over_fused"] = torch_seconds / fused_seconds;
}

#define STRATA_OPTIMIZER_BENCHMARKS(name, kind)  \
  BENCHMARK_CAPTURE(BM_Fused, name, kind)        \
      ->Arg(10'000'000)                          \
      ->Arg(50'000'000)                          \
      ->Unit(benchmark::kMillisecond);           \
  BENCHMARK_CAPTURE(BM_Torch, name, kind)        \
      ->Arg(10'000'000)                          \
      ->Arg(50'000'000)                          \
      ->Unit(benchmark::kMillisecond);           \
  BENCHMARK_CAPTURE(BM_FusedVsTorch, name, kind) \
      ->Arg(10'000'000)                          \
      ->Arg(50'000'000)                          \
      ->UseManualTime()                          \
      ->Unit(benchmark::kMillisecond)

STRATA_OPTIMIZER_BENCHMARKS(AdamW, Kind::kAdamW);
STRATA_OPTIMIZER_BENCHMARKS(Adam, Kind::kAdam);
STRATA_OPTIMIZER_BENCHMARKS(SgdMomentum, Kind::kSgd);

}  // namespace
}  // namespace strata::optim
