#include "strategies/ddp.h"

#include <ATen/ATen.h>
#include <glog/logging.h>
#include <gtest/gtest.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/variable.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>

#include <algorithm>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "base/testing/status_matchers.h"
#include "comm/testing/multi_rank.h"
#include "data/markov_corpus.h"
#include "data/sampler.h"
#include "models/config.h"
#include "models/factory.h"
#include "strategies/factory.h"
#include "strategies/single.h"
#include "strategies/strategy.h"
#include "strategies/testing/parity.h"

namespace strata::strategies {
namespace {

using ::strata::testing::IsOk;

using comm::Group;
using comm::testing::RunOnRanks;
using testing::Build;
using testing::Config;
using testing::ExpectClose;
using testing::ExpectEqual;
using testing::ExpectMatchesSingle;
using testing::Kind;
using testing::kSeqLen;
using testing::Optimizer;
using testing::Params;
using testing::Schedule;
using testing::Snapshot;
using testing::Train;

StrategyOptions Ddp(int64_t bucket_bytes = int64_t{25} << 20,
                    int64_t first_bucket_bytes = int64_t{1} << 20) {
  return Kind("ddp", bucket_bytes, first_bucket_bytes);
}

class DdpParityTest : public ::testing::TestWithParam<std::string> {};

TEST_P(DdpParityTest, MatchesSingleOnTheFullBatch) {
  ExpectMatchesSingle(GetParam(), Ddp(), "ddp", /*what_prefix=*/"");
}

INSTANTIATE_TEST_SUITE_P(Models, DdpParityTest,
                         ::testing::Values("gpt-tiny", "llama-tiny"));

// Adam and SGD (AdamW is the default above) at 1..4 ranks, to each one's
// derived tolerance (parity.h, ExpectClose).
class DdpOptimizerParityTest
    : public ::testing::TestWithParam<testing::ParityOptimizer> {};

TEST_P(DdpOptimizerParityTest, MatchesSingleWithTheSameOptimizer) {
  ExpectMatchesSingle("gpt-tiny", Ddp(), "ddp", /*what_prefix=*/"",
                      /*dropout=*/0.0, GetParam());
}

INSTANTIATE_TEST_SUITE_P(
    Optimizers, DdpOptimizerParityTest,
    ::testing::Values(testing::ParityAdam(), testing::ParitySgd()),
    [](const ::testing::TestParamInfo<testing::ParityOptimizer>& info) {
      return info.param.name;
    });

// Dropout masks follow the global sample (testing::Train sets the trainer's
// DropoutContext), so DDP at 1..4 ranks with dropout matches single-process
// training with the same dropout to the tolerance without it.
TEST(DdpTest, MatchesSingleWithDropout) {
  ExpectMatchesSingle("gpt-tiny", Ddp(), "ddp", /*what_prefix=*/"dropout ",
                      testing::kParityDropout);
}

// The check above can fail: dropout 0.1 moves the first step's gradient norm
// by far more than the 1e-5 relative the parity tests allow (measured: a few
// per cent), so masks that differed between runs would be seen.
TEST(DdpTest, ParityDropoutChangesTheGradients) {
  std::vector<double> without;
  std::vector<double> with;
  testing::TrainSingle("gpt-tiny", &without);
  testing::TrainSingle("gpt-tiny", &with, testing::kParityDropout);
  ASSERT_FALSE(without.empty());
  ASSERT_EQ(with.size(), without.size());
  EXPECT_GT(std::abs(with[0] - without[0]), 1e-3 * without[0]);
}

TEST(DdpTest, BucketSizeDoesNotChangeResultsBitwise) {
  std::vector<Params> results(2);
  const std::vector<StrategyOptions> options = {
      Ddp(/*bucket_bytes=*/1024, /*first_bucket_bytes=*/512),
      Ddp(int64_t{1} << 30, int64_t{1} << 30)};
  std::vector<size_t> num_buckets(2);
  for (int k = 0; k < 2; ++k) {
    ASSERT_TRUE(RunOnRanks(2, [&](Group& group) {
                  auto created = DdpStrategy::Create(
                      options[k], Build(Config("gpt-tiny"), 7), &group,
                      Optimizer(), Schedule());
                  ASSERT_THAT(created, IsOk());
                  ASSERT_THAT(Train(**created, group.rank(), 2, 2), IsOk());
                  if (group.rank() == 0) {
                    results[k] = Snapshot(**created);
                    num_buckets[k] = (*created)->buckets().size();
                  }
                }).ok());
  }
  EXPECT_GT(num_buckets[0], 10u);
  EXPECT_EQ(num_buckets[1], 1u);
  ExpectEqual(results[0], results[1], "tiny buckets vs one bucket");
}

TEST(DdpTest, BucketsAreContiguousReverseOrderAndWithinTheirCaps) {
  ASSERT_TRUE(RunOnRanks(1, [&](Group& group) {
                auto model = Build(Config("gpt-tiny"), 7);
                auto created = DdpStrategy::Create(
                    Ddp(/*bucket_bytes=*/64 << 10, /*first=*/8 << 10), model,
                    &group, Optimizer(), Schedule());
                ASSERT_THAT(created, IsOk());
                const DdpStrategy& ddp = **created;
                // Flat order is the reverse of registration order.
                auto named = model->named_parameters();
                const auto& entries = ddp.flat().entries();
                ASSERT_EQ(entries.size(), named.size());
                for (size_t i = 0; i < entries.size(); ++i) {
                  EXPECT_EQ(entries[i].name, named[named.size() - 1 - i].key());
                }
                int64_t next = 0;
                for (size_t b = 0; b < ddp.buckets().size(); ++b) {
                  const auto& bucket = ddp.buckets()[b];
                  EXPECT_EQ(bucket.offset, next);
                  next += bucket.numel;
                  const int64_t cap = b == 0 ? (8 << 10) : (64 << 10);
                  if (bucket.entries.size() > 1) {
                    EXPECT_LE(bucket.numel * 4, cap) << b;
                  }
                }
                EXPECT_EQ(next, ddp.flat().numel());
              }).ok());
}

TEST(DdpTest, AllReducesOverlapBackwardAndSkipAccumulationSteps) {
  ASSERT_TRUE(
      RunOnRanks(2, [&](Group& group) {
        auto created = DdpStrategy::Create(
            Ddp(/*bucket_bytes=*/16 << 10, /*first=*/4 << 10),
            Build(Config("gpt-tiny"), 7), &group, Optimizer(), Schedule());
        ASSERT_THAT(created, IsOk());
        DdpStrategy& ddp = **created;
        const int64_t num_buckets = ddp.buckets().size();
        ASSERT_GT(num_buckets, 3);
        at::Tensor tokens = at::randint(0, 256, {4, kSeqLen + 1}, at::kLong);
        at::Tensor inputs = tokens.narrow(1, 0, kSeqLen).contiguous();
        at::Tensor targets = tokens.narrow(1, 1, kSeqLen).contiguous();
        for (int step = 0; step < 2; ++step) {
          ddp.ZeroGrad();
          // Accumulation micro-steps: nothing is launched.
          for (int m = 0; m < 2; ++m) {
            ASSERT_THAT(ddp.ForwardBackward(inputs, targets, 1.0 / 3, false),
                        IsOk());
            EXPECT_EQ(ddp.buckets_launched_in_backward(), step * num_buckets);
            EXPECT_EQ(ddp.buckets_launched_at_step(), 0);
          }
          // The last micro-batch: every bucket starts from a
          // gradient hook, before backward returns.
          ASSERT_THAT(ddp.ForwardBackward(inputs, targets, 1.0 / 3, true),
                      IsOk());
          EXPECT_EQ(ddp.buckets_launched_in_backward(),
                    (step + 1) * num_buckets);
          auto result = ddp.Step(step);
          ASSERT_THAT(result, IsOk());
          EXPECT_EQ(ddp.buckets_launched_at_step(), 0);
        }
      }).ok());
}

TEST(DdpTest, StepWithoutLastMicroBatchFails) {
  ASSERT_TRUE(RunOnRanks(1, [&](Group& group) {
                auto created =
                    CreateStrategy(Ddp(), Build(Config("gpt-tiny"), 7), &group,
                                   Optimizer(), Schedule());
                ASSERT_THAT(created, IsOk());
                auto result = (*created)->Step(0);
                EXPECT_EQ(result.status().code(),
                          absl::StatusCode::kFailedPrecondition);
                EXPECT_NE(result.status().message().find("last_micro_batch"),
                          std::string::npos)
                    << result.status();
              }).ok());
}

TEST(DdpTest, BroadcastsRankZerosWeights) {
  const Params rank0 = [] {
    Params params;
    for (const auto& item :
         Build(Config("llama-tiny"), 7)->named_parameters()) {
      params[item.key()] = item.value().detach().clone();
    }
    return params;
  }();
  ASSERT_TRUE(RunOnRanks(3, [&](Group& group) {
                auto created = CreateStrategy(
                    Ddp(), Build(Config("llama-tiny"), 7 + group.rank()),
                    &group, Optimizer(), Schedule());
                ASSERT_THAT(created, IsOk());
                ExpectEqual(Snapshot(**created), rank0,
                            absl::StrCat("rank ", group.rank()));
              }).ok());
}

TEST(DdpTest, ShapeMismatchFailsOnEveryRankNamingTheParameter) {
  ASSERT_TRUE(
      RunOnRanks(2, [&](Group& group) {
        models::ModelConfig config = Config("gpt-tiny");
        if (group.rank() == 1) config.vocab_size = 300;
        auto created = CreateStrategy(Ddp(), Build(config, 7), &group,
                                      Optimizer(), Schedule());
        ASSERT_FALSE(created.ok());
        const std::string message(created.status().message());
        EXPECT_EQ(created.status().code(), absl::StatusCode::kInvalidArgument);
        EXPECT_NE(message.find("'wte.weight'"), std::string::npos) << message;
        EXPECT_NE(message.find("rank 0 has shape [256, 64]"), std::string::npos)
            << message;
        EXPECT_NE(message.find("rank 1 has shape [300, 64]"), std::string::npos)
            << message;
      }).ok());
}

TEST(DdpTest, ParameterCountMismatchFailsOnEveryRank) {
  ASSERT_TRUE(RunOnRanks(2, [&](Group& group) {
                models::ModelConfig config = Config("gpt-tiny");
                if (group.rank() == 1) config.num_layers = 3;
                auto created = CreateStrategy(Ddp(), Build(config, 7), &group,
                                              Optimizer(), Schedule());
                ASSERT_FALSE(created.ok());
                const std::string message(created.status().message());
                EXPECT_NE(message.find("rank 0 has "), std::string::npos)
                    << message;
                EXPECT_NE(message.find("rank 1 has "), std::string::npos)
                    << message;
              }).ok());
}

// A model with a head that never takes part in the loss.
class UnusedHeadModel : public models::UnitModel {
 public:
  UnusedHeadModel() {
    embedding_ = register_module("embedding", torch::nn::Embedding(16, 8));
    used_ = register_module("used", torch::nn::Linear(8, 16));
    unused_ = register_module("unused", torch::nn::Linear(8, 16));
  }
  at::Tensor Forward(const at::Tensor& tokens) override {
    return used_->forward(embedding_->forward(tokens));
  }

