#include "checkpoint/testing/states.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "base/testing/temp_dir.h"
#include "comm/testing/multi_rank.h"
#include "strategies/factory.h"
#include "strategies/testing/parity.h"

namespace strata::checkpoint::testing {

namespace parity = strategies::testing;

strategies::StrategyOptions Kind(const std::string& kind) {
  if (kind == "zero1" || kind == "zero2") return parity::Kind(kind, 1000, 600);
  if (kind == "fsdp_hybrid") {
    strategies::StrategyOptions options = parity::Kind("fsdp");
    options.fsdp.sharding = strategies::ShardingStrategy::kHybridShard;
    options.fsdp.hybrid_shard_group_size = 2;
    return options;
  }
  return parity::Kind(kind);
}

strategies::OptimizerConfig DefaultOptimizer() { return parity::Optimizer(); }

strategies::OptimizerConfig OptimizerNamed(const std::string& name) {
  strategies::OptimizerConfig config = DefaultOptimizer();
  if (name == "adam") config.kind = strategies::OptimizerKind::kAdam;
  if (name == "sgd" || name == "sgd_momentum") {
    config.kind = strategies::OptimizerKind::kSgd;
  }
  if (name == "sgd_momentum") {
    config.sgd.momentum = 0.9;
    config.sgd.dampening = 0.1;
  }
  EXPECT_EQ(strategies::OptimizerStateName(config), name);
  return config;
}

std::unique_ptr<strategies::Strategy> MakeStrategy(
    const std::string& kind, comm::Group* group, uint64_t seed, int steps,
    const strategies::OptimizerConfig& optimizer) {
  auto created = strategies::CreateStrategy(
      Kind(kind), parity::Build(parity::Config("gpt-tiny"), seed), group,
      optimizer, parity::Schedule());
  EXPECT_TRUE(created.ok()) << created.status();
  if (!created.ok()) return nullptr;
  const int rank = group == nullptr ? 0 : group->rank();
  const int world = group == nullptr ? 1 : group->size();
  if (steps > 0) {
    absl::Status trained =
        parity::Train(**created, rank, world, 1, nullptr, steps);
    EXPECT_TRUE(trained.ok()) << trained;
    if (!trained.ok()) return nullptr;
  }
  return *std::move(created);
}

TensorState StateOf(const strategies::Strategy& strategy) {
  return TensorState{strategy.ModelState(), strategy.OptimizerState()};
}

void AddRuns(const TensorState& state, Globals& globals, std::mutex& mu) {
  std::lock_guard<std::mutex> lock(mu);
  for (int section = 0; section < 2; ++section) {
    const auto& runs = section == 0 ? state.model : state.optimizer;
    for (const ShardedTensor& run : runs) {
      const std::string key =
          absl::StrCat(section == 0 ? "model/" : "optimizer/", run.name);
      auto it = globals.find(key);
      if (it == globals.end()) {
        const int64_t numel = NumElements(run.global_shape);
        at::Tensor t = at::isFloatingType(run.local.scalar_type())
                           ? at::full({numel}, NAN, run.local.options())
                           : at::full({numel}, -1, run.local.options());
        it = globals.emplace(key, t).first;
      }
      it->second.narrow(0, run.offset, run.local.numel())
          .copy_(run.local.reshape({-1}));
    }
  }
}

void ExpectGlobalsEqual(const Globals& actual, const Globals& expected,
                        const std::string& what) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  for (const auto& [key, want] : expected) {
    auto it = actual.find(key);
    ASSERT_NE(it, actual.end()) << what << ": " << key;
    EXPECT_TRUE(at::equal(it->second, want)) << what << ": " << key;
  }
}

Globals RunRanks(const std::string& kind, int world, uint64_t seed, int steps,
                 const std::string& optimizer,
                 const std::function<bool(const Rank&)>& body) {
  Globals globals;
  std::mutex mu;
  absl::Status formed =
      comm::testing::RunOnRanks(world, [&](comm::Group& group) {
        comm::Group* g = kind == "single" ? nullptr : &group;
        auto strategy =
            MakeStrategy(kind, g, seed, steps, OptimizerNamed(optimizer));
        ASSERT_NE(strategy, nullptr);
        const TensorState state = StateOf(*strategy);
        if (body(Rank{*strategy, state, g})) AddRuns(state, globals, mu);
      });
  EXPECT_TRUE(formed.ok()) << formed;
  return globals;
}

std::map<std::string, at::Tensor> Snapshot(const TensorState& state) {
  std::map<std::string, at::Tensor> out;
  for (const auto& run : state.model) {
    out[absl::StrCat("model/", run.name, "@", run.offset)] = run.local.clone();
  }
  for (const auto& run : state.optimizer) {
    out[absl::StrCat("optimizer/", run.name, "@", run.offset)] =
        run.local.clone();
  }
  return out;
}

void ExpectSnapshotsEqual(const std::map<std::string, at::Tensor>& actual,
                          const std::map<std::string, at::Tensor>& expected,
                          const std::string& what) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  for (const auto& [key, want] : expected) {
    auto it = actual.find(key);
    ASSERT_NE(it, actual.end()) << what << ": " << key;
    EXPECT_TRUE(at::equal(it->second, want)) << what << ": " << key;
  }
}

std::string TempDir(const std::string& name) {
  return ::strata::testing::FreshTempDir(name);
}

const std::vector<std::pair<std::string, int>>& RoundTripSetups() {
  static const auto* const kSetups =
      new std::vector<std::pair<std::string, int>>{
          {"single", 1}, {"ddp", 2}, {"zero1", 2}, {"zero2", 2}, {"fsdp", 3}};
  return *kSetups;
}

std::pair<std::string, std::string> GridKinds(int n, int m) {
  static const char* const kKinds[] = {"ddp", "zero1", "zero2", "fsdp"};
  return {n == 1 && m % 2 == 1 ? "single" : kKinds[(n + m) % 4],
          m == 1 && n % 2 == 0 ? "single" : kKinds[(n + 2 * m + 1) % 4]};
}

}  // namespace strata::checkpoint::testing
