// LoadModel and the LoadModelWeights hook (strata_generate --load_weights)
// against DCP directories PyTorch 2.6's dcp.save wrote (testdata/
// dcp_save.py, 2 Gloo ranks, every parameter sharded on dim 0) from a
// Strata llama-tiny's parameters (Meta's names, as torchtitan's): in the
// {"model": ..., "optim": ...} layout (with AdamW-like moments under
// "optim.state.<name>", not read) and flat, loaded whole and as
// FSDP-like element ranges, byte-identical; and every refusal, naming the
// key, with the model unchanged. Skipped (counted so) under a PyTorch
// older than 2.4.
#include "checkpoint/dcp/load.h"

#include <ATen/ATen.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "base/testing/status_matchers.h"
#include "base/testing/temp_dir.h"
#include "checkpoint/contents.h"
#include "checkpoint/model_weights.h"
#include "comm/group.h"
#include "comm/testing/multi_rank.h"
#include "models/config.h"
#include "models/factory.h"
#include "models/state_dict.h"
#include "serialization/testing/python_runner.h"
#include "serialization/torch_file.h"

namespace strata::checkpoint::dcp {
namespace {

using serialization::testing::RunPython;
using ::strata::testing::IsOk;
using ::strata::testing::StatusIs;
using ::testing::AllOf;
using ::testing::HasSubstr;
using Parameters = std::vector<std::pair<std::string, at::Tensor>>;

std::string ScriptPath() {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  return std::string(srcdir != nullptr ? srcdir : ".") +
         "/strata/checkpoint/dcp/testdata/dcp_save.py";
}

models::ModelConfig Config(const std::string& name) {
  absl::StatusOr<models::ModelConfig> config = models::ConfigByName(name);
  CHECK(config.ok()) << config.status();
  return *config;
}

struct Model {
  std::shared_ptr<models::UnitModel> module;
  Parameters parameters;
};

Model Build(const std::string& name, uint64_t seed) {
  models::BuildOptions options;
  options.seed = seed;
  absl::StatusOr<std::shared_ptr<models::UnitModel>> built =
      models::BuildModel(Config(name), options);
  CHECK(built.ok()) << built.status();
  return Model{*built, models::NamedStateTensors(**built)};
}

Parameters Copy(const Parameters& parameters) {
  Parameters copy;
  for (const auto& [name, tensor] : parameters) {
    copy.emplace_back(name, tensor.detach().clone());
  }
  return copy;
}

bool SameBytes(const at::Tensor& a, const at::Tensor& b) {
  return a.scalar_type() == b.scalar_type() && a.sizes() == b.sizes() &&
         std::memcmp(a.contiguous().data_ptr(), b.contiguous().data_ptr(),
                     a.nbytes()) == 0;
}

void ExpectSameBytes(const Parameters& actual, const Parameters& expected) {
  ASSERT_EQ(actual.size(), expected.size());
  for (size_t i = 0; i < actual.size(); ++i) {
    EXPECT_EQ(actual[i].first, expected[i].first);
    EXPECT_TRUE(SameBytes(actual[i].second, expected[i].second))
        << actual[i].first;
  }
}

class LoadTest : public ::testing::Test {
 protected:
  // llama-tiny (seed 1) saved by PyTorch's dcp.save in both layouts.
  static void SetUpTestSuite() {
    dir_ = new std::string(strata::testing::FreshTempDir("dcp_load"));
    const std::string why = serialization::testing::WhyTorchBelow(
        2, 4, "DTensor, dcp.save", *dir_ + "/version.log");
    if (!why.empty()) {
      skip_ = new std::string(why);
      return;
    }
    const Model saved = Build("llama-tiny", 1);
    c10::impl::GenericDict dict(c10::StringType::get(), c10::TensorType::get());
    for (const auto& [name, tensor] : saved.parameters) {
      dict.insert(name, tensor.detach());
    }
    ASSERT_THAT(serialization::WriteTorchFile(*dir_ + "/params.pt", dict),
                IsOk());
    ASSERT_THAT(
        RunPython({ScriptPath(), "weights", *dir_ + "/params.pt", *dir_},
                  *dir_ + "/log_weights"),
        IsOk());
  }