 private:
  torch::nn::Embedding embedding_{nullptr};
  torch::nn::Linear used_{nullptr};
  torch::nn::Linear unused_{nullptr};
};

// Fresh models with identical weights (parameters copied from one made
// here), so that no test thread depends on the global RNG.
std::shared_ptr<UnusedHeadModel> UnusedHead() {
  static const Params* weights = [] {
    UnusedHeadModel model;
    auto* params = new Params;
    for (const auto& item : model.named_parameters()) {
      (*params)[item.key()] = item.value().detach().clone();
    }
    return params;
  }();
  auto model = std::make_shared<UnusedHeadModel>();
  at::NoGradGuard no_grad;
  for (auto& item : model->named_parameters()) {
    item.value().copy_(weights->at(item.key()));
  }
  return model;
}

absl::Status TrainUnused(Strategy& strategy, int rank, int world) {
  at::Tensor tokens =
      at::arange(0, 12 * 9, at::kLong).remainder(13).view({12, 9});
  const int64_t rows = 12 / world;
  at::Tensor mine = tokens.narrow(0, rank * rows, rows);
  for (int step = 0; step < 3; ++step) {
    strategy.ZeroGrad();
    STRATA_RETURN_IF_ERROR(
        strategy
            .ForwardBackward(mine.narrow(1, 0, 8).contiguous(),
                             mine.narrow(1, 1, 8).contiguous(), 1.0, true)
            .status());
    STRATA_RETURN_IF_ERROR(strategy.Step(step).status());
  }
  return absl::OkStatus();
}

TEST(DdpTest, UnusedParametersFailStepNamingThem) {
  ASSERT_TRUE(
      RunOnRanks(2, [&](Group& group) {
        auto created = CreateStrategy(Ddp(), UnusedHead(), &group, Optimizer(),
                                      Schedule());
        ASSERT_THAT(created, IsOk());
        absl::Status status = TrainUnused(**created, group.rank(), 2);
        EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
        const std::string message(status.message());
        EXPECT_NE(message.find("unused.bias, unused.weight"), std::string::npos)
            << message;
        EXPECT_EQ(message.find("used.weight,"), std::string::npos) << message;
        EXPECT_NE(message.find("allow_unused_parameters"), std::string::npos)
            << message;
      }).ok());
}

TEST(DdpTest, AllowedUnusedParametersMatchSingle) {
  Params expected;
  {
    auto created = CreateStrategy(StrategyOptions(), UnusedHead(), nullptr,
                                  Optimizer(), Schedule());
    ASSERT_THAT(created, IsOk());
    ASSERT_THAT(TrainUnused(**created, 0, 1), IsOk());
    expected = Snapshot(**created);
  }
  ASSERT_TRUE(RunOnRanks(2, [&](Group& group) {
                StrategyOptions options = Ddp(/*bucket_bytes=*/256,
                                              /*first_bucket_bytes=*/256);
                options.allow_unused_parameters = true;
                auto created = DdpStrategy::Create(
                    options, UnusedHead(), &group, Optimizer(), Schedule());
                ASSERT_THAT(created, IsOk());
                absl::Status status = TrainUnused(**created, group.rank(), 2);
                ASSERT_THAT(status, IsOk());
                // The unused head's buckets come first (reverse order), so
                // every bucket waited for Step().
                EXPECT_GT((*created)->buckets_launched_at_step(), 0);
                ExpectClose(Snapshot(**created), expected,
                            absl::StrCat("rank ", group.rank()));
              }).ok());
}

size_t NumPostHooks(const models::UnitModel& model) {
  size_t hooks = 0;
  for (const auto& p : model.parameters()) {
    hooks += torch::autograd::impl::grad_accumulator(p)->post_hooks().size();
  }
  return hooks;
}

TEST(DdpTest, DestroyedStrategyLeavesNoHooksBehind) {
  auto model = Build(Config("gpt-tiny"), 7);
  ASSERT_EQ(NumPostHooks(*model), 0u);
  ASSERT_TRUE(RunOnRanks(1, [&](Group& group) {
                auto created = CreateStrategy(Ddp(), model, &group, Optimizer(),
                                              Schedule());
                ASSERT_THAT(created, IsOk());
                EXPECT_EQ(NumPostHooks(*model), model->parameters().size());
              }).ok());
  // The strategy is gone; the model must not call back into it.
  EXPECT_EQ(NumPostHooks(*model), 0u);
  at::Tensor tokens = at::randint(0, 256, {2, kSeqLen + 1}, at::kLong);
  models::UnitModel::Loss(
      model->Forward(tokens.narrow(1, 0, kSeqLen).contiguous()),
      tokens.narrow(1, 1, kSeqLen).contiguous())
      .backward();
}

TEST(DdpTest, MemoryIsSixteenBytesPerParameter) {
  ASSERT_TRUE(RunOnRanks(2, [&](Group& group) {
                auto model = Build(Config("gpt-tiny"), 7);
                int64_t psi = 0;
                for (const auto& p : model->parameters()) psi += p.numel();
                auto created = CreateStrategy(Ddp(), model, &group, Optimizer(),
                                              Schedule());
                ASSERT_THAT(created, IsOk());
                const MemoryReport memory = (*created)->Memory();
                EXPECT_EQ(memory.parameter_bytes, 4 * psi);
                EXPECT_EQ(memory.gradient_bytes, 4 * psi);
                // exp_avg + exp_avg_sq; "step" is one int64 (8 bytes).
                EXPECT_EQ(memory.optimizer_bytes, 8 * psi + 8);
                EXPECT_EQ(memory.communication_bytes, 0);
                EXPECT_EQ(memory.parameter_bytes + memory.gradient_bytes +
                              memory.optimizer_bytes - 8,
                          16 * psi);
              }).ok());
}

class DdpMixedPrecisionTest : public ::testing::TestWithParam<at::ScalarType> {
};

TEST_P(DdpMixedPrecisionTest, MatchesBf16Single) {
  testing::ExpectMixedMatchesSingle(
      "gpt-tiny", testing::MixedKind("ddp", GetParam()), "ddp", {2, 3, 4});
}

INSTANTIATE_TEST_SUITE_P(ReduceDtypes, DdpMixedPrecisionTest,
                         ::testing::Values(at::kFloat, at::kBFloat16));

TEST(DdpTest, FrozenParametersStayUnchangedFp32) {
  testing::ExpectFrozenParametersUnchanged(Ddp());
}

TEST(DdpTest, FrozenParametersStayUnchangedBf16) {
  testing::ExpectFrozenParametersUnchanged(
      testing::MixedKind("ddp", at::kBFloat16));
}

TEST(DdpTest, MixedPrecisionMemoryCountsBf16CopiesAndFp32Masters) {
  ASSERT_TRUE(RunOnRanks(2, [&](Group& group) {
                auto model = Build(Config("gpt-tiny"), 7);
                int64_t psi = 0;
                for (const auto& p : model->parameters()) psi += p.numel();
                auto created =
                    CreateStrategy(testing::MixedKind("ddp", at::kBFloat16),
                                   model, &group, Optimizer(), Schedule());
                ASSERT_THAT(created, IsOk());
                const MemoryReport memory = (*created)->Memory();
                // bf16 parameters + fp32 masters; bf16 gradients + fp32
                // accumulation (the bf16 buffer doubles as the bf16 reduce
                // buffer); fp32 AdamW state.
                EXPECT_EQ(memory.parameter_bytes, (2 + 4) * psi);
                EXPECT_EQ(memory.gradient_bytes, (2 + 4) * psi);
                EXPECT_EQ(memory.optimizer_bytes, 8 * psi + 8);
                EXPECT_EQ(memory.communication_bytes, 0);
              }).ok());
}

TEST(DdpTest, Bf16ReduceOfFp32ParametersDeclaresItsBuffer) {
  ASSERT_TRUE(
      RunOnRanks(2, [&](Group& group) {
        auto model = Build(Config("gpt-tiny"), 7);
        int64_t psi = 0;
        for (const auto& p : model->parameters()) psi += p.numel();
        StrategyOptions options = Ddp();
        options.mixed_precision.reduce_dtype = at::kBFloat16;
        auto created =
            CreateStrategy(options, model, &group, Optimizer(), Schedule());
        ASSERT_THAT(created, IsOk());
        const MemoryReport memory = (*created)->Memory();
        EXPECT_EQ(memory.parameter_bytes, 4 * psi);
        EXPECT_EQ(memory.gradient_bytes, 4 * psi);
        EXPECT_EQ(memory.communication_bytes, 2 * psi);
        // The gradients are rounded to bf16 once, in the reduce: the
        // norm stays within bf16 rounding (2^-8 relative per element,
        // 2^-6 with margin) of fp32 DDP's, which equals single's.
        std::vector<double> norms;
        ASSERT_THAT(Train(**created, group.rank(), 2, 1, &norms), IsOk());
        std::vector<double> expected;
        testing::TrainSingle("gpt-tiny", &expected);
        ASSERT_EQ(norms.size(), expected.size());
        for (size_t s = 0; s < norms.size(); ++s) {
          EXPECT_NEAR(norms[s], expected[s], expected[s] / 64) << s;
          EXPECT_NE(norms[s], expected[s]) << s;
        }
      }).ok());
}

}  // namespace
}  // namespace strata::strategies
