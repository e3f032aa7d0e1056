// LoadHfWeights: Hugging Face safetensors (sharded here) loaded into a
// strategy's model at another world size than the one that exported them,
// and refused on every rank, leaving the model as it was, when the
// config.json beside them describes another architecture.
#include <ATen/ATen.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <mutex>
#include <string>
#include <utility>

#include "base/file_io.h"
#include "base/testing/status_matchers.h"
#include "checkpoint/contents.h"
#include "checkpoint/strategy/checkpoint.h"
#include "checkpoint/testing/states.h"
#include "comm/group.h"
#include "comm/testing/multi_rank.h"
#include "models/config.h"
#include "models/hf_layout.h"
#include "strategies/testing/parity.h"

namespace strata::checkpoint {
namespace {

using comm::Group;
using comm::testing::RunOnRanks;
using ::strata::testing::IsOk;
using ::strata::testing::StatusIs;
using testing::AddRuns;
using testing::ExpectGlobalsEqual;
using testing::Globals;
using ::testing::HasSubstr;
using testing::MakeStrategy;
using testing::StateOf;
using testing::TempDir;

// The model section of a strategy's state.
TensorState ModelOf(const strategies::Strategy& strategy) {
  TensorState state;
  state.model = StateOf(strategy).model;
  return state;
}

// gpt-tiny from seed 7 (one process) written as Hugging Face GPT-2 shards
// into `dir`; returns its model state.
Globals ExportSource(const std::string& dir) {
  auto source = MakeStrategy("single", nullptr, 7, 0);
  CHECK(source != nullptr);
  models::NamedTensors tensors;
  for (const ShardedTensor& run : ModelOf(*source).model) {
    tensors.emplace_back(run.name, run.local.view(run.global_shape));
  }
  const models::ModelConfig config = strategies::testing::Config("gpt-tiny");
  absl::StatusOr<models::NamedTensors> hf =
      models::ExportHf(tensors, config, "source");
  CHECK(hf.ok()) << hf.status();
  CHECK(
      models::WriteHfModel(dir, *hf, config, /*max_shard_bytes=*/100000).ok());
  Globals globals;
  std::mutex mu;
  AddRuns(ModelOf(*source), globals, mu);
  return globals;
}

TEST(HfLoadTest, ShardedHfWeightsLoadUnderFsdpAtTwoRanks) {
  const std::string dir = TempDir("hf_load_fsdp");
  const Globals expected = ExportSource(dir);
  Globals loaded;
  std::mutex mu;
  ASSERT_TRUE(RunOnRanks(2, [&](Group& group) {
                auto strategy = MakeStrategy("fsdp", &group, 11, 0);
                ASSERT_NE(strategy, nullptr);
                ASSERT_THAT(
                    LoadHfWeights(dir, strategies::testing::Config("gpt-tiny"),
                                  *strategy, &group),
                    IsOk());
                AddRuns(ModelOf(*strategy), loaded, mu);
              }).ok());
  ExpectGlobalsEqual(loaded, expected, "hf -> fsdp at 2 ranks");
}

TEST(HfLoadTest, ConfigOfAnotherArchitectureIsRefusedOnEveryRank) {
  const std::string dir = TempDir("hf_load_heads");
  ExportSource(dir);
  absl::StatusOr<std::string> text = ReadWholeFile(dir + "/config.json");
  ASSERT_THAT(text, IsOk());
  std::string edited = *text;
  const std::string heads = "\"n_head\": 4";
  ASSERT_NE(edited.find(heads), std::string::npos) << edited;
  edited.replace(edited.find(heads), heads.size(), "\"n_head\": 2");
  ASSERT_THAT(WriteFileAtomic(dir + "/config.json", edited), IsOk());
  ASSERT_TRUE(
      RunOnRanks(2, [&](Group& group) {
        auto strategy = MakeStrategy("ddp", &group, 11, 0);
        ASSERT_NE(strategy, nullptr);
        const auto before = testing::Snapshot(ModelOf(*strategy));
        EXPECT_THAT(LoadHfWeights(dir, strategies::testing::Config("gpt-tiny"),
                                  *strategy, &group),
                    StatusIs(absl::StatusCode::kInvalidArgument,
                             HasSubstr("num_heads is 2 there and 4")));
        testing::ExpectSnapshotsEqual(testing::Snapshot(ModelOf(*strategy)),
                                      before, "after a refused load");
      }).ok());
}

}  // namespace
}  // namespace strata::checkpoint
