#include "models/hf_config.h"

#include <glog/logging.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "base/testing/status_matchers.h"
#include "models/config.h"

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

TEST(HfConfigTest, ReadsPublishedLlamaConfigKeys) {
  ASSERT_OK_AND_ASSIGN(
      models::ModelConfig c,
      ModelConfigFromHfJson(
          R"({"model_type": "llama", "vocab_size": 32000, "hidden_size": 4096,
              "intermediate_size": 11008, "num_hidden_layers": 32,
              "num_attention_heads": 32, "num_key_value_heads": 8,
              "max_position_embeddings": 4096, "rms_norm_eps": 1e-05,
              "rope_theta": 500000.0, "rope_scaling": null,
              "hidden_act": "silu", "tie_word_embeddings": false})",
          "config.json", "llama"));
  EXPECT_EQ(c.family, "llama");
  EXPECT_EQ(c.dim, 4096);
  EXPECT_EQ(c.num_kv_heads, 8);
  EXPECT_EQ(c.ffn_dim, 11008);
  EXPECT_EQ(c.seq_len, 4096);
  EXPECT_EQ(c.rope_theta, 500000.0);
  EXPECT_EQ(c.norm_eps, 1e-5);
  EXPECT_FALSE(c.tie_embeddings);
}

TEST(HfConfigTest, ReadsPublishedGpt2ConfigKeys) {
  ASSERT_OK_AND_ASSIGN(
      models::ModelConfig c,
      ModelConfigFromHfJson(
          R"({"model_type": "gpt2", "vocab_size": 50257, "n_ctx": 1024,
              "n_positions": 1024, "n_embd": 768, "n_layer": 12, "n_head": 12,
              "n_inner": null, "layer_norm_epsilon": 1e-05,
              "activation_function": "gelu_new"})",
          "config.json", "gpt"));
  const models::ModelConfig gpt2 = Config("gpt2");
  EXPECT_EQ(c.vocab_size, gpt2.vocab_size);
  EXPECT_EQ(c.seq_len, gpt2.seq_len);
  EXPECT_EQ(c.dim, gpt2.dim);
  EXPECT_EQ(c.num_layers, gpt2.num_layers);
  EXPECT_EQ(c.num_heads, gpt2.num_heads);
  EXPECT_EQ(c.ffn_dim, gpt2.ffn_dim);
}

// A Llama config.json with `rope_scaling` (JSON) and small sizes.
std::string LlamaConfigWithScaling(const std::string& rope_scaling) {
  return R"({"vocab_size": 8, "hidden_size": 8, "intermediate_size": 8,
             "num_hidden_layers": 1, "num_attention_heads": 2,
             "max_position_embeddings": 8, "rope_scaling": )" +
         rope_scaling + "}";
}

TEST(HfConfigTest, RopeScalingOfAnotherTypeIsRefused) {
  EXPECT_THAT(
      ModelConfigFromHfJson(
          LlamaConfigWithScaling(R"({"rope_type": "yarn", "factor": 4.0})"),
          "config.json", "llama"),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("config.json: \"rope_scaling.rope_type\": 'yarn': "
                         "Strata's Llama models only Llama 3.1's scaling")));
}

TEST(HfConfigTest, Llama3RopeScalingWithoutItsContextNamesTheKey) {
  EXPECT_THAT(
      ModelConfigFromHfJson(
          LlamaConfigWithScaling(R"({"rope_type": "llama3", "factor": 8.0})"),
          "config.json", "llama"),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("config.json: missing "
                         "\"rope_scaling.original_max_position_embeddings\"")));
}

