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
#include "comm/testing/multi_rank.h"
#include "data/markov_corpus.h"
#include "data/sampler.h"
#include "models/config.h"
#include "models/factory.h"
#include "strategies/factory.h"
#include "strategies/single.h"
#include "strategies/strategy.h"

namespace strata::strategies {
namespace {

using comm::Group;
using comm::testing::RunOnRanks;
using Params = std::map<std::string, at::Tensor>;

constexpr int64_t kGlobalBatch = 12;
constexpr int64_t kSeqLen = 32;
constexpr int kSteps = 5;

models::ModelConfig Config(const std::string& name) {
  auto config = models::ConfigByName(name);
  EXPECT_TRUE(config.ok()) << config.status();
  return *config;
}

std::shared_ptr<models::UnitModel> Build(const models::ModelConfig& config,
                                         uint64_t seed) {
  auto model = models::BuildModel(config, models::BuildOptions{seed});
  EXPECT_TRUE(model.ok()) << model.status();
  return *model;
}

optim::LrScheduleOptions Schedule() {
  optim::LrScheduleOptions lr;
  lr.kind = "cosine";
  lr.base_lr = 1e-4;
  lr.warmup_steps = 2;
  lr.total_steps = kSteps;
  return lr;
}

OptimizerConfig Optimizer() {
  OptimizerConfig config;  // weight decay 0.1, clipping at 1.0: both on.
  return config;
}

StrategyOptions Ddp(int64_t bucket_bytes = int64_t{25} << 20,
                    int64_t first_bucket_bytes = int64_t{1} << 20) {
  StrategyOptions options;
  options.kind = "ddp";
  options.bucket_bytes = bucket_bytes;
  options.first_bucket_bytes = first_bucket_bytes;
  return options;
}

const data::MarkovCorpus& Corpus() {
  static const data::MarkovCorpus* corpus = [] {
    data::MarkovCorpusOptions options;
    options.vocab_size = 256;
    options.num_tokens = 20000;
    auto created = data::MarkovCorpus::Create(options);
    CHECK(created.ok()) << created.status();
    return created->release();
  }();
  return *corpus;
}

// Trains `steps` steps on this rank's part of each global batch, split into
// `micro_batches` micro-batches of (nearly) equal size.
absl::Status Train(Strategy& strategy, int rank, int world, int micro_batches,
                   std::vector<double>* grad_norms = nullptr,
                   int steps = kSteps) {
  data::SamplerOptions options;
  options.seq_len = kSeqLen;
  options.global_batch_size = kGlobalBatch;
  options.seed = 5;
  STRATA_ASSIGN_OR_RETURN(auto sampler,
                          data::DistributedSampler::Create(&Corpus(), options));
  for (int step = 0; step < steps; ++step) {
    STRATA_ASSIGN_OR_RETURN(at::Tensor batch, sampler->NextBatch(rank, world));
    const int64_t rows = batch.size(0);
    strategy.ZeroGrad();
    int64_t start = 0;
    for (int m = 0; m < micro_batches; ++m) {
      const int64_t size = (rows * (m + 1)) / micro_batches - start;
      at::Tensor chunk = batch.narrow(0, start, size);
      start += size;
      STRATA_ASSIGN_OR_RETURN(
          double loss,
          strategy.ForwardBackward(chunk.narrow(1, 0, kSeqLen).contiguous(),
                                   chunk.narrow(1, 1, kSeqLen).contiguous(),
                                   static_cast<double>(size) / rows,
                                   m + 1 == micro_batches));
      (void)loss;
    }
    STRATA_ASSIGN_OR_RETURN(StepResult result, strategy.Step(step));
    if (grad_norms != nullptr) grad_norms->push_back(result.grad_norm);
  }
  return absl::OkStatus();
}

Params Snapshot(const Strategy& strategy) {
  Params params;
  for (const ShardedTensor& t : strategy.ModelState()) {
    params[t.name] = t.local.detach().clone();
  }
  return params;
}

Params TrainSingle(const std::string& model_name,
                   std::vector<double>* grad_norms) {
  auto created = CreateStrategy(StrategyOptions(), Build(Config(model_name), 7),
                                nullptr, Optimizer(), Schedule());
  EXPECT_TRUE(created.ok()) << created.status();
  absl::Status status = Train(**created, 0, 1, 1, grad_norms);
  EXPECT_TRUE(status.ok()) << status;
  return Snapshot(**created);
}

// Tolerance of the DDP-vs-single comparison. Both compute the same
// gradient with float sums in different orders: each rank's loss mean over
// its rows, accumulated micro-batches, then an average over ranks, instead of
// one mean over all rows. A reordered float sum of n terms differs by up to
// ~n * 2^-24 of the sum of magnitudes, so gradient elements differ by ~1e-7
// relative to their terms. AdamW's update is lr * m_hat / (sqrt(v_hat) + eps),
// bounded by ~lr per step per element whatever the gradient; an element whose
// gradient is well above its rounding noise changes its update by ~1e-7 * lr,
// but one whose gradient is near zero (a cancellation, where the noise is
// comparable to the gradient itself) can change its update by up to ~lr.
// Such elements are rare and do not repeat every step, so with lr = 1e-4
// over 5 steps the worst element moves a fraction of 5 * lr = 5e-4 apart:
// measured up to 1.1e-6 (at lr = 1e-3: 1.6e-5; it scales with lr).
// 1e-5 * max(1, max|param|) bounds this with margin while a missing bucket,
// skipped rank or wrong gradient direction moves most elements by ~lr =
// 1e-4 per step. A gradient scaled as a whole (a missing average) barely
// changes AdamW's update, so the pre-clip gradient norms are compared too,
// to 1e-5 relative (their rounding is ~1e-7 relative).
void ExpectClose(const Params& actual, const Params& expected,
                 const std::string& what) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  for (const auto& [name, want] : expected) {
    auto it = actual.find(name);
    ASSERT_NE(it, actual.end()) << what << ": " << name;
    const double scale = std::max(1.0, want.abs().max().item<double>());
    const double diff = (it->second - want).abs().max().item<double>();
    EXPECT_LE(diff, 1e-5 * scale) << what << ": " << name;
  }
}

void ExpectEqual(const Params& actual, const Params& expected,
                 const std::string& what) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  for (const auto& [name, want] : expected) {
    auto it = actual.find(name);
    ASSERT_NE(it, actual.end()) << what << ": " << name;
    EXPECT_TRUE(at::equal(it->second, want)) << what << ": " << name;
  }
}

