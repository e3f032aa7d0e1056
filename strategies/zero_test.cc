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
#include "strategies/testing/parity.h"

namespace strata::strategies {
namespace {

using comm::Group;
using comm::testing::RunOnRanks;
using testing::Build;
using testing::Config;
using testing::ExpectEqual;
using testing::ExpectMatchesSingle;
using testing::Kind;
using testing::kSteps;
using testing::Optimizer;
using testing::Params;
using testing::Schedule;
using testing::Snapshot;
using testing::Train;

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
  ExpectMatchesSingle(model_name, Kind(kind), kind,
                      /*what_prefix=*/absl::StrCat(kind, " "));
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