TEST(HfConfigTest, Llama3RopeScalingIsReadAndWrittenBack) {
  absl::StatusOr<models::ModelConfig> read = ModelConfigFromHfJson(
      LlamaConfigWithScaling(
          R"({"rope_type": "llama3", "factor": 32.0, "low_freq_factor": 1.0,
              "high_freq_factor": 4.0,
              "original_max_position_embeddings": 8192})"),
      "config.json", "llama");
  ASSERT_THAT(read, IsOk());
  EXPECT_EQ(read->rope_scaling.type, "llama3");
  EXPECT_EQ(read->rope_scaling.factor, 32.0);
  EXPECT_EQ(read->rope_scaling.low_freq_factor, 1.0);
  EXPECT_EQ(read->rope_scaling.high_freq_factor, 4.0);
  EXPECT_EQ(read->rope_scaling.original_max_position_embeddings, 8192);
  absl::StatusOr<models::ModelConfig> again =
      ModelConfigFromHfJson(HfConfigJson(*read), "again.json", "llama");
  ASSERT_THAT(again, IsOk());
  EXPECT_EQ(again->rope_scaling.type, "llama3");
  EXPECT_EQ(again->rope_scaling.factor, 32.0);
  EXPECT_EQ(again->rope_scaling.original_max_position_embeddings, 8192);
}

TEST(HfConfigTest, ConfigMissingAKeyNamesIt) {
  EXPECT_THAT(ModelConfigFromHfJson(R"({"vocab_size": 8, "n_positions": 8})",
                                    "config.json", "gpt"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("config.json: missing \"n_embd\"")));
}

TEST(HfConfigTest, ConfigOfTheOtherFamilyIsRefused) {
  EXPECT_THAT(
      ModelConfigFromHfJson(R"({"model_type": "llama"})", "config.json", "gpt"),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("'llama', expected 'gpt2' for hf-gpt2")));
}

TEST(HfConfigTest, RecordOfAnUnchangedRegisteredConfigIsItsName) {
  models::ModelConfig config = Config("gpt-tiny");
  config.dropout = 0.1;  // Not a shape: the name still describes the weights.
  EXPECT_EQ(ModelConfigRecord("gpt-tiny", config), "gpt-tiny");
}

TEST(HfConfigTest, RecordOfAReshapedConfigIsOneLineOfConfigJson) {
  models::ModelConfig config = Config("gpt-tiny");
  config.vocab_size = 300;
  const std::string record = ModelConfigRecord("gpt-tiny", config);
  EXPECT_EQ(record.find('\n'), std::string::npos);
  absl::StatusOr<models::ModelConfig> read =
      ModelConfigFromRecord(record, "ckpt");
  ASSERT_THAT(read, IsOk());
  EXPECT_EQ(read->family, "gpt");
  EXPECT_EQ(read->vocab_size, 300);
  EXPECT_EQ(HfConfigJson(*read), HfConfigJson(config));
}

TEST(HfConfigTest, RecordOfAPathIsTheConfigItself) {
  const models::ModelConfig config = Config("llama-tiny");
  const std::string record = ModelConfigRecord("/no/such/dir", config);
  absl::StatusOr<models::ModelConfig> read =
      ModelConfigFromRecord(record, "ckpt");
  ASSERT_THAT(read, IsOk());
  EXPECT_EQ(HfConfigJson(*read), HfConfigJson(config));
}

TEST(HfConfigTest, RecordNamingARegisteredConfigReadsIt) {
  absl::StatusOr<models::ModelConfig> read =
      ModelConfigFromRecord("llama-tiny", "ckpt");
  ASSERT_THAT(read, IsOk());
  EXPECT_EQ(HfConfigJson(*read), HfConfigJson(Config("llama-tiny")));
}

TEST(HfConfigTest, BrokenRecordNamesItsSource) {
  EXPECT_THAT(ModelConfigFromRecord(R"({"model_type": "bert"})", "ckpt/meta"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("ckpt/meta (its recorded model config)")));
}

TEST(HfConfigTest, NameOrPathReadsARegisteredName) {
  absl::StatusOr<models::ModelConfig> read =
      ModelConfigByNameOrPath("gpt-tiny");
  ASSERT_THAT(read, IsOk());
  EXPECT_EQ(HfConfigJson(*read), HfConfigJson(Config("gpt-tiny")));
}

TEST(HfConfigTest, NameOrPathOfAMissingConfigJsonNamesTheFile) {
  EXPECT_THAT(
      ModelConfigByNameOrPath("/no/such/config.json"),
      StatusIs(absl::StatusCode::kNotFound, HasSubstr("/no/such/config.json")));
}

}  // namespace
}  // namespace strata::models