class DdpParityTest : public ::testing::TestWithParam<std::string> {};

TEST_P(DdpParityTest, MatchesSingleOnTheFullBatch) {
  const std::string model_name = GetParam();
  std::vector<double> expected_norms;
  const Params expected = TrainSingle(model_name, &expected_norms);
  for (int world = 1; world <= 4; ++world) {
    for (int micro_batches : {1, 2}) {
      const std::string what = absl::StrCat(model_name, " world ", world,
                                            " micro-batches ", micro_batches);
      ASSERT_TRUE(
          RunOnRanks(world,
                     [&](Group& group) {
                       auto created =
                           CreateStrategy(Ddp(), Build(Config(model_name), 7),
                                          &group, Optimizer(), Schedule());
                       ASSERT_TRUE(created.ok()) << created.status();
                       EXPECT_EQ((*created)->name(), "ddp");
                       std::vector<double> norms;
                       absl::Status status =
                           Train(**created, group.rank(), world, micro_batches,
                                 &norms);
                       ASSERT_TRUE(status.ok()) << status;
                       // The pre-clip norm catches a gradient scaled by a
                       // missing (or doubled) average, which AdamW's update
                       // would hide.
                       ASSERT_EQ(norms.size(), expected_norms.size());
                       for (size_t s = 0; s < norms.size(); ++s) {
                         EXPECT_NEAR(norms[s], expected_norms[s],
                                     1e-5 * expected_norms[s])
                             << what << " step " << s;
                       }
                       ExpectClose(Snapshot(**created), expected,
                                   absl::StrCat(what, " rank ", group.rank()));
                     })
              .ok())
          << what;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Models, DdpParityTest,
                         ::testing::Values("gpt-tiny", "llama-tiny"));

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
                  ASSERT_TRUE(created.ok()) << created.status();
                  ASSERT_TRUE(Train(**created, group.rank(), 2, 2).ok());
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
                ASSERT_TRUE(created.ok()) << created.status();
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
        ASSERT_TRUE(created.ok()) << created.status();
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
            ASSERT_TRUE(
                ddp.ForwardBackward(inputs, targets, 1.0 / 3, false).ok());
            EXPECT_EQ(ddp.buckets_launched_in_backward(), step * num_buckets);
            EXPECT_EQ(ddp.buckets_launched_at_step(), 0);
          }
          // The last micro-batch: every bucket starts from a
          // gradient hook, before backward returns.
          ASSERT_TRUE(ddp.ForwardBackward(inputs, targets, 1.0 / 3, true).ok());
          EXPECT_EQ(ddp.buckets_launched_in_backward(),
                    (step + 1) * num_buckets);
          auto result = ddp.Step(step);
          ASSERT_TRUE(result.ok()) << result.status();
          EXPECT_EQ(ddp.buckets_launched_at_step(), 0);
        }
      }).ok());
}

TEST(DdpTest, StepWithoutLastMicroBatchFails) {
  ASSERT_TRUE(RunOnRanks(1, [&](Group& group) {
                auto created =
                    CreateStrategy(Ddp(), Build(Config("gpt-tiny"), 7), &group,
                                   Optimizer(), Schedule());
                ASSERT_TRUE(created.ok()) << created.status();
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
                ASSERT_TRUE(created.ok()) << created.status();
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
        ASSERT_TRUE(created.ok()) << created.status();
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
    ASSERT_TRUE(created.ok()) << created.status();
    ASSERT_TRUE(TrainUnused(**created, 0, 1).ok());
    expected = Snapshot(**created);
  }
  ASSERT_TRUE(RunOnRanks(2, [&](Group& group) {
                StrategyOptions options = Ddp(/*bucket_bytes=*/256,
                                              /*first_bucket_bytes=*/256);
                options.allow_unused_parameters = true;
                auto created = DdpStrategy::Create(
                    options, UnusedHead(), &group, Optimizer(), Schedule());
                ASSERT_TRUE(created.ok()) << created.status();
                absl::Status status = TrainUnused(**created, group.rank(), 2);
                ASSERT_TRUE(status.ok()) << status;
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
                ASSERT_TRUE(created.ok()) << created.status();
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
                ASSERT_TRUE(created.ok()) << created.status();
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

}  // namespace
}  // namespace strata::strategies
