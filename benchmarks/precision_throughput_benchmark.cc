// Training throughput by precision, single process, side by side in one
// run: fp32; bf16 autocast (--precision=bf16: bf16 matmuls over fp32
// weights); bf16 parameters with fp32 masters (--param_dtype=bf16); fp16
// parameters with fp32 masters and dynamic loss scaling (--precision=fp16).
// Each iteration of BM_Precision runs one training step (forward, backward,
// clip, AdamW) of every mode in turn on the same batch, so the modes share
// the machine's state; the counters are each mode's tokens/s and its ratio
// to fp32. A mode this LibTorch cannot compute on the CPU (fp16 on 1.13) is
// left out and logged.
//
//   bazel run -c opt //benchmarks:precision_throughput
//   tools/libtorch2/run.sh bazel run -c opt //benchmarks:precision_throughput
//   ... -- --model=gpt-small50m --batch=4 --seq_len=256
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <benchmark/benchmark.h>
#include <gflags/gflags.h>
#include <glog/logging.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "models/config.h"
#include "models/factory.h"
#include "models/unit.h"
#include "optim/lr_schedule.h"
#include "strategies/autocast.h"
#include "strategies/factory.h"
#include "strategies/mixed_precision.h"
#include "strategies/options.h"
#include "strategies/strategy.h"

DEFINE_string(model, "gpt-small50m", "Named model config (models/config.h).");
DEFINE_int64(batch, 4, "Sequences per step.");
DEFINE_int64(seq_len, 128, "Tokens per sequence.");

namespace strata {
namespace {

struct Mode {
  std::string name;
  bool autocast = false;
  at::ScalarType param_dtype = at::kFloat;
  bool loss_scaling = false;
};

struct Trainer {
  Mode mode;
  std::unique_ptr<strategies::Strategy> strategy;
  double seconds = 0;
};

std::unique_ptr<strategies::Strategy> Build(const Mode& mode) {
  absl::StatusOr<models::ModelConfig> config =
      models::ConfigByName(FLAGS_model);
  CHECK(config.ok()) << config.status();
  absl::StatusOr<std::shared_ptr<models::UnitModel>> model =
      models::BuildModel(*config, models::BuildOptions{1});
  CHECK(model.ok()) << model.status();
  (*model)->train();
  if (mode.autocast) {
    (*model)->AddInterceptor(
        std::make_shared<strategies::AutocastInterceptor>());
  }
  strategies::StrategyOptions options;
  options.mixed_precision.param_dtype = mode.param_dtype;
  options.mixed_precision.buffer_dtype = mode.param_dtype;
  strategies::OptimizerConfig optimizer;
  if (mode.loss_scaling) optimizer.loss_scaling = optim::LossScalerOptions();
  optim::LrScheduleOptions schedule;
  schedule.kind = optim::LrScheduleKind::kConstant;
  schedule.base_lr = 1e-4;
  absl::StatusOr<std::unique_ptr<strategies::Strategy>> strategy =
      strategies::CreateStrategy(options, *model, nullptr, optimizer, schedule);
  CHECK(strategy.ok()) << strategy.status();
  return *std::move(strategy);
}

void Step(Trainer& t, const at::Tensor& batch, int64_t step) {
  const auto start = std::chrono::steady_clock::now();
  t.strategy->ZeroGrad();
  absl::StatusOr<double> loss = t.strategy->ForwardBackward(
      batch.narrow(1, 0, FLAGS_seq_len), batch.narrow(1, 1, FLAGS_seq_len), 1.0,
      /*last_micro_batch=*/true);
  CHECK(loss.ok()) << t.mode.name << ": " << loss.status();
  absl::StatusOr<strategies::StepResult> result = t.strategy->Step(step);
  CHECK(result.ok()) << t.mode.name << ": " << result.status();
  t.seconds +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
}

void BM_Precision(benchmark::State& state) {
  std::vector<Trainer> trainers;
  for (const Mode& mode : {Mode{"fp32"}, Mode{"bf16_autocast", true},
                           Mode{"bf16_params", false, at::kBFloat16},
                           Mode{"fp16_loss_scaled", false, at::kHalf, true}}) {
    if (absl::Status can = strategies::CheckCpuComputeDtype(mode.param_dtype);
        !can.ok()) {
      LOG(WARNING) << mode.name << " left out: " << can.message();
      continue;
    }
    trainers.push_back({mode, Build(mode)});
  }
  const absl::StatusOr<models::ModelConfig> config =
      models::ConfigByName(FLAGS_model);
  CHECK(config.ok()) << config.status();
  const at::Tensor batch =
      at::randint(config->vocab_size, {FLAGS_batch, FLAGS_seq_len + 1},
                  at::TensorOptions().dtype(at::kLong));
  // One warm-up step each (allocations, first-touch), not timed.
  for (Trainer& t : trainers) Step(t, batch, 0);
  for (Trainer& t : trainers) t.seconds = 0;
  int64_t step = 1;
  for (auto _ : state) {
    for (Trainer& t : trainers) Step(t, batch, step);
    ++step;
  }
  const double tokens =
      static_cast<double>(state.iterations()) * FLAGS_batch * FLAGS_seq_len;
  const double fp32_tokens_per_s = tokens / trainers.front().seconds;
  for (const Trainer& t : trainers) {
    const double tokens_per_s = tokens / t.seconds;
    state.counters[t.mode.name + "_tok_s"] = tokens_per_s;
    state.counters[t.mode.name + "_vs_fp32"] = tokens_per_s / fp32_tokens_per_s;
  }
}

BENCHMARK(BM_Precision)->Unit(benchmark::kMillisecond)->MinTime(10.0);

}  // namespace
}  // namespace strata

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  google::InitGoogleLogging(argv[0]);
  at::set_num_threads(1);
  benchmark::RunSpecifiedBenchmarks();
  return 0;
}
