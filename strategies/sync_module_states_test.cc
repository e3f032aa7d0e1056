// PyTorch FSDP's sync_module_states=True, which every Strata strategy does
// unconditionally: ranks that built their models from different seeds all
// start from rank 0's weights (replicas.h; FSDP cuts its shards from rank
// 0's values), and train as if every rank had built rank 0's model.
// sync_module_states=False (each rank keeping its own initial values) is
// not offered: a data-parallel run whose replicas start apart is not the
// single-process run it must match.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "comm/group.h"
#include "comm/testing/multi_rank.h"
#include "strategies/factory.h"
#include "strategies/options.h"
#include "strategies/strategy.h"
#include "strategies/testing/parity.h"

namespace strata::strategies {
namespace {

using testing::Build;
using testing::Config;
using testing::Params;

// Strategy `kind` on this rank of `group` over gpt-tiny built from seed
// 7 + 100 * rank: every rank's model starts apart.
absl::StatusOr<std::unique_ptr<Strategy>> CreateApart(const std::string& kind,
                                                      comm::Group& group) {
  return CreateStrategy(testing::Kind(kind),
                        Build(Config("gpt-tiny"), 7 + 100 * group.rank()),
                        &group, testing::Optimizer(), testing::Schedule());
}

class SyncModuleStatesTest : public ::testing::TestWithParam<std::string> {};

// Rank r builds gpt-tiny from seed 7 + 100 r; the full model state every
// rank sees after creation is rank 0's initial weights, bitwise (copies, no
// arithmetic).
TEST_P(SyncModuleStatesTest, EveryRankStartsFromRankZerosWeights) {
  const Params want = testing::ParametersOf(*Build(Config("gpt-tiny"), 7));
  const Params other = testing::ParametersOf(*Build(Config("gpt-tiny"), 107));
  ASSERT_FALSE(at::equal(other.at("wte.weight"), want.at("wte.weight")));
  std::vector<Params> got(2);
  const absl::Status formed =
      comm::testing::RunOnRanks(2, [&](comm::Group& group) {
        auto created = CreateApart(GetParam(), group);
        ASSERT_TRUE(created.ok()) << created.status();
        auto full = (*created)->FullModelState();
        ASSERT_TRUE(full.ok()) << full.status();
        for (auto& [name, tensor] : *full) got[group.rank()][name] = tensor;
      });
  ASSERT_TRUE(formed.ok()) << formed;
  for (int rank = 0; rank < 2; ++rank) {
    testing::ExpectEqual(got[rank], want,
                         absl::StrCat(GetParam(), " rank ", rank));
  }
}

// Training from different seeds on each rank is training from rank 0's:
// the same run, bitwise, as when every rank builds seed 7.
TEST_P(SyncModuleStatesTest, TrainsAsIfEveryRankBuiltRankZerosModel) {
  const testing::RunResult same = testing::TrainRun(
      testing::Kind(GetParam()), [] { return Build(Config("gpt-tiny"), 7); }, 2,
      testing::TokenLoop(2));
  testing::RunResult apart;
  const absl::Status formed =
      comm::testing::RunOnRanks(2, [&](comm::Group& group) {
        auto created = CreateApart(GetParam(), group);
        ASSERT_TRUE(created.ok()) << created.status();
        std::vector<double> norms;
        const absl::Status trained =
            testing::Train(**created, group.rank(), 2, 2, &norms);
        ASSERT_TRUE(trained.ok()) << trained;
        auto full = (*created)->FullModelState();
        ASSERT_TRUE(full.ok()) << full.status();
        if (group.rank() != 0) return;
        apart.norms = norms;
        for (auto& [name, tensor] : *full) apart.params[name] = tensor;
      });
  ASSERT_TRUE(formed.ok()) << formed;
  testing::ExpectEqual(apart.params, same.params, GetParam());
  EXPECT_EQ(apart.norms, same.norms) << GetParam();
}

INSTANTIATE_TEST_SUITE_P(Kinds, SyncModuleStatesTest,
                         ::testing::Values("ddp", "zero1", "zero2", "fsdp"));

}  // namespace
}  // namespace strata::strategies
