#include "strategies/testing/parity.h"

#include <ATen/ATen.h>
#include <glog/logging.h>
#include <gtest/gtest.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "comm/group.h"
#include "comm/testing/multi_rank.h"
#include "data/sampler.h"
#include "models/factory.h"
#include "strategies/factory.h"

namespace strata::strategies::testing {

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

OptimizerConfig Optimizer(double grad_clip) {
  OptimizerConfig config;  // weight decay 0.1.
  config.grad_clip = grad_clip;
  return config;
}

StrategyOptions Kind(const std::string& kind, int64_t bucket_bytes,
                     int64_t first_bucket_bytes) {
  StrategyOptions options;
  options.kind = kind;
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

absl::Status Train(Strategy& strategy, int rank, int world, int micro_batches,
                   std::vector<double>* grad_norms, int steps) {
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

void ExpectMatchesSingle(const std::string& model_name,
                         const StrategyOptions& options,
                         const std::string& name,
                         const std::string& what_prefix) {
  std::vector<double> expected_norms;
  const Params expected = TrainSingle(model_name, &expected_norms);
  for (int world = 1; world <= 4; ++world) {
    for (int micro_batches : {1, 2}) {
      const std::string what =
          absl::StrCat(what_prefix, model_name, " world ", world,
                       " micro-batches ", micro_batches);
      ASSERT_TRUE(comm::testing::RunOnRanks(
                      world,
                      [&](comm::Group& group) {
                        auto created = CreateStrategy(
                            options, Build(Config(model_name), 7), &group,
                            Optimizer(), Schedule());
                        ASSERT_TRUE(created.ok()) << created.status();
                        EXPECT_EQ((*created)->name(), name);
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

}  // namespace strata::strategies::testing
