// A program outside Strata's tree that uses Strata as a library: builds
// GPT-tiny (models/), wraps it in FSDP at a world of one process (no process
// group needed), trains a few steps on one fixed random batch and prints the
// loss of each. Overfitting one batch, the loss must fall; the program exits
// non-zero if it does not, or on any error.
//
// Both examples build this one file: examples/bazel_consumer against Strata
// as an external repository (@strata), examples/cmake_consumer against the
// installed package (find_package(Strata); its check.sh installs, builds and
// runs it). README.md, "Use Strata from your project".
#include <ATen/ATen.h>

#include <cstdint>
#include <cstdio>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "base/status.h"
#include "models/config.h"
#include "models/factory.h"
#include "models/init.h"
#include "models/unit.h"
#include "optim/lr_schedule.h"
#include "strategies/factory.h"
#include "strategies/options.h"
#include "strategies/strategy.h"

namespace {

constexpr int64_t kSteps = 5;
constexpr int64_t kBatch = 4;
constexpr int64_t kSeqLen = 32;

absl::Status Run() {
  using strata::strategies::Strategy;
  STRATA_ASSIGN_OR_RETURN(strata::models::ModelConfig config,
                          strata::models::ConfigByName("gpt-tiny"));
  strata::models::BuildOptions build;
  build.seed = 1;
  STRATA_ASSIGN_OR_RETURN(std::shared_ptr<strata::models::UnitModel> model,
                          strata::models::BuildModel(config, build));

  strata::strategies::StrategyOptions options;
  options.kind = strata::strategies::StrategyKind::kFsdp;
  strata::optim::LrScheduleOptions schedule;
  schedule.kind = strata::optim::LrScheduleKind::kConstant;
  schedule.base_lr = 1e-3;
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<Strategy> strategy,
                          strata::strategies::CreateStrategy(
                              options, model, /*group=*/nullptr,
                              strata::strategies::OptimizerConfig(), schedule));

  at::manual_seed(2);
  // Next-token prediction on one random batch of token ids.
  at::Tensor tokens =
      at::randint(config.vocab_size, {kBatch, kSeqLen + 1}, at::kLong);
  at::Tensor inputs = tokens.narrow(1, 0, kSeqLen).contiguous();
  at::Tensor targets = tokens.narrow(1, 1, kSeqLen).contiguous();

  double first_loss = 0;
  double loss = 0;
  for (int64_t step = 0; step < kSteps; ++step) {
    strategy->ZeroGrad();
    STRATA_ASSIGN_OR_RETURN(
        loss, strategy->ForwardBackward(inputs, targets, /*loss_weight=*/1.0,
                                        /*last_micro_batch=*/true));
    STRATA_ASSIGN_OR_RETURN(strata::strategies::StepResult result,
                            strategy->Step(step));
    std::printf("step %lld  loss %.4f  grad_norm %.4f\n",
                static_cast<long long>(step), loss, result.grad_norm);
    if (step == 0) first_loss = loss;
  }
  if (!(loss < first_loss)) {
    return absl::InternalError(
        "the loss did not fall while overfitting one batch");
  }
  std::printf("%s on %s: loss %.4f -> %.4f\n", strategy->name().c_str(),
              config.family.c_str(), first_loss, loss);
  return absl::OkStatus();
}

}  // namespace

int main() {
  absl::Status status = Run();
  if (!status.ok()) {
    std::fprintf(stderr, "strata consumer: %s\n", status.ToString().c_str());
    return 1;
  }
  return 0;
}
