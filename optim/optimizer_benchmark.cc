// The fused flat AdamW (one pass over memory, adamw.h) against LibTorch's
// torch::optim::AdamW (about nine tensor ops and two temporaries per step) on
// one fp32 buffer of 10M and 50M elements, with weight decay.
//
//   bazel run -c opt //optim:optimizer_benchmark
//   bazel run -c opt //optim:optimizer_benchmark -- --benchmark_filter=Vs
//
// BM_FusedVsTorchAdamW runs both in every iteration and reports their mean
// step times and the ratio measured in the same run: torch_over_fused.
// bytes_per_second counts the memory the fused step must move: it reads
// params, grads, exp_avg, exp_avg_sq and writes params, exp_avg, exp_avg_sq
// (28 bytes per element).

#include <ATen/ATen.h>
#include <benchmark/benchmark.h>
#include <glog/logging.h>
#include <torch/optim/adamw.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include "optim/adamw.h"

namespace strata::optim {
namespace {

constexpr double kLr = 1e-4;
constexpr double kWeightDecay = 0.01;
constexpr int64_t kBytesPerElement = 7 * sizeof(float);

std::unique_ptr<Optimizer> MakeFused(const at::Tensor& params,
                                     const at::Tensor& grads) {
  auto adamw = CreateAdamW(params, grads, {{0, params.numel(), kWeightDecay}},
                           AdamWOptions());
  CHECK(adamw.ok()) << adamw.status();
  return *std::move(adamw);
}

std::unique_ptr<torch::optim::AdamW> MakeTorch(at::Tensor& params,
                                               const at::Tensor& grads) {
  params.requires_grad_();
  params.mutable_grad() = grads;
  return std::make_unique<torch::optim::AdamW>(
      std::vector<at::Tensor>{params},
      torch::optim::AdamWOptions(kLr).weight_decay(kWeightDecay));
}

void BM_FusedAdamW(benchmark::State& state) {
  const int64_t n = state.range(0);
  at::Tensor params = at::randn({n});
  at::Tensor grads = at::randn({n});
  std::unique_ptr<Optimizer> fused = MakeFused(params, grads);
  for (auto _ : state) fused->Step(kLr);
  state.SetBytesProcessed(state.iterations() * n * kBytesPerElement);
}

void BM_TorchAdamW(benchmark::State& state) {
  const int64_t n = state.range(0);
  at::Tensor params = at::randn({n});
  std::unique_ptr<torch::optim::AdamW> adamw =
      MakeTorch(params, at::randn({n}));
  adamw->step();  // Allocates the state.
  for (auto _ : state) adamw->step();
  state.SetBytesProcessed(state.iterations() * n * kBytesPerElement);
}

void BM_FusedVsTorchAdamW(benchmark::State& state) {
  using Clock = std::chrono::steady_clock;
  const int64_t n = state.range(0);
  at::Tensor fused_params = at::randn({n});
  at::Tensor torch_params = fused_params.clone();
  at::Tensor grads = at::randn({n});
  std::unique_ptr<Optimizer> fused = MakeFused(fused_params, grads);
  std::unique_ptr<torch::optim::AdamW> adamw = MakeTorch(torch_params, grads);
  fused->Step(kLr);
  adamw->step();
  double fused_seconds = 0;
  double torch_seconds = 0;
  for (auto _ : state) {
    const auto t0 = Clock::now();
    fused->Step(kLr);
    const auto t1 = Clock::now();
    adamw->step();
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

BENCHMARK(BM_FusedAdamW)
    ->Arg(10'000'000)
    ->Arg(50'000'000)
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_TorchAdamW)
    ->Arg(10'000'000)
    ->Arg(50'000'000)
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_FusedVsTorchAdamW)
    ->Arg(10'000'000)
    ->Arg(50'000'000)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace strata::optim
