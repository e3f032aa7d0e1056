#include "models/hf_layout.h"

#include <ATen/ATen.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "base/file_io.h"
#include "base/testing/status_matchers.h"
#include "base/testing/temp_dir.h"
#include "models/config.h"
#include "models/factory.h"
#include "models/hf_config.h"
#include "models/state_dict.h"
#include "serialization/safetensors.h"

namespace strata::models {
namespace {

using ::strata::testing::IsOk;
using ::strata::testing::StatusIs;
using ::testing::HasSubstr;

models::ModelConfig Config(const std::string& name) {
  absl::StatusOr<models::ModelConfig> config = models::ConfigByName(name);
  CHECK(config.ok()) << config.status();
  return *config;
}

// A randomly initialised model's state (every value distinct).
NamedTensors StrataState(const models::ModelConfig& config) {
  at::manual_seed(5);
  models::BuildOptions options;
  options.seed = 3;
  absl::StatusOr<std::shared_ptr<models::UnitModel>> model =
      models::BuildModel(config, options);
  CHECK(model.ok()) << model.status();
  NamedTensors state;
  for (auto& [name, tensor] : models::NamedStateTensors(**model)) {
    // Norm gains start at 1 and biases at 0: make them distinct too.
    state.emplace_back(name,
                       tensor.detach().clone() + at::randn_like(tensor) * 0.1);
  }
  return state;
}

const at::Tensor& Find(const NamedTensors& tensors, const std::string& name) {
  for (const auto& [n, t] : tensors) {
    if (n == name) return t;
  }
  static const at::Tensor* kNone = new at::Tensor();
  ADD_FAILURE() << "no tensor " << name;
  return *kNone;
}

void ExpectBitwiseEqual(const NamedTensors& a, const NamedTensors& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].first, b[i].first);
    EXPECT_EQ(a[i].second.scalar_type(), b[i].second.scalar_type());
    EXPECT_TRUE(at::equal(a[i].second, b[i].second)) << a[i].first;
  }
}

models::ModelConfig TiedLlama() {
  models::ModelConfig config = Config("llama-tiny");
  config.tie_embeddings = true;
  return config;
}

TEST(HfLayoutTest, Gpt2ExportThenImportIsBitwise) {
  const models::ModelConfig config = Config("gpt-tiny");
  const NamedTensors state = StrataState(config);
  ASSERT_OK_AND_ASSIGN(NamedTensors hf, ExportHf(state, config, "t"));
  ASSERT_OK_AND_ASSIGN(NamedTensors back, ImportHf(hf, config, "t"));
  ExpectBitwiseEqual(state, back);
}

TEST(HfLayoutTest, LlamaWithGroupedQueryAttentionExportThenImportIsBitwise) {
  const models::ModelConfig config = Config("llama-tiny");
  ASSERT_LT(config.num_kv_heads, config.num_heads);
  const NamedTensors state = StrataState(config);
  ASSERT_OK_AND_ASSIGN(NamedTensors hf, ExportHf(state, config, "t"));
  ASSERT_OK_AND_ASSIGN(NamedTensors back, ImportHf(hf, config, "t"));
  ExpectBitwiseEqual(state, back);
}

TEST(HfLayoutTest, TiedLlamaExportsNoHead) {
  const models::ModelConfig config = TiedLlama();
  ASSERT_OK_AND_ASSIGN(NamedTensors hf,
                       ExportHf(StrataState(config), config, "t"));
  for (const auto& [name, tensor] : hf) EXPECT_NE(name, "lm_head.weight");
  ASSERT_OK_AND_ASSIGN(NamedTensors back, ImportHf(hf, config, "t"));
  ExpectBitwiseEqual(StrataState(config), back);
}

TEST(HfLayoutTest, Gpt2NamesAndConv1DLayout) {
  const models::ModelConfig config = Config("gpt-tiny");
  const NamedTensors state = StrataState(config);
  ASSERT_OK_AND_ASSIGN(NamedTensors hf, ExportHf(state, config, "t"));
  const at::Tensor c_attn = Find(hf, "transformer.h.1.attn.c_attn.weight");
  EXPECT_EQ(c_attn.sizes(), at::IntArrayRef({config.dim, 3 * config.dim}));
  EXPECT_TRUE(at::equal(c_attn, Find(state, "blocks.1.attn.qkv.weight").t()));
  EXPECT_TRUE(at::equal(Find(hf, "transformer.h.0.mlp.c_fc.weight"),
                        Find(state, "blocks.0.mlp.fc.weight").t()));
  EXPECT_TRUE(
      at::equal(Find(hf, "transformer.wte.weight"), Find(state, "wte.weight")));
  EXPECT_TRUE(
      at::equal(Find(hf, "transformer.ln_f.bias"), Find(state, "ln_f.bias")));
  for (const auto& [name, tensor] : hf) EXPECT_NE(name, "lm_head.weight");
}

