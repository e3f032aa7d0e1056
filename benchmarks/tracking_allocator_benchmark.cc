// The tracking allocator's cost (base/tracking_allocator.h), to decide
// whether the train binary installs it by default (--track_tensor_memory):
// the time of an allocate + free through LibTorch's plain CPU allocator and
// through the tracking allocator wrapped around it, alternating the two in
// each repetition (both are called directly as c10::Allocator, so what
// differs is only the tracking: a 64-byte header, a thread-local tag, five
// relaxed atomics); then the allocations of a training step of --model
// (single strategy, AdamW, one thread) and that step's time, and the cost
// per step (allocations x the largest per-allocation difference) as a share
// of the step.
//
//   bazel build -c opt //benchmarks:tracking_allocator
//   bazel-bin/benchmarks/tracking_allocator --model=gpt-tiny
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>
#include <gflags/gflags.h>
#include <glog/logging.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <vector>

#include "base/tracking_allocator.h"
#include "models/config.h"
#include "models/factory.h"
#include "strategies/factory.h"
#include "strategies/options.h"
#include "strategies/strategy.h"

DEFINE_string(model, "gpt-tiny", "Model config of the training step.");
DEFINE_int64(batch, 8, "Sequences per step.");
DEFINE_int64(seq_len, 128, "Tokens per sequence.");
DEFINE_int32(steps, 20, "Timed training steps (after 2 warm-up steps).");
DEFINE_int32(repetitions, 15, "Alternating repetitions per size.");
DEFINE_int64(allocations, 200000, "Allocate + free pairs per repetition.");

namespace {

using Clock = std::chrono::steady_clock;

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Nanoseconds per allocate + free of `nbytes` through `allocator`.
double NsPerAllocation(c10::Allocator* allocator, size_t nbytes) {
  const auto start = Clock::now();
  for (int64_t i = 0; i < FLAGS_allocations; ++i) {
    c10::DataPtr p = allocator->allocate(nbytes);
    CHECK(p.get() != nullptr);
  }
  const double s = std::chrono::duration<double>(Clock::now() - start).count();
  return 1e9 * s / FLAGS_allocations;
}

struct StepFigures {
  double allocations_per_step = 0;
  double step_ms = 0;  // Median.
};

StepFigures TrainingStep() {
  auto config = strata::models::ConfigByName(FLAGS_model);
  CHECK(config.ok()) << config.status();
  auto model = strata::models::BuildModel(*config, {});
  CHECK(model.ok()) << model.status();
  strata::strategies::StrategyOptions options;
  options.kind = strata::strategies::StrategyKind::kSingle;
  strata::optim::LrScheduleOptions schedule;
  schedule.kind = strata::optim::LrScheduleKind::kConstant;
  schedule.base_lr = 1e-4;
  schedule.total_steps = 1000;
  auto strategy = strata::strategies::CreateStrategy(
      options, *model, nullptr, strata::strategies::OptimizerConfig(),
      schedule);
  CHECK(strategy.ok()) << strategy.status();
  const at::Tensor tokens = at::randint(
      config->vocab_size, {FLAGS_batch, FLAGS_seq_len + 1}, at::kLong);
  const at::Tensor inputs = tokens.narrow(1, 0, FLAGS_seq_len);
  const at::Tensor targets = tokens.narrow(1, 1, FLAGS_seq_len);
  std::vector<double> ms;
  int64_t allocations = 0;
  for (int step = 0; step < 2 + FLAGS_steps; ++step) {
    const int64_t before = strata::TrackingAllocator::Total().num_allocations;
    const auto start = Clock::now();
    (*strategy)->ZeroGrad();
    CHECK((*strategy)->ForwardBackward(inputs, targets, 1.0, true).ok());
    CHECK((*strategy)->Step(step).ok());
    if (step < 2) continue;
    ms.push_back(1e3 *
                 std::chrono::duration<double>(Clock::now() - start).count());
    allocations += strata::TrackingAllocator::Total().num_allocations - before;
  }
  return {static_cast<double>(allocations) / FLAGS_steps, Median(ms)};
}

}  // namespace

int main(int argc, char** argv) {
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  google::InitGoogleLogging(argv[0]);
  at::set_num_threads(1);
  c10::Allocator* plain = c10::GetCPUAllocator();
  CHECK(strata::TrackingAllocator::Install().ok());
  c10::Allocator* tracking = c10::GetCPUAllocator();
  CHECK(tracking != plain);
  std::printf("| bytes | plain (ns) | tracking (ns) | difference (ns) |\n");
  std::printf("| --: | --: | --: | --: |\n");
  double largest_difference_ns = 0;
  for (const size_t nbytes : {size_t{64}, size_t{4096}, size_t{1} << 20}) {
    std::vector<double> off, on, difference;
    for (int r = 0; r < FLAGS_repetitions; ++r) {
      // Alternate which goes first.
      const double a = r % 2 == 0 ? NsPerAllocation(plain, nbytes) : 0;
      const double b = NsPerAllocation(tracking, nbytes);
      const double c = r % 2 == 1 ? NsPerAllocation(plain, nbytes) : a;
      off.push_back(c);
      on.push_back(b);
      difference.push_back(b - c);
    }
    const double d = Median(difference);
    largest_difference_ns = std::max(largest_difference_ns, d);
    std::printf("| %zu | %.1f | %.1f | %+.1f |\n", nbytes, Median(off),
                Median(on), d);
  }
  const StepFigures step = TrainingStep();
  std::printf(
      "%s, %lld x %lld tokens, single, AdamW: %.0f allocations per step, "
      "step %.2f ms (median of %d); tracking costs <= %.0f x %.1f ns = "
      "%.4f ms a step, %.3f %% of it\n",
      FLAGS_model.c_str(), static_cast<long long>(FLAGS_batch),
      static_cast<long long>(FLAGS_seq_len), step.allocations_per_step,
      step.step_ms, FLAGS_steps, step.allocations_per_step,
      largest_difference_ns,
      step.allocations_per_step * largest_difference_ns * 1e-6,
      100 * step.allocations_per_step * largest_difference_ns * 1e-6 /
          step.step_ms);
  return 0;
}
