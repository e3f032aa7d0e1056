#include "checkpoint/model_weights.h"

#include <ATen/ATen.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "base/testing/status_matchers.h"
#include "base/testing/temp_dir.h"
#include "checkpoint/contents.h"
#include "checkpoint/full.h"
#include "checkpoint/local.h"
#include "checkpoint/sharded.h"
#include "models/config.h"
#include "models/factory.h"
#include "models/hf_layout.h"
#include "models/state_dict.h"

namespace strata::checkpoint {
namespace {

using ::strata::testing::IsOk;
using ::strata::testing::StatusIs;
using ::testing::HasSubstr;
using Parameters = std::vector<std::pair<std::string, at::Tensor>>;

models::ModelConfig Config(const std::string& name) {
  absl::StatusOr<models::ModelConfig> config = models::ConfigByName(name);
  CHECK(config.ok()) << config.status();
  return *config;
}

// A model built from `seed` (the model stays alive with its parameters).
struct Model {
  std::shared_ptr<models::UnitModel> module;
  Parameters parameters;
};

Model Build(const models::ModelConfig& config, uint64_t seed) {
  models::BuildOptions options;
  options.seed = seed;
  absl::StatusOr<std::shared_ptr<models::UnitModel>> built =
      models::BuildModel(config, options);
  CHECK(built.ok()) << built.status();
  Model model{*built, models::NamedStateTensors(**built)};
  return model;
}

Contents SomeContents() {
  Contents contents;
  contents.meta = NewMeta();
  contents.meta.step = 3;
  contents.meta.model_config = "gpt-tiny";
  return contents;
}

Parameters Copy(const Parameters& parameters) {
  Parameters copy;
  for (const auto& [name, tensor] : parameters) {
    copy.emplace_back(name, tensor.detach().clone());
  }
  return copy;
}

void ExpectBitwiseEqual(const Parameters& actual, const Parameters& expected) {
  ASSERT_EQ(actual.size(), expected.size());
  for (size_t i = 0; i < actual.size(); ++i) {
    EXPECT_EQ(actual[i].first, expected[i].first);
    EXPECT_TRUE(at::equal(actual[i].second, expected[i].second))
        << actual[i].first;
  }
}

TEST(ModelWeightsTest, FullFileLoadsBitwise) {
  const Model saved = Build(Config("gpt-tiny"), 1);
  const std::string path = strata::testing::FreshTempDir("mw_full") + "/m.pth";
  ASSERT_THAT(SaveFull(path, WholeTensorState(saved.parameters), SomeContents(),
                       /*group=*/nullptr),
              IsOk());
  const Model live = Build(Config("gpt-tiny"), 2);
  ASSERT_THAT(LoadModelWeights(path, Config("gpt-tiny"), live.parameters),
              IsOk());
  ExpectBitwiseEqual(live.parameters, saved.parameters);
}

TEST(ModelWeightsTest, ShardedDirectoryLoadsBitwise) {
  const Model saved = Build(Config("llama-tiny"), 1);
  const std::string dir = strata::testing::FreshTempDir("mw_sharded") + "/c";
  ASSERT_THAT(
      SaveSharded(dir, WholeTensorState(saved.parameters), SomeContents(),
                  /*group=*/nullptr),
      IsOk());
  const Model live = Build(Config("llama-tiny"), 2);
  ASSERT_THAT(LoadModelWeights(dir, Config("llama-tiny"), live.parameters),
              IsOk());
  ExpectBitwiseEqual(live.parameters, saved.parameters);
}

TEST(ModelWeightsTest, OneProcessLocalDirectoryLoadsBitwise) {
  const Model saved = Build(Config("gpt-tiny"), 1);
  const std::string dir = strata::testing::FreshTempDir("mw_local") + "/c";
  ASSERT_THAT(SaveLocal(dir, WholeTensorState(saved.parameters), SomeContents(),
                        "single", /*group=*/nullptr),
              IsOk());
  const Model live = Build(Config("gpt-tiny"), 2);
  ASSERT_THAT(LoadModelWeights(dir, Config("gpt-tiny"), live.parameters),
              IsOk());
  ExpectBitwiseEqual(live.parameters, saved.parameters);
}

TEST(ModelWeightsTest, HuggingFaceWeightsLoadConverted) {
  const models::ModelConfig config = Config("llama-tiny");
  const Model saved = Build(config, 1);
  absl::StatusOr<models::NamedTensors> hf =
      models::ExportHf(saved.parameters, config, "source");
  ASSERT_THAT(hf, IsOk());
  const std::string dir = strata::testing::FreshTempDir("mw_hf");
  ASSERT_THAT(models::WriteHfModel(dir, *hf, config, /*max_shard_bytes=*/0),
              IsOk());
  const Model live = Build(config, 2);
  ASSERT_THAT(LoadModelWeights(dir, config, live.parameters), IsOk());
  ExpectBitwiseEqual(live.parameters, saved.parameters);
}

TEST(ModelWeightsTest, AnotherModelIsRefusedNamingThePathAndChangesNothing) {
  const Model saved = Build(Config("gpt-tiny"), 1);
  const std::string path = strata::testing::FreshTempDir("mw_other") + "/m.pth";
  ASSERT_THAT(SaveFull(path, WholeTensorState(saved.parameters), SomeContents(),
                       /*group=*/nullptr),
              IsOk());
  const Model live = Build(Config("llama-tiny"), 2);
  const Parameters before = Copy(live.parameters);
  EXPECT_THAT(LoadModelWeights(path, Config("llama-tiny"), live.parameters),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(path)));
  ExpectBitwiseEqual(live.parameters, before);
}

TEST(ModelWeightsTest, MissingPathIsNotFoundNamingIt) {
  const Model live = Build(Config("gpt-tiny"), 2);
  EXPECT_THAT(
      LoadModelWeights("/nonexistent/ckpt", Config("gpt-tiny"),
                       live.parameters),
      StatusIs(absl::StatusCode::kNotFound, HasSubstr("/nonexistent/ckpt")));
}

}  // namespace
}  // namespace strata::checkpoint