  void SetUp() override {
    if (skip_ != nullptr) GTEST_SKIP() << *skip_;
    saved_ = Build("llama-tiny", 1);
  }

  static std::string* dir_;
  static std::string* skip_;
  Model saved_;
};

std::string* LoadTest::dir_ = nullptr;
std::string* LoadTest::skip_ = nullptr;

TEST_F(LoadTest, ModelWeightsLoadBothLayoutsByteIdentical) {
  for (const std::string layout : {"nested", "flat"}) {
    const Model fresh = Build("llama-tiny", 2);
    ASSERT_FALSE(
        SameBytes(fresh.parameters[0].second, saved_.parameters[0].second));
    ASSERT_THAT(LoadModelWeights(*dir_ + "/" + layout, Config("llama-tiny"),
                                 fresh.parameters),
                IsOk())
        << layout;
    ExpectSameBytes(fresh.parameters, saved_.parameters);
  }
}

TEST_F(LoadTest, ElementRangesLoadAsAShardedRankHoldsThem) {
  // Each parameter as three runs of uneven element ranges (FSDP's flat
  // shards cut across the chunks PyTorch's 2 ranks saved).
  const Model fresh = Build("llama-tiny", 3);
  TensorState live;
  for (const auto& [name, tensor] : fresh.parameters) {
    const int64_t n = tensor.numel();
    const int64_t cuts[] = {0, n / 3, n / 3 + n / 5 + 1, n};
    for (int i = 0; i < 3; ++i) {
      if (cuts[i + 1] <= cuts[i]) continue;
      live.model.push_back(
          ShardedTensor{name, tensor.sizes().vec(), cuts[i],
                        tensor.detach().view({-1}).narrow(
                            0, cuts[i], cuts[i + 1] - cuts[i])});
    }
  }
  ASSERT_THAT(LoadModel(*dir_ + "/nested", live, /*group=*/nullptr), IsOk());
  ExpectSameBytes(fresh.parameters, saved_.parameters);
}

// The rank's half of each parameter (rank 0 the first ceil(n / 2)
// elements), aliasing `parameters`.
TensorState HalfOf(const Parameters& parameters, int rank) {
  TensorState state;
  for (const auto& [name, tensor] : parameters) {
    const int64_t n = tensor.numel(), half = (n + 1) / 2;
    const int64_t begin = rank == 0 ? 0 : half;
    const int64_t count = rank == 0 ? half : n - half;
    if (count == 0) continue;
    state.model.push_back(
        ShardedTensor{name, tensor.sizes().vec(), begin,
                      tensor.detach().view({-1}).narrow(0, begin, count)});
  }
  return state;
}

TEST_F(LoadTest, TwoRanksEachLoadTheirHalfAndAgreeOnErrors) {
  const Model fresh[2] = {Build("llama-tiny", 6), Build("llama-tiny", 6)};
  ASSERT_THAT(comm::testing::RunOnRanks(
                  2,
                  [&](comm::Group& group) {
                    const TensorState half =
                        HalfOf(fresh[group.rank()].parameters, group.rank());
                    EXPECT_THAT(LoadModel(*dir_ + "/flat", half, &group),
                                IsOk());
                  }),
              IsOk());
  for (int rank = 0; rank < 2; ++rank) {
    for (size_t i = 0; i < saved_.parameters.size(); ++i) {
      const at::Tensor got = fresh[rank].parameters[i].second.view({-1});
      const at::Tensor want = saved_.parameters[i].second.view({-1});
      const int64_t n = want.numel(), half = (n + 1) / 2;
      const int64_t begin = rank == 0 ? 0 : half;
      EXPECT_TRUE(SameBytes(got.narrow(0, begin, rank == 0 ? half : n - half),
                            want.narrow(0, begin, rank == 0 ? half : n - half)))
          << "rank " << rank << " " << saved_.parameters[i].first;
    }
  }
  // Rank 1 holds a run of another dtype: both ranks fail, neither writes.
  const Model other[2] = {Build("llama-tiny", 8), Build("llama-tiny", 8)};
  const Parameters before = Copy(other[0].parameters);
  ASSERT_THAT(comm::testing::RunOnRanks(
                  2,
                  [&](comm::Group& group) {
                    TensorState half =
                        HalfOf(other[group.rank()].parameters, group.rank());
                    if (group.rank() == 1) {
                      half.model[0].local = half.model[0].local.to(at::kDouble);
                    }
                    EXPECT_THAT(
                        LoadModel(*dir_ + "/flat", half, &group),
                        StatusIs(absl::StatusCode::kInvalidArgument,
                                 AllOf(HasSubstr("rank 1"),
                                       HasSubstr("Double in the model"))));
                  }),
              IsOk());
  ExpectSameBytes(other[0].parameters, before);
  ExpectSameBytes(other[1].parameters, before);
}

TEST_F(LoadTest, RefusesMissingUnexpectedAndMismatchedKeysChangingNothing) {
  const std::string dir = *dir_ + "/nested";
  // Another model: its keys are missing, llama's unexpected.
  const Model gpt = Build("gpt-tiny", 4);
  const Parameters gpt_before = Copy(gpt.parameters);
  EXPECT_THAT(LoadModelWeights(dir, Config("gpt-tiny"), gpt.parameters),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("\"model\" dict of a DCP checkpoint"),
                             HasSubstr("wte.weight"),
                             HasSubstr("tok_embeddings.weight"))));
  ExpectSameBytes(gpt.parameters, gpt_before);

