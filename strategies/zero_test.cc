#include "strategies/zero.h"

#include <ATen/ATen.h>
#include <glog/logging.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "comm/testing/multi_rank.h"
#include "data/markov_corpus.h"
#include "data/sampler.h"
#include "models/config.h"
#include "models/factory.h"
#include "strategies/factory.h"
#include "strategies/strategy.h"

namespace strata::strategies {
namespace {

using comm::Group;
using comm::testing::RunOnRanks;
using Params = std::map<std::string, at::Tensor>;

// Helpers copied from ddp_test.cc (same batch, schedule and tolerance).
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

OptimizerConfig Optimizer(double grad_clip = 1.0) {
  OptimizerConfig config;  // weight decay 0.1.
  config.grad_clip = grad_clip;
  return config;
}

StrategyOptions Kind(const std::string& kind,
                     int64_t bucket_bytes = int64_t{25} << 20,
                     int64_t first_bucket_bytes = int64_t{1} << 20) {
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

// ddp_test.cc explains the tolerance: 1e-5 * max(1, max|param|).
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

int64_t NumParameterElements(const std::string& model_name) {
  int64_t n = 0;
  for (const auto& p : Build(Config(model_name), 7)->parameters()) {
    n += p.numel();
  }
  return n;
}

class ZeroParityTest
    : public ::testing::TestWithParam<std::tuple<std::string, std::string>> {};

TEST_P(ZeroParityTest, MatchesSingleOnTheFullBatch) {
  const auto& [model_name, kind] = GetParam();
  std::vector<double> expected_norms;
  const Params expected = TrainSingle(model_name, &expected_norms);
  for (int world = 1; world <= 4; ++world) {
    for (int micro_batches : {1, 2}) {
      const std::string what =
          absl::StrCat(kind, " ", model_name, " world ", world,
                       " micro-batches ", micro_batches);
      ASSERT_TRUE(RunOnRanks(world,
                             [&](Group& group) {
                               auto created = CreateStrategy(
                                   Kind(kind), Build(Config(model_name), 7),
                                   &group, Optimizer(), Schedule());
                               ASSERT_TRUE(created.ok()) << created.status();
                               EXPECT_EQ((*created)->name(), kind);
                               std::vector<double> norms;
                               absl::Status status =
                                   Train(**created, group.rank(), world,
                                         micro_batches, &norms);
                               ASSERT_TRUE(status.ok()) << status;
                               ASSERT_EQ(norms.size(), expected_norms.size());
                               for (size_t s = 0; s < norms.size(); ++s) {
                                 EXPECT_NEAR(norms[s], expected_norms[s],
                                             1e-5 * expected_norms[s])
                                     << what << " step " << s;
                               }
                               ExpectClose(
                                   Snapshot(**created), expected,
                                   absl::StrCat(what, " rank ", group.rank()));
                             })
                      .ok())
          << what;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Models, ZeroParityTest,
    ::testing::Combine(::testing::Values("gpt-tiny", "llama-tiny"),
                       ::testing::Values("zero1", "zero2")));

TEST(ZeroTest, BitwiseEqualToDdpAtWorldTwoWithoutClipping) {
  // Small ZeRO buckets: many buckets, parameters straddling bucket and shard
  // boundaries. With two ranks every gradient element is the same float sum
  // (a + b) / 2 and AdamW is element-wise, so the results must be bitwise
  // equal to DDP's.
  const std::vector<StrategyOptions> options = {
      Kind("ddp"), Kind("zero1", /*bucket_bytes=*/1000, 600),
      Kind("zero2", /*bucket_bytes=*/1000, 600)};
  std::vector<std::vector<Params>> results(options.size(),
                                           std::vector<Params>(2));
  std::vector<std::vector<double>> norms(options.size());
  for (size_t k = 0; k < options.size(); ++k) {
    ASSERT_TRUE(
        RunOnRanks(2, [&](Group& group) {
          auto created =
              CreateStrategy(options[k], Build(Config("gpt-tiny"), 7), &group,
                             Optimizer(/*grad_clip=*/0), Schedule());
          ASSERT_TRUE(created.ok()) << created.status();
          if (k > 0) {
            auto* zero = dynamic_cast<ZeroStrategy*>(created->get());
            ASSERT_NE(zero, nullptr);
            EXPECT_GT(zero->buckets().size(), 10u);
          }
          std::vector<double> local_norms;
          absl::Status status =
              Train(**created, group.rank(), 2, 2, &local_norms);
          ASSERT_TRUE(status.ok()) << status;
          if (k > 0) {
            // Every bucket is reduced from the backward hooks, none
            // left to Step().
            auto* zero = dynamic_cast<ZeroStrategy*>(created->get());
            EXPECT_EQ(zero->buckets_launched_in_backward(),
                      kSteps * static_cast<int64_t>(zero->buckets().size()));
            EXPECT_EQ(zero->buckets_launched_at_step(), 0);
          }
          results[k][group.rank()] = Snapshot(**created);
          if (group.rank() == 0) norms[k] = local_norms;
        }).ok());
  }
  for (size_t k = 1; k < options.size(); ++k) {
    for (int rank = 0; rank < 2; ++rank) {
      ExpectEqual(results[k][rank], results[0][0],
                  absl::StrCat(options[k].kind, " rank ", rank, " vs ddp"));
    }
    ASSERT_EQ(norms[k].size(), norms[0].size());
    for (size_t s = 0; s < norms[0].size(); ++s) {
      EXPECT_NEAR(norms[k][s], norms[0][s], 1e-6 * norms[0][s])
          << options[k].kind << " step " << s;
    }
  }
}

TEST(ZeroTest, MemoryMatchesTheZeroFormulas) {
  const int64_t psi = NumParameterElements("gpt-tiny");
  for (const std::string kind : {"zero1", "zero2"}) {
    for (int world : {2, 4}) {
      const std::string what = absl::StrCat(kind, " world ", world);
      ASSERT_TRUE(
          RunOnRanks(
              world,
              [&](Group& group) {
                auto created =
                    CreateStrategy(Kind(kind), Build(Config("gpt-tiny"), 7),
                                   &group, Optimizer(), Schedule());
                ASSERT_TRUE(created.ok()) << created.status();
                const MemoryReport m = (*created)->Memory();
                const double n = world;
                // 8 bytes of AdamW state per owned element.
                EXPECT_NEAR(m.optimizer_bytes, 8 * psi / n, 0.05 * 8 * psi / n)
                    << what;
                const int64_t padded = m.parameter_bytes / 4;
                EXPECT_GE(padded, psi);
                EXPECT_LT(padded, psi + world);
                EXPECT_EQ(m.communication_bytes, 4 * padded / world) << what;
                if (kind == "zero1") {
                  EXPECT_EQ(m.gradient_bytes, 4 * padded) << what;
                  const double total =
                      m.parameter_bytes + m.gradient_bytes + m.optimizer_bytes;
                  EXPECT_NEAR(total, 8 * psi + 8 * psi / n,
                              0.05 * (8 * psi + 8 * psi / n))
                      << what;
                } else {
                  // Full accumulation buffer plus the shard buffer.
                  EXPECT_EQ(m.gradient_bytes, 4 * padded + 4 * padded / world)
                      << what;
                }
              })
              .ok())
          << what;
    }
  }
}

TEST(ZeroTest, OptimizerStateShardsCoverEveryElementOnce) {
  // Three ranks and small buckets: padding, and parameters straddling shard
  // and bucket boundaries.
  for (const std::string kind : {"zero1", "zero2"}) {
    std::mutex mu;
    std::vector<ShardedTensor> all;
    std::map<std::string, std::vector<int64_t>> shapes;
    ASSERT_TRUE(RunOnRanks(3, [&](Group& group) {
                  auto created =
                      CreateStrategy(Kind(kind, /*bucket_bytes=*/1000, 600),
                                     Build(Config("gpt-tiny"), 7), &group,
                                     Optimizer(), Schedule());
                  ASSERT_TRUE(created.ok()) << created.status();
                  ASSERT_TRUE(Train(**created, group.rank(), 3, 1, nullptr,
                                    /*steps=*/1)
                                  .ok());
                  std::vector<ShardedTensor> state =
                      (*created)->OptimizerState();
                  std::lock_guard<std::mutex> lock(mu);
                  for (ShardedTensor& t : state) {
                    t.local = t.local.clone();
                    all.push_back(std::move(t));
                  }
                  if (group.rank() == 0) {
                    for (const ShardedTensor& t : (*created)->ModelState()) {
                      shapes[t.name] = t.global_shape;
                    }
                  }
                }).ok());
    std::map<std::string, at::Tensor> counts;
    for (const auto& [name, shape] : shapes) {
      for (const char* key : {"exp_avg", "exp_avg_sq"}) {
        int64_t numel = 1;
        for (int64_t d : shape) numel *= d;
        counts[absl::StrCat(name, ".", key)] = at::zeros({numel}, at::kInt);
      }
    }
    int steps = 0;
    for (const ShardedTensor& t : all) {
      if (t.name == "step") {
        EXPECT_EQ(t.local.item<int64_t>(), 1) << kind;
        ++steps;
        continue;
      }
      auto it = counts.find(t.name);
      ASSERT_NE(it, counts.end()) << kind << ": " << t.name;
      const std::string param = t.name.substr(0, t.name.rfind('.'));
      EXPECT_EQ(t.global_shape, shapes[param]) << kind << ": " << t.name;
      ASSERT_GE(t.offset, 0);
      ASSERT_LE(t.offset + t.local.numel(), it->second.numel()) << t.name;
      it->second.narrow(0, t.offset, t.local.numel()).add_(1);
    }
    EXPECT_EQ(steps, 3) << kind;
    for (const auto& [name, count] : counts) {
      EXPECT_TRUE(at::equal(count, at::ones_like(count)))
          << kind << ": " << name << " covered " << count.min().item<int>()
          << " to " << count.max().item<int>() << " times";
    }
  }
}

TEST(ZeroTest, CreateNeedsAGroup) {
  auto created = CreateStrategy(Kind("zero2"), Build(Config("gpt-tiny"), 7),
                                nullptr, Optimizer(), Schedule());
  ASSERT_FALSE(created.ok());
  EXPECT_EQ(created.status().message(),
            "--strategy zero2 needs a process group, got none");
}

}  // namespace
}  // namespace strata::strategies