// Hugging Face row s * d/2 + j of each head is Strata's row 2j + s.
TEST(HfLayoutTest, LlamaQueryAndKeyRowsMoveFromPairsToHalves) {
  const models::ModelConfig config = Config("llama-tiny");
  const int64_t d = config.dim / config.num_heads;
  const NamedTensors state = StrataState(config);
  ASSERT_OK_AND_ASSIGN(NamedTensors hf, ExportHf(state, config, "t"));
  const at::Tensor wq = Find(state, "layers.0.attention.wq.weight");
  const at::Tensor wk = Find(state, "layers.1.attention.wk.weight");
  const at::Tensor q = Find(hf, "model.layers.0.self_attn.q_proj.weight");
  const at::Tensor k = Find(hf, "model.layers.1.self_attn.k_proj.weight");
  for (int64_t h = 0; h < config.num_heads; ++h) {
    for (int64_t j = 0; j < d / 2; ++j) {
      for (int64_t s = 0; s < 2; ++s) {
        EXPECT_TRUE(at::equal(q[h * d + s * d / 2 + j], wq[h * d + 2 * j + s]));
        if (h < config.num_kv_heads) {
          EXPECT_TRUE(
              at::equal(k[h * d + s * d / 2 + j], wk[h * d + 2 * j + s]));
        }
      }
    }
  }
  EXPECT_TRUE(at::equal(Find(hf, "model.layers.0.self_attn.v_proj.weight"),
                        Find(state, "layers.0.attention.wv.weight")));
  EXPECT_TRUE(at::equal(Find(hf, "model.layers.0.mlp.gate_proj.weight"),
                        Find(state, "layers.0.feed_forward.w1.weight")));
  EXPECT_TRUE(at::equal(Find(hf, "model.layers.0.mlp.down_proj.weight"),
                        Find(state, "layers.0.feed_forward.w2.weight")));
  EXPECT_TRUE(at::equal(Find(hf, "model.layers.0.mlp.up_proj.weight"),
                        Find(state, "layers.0.feed_forward.w3.weight")));
  EXPECT_TRUE(
      at::equal(Find(hf, "lm_head.weight"), Find(state, "output.weight")));
}

// Files saved from GPT2Model (the published "gpt2") have no "transformer."
// prefix and may carry causal-mask buffers.
TEST(HfLayoutTest, Gpt2ImportAcceptsBareNamesAndSkipsMaskBuffers) {
  const models::ModelConfig config = Config("gpt-tiny");
  const NamedTensors state = StrataState(config);
  ASSERT_OK_AND_ASSIGN(NamedTensors hf, ExportHf(state, config, "t"));
  NamedTensors bare;
  for (auto& [name, tensor] : hf) {
    bare.emplace_back(name.substr(std::string("transformer.").size()), tensor);
  }
  bare.emplace_back("h.0.attn.bias", at::ones({1, 1, 4, 4}));
  bare.emplace_back("lm_head.weight", Find(hf, "transformer.wte.weight"));
  ASSERT_OK_AND_ASSIGN(NamedTensors back, ImportHf(bare, config, "t"));
  ExpectBitwiseEqual(state, back);
}

TEST(HfLayoutTest, ImportRefusesATiedHeadThatDiffersFromTheEmbedding) {
  const models::ModelConfig config = Config("gpt-tiny");
  ASSERT_OK_AND_ASSIGN(NamedTensors hf,
                       ExportHf(StrataState(config), config, "t"));
  hf.emplace_back("lm_head.weight", Find(hf, "transformer.wte.weight") + 1.0f);
  EXPECT_THAT(ImportHf(hf, config, "m.safetensors"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("lm_head.weight differs from "
                                 "transformer.wte.weight")));
}

TEST(HfLayoutTest, ImportNamesMissingUnexpectedAndMisshapedTensors) {
  const models::ModelConfig config = Config("llama-tiny");
  ASSERT_OK_AND_ASSIGN(NamedTensors hf,
                       ExportHf(StrataState(config), config, "t"));
  NamedTensors edited;
  for (auto& [name, tensor] : hf) {
    if (name == "model.norm.weight") continue;
    if (name == "model.layers.1.self_attn.k_proj.weight") {
      edited.emplace_back(name, at::zeros({3, 3}));
      continue;
    }
    edited.emplace_back(name, tensor);
  }
  edited.emplace_back("model.layers.9.mlp.up_proj.weight", at::zeros({1}));
  const absl::Status status =
      ImportHf(edited, config, "m.safetensors").status();
  EXPECT_THAT(status, StatusIs(absl::StatusCode::kInvalidArgument,
                               HasSubstr("m.safetensors is not a Hugging Face "
                                         "Llama checkpoint of this config")));
  EXPECT_THAT(status.message(),
              HasSubstr("1 missing tensor(s): 'model.norm.weight'"));
  EXPECT_THAT(status.message(),
              HasSubstr("the model does not have: "
                        "'model.layers.9.mlp.up_proj.weight'"));
  EXPECT_THAT(status.message(),
              HasSubstr("'model.layers.1.self_attn.k_proj.weight' is [3, 3], "
                        "expected [32, 64]"));
}

