#include "models/factory.h"

#include <ATen/ATen.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "base/testing/status_matchers.h"
#include "models/config.h"
#include "models/init.h"
#include "models/unit.h"

namespace strata::models {
namespace {

using ::strata::testing::IsOk;

using ::testing::HasSubstr;

std::shared_ptr<UnitModel> Build(const std::string& name, uint64_t seed,
                                 bool deferred) {
  absl::StatusOr<ModelConfig> config = ConfigByName(name);
  EXPECT_THAT(config, IsOk());
  BuildOptions options;
  options.seed = seed;
  options.deferred = deferred;
  absl::StatusOr<std::shared_ptr<UnitModel>> model =
      BuildModel(*config, options);
  EXPECT_THAT(model, IsOk());
  return *model;
}

// Whether both models have bitwise-equal parameters under the same names.
::testing::AssertionResult SameParameters(const UnitModel& a,
                                          const UnitModel& b) {
  auto pa = a.named_parameters();
  auto pb = b.named_parameters();
  if (pa.size() != pb.size()) {
    return ::testing::AssertionFailure() << "different parameter counts";
  }
  for (const auto& item : pa) {
    const at::Tensor* other = pb.find(item.key());
    if (other == nullptr) {
      return ::testing::AssertionFailure() << "missing " << item.key();
    }
    if (!at::equal(item.value(), *other)) {
      return ::testing::AssertionFailure() << "differs: " << item.key();
    }
  }
  return ::testing::AssertionSuccess();
}

class FactoryTest : public ::testing::TestWithParam<std::string> {};

TEST_P(FactoryTest, DeferredBuildHasOnlyMetaParameters) {
  std::shared_ptr<UnitModel> model = Build(GetParam(), 0, true);
  for (const at::Tensor& p : model->parameters()) EXPECT_TRUE(p.is_meta());
}

TEST_P(FactoryTest, DeferredThenMaterializeIsBitwiseTheDirectBuild) {
  std::shared_ptr<UnitModel> deferred = Build(GetParam(), 5, true);
  ASSERT_THAT(Materialize(*deferred, BuildOptions{5, false}), IsOk());
  EXPECT_TRUE(SameParameters(*deferred, *Build(GetParam(), 5, false)));
}

TEST_P(FactoryTest, MaterializeOrderDoesNotChangeValues) {
  // One parameter at a time, last first.
  std::shared_ptr<UnitModel> model = Build(GetParam(), 9, true);
  std::vector<std::string> names = model->named_parameters().keys();
  std::reverse(names.begin(), names.end());
  for (const std::string& name : names) {
    ASSERT_TRUE(
        Materialize(*model, BuildOptions{9, false}, [&](const std::string& n) {
          return n == name;
        }).ok());
  }
  EXPECT_TRUE(SameParameters(*model, *Build(GetParam(), 9, false)));
}

TEST_P(FactoryTest, MaterializeOneUnitLeavesOthersOnMeta) {
  std::shared_ptr<UnitModel> model = Build(GetParam(), 0, true);
  const UnitInfo& unit = model->units()[1];
  ASSERT_TRUE(Materialize(*model, BuildOptions(), [&](const std::string& name) {
                return std::find(unit.parameters.begin(), unit.parameters.end(),
                                 name) != unit.parameters.end();
              }).ok());
  for (const auto& item : model->named_parameters()) {
    const bool in_unit =
        std::find(unit.parameters.begin(), unit.parameters.end(), item.key()) !=
        unit.parameters.end();
    EXPECT_EQ(item.value().is_meta(), !in_unit) << item.key();
  }
}

TEST_P(FactoryTest, MaterializedModelRunsForward) {
  std::shared_ptr<UnitModel> model = Build(GetParam(), 0, true);
  ASSERT_THAT(Materialize(*model, BuildOptions()), IsOk());
  EXPECT_EQ(model->Forward(at::zeros({1, 3}, at::kLong)).sizes(),
            at::IntArrayRef({1, 3, 256}));
}

TEST_P(FactoryTest, SeedChangesWeights) {
  EXPECT_FALSE(SameParameters(*Build(GetParam(), 1, false),
                              *Build(GetParam(), 2, false)));
}

TEST_P(FactoryTest, ParameterCountMatchesConfigCount) {
  int64_t count = 0;
  for (const at::Tensor& p : Build(GetParam(), 0, true)->parameters()) {
    count += p.numel();
  }
  EXPECT_EQ(count, NumParameters(*ConfigByName(GetParam())));
}

INSTANTIATE_TEST_SUITE_P(TinyModels, FactoryTest,
                         ::testing::Values("gpt-tiny", "llama-tiny"));

TEST(BuildModelTest, DeferredLlama7bAllocatesNothingAndCountsMatch) {
  // 6.7B parameters on the meta device: instant, no memory.
  std::shared_ptr<UnitModel> model = Build("llama-7b", 0, true);
  int64_t count = 0;
  for (const at::Tensor& p : model->parameters()) count += p.numel();
  EXPECT_EQ(count, 6738415616);
  EXPECT_EQ(model->units().size(), 34);
}

TEST(BuildModelTest, InvalidConfigIsAnError) {
  ModelConfig config = *ConfigByName("gpt-tiny");
  config.dim = 63;
  absl::StatusOr<std::shared_ptr<UnitModel>> model =
      BuildModel(config, BuildOptions());
  EXPECT_EQ(model.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(model.status().message(), HasSubstr("dim (63)"));
}

}  // namespace
}  // namespace strata::models
