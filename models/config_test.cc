#include "models/config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "base/testing/status_matchers.h"

namespace strata::models {
namespace {

using ::strata::testing::IsOk;

using ::testing::HasSubstr;

ModelConfig Named(const std::string& name) {
  absl::StatusOr<ModelConfig> config = ConfigByName(name);
  EXPECT_THAT(config, IsOk());
  return config.ok() ? *config : ModelConfig();
}

TEST(ConfigTest, EveryNamedConfigIsValid) {
  EXPECT_EQ(ConfigNames().size(), 10);
  for (const std::string& name : ConfigNames()) {
    absl::StatusOr<ModelConfig> config = ConfigByName(name);
    ASSERT_THAT(config, IsOk());
    EXPECT_THAT(ValidateConfig(*config), IsOk())
        << name << ": " << ValidateConfig(*config);
  }
}

TEST(ConfigTest, UnknownNameListsKnownNames) {
  absl::StatusOr<ModelConfig> config = ConfigByName("gpt-5");
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(config.status().message(), HasSubstr("'gpt-5'"));
  EXPECT_THAT(config.status().message(), HasSubstr("gpt-tiny"));
  EXPECT_THAT(config.status().message(), HasSubstr("llama-7b"));
}

TEST(ConfigTest, Gpt2CountMatchesPublished) {
  EXPECT_EQ(NumParameters(Named("gpt2")), 124439808);
}

TEST(ConfigTest, LargerGpt2CountsMatchPublished) {
  // Hugging Face's gpt2-medium / -large / -xl parameter counts.
  EXPECT_EQ(NumParameters(Named("gpt2-medium")), 354823168);
  EXPECT_EQ(NumParameters(Named("gpt2-large")), 774030080);
  EXPECT_EQ(NumParameters(Named("gpt2-xl")), 1557611200);
}

TEST(ConfigTest, Llama7bCountMatchesPublished) {
  EXPECT_EQ(NumParameters(Named("llama-7b")), 6738415616);
}

TEST(ConfigTest, Llama1bCountMatchesPublished) {
  // Llama 3.2 1B with its tied head: 1,235,814,400.
  EXPECT_EQ(NumParameters(Named("llama-1b")), 1235814400);
}

TEST(ConfigTest, GptTinyCountByHand) {
  // wte 256*64 + wpe 128*64 + 2 layers * (12*64^2 + 13*64) + ln_f 2*64.
  EXPECT_EQ(NumParameters(Named("gpt-tiny")),
            256 * 64 + 128 * 64 + 2 * (12 * 64 * 64 + 13 * 64) + 2 * 64);
}

TEST(ConfigTest, MatmulParametersOfGpt2) {
  // 12 layers * 12 * 768^2 + the tied head 50257 * 768.
  EXPECT_EQ(NumMatmulParameters(Named("gpt2")),
            12 * 12 * 768 * 768 + 50257 * 768);
}

TEST(ConfigTest, MatmulParametersOfLlamaTinyWithGroupedKv) {
  // Per layer: wq, wo 64x64; wk, wv 64x32 (2 kv heads of 16); 3 * 64x172.
  EXPECT_EQ(NumMatmulParameters(Named("llama-tiny")),
            2 * (2 * 64 * 64 + 2 * 64 * 32 + 3 * 64 * 172) + 256 * 64);
}

TEST(ConfigTest, TrainingFlopsFormula) {
  const ModelConfig config = Named("gpt2");
  EXPECT_DOUBLE_EQ(TrainingFlopsPerToken(config, 1024),
                   6.0 * NumMatmulParameters(config) + 12.0 * 12 * 768 * 1024);
}

TEST(ConfigTest, ValidateNamesDimHeadsField) {
  ModelConfig config = Named("gpt-tiny");
  config.num_heads = 5;
  config.num_kv_heads = 5;
  absl::Status status = ValidateConfig(config);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("dim (64)"));
  EXPECT_THAT(status.message(), HasSubstr("num_heads (5)"));
}

TEST(ConfigTest, ValidateNamesNegativeLossChunkTokens) {
  ModelConfig config = Named("gpt-tiny");
  config.loss_chunk_tokens = -1;
  absl::Status status = ValidateConfig(config);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("loss_chunk_tokens must be >= 0"));
}

TEST(ConfigTest, ValidateNamesKvHeadsField) {
  ModelConfig config = Named("llama-tiny");
  config.num_kv_heads = 3;
  EXPECT_THAT(ValidateConfig(config).message(), HasSubstr("num_kv_heads (3)"));
}

TEST(ConfigTest, ValidateRejectsNonPositiveSize) {
  ModelConfig config = Named("gpt-tiny");
  config.vocab_size = 0;
  EXPECT_THAT(ValidateConfig(config).message(),
              HasSubstr("vocab_size must be positive, got 0"));
}

TEST(ConfigTest, ValidateRejectsUnknownFamily) {
  ModelConfig config = Named("gpt-tiny");
  config.family = "bert";
  EXPECT_THAT(ValidateConfig(config).message(), HasSubstr("\"bert\""));
}

TEST(ConfigTest, ValidateRejectsUntiedGpt) {
  ModelConfig config = Named("gpt-tiny");
  config.tie_embeddings = false;
  EXPECT_THAT(ValidateConfig(config).message(),
              HasSubstr("tie_embeddings must be true"));
}

TEST(ConfigTest, ValidateRejectsLlamaDropout) {
  ModelConfig config = Named("llama-tiny");
  config.dropout = 0.1;
  EXPECT_THAT(ValidateConfig(config).message(), HasSubstr("dropout"));
}

}  // namespace
}  // namespace strata::models