TEST(HfLayoutTest, ExportNamesAMissingTensor) {
  const models::ModelConfig config = Config("gpt-tiny");
  NamedTensors state = StrataState(config);
  state.erase(state.begin());
  EXPECT_THAT(ExportHf(state, config, "w.pt"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("1 missing tensor(s): 'wte.weight'")));
}

TEST(HfLayoutTest, ShardedWriteThenReadGivesTheSameTensors) {
  const models::ModelConfig config = Config("llama-tiny");
  ASSERT_OK_AND_ASSIGN(NamedTensors hf,
                       ExportHf(StrataState(config), config, "t"));
  const std::string dir = strata::testing::FreshTempDir("hf_sharded");
  ASSERT_THAT(WriteHfModel(dir, hf, config, /*max_shard_bytes=*/40000), IsOk());
  EXPECT_TRUE(std::filesystem::exists(dir + "/model.safetensors.index.json"));
  int shards = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    shards += entry.path().extension() == ".safetensors";
  }
  EXPECT_GT(shards, 2);
  EXPECT_FALSE(std::filesystem::exists(dir + "/model.safetensors"));
  ASSERT_OK_AND_ASSIGN(NamedTensors read, ReadHfWeights(dir));
  std::map<std::string, at::Tensor> by_name(read.begin(), read.end());
  ASSERT_EQ(by_name.size(), hf.size());
  for (const auto& [name, tensor] : hf) {
    ASSERT_EQ(by_name.count(name), 1u) << name;
    EXPECT_TRUE(at::equal(by_name[name], tensor)) << name;
  }
}

TEST(HfLayoutTest, SingleFileWriteThenReadWithConfig) {
  const models::ModelConfig config = Config("gpt-tiny");
  ASSERT_OK_AND_ASSIGN(NamedTensors hf,
                       ExportHf(StrataState(config), config, "t"));
  const std::string dir = strata::testing::FreshTempDir("hf_single");
  ASSERT_THAT(WriteHfModel(dir, hf, config, /*max_shard_bytes=*/0), IsOk());
  ASSERT_OK_AND_ASSIGN(NamedTensors read, ReadHfWeights(dir));
  EXPECT_EQ(read.size(), hf.size());
  ASSERT_OK_AND_ASSIGN(auto file, serialization::SafetensorsFile::Open(
                                      dir + "/model.safetensors"));
  EXPECT_EQ(file->metadata().at("format"), "pt");
  ASSERT_OK_AND_ASSIGN(std::string text, ReadWholeFile(HfConfigPath(dir)));
  ASSERT_OK_AND_ASSIGN(models::ModelConfig back,
                       ModelConfigFromHfJson(text, "config.json", "gpt"));
  EXPECT_EQ(back.vocab_size, config.vocab_size);
  EXPECT_EQ(back.seq_len, config.seq_len);
  EXPECT_EQ(back.num_layers, config.num_layers);
  EXPECT_EQ(back.num_heads, config.num_heads);
  EXPECT_EQ(back.dim, config.dim);
  EXPECT_EQ(back.ffn_dim, config.ffn_dim);
  EXPECT_EQ(back.norm_eps, config.norm_eps);
  EXPECT_TRUE(back.tie_embeddings);
}

TEST(HfLayoutTest, IndexNamingATensorItsShardLacksIsRefused) {
  const models::ModelConfig config = Config("llama-tiny");
  ASSERT_OK_AND_ASSIGN(NamedTensors hf,
                       ExportHf(StrataState(config), config, "t"));
  const std::string dir = strata::testing::FreshTempDir("hf_bad_index");
  ASSERT_THAT(WriteHfModel(dir, hf, config, 0), IsOk());
  ASSERT_THAT(WriteFileAtomic(dir + "/model.safetensors.index.json",
                              R"({"weight_map": {"x": "model.safetensors"}})"),
              IsOk());
  EXPECT_THAT(ReadHfWeights(dir),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("maps 'x' to model.safetensors, which has no "
                                 "such tensor")));
}

TEST(HfLayoutTest, IndexShardOutsideTheDirectoryIsRefused) {
  const std::string dir = strata::testing::FreshTempDir("hf_escape");
  ASSERT_THAT(WriteFileAtomic(dir + "/model.safetensors.index.json",
                              R"({"weight_map": {"x": "../m.safetensors"}})"),
              IsOk());
  EXPECT_THAT(ReadHfWeights(dir),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("must be a file name in the same directory")));
}

TEST(HfLayoutTest, DirectoryWithoutWeightsIsNotFound) {
  const std::string dir = strata::testing::FreshTempDir("hf_empty");
  EXPECT_THAT(ReadHfWeights(dir),
              StatusIs(absl::StatusCode::kNotFound,
                       HasSubstr("has neither model.safetensors nor")));
}

}  // namespace
}  // namespace strata::models
