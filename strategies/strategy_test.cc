// Loss scaling (OptimizerConfig::loss_scaling) through Strategy's contract,
// for every strategy: a power-of-two scale changes nothing, an overflow on
// one rank skips the step on every rank, and fp16 parameters train (where
// this LibTorch can compute in fp16 on the CPU).
#include "strategies/strategy.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "base/testing/status_matchers.h"
#include "comm/testing/multi_rank.h"
#include "data/sampler.h"
#include "strategies/factory.h"
#include "strategies/mixed_precision.h"
#include "strategies/testing/parity.h"

namespace strata::strategies {
namespace {

using comm::Group;
using comm::testing::RunOnRanks;
using ::strata::testing::IsOk;
using testing::Build;
using testing::Config;
using testing::Corpus;
using testing::ExpectEqual;
using testing::Kind;
using testing::kSeqLen;
using testing::Params;
using testing::Schedule;
using testing::Snapshot;
using testing::Train;

constexpr const char* kModel = "gpt-tiny";

// A static scale: no growth, no back-off.
optim::LossScalerOptions StaticScale(double scale) {
  optim::LossScalerOptions options;
  options.init_scale = scale;
  options.growth_factor = 1.0;
  options.backoff_factor = 1.0;
  return options;
}

// Trains `kind` on `world` ranks (1: no group) with `config`; returns each
// rank's ModelState and the pre-clip gradient norms of rank 0.
struct RunResult {
  std::vector<Params> params;  // Per rank: its ModelState (shards).
  Params full;                 // FullModelState, of rank 0.
  std::vector<double> grad_norms;
};
RunResult TrainKind(const std::string& kind, int world,
                    const OptimizerConfig& config,
                    const MixedPrecisionOptions& mixed = {},
                    double base_lr = 1e-4) {
  RunResult out;
  out.params.resize(world);
  StrategyOptions options = Kind(kind);
  options.mixed_precision = mixed;
  const auto body = [&](Group* group) {
    const int rank = group == nullptr ? 0 : group->rank();
    absl::StatusOr<std::unique_ptr<Strategy>> strategy = CreateStrategy(
        options, Build(Config(kModel), 7), group, config, Schedule(base_lr));
    ASSERT_THAT(strategy.status(), IsOk());
    std::vector<double> norms;
    ASSERT_THAT(Train(**strategy, rank, world, /*micro_batches=*/2, &norms),
                IsOk());
    out.params[rank] = Snapshot(**strategy);
    ASSERT_OK_AND_ASSIGN(auto full, (*strategy)->FullModelState());
    if (rank == 0) {
      out.grad_norms = norms;
      for (auto& [name, value] : full) out.full[name] = value;
    }
  };
  if (world == 1) {
    body(nullptr);
  } else {
    EXPECT_THAT(RunOnRanks(world, [&](Group& group) { body(&group); }), IsOk());
  }
  return out;
}

// Multiplying the loss by 2^k multiplies every gradient by exactly 2^k (an
// exponent shift, far from fp32's overflow and underflow for this model) and
// dividing by it restores them exactly, so a power-of-two scale leaves the
// run bitwise unchanged: parameters and gradient norms.
class PowerOfTwoScaleTest : public ::testing::TestWithParam<std::string> {};

TEST_P(PowerOfTwoScaleTest, TrainsBitwiseAsWithoutScaling) {
  const std::string kind = GetParam();
  const int world = kind == "single" ? 1 : 2;
  OptimizerConfig plain = testing::Optimizer();
  OptimizerConfig scaled = plain;
  scaled.loss_scaling = StaticScale(1024.0);
  const RunResult a = TrainKind(kind, world, plain);
  const RunResult b = TrainKind(kind, world, scaled);
  for (int rank = 0; rank < world; ++rank) {
    ExpectEqual(b.params[rank], a.params[rank],
                absl::StrCat(kind, " rank ", rank, " with loss scale 1024"));
  }
  ASSERT_EQ(a.grad_norms.size(), b.grad_norms.size());
  for (size_t i = 0; i < a.grad_norms.size(); ++i) {
    EXPECT_EQ(b.grad_norms[i], a.grad_norms[i]) << kind << " step " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Kinds, PowerOfTwoScaleTest,
                         ::testing::Values("single", "ddp", "zero1", "zero2",
                                           "fsdp"));

// One step on every rank of `group`, rank 1's loss weighted by
// `rank1_weight` (rank 0's by 1).
absl::StatusOr<StepResult> OneStep(Strategy& strategy, int rank, int world,
                                   int64_t step, double rank1_weight) {
  data::SamplerOptions options;
  options.seq_len = kSeqLen;
  options.global_batch_size = testing::kGlobalBatch;
  options.seed = 5;
  STRATA_ASSIGN_OR_RETURN(auto sampler,
                          data::DistributedSampler::Create(&Corpus(), options));
  STRATA_ASSIGN_OR_RETURN(at::Tensor batch, sampler->NextBatch(rank, world));
  strategy.ZeroGrad();
  STRATA_RETURN_IF_ERROR(
      strategy
          .ForwardBackward(batch.narrow(1, 0, kSeqLen).contiguous(),
                           batch.narrow(1, 1, kSeqLen).contiguous(),
                           rank == 1 ? rank1_weight : 1.0,
                           /*last_micro_batch=*/true)
          .status());
  return strategy.Step(step);
}

// Rank 1's gradients overflow fp32 (its loss weighted by 1e36 and scaled by
// 2^16), rank 0's do not: every rank skips the step, keeps its parameters
// bitwise, backs the scale off by the same factor, and the next step (both
// weights 1) trains.
class OverflowTest : public ::testing::TestWithParam<std::string> {};

TEST_P(OverflowTest, OneRankOverflowingSkipsTheStepOnEveryRank) {
  const std::string kind = GetParam();
  OptimizerConfig config = testing::Optimizer();
  optim::LossScalerOptions scaling;
  scaling.init_scale = 65536.0;
  scaling.growth_interval = 100;
  config.loss_scaling = scaling;
  ASSERT_THAT(
      RunOnRanks(
          2,
          [&](Group& group) {
            absl::StatusOr<std::unique_ptr<Strategy>> created =
                CreateStrategy(Kind(kind), Build(Config(kModel), 7), &group,
                               config, Schedule());
            ASSERT_THAT(created.status(), IsOk());
            Strategy& strategy = **created;
            const Params before = Snapshot(strategy);
            ASSERT_OK_AND_ASSIGN(const StepResult overflow,
                                 OneStep(strategy, group.rank(), 2, 0, 1e36));
            EXPECT_TRUE(overflow.skipped) << kind << " rank " << group.rank();
            EXPECT_EQ(overflow.loss_scale, 65536.0);
            EXPECT_TRUE(std::isinf(overflow.grad_norm));
            ExpectEqual(
                Snapshot(strategy), before,
                absl::StrCat(kind, " rank ", group.rank(), " after a skip"));
            ASSERT_NE(strategy.loss_scaler(), nullptr);
            EXPECT_EQ(strategy.loss_scaler()->scale(), 32768.0);

            ASSERT_OK_AND_ASSIGN(const StepResult clean,
                                 OneStep(strategy, group.rank(), 2, 1, 1.0));
            EXPECT_FALSE(clean.skipped) << kind << " rank " << group.rank();
            EXPECT_EQ(clean.loss_scale, 32768.0);
            EXPECT_TRUE(std::isfinite(clean.grad_norm));
            EXPECT_GT(clean.grad_norm, 0);
            EXPECT_EQ(strategy.loss_scaler()->scale(), 32768.0);
            EXPECT_EQ(strategy.loss_scaler()->growth_tracker(), 1);
            bool changed = false;
            const Params after = Snapshot(strategy);
            for (const auto& [name, value] : before) {
              changed = changed || !at::equal(after.at(name), value);
            }
            EXPECT_TRUE(changed) << kind << ": the clean step changed nothing";
          }),
      IsOk());
}

INSTANTIATE_TEST_SUITE_P(Kinds, OverflowTest,
                         ::testing::Values("ddp", "zero1", "zero2", "fsdp"));

// A strategy whose DoStep unscales a gradient tensor the test chooses per
// rank: isolates UnscaleGradients' agreement from any gradient reduction
// (which would spread an inf to every rank by itself).
class UnscaleProbe : public Strategy {
 public:
  UnscaleProbe(const OptimizerConfig& config, at::Tensor grads, Group* group)
      : Strategy(Build(Config(kModel), 7), config),
        config_(config),
        grads_(std::move(grads)),
        group_(group) {}
  std::string name() const override { return "probe"; }
  void ZeroGrad() override {}
  MemoryReport Memory() const override { return {}; }
  const OptimizerConfig& optimizer_config() const override { return config_; }
  std::vector<ShardedTensor> ModelState() const override { return {}; }
  std::vector<ShardedTensor> OptimizerState() const override { return {}; }

 protected:
  absl::StatusOr<StepResult> DoStep(int64_t) override {
    STRATA_ASSIGN_OR_RETURN(const bool skip, UnscaleGradients(grads_, group_));
    StepResult result;
    result.grad_norm = skip ? -1 : 1;
    return result;
  }

 private:
  OptimizerConfig config_;
  at::Tensor grads_;
  Group* group_;
};

TEST(UnscaleGradientsTest, AnInfOnOneRankIsAgreedByEveryRank) {
  OptimizerConfig config = testing::Optimizer();
  config.loss_scaling = optim::LossScalerOptions();  // 2^16, back-off 0.5.
  ASSERT_THAT(
      RunOnRanks(2,
                 [&](Group& group) {
                   at::Tensor grads = at::full({4}, 65536.0f);
                   if (group.rank() == 1)
                     grads[2] = std::numeric_limits<float>::infinity();
                   UnscaleProbe probe(config, grads, &group);
                   ASSERT_THAT(probe
                                   .ForwardBackward(
                                       at::zeros({1, 4}, at::kLong),
                                       at::zeros({1, 4}, at::kLong), 1.0, true)
                                   .status(),
                               IsOk());
                   ASSERT_OK_AND_ASSIGN(const StepResult result, probe.Step(0));
                   EXPECT_TRUE(result.skipped) << "rank " << group.rank();
                   EXPECT_EQ(probe.loss_scaler()->scale(), 32768.0)
                       << "rank " << group.rank();
                   if (group.rank() == 0) {
                     EXPECT_TRUE(at::equal(grads, at::ones({4})))
                         << "unscaled in place";
                   }
                 }),
      IsOk());
}

TEST(UnscaleGradientsTest, WithoutLossScalingGradientsAreUntouched) {
  at::Tensor grads = at::full({4}, 3.0f);
  UnscaleProbe probe(testing::Optimizer(), grads, nullptr);
  ASSERT_THAT(probe
                  .ForwardBackward(at::zeros({1, 4}, at::kLong),
                                   at::zeros({1, 4}, at::kLong), 1.0, true)
                  .status(),
              IsOk());
  ASSERT_OK_AND_ASSIGN(const StepResult result, probe.Step(0));
  EXPECT_FALSE(result.skipped);
  EXPECT_EQ(result.loss_scale, 1.0);
  EXPECT_EQ(probe.loss_scaler(), nullptr);
  EXPECT_TRUE(at::equal(grads, at::full({4}, 3.0f)));
}

// --- fp16 parameters (fp32 masters) with dynamic loss scaling. ------------

// fp16 training where this LibTorch computes in fp16 on the CPU (2.x);
// LibTorch 1.13 has no CPU Half matmul, and the trainer refuses
// --precision=fp16 there (launch/train/trainer_test.cc checks that).
class Fp16Test : public ::testing::Test {
 protected:
  void SetUp() override {
    const absl::Status can = CheckCpuComputeDtype(at::kHalf);
    if (!can.ok()) GTEST_SKIP() << can.message();
  }
  static MixedPrecisionOptions Half() {
    MixedPrecisionOptions mixed;
    mixed.param_dtype = at::kHalf;
    mixed.buffer_dtype = at::kHalf;
    return mixed;
  }
  static OptimizerConfig Sgd() {
    OptimizerConfig config = testing::ParitySgd().config;
    config.loss_scaling = optim::LossScalerOptions();
    return config;
  }
};

// SGD's update is linear in the gradient, so a gradient left scaled (x2^16)
// or a skipped step shows at once. fp16 compute rounds each op's output to
// 2^-11 relative; through the model's few layers the gradients stay within
// ~1e-2 relative of fp32's, so each element's total change over the run
// stays within 5e-2 of the largest fp32 change (plus fp16 rounding of the
// initial parameters, 2^-11 * |p|, which the masters never see: they start
// from the fp32 values).
TEST_F(Fp16Test, SingleTracksFp32) {
  const RunResult fp32 = TrainKind("single", 1, testing::ParitySgd().config, {},
                                   testing::ParitySgd().base_lr);
  const RunResult fp16 =
      TrainKind("single", 1, Sgd(), Half(), testing::ParitySgd().base_lr);
  const Params init = testing::ParametersOf(*Build(Config(kModel), 7));
  for (const auto& [name, expected] : fp32.full) {
    const at::Tensor change = (expected - init.at(name)).abs();
    const double bound = 5e-2 * change.max().item<double>() + 1e-7;
    const double diff =
        (fp16.full.at(name) - expected).abs().max().item<double>();
    EXPECT_LE(diff, bound) << name;
  }
  for (size_t i = 0; i < fp32.grad_norms.size(); ++i) {
    EXPECT_NEAR(fp16.grad_norms[i], fp32.grad_norms[i],
                1e-2 * fp32.grad_norms[i])
        << "step " << i;
  }
}

// fp16 on two ranks against fp16 single: the same fp16 compute per row;
// gradients differ by fp32 reduction order (~1e-7 relative), which can flip
// an fp16 rounding of a refreshed parameter (2^-11 relative) and so move a
// later gradient by ~1e-3 relative; with SGD at lr 0.1 over 5 steps and
// gradients clipped to 1, elements stay within 1e-3 absolute.
class Fp16ParityTest : public Fp16Test,
                       public ::testing::WithParamInterface<std::string> {};

TEST_P(Fp16ParityTest, TwoRanksMatchSingle) {
  const std::string kind = GetParam();
  const double lr = testing::ParitySgd().base_lr;
  const RunResult single = TrainKind("single", 1, Sgd(), Half(), lr);
  const RunResult two = TrainKind(kind, 2, Sgd(), Half(), lr);
  for (const auto& [name, expected] : single.full) {
    const double diff =
        (two.full.at(name) - expected).abs().max().item<double>();
    EXPECT_LE(diff, 1e-3) << kind << " " << name;
  }
  for (size_t i = 0; i < single.grad_norms.size(); ++i) {
    EXPECT_NEAR(two.grad_norms[i], single.grad_norms[i],
                1e-2 * single.grad_norms[i])
        << kind << " step " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Kinds, Fp16ParityTest,
                         ::testing::Values("ddp", "zero2", "fsdp"));

}  // namespace
}  // namespace strata::strategies