  // One parameter fewer: its key is unexpected.
  Model fresh = Build("llama-tiny", 5);
  const Parameters before = Copy(fresh.parameters);
  Parameters fewer(fresh.parameters.begin() + 1, fresh.parameters.end());
  EXPECT_THAT(LoadModelWeights(dir, Config("llama-tiny"), fewer),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr(fresh.parameters[0].first)));
  // Another dtype.
  Parameters bf16 = fresh.parameters;
  bf16[1].second = bf16[1].second.detach().to(at::kBFloat16);
  EXPECT_THAT(
      LoadModelWeights(dir, Config("llama-tiny"), bf16),
      StatusIs(absl::StatusCode::kInvalidArgument,
               AllOf(HasSubstr("'model." + fresh.parameters[1].first + "'"),
                     HasSubstr("Float in the checkpoint but BFloat16"))));
  // Another shape.
  Parameters reshaped = fresh.parameters;
  reshaped[2].second = at::zeros({3}, at::kFloat);
  EXPECT_THAT(LoadModelWeights(dir, Config("llama-tiny"), reshaped),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr(fresh.parameters[2].first)));
  ExpectSameBytes(fresh.parameters, before);
}

// mmengine's revise_keys: the checkpoint's model keys are renamed, in
// order, before they are matched, as for Strata and PyTorch checkpoints; the
// optimizer's are not read here.
TEST_F(LoadTest, ReviseKeysRenameTheModelKeysBeforeMatching) {
  const Model fresh = Build("llama-tiny", 6);
  Parameters wrapped;  // The names a model held as `backbone` would have.
  for (const auto& [name, tensor] : fresh.parameters) {
    wrapped.emplace_back("backbone." + name, tensor);
  }
  const Parameters before = Copy(fresh.parameters);
  ReadOptions options;
  options.load_optimizer = false;
  EXPECT_THAT(LoadDcp(*dir_ + "/nested", WholeTensorState(wrapped), options,
                      "adamw", /*group=*/nullptr)
                  .status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("backbone.tok_embeddings.weight")));
  ExpectSameBytes(fresh.parameters, before);
  options.revise_keys = {{"^", "backbone."}};
  ASSERT_THAT(LoadDcp(*dir_ + "/nested", WholeTensorState(wrapped), options,
                      "adamw", /*group=*/nullptr)
                  .status(),
              IsOk());
  ExpectSameBytes(fresh.parameters, saved_.parameters);
}

}  // namespace
}  // namespace strata::checkpoint::dcp
