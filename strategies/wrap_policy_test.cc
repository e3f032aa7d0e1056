#include "strategies/wrap_policy.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "base/testing/status_matchers.h"
#include "models/config.h"
#include "models/factory.h"

namespace strata::strategies {
namespace {

using ::strata::testing::IsOk;

std::shared_ptr<models::UnitModel> GptTiny() {
  auto config = models::ConfigByName("gpt-tiny");
  EXPECT_THAT(config, IsOk());
  auto model = models::BuildModel(*config, models::BuildOptions());
  EXPECT_THAT(model, IsOk());
  return *model;
}

// gpt-tiny's units in forward order: embed, blocks.0, blocks.1, head.
TEST(WrapPolicyTest, NoCriterionWrapsEveryUnit) {
  auto wrapped = SelectWrappedUnits(*GptTiny(), WrapPolicy());
  ASSERT_THAT(wrapped, IsOk());
  EXPECT_EQ(*wrapped, (std::vector<int>{0, 1, 2, 3}));
}

TEST(WrapPolicyTest, ByUnitType) {
  WrapPolicy policy;
  policy.unit_types = {"GPTBlock"};
  auto wrapped = SelectWrappedUnits(*GptTiny(), policy);
  ASSERT_THAT(wrapped, IsOk());
  EXPECT_EQ(*wrapped, (std::vector<int>{1, 2}));
}

TEST(WrapPolicyTest, ByParameterCount) {
  auto model = GptTiny();
  // A block has 2 LayerNorms (2 x 128), attention (64x192 + 192 + 64x64 +
  // 64) and MLP (64x256 + 256 + 256x64 + 64): 49,984 parameters; the
  // embedding unit 256x64 + 128x64 = 24,576; the head (ln_f) 128.
  EXPECT_EQ(UnitsNumParameters(*model),
            (std::vector<int64_t>{24576, 49984, 49984, 128}));
  WrapPolicy policy;
  policy.min_num_params = 30000;
  auto wrapped = SelectWrappedUnits(*model, policy);
  ASSERT_THAT(wrapped, IsOk());
  EXPECT_EQ(*wrapped, (std::vector<int>{1, 2}));
}

TEST(WrapPolicyTest, ByPredicate) {
  WrapPolicy policy;
  policy.predicate = [](const models::UnitInfo& unit) {
    return unit.name == "blocks.1";
  };
  auto wrapped = SelectWrappedUnits(*GptTiny(), policy);
  ASSERT_THAT(wrapped, IsOk());
  EXPECT_EQ(*wrapped, (std::vector<int>{2}));
}

TEST(WrapPolicyTest, UnknownTypeNamesTheFlagAndTheModelsTypes) {
  WrapPolicy policy;
  policy.unit_types = {"TransformerBlock"};
  auto wrapped = SelectWrappedUnits(*GptTiny(), policy);
  ASSERT_FALSE(wrapped.ok());
  EXPECT_NE(wrapped.status().message().find("--fsdp_wrap_unit_types"),
            std::string::npos);
  EXPECT_NE(wrapped.status().message().find("'TransformerBlock'"),
            std::string::npos);
  EXPECT_NE(wrapped.status().message().find("GPTBlock"), std::string::npos);
}

TEST(WrapPolicyTest, PolicyMatchingNothingWrapsNothing) {
  WrapPolicy policy;
  policy.min_num_params = 1'000'000;
  auto wrapped = SelectWrappedUnits(*GptTiny(), policy);
  ASSERT_TRUE(wrapped.ok()) << wrapped.status();
  EXPECT_TRUE(wrapped->empty());
}

TEST(WrapPolicyTest, NegativeMinParamsFails) {
  WrapPolicy policy;
  policy.min_num_params = -1;
  EXPECT_FALSE(SelectWrappedUnits(*GptTiny(), policy).ok());
}

}  // namespace
}  // namespace strata::strategies
