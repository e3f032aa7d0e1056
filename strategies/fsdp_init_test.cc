// FsdpOptions::param_init_fn (fsdp_init.h, ShardSource): a user's
// initialisation of a deferred model's parameters, through FsdpStrategy.
#include "strategies/fsdp_init.h"

#include <ATen/ATen.h>
#include <glog/logging.h>
#include <gtest/gtest.h>

#include <atomic>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "base/testing/status_matchers.h"
#include "comm/group.h"
#include "comm/testing/multi_rank.h"
#include "models/config.h"
#include "models/factory.h"
#include "strategies/factory.h"
#include "strategies/fsdp.h"
#include "strategies/strategy.h"
#include "strategies/testing/parity.h"

namespace strata::strategies {
namespace {

using ::strata::testing::IsOk;

using comm::Group;
using comm::testing::RunOnRanks;
using testing::Optimizer;
using testing::Params;
using testing::Schedule;

// Every parameter, gathered.
Params FullParams(Strategy& strategy) {
  auto* fsdp = dynamic_cast<FsdpStrategy*>(&strategy);
  CHECK(fsdp != nullptr);
  auto full = fsdp->FullModelState();
  EXPECT_THAT(full, IsOk());
  Params params;
  if (!full.ok()) return params;
  for (auto& [name, tensor] : *full) params[name] = tensor;
  return params;
}

// A user's initialisation, closed form: a parameter's value depends on its
// name and shape only (PyTorch's param_init_fn, per parameter).
at::Tensor UserInit(const std::string& name,
                    const std::vector<int64_t>& shape) {
  int64_t numel = 1;
  for (int64_t d : shape) numel *= d;
  return (at::arange(numel, at::kFloat) * 1e-4 +
          static_cast<float>(name.size()) / 100)
      .reshape(shape);
}

// Creates FSDP over a deferred llama-tiny at `world` ranks with `init` as
// param_init_fn; returns each rank's creation status and full parameters.
std::vector<std::pair<absl::Status, Params>> CreateDeferred(
    int world,
    std::function<absl::StatusOr<at::Tensor>(const std::string&,
                                             const std::vector<int64_t>&)>
        init,
    bool deferred = true) {
  std::vector<std::pair<absl::Status, Params>> results(world);
  auto config = models::ConfigByName("llama-tiny");
  CHECK(config.ok()) << config.status();
  CHECK(RunOnRanks(world, [&](Group& group) {
          models::BuildOptions build;
          build.seed = 11;
          build.deferred = deferred;
          auto model = models::BuildModel(*config, build);
          ASSERT_THAT(model, IsOk());
          StrategyOptions options;
          options.kind = StrategyKind::kFsdp;
          options.fsdp.wrap_policy.unit_types = {"LlamaBlock"};
          options.fsdp.init_seed = 11;
          options.fsdp.param_init_fn = init;
          auto created =
              CreateStrategy(options, *model, &group, Optimizer(), Schedule());
          results[group.rank()].first = created.status();
          if (created.ok())
            results[group.rank()].second = FullParams(**created);
        }).ok());
  return results;
}

TEST(FsdpParamInitFnTest, InitialisesADeferredModel) {
  auto config = models::ConfigByName("llama-tiny");
  ASSERT_THAT(config, IsOk());
  auto full_model = models::BuildModel(*config, models::BuildOptions());
  ASSERT_THAT(full_model, IsOk());
  const int64_t num_params =
      static_cast<int64_t>((*full_model)->named_parameters().size());
  for (int world : {1, 3}) {
    std::atomic<int64_t> calls{0};
    const auto results = CreateDeferred(
        world,
        [&](const std::string& name,
            const std::vector<int64_t>& shape) -> absl::StatusOr<at::Tensor> {
          ++calls;
          return UserInit(name, shape);
        });
    // Every rank asks for every parameter once, whatever it keeps of it.
    EXPECT_EQ(calls.load(), world * num_params);
    for (int r = 0; r < world; ++r) {
      ASSERT_THAT(results[r].first, IsOk());
      for (const auto& item : (*full_model)->named_parameters()) {
        EXPECT_TRUE(at::equal(results[r].second.at(item.key()),
                              UserInit(item.key(), item.value().sizes().vec())))
            << "world " << world << " rank " << r << " " << item.key();
      }
    }
  }
}

TEST(FsdpParamInitFnTest, ErrorsNameTheParameter) {
  const std::string bad = "layers.1.attention.wq.weight";
  const auto failing = CreateDeferred(
      2,
      [&](const std::string& name,
          const std::vector<int64_t>& shape) -> absl::StatusOr<at::Tensor> {
        if (name == bad) return absl::UnavailableError("no initialiser");
        return UserInit(name, shape);
      });
  const auto misshapen = CreateDeferred(
      2,
      [&](const std::string& name,
          const std::vector<int64_t>& shape) -> absl::StatusOr<at::Tensor> {
        return name == bad ? at::zeros({3}) : UserInit(name, shape);
      });
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(failing[r].first.code(), absl::StatusCode::kUnavailable);
    EXPECT_NE(failing[r].first.message().find(bad), std::string::npos)
        << failing[r].first;
    EXPECT_NE(failing[r].first.message().find("param_init_fn"),
              std::string::npos)
        << failing[r].first;
    EXPECT_EQ(misshapen[r].first.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(misshapen[r].first.message().find(bad), std::string::npos)
        << misshapen[r].first;
    EXPECT_NE(misshapen[r].first.message().find("shape [3]"), std::string::npos)
        << misshapen[r].first;
  }
}

TEST(FsdpParamInitFnTest, WithoutADeferredModelIsAnError) {
  const auto results = CreateDeferred(2, &UserInit, /*deferred=*/false);
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(results[r].first.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(results[r].first.message().find("meta device"), std::string::npos)
        << results[r].first;
  }
}

}  // namespace
}  // namespace strata::strategies
