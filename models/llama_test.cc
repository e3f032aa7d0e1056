#include "models/llama.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <torch/optim/adamw.h>

#include <cmath>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "base/testing/status_matchers.h"
#include "models/config.h"
#include "models/init.h"
#include "models/unit.h"

namespace strata::models {
namespace {

using ::strata::testing::IsOk;

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Pair;

ModelConfig TinyConfig() {
  absl::StatusOr<ModelConfig> config = ConfigByName("llama-tiny");
  EXPECT_THAT(config, IsOk());
  return *config;
}

std::shared_ptr<Llama> Build(const ModelConfig& config, uint64_t seed = 0,
                             bool deferred = false) {
  BuildOptions options;
  options.seed = seed;
  options.deferred = deferred;
  absl::StatusOr<std::shared_ptr<Llama>> model = Llama::Create(config, options);
  EXPECT_THAT(model, IsOk());
  return *model;
}

at::Tensor RandomTokens(int64_t batch, int64_t seq, int64_t vocab,
                        uint64_t seed) {
  at::Generator generator = at::detail::createCPUGenerator(seed);
  return at::randint(vocab, {batch, seq}, generator, at::kLong);
}

TEST(LlamaTest, ParameterNamesAndShapes) {
  std::map<std::string, std::vector<int64_t>> shapes;
  for (const auto& item : Build(TinyConfig())->named_parameters()) {
    shapes[item.key()] = item.value().sizes().vec();
  }
  // 4 heads of 16; 2 kv heads -> wk, wv [32, 64].
  std::map<std::string, std::vector<int64_t>> expected = {
      {"tok_embeddings.weight", {256, 64}},
      {"norm.weight", {64}},
      {"output.weight", {256, 64}}};
  for (int i = 0; i < 2; ++i) {
    const std::string l = "layers." + std::to_string(i) + ".";
    expected[l + "attention.wq.weight"] = {64, 64};
    expected[l + "attention.wk.weight"] = {32, 64};
    expected[l + "attention.wv.weight"] = {32, 64};
    expected[l + "attention.wo.weight"] = {64, 64};
    expected[l + "feed_forward.w1.weight"] = {172, 64};
    expected[l + "feed_forward.w2.weight"] = {64, 172};
    expected[l + "feed_forward.w3.weight"] = {172, 64};
    expected[l + "attention_norm.weight"] = {64};
    expected[l + "ffn_norm.weight"] = {64};
  }
  EXPECT_EQ(shapes, expected);
}

TEST(LlamaTest, ParameterCountMatchesConfigCount) {
  int64_t count = 0;
  for (const at::Tensor& p : Build(TinyConfig())->parameters()) {
    count += p.numel();
  }
  EXPECT_EQ(count, NumParameters(TinyConfig()));
}

TEST(LlamaTest, UnitsInForwardOrder) {
  std::shared_ptr<Llama> model = Build(TinyConfig());
  std::vector<std::string> names;
  for (const UnitInfo& unit : model->units()) names.push_back(unit.name);
  EXPECT_THAT(names,
              ElementsAre("tok_embeddings", "layers.0", "layers.1", "head"));
  EXPECT_EQ(model->units()[1].type, "LlamaBlock");
  EXPECT_THAT(model->units()[3].parameters,
              ElementsAre("norm.weight", "output.weight"));
  EXPECT_THAT(model->SharedParameters(), IsEmpty());
}

TEST(LlamaTest, TiedHeadReadsTokenEmbedding) {
  ModelConfig config = TinyConfig();
  config.tie_embeddings = true;
  std::shared_ptr<Llama> model = Build(config);
  EXPECT_EQ(model->named_parameters().find("output.weight"), nullptr);
  EXPECT_THAT(model->units()[3].parameters, ElementsAre("norm.weight"));
  EXPECT_THAT(model->SharedParameters(),
              ElementsAre(Pair("tok_embeddings.weight", ElementsAre("head"))));
  int64_t count = 0;
  for (const at::Tensor& p : model->parameters()) count += p.numel();
  EXPECT_EQ(count, NumParameters(config));
  EXPECT_EQ(model->Forward(RandomTokens(1, 4, 256, 1)).sizes(),
            at::IntArrayRef({1, 4, 256}));
}

TEST(LlamaTest, ForwardShapeAndInitialLoss) {
  const at::Tensor logits =
      Build(TinyConfig())->Forward(RandomTokens(4, 32, 256, 2));
  EXPECT_EQ(logits.sizes(), at::IntArrayRef({4, 32, 256}));
  EXPECT_EQ(logits.scalar_type(), at::kFloat);
  // Logits have std ~ 0.02 * sqrt(64) = 0.16 at init.
  EXPECT_NEAR(
      UnitModel::Loss(logits, RandomTokens(4, 32, 256, 3)).item<double>(),
      std::log(256.0), 0.05);
}

TEST(LlamaTest, LaterTokensDoNotChangeEarlierLogits) {
  std::shared_ptr<Llama> model = Build(TinyConfig());
  at::Tensor tokens = RandomTokens(1, 8, 256, 4);
  const at::Tensor before = model->Forward(tokens);
  tokens[0][7] = (tokens[0][7].item<int64_t>() + 1) % 256;
  const at::Tensor after = model->Forward(tokens);
  EXPECT_TRUE(at::allclose(before.narrow(1, 0, 7), after.narrow(1, 0, 7)));
}

TEST(LlamaTest, GroupedQueryAttentionEqualsRepeatedKvHeads) {
  // A 2-kv-head model equals a 4-kv-head one whose k/v heads 2j and 2j+1
  // are copies of the grouped model's head j.
  std::shared_ptr<Llama> grouped = Build(TinyConfig(), 1);
  ModelConfig mha_config = TinyConfig();
  mha_config.num_kv_heads = 4;
  std::shared_ptr<Llama> mha = Build(mha_config, 2);
  auto source = grouped->named_parameters();
  at::NoGradGuard no_grad;
  for (auto& item : mha->named_parameters()) {
    at::Tensor value = source[item.key()];
    if (value.size(0) != item.value().size(0)) {  // wk, wv: [2*16, 64]
      value = value.view({2, 16, 64}).repeat_interleave(2, 0).reshape({64, 64});
    }
    item.value().copy_(value);
  }
  const at::Tensor tokens = RandomTokens(2, 12, 256, 5);
  EXPECT_TRUE(
      at::allclose(grouped->Forward(tokens), mha->Forward(tokens), 1e-5, 1e-6));
}

TEST(LlamaTest, RotaryMakesAttentionPositionDependent) {
  // With positions encoded, the same token at two positions after
  // different prefixes gives different logits; a shift of the whole
  // sequence by one position changes them too (relative positions matter
  // only within attention, but the first token attends only to itself).
  std::shared_ptr<Llama> model = Build(TinyConfig());
  const at::Tensor tokens = RandomTokens(1, 6, 256, 6);
  const at::Tensor logits = model->Forward(tokens);
  const at::Tensor repeated = model->Forward(at::cat({tokens, tokens}, 1));
  // Second copy sees a longer context: different logits.
  EXPECT_FALSE(at::allclose(repeated.narrow(1, 6, 6), logits, 1e-4, 1e-4));
  // First copy is the same computation.
  EXPECT_TRUE(at::allclose(repeated.narrow(1, 0, 6), logits, 1e-5, 1e-6));
}

TEST(LlamaTest, TrainsOnARepeatedBatch) {
  std::shared_ptr<Llama> model = Build(TinyConfig());
  const at::Tensor data = RandomTokens(4, 33, 256, 7);
  torch::optim::AdamW optimizer(model->parameters(),
                                torch::optim::AdamWOptions(3e-3));
  double first = 0, last = 0;
  for (int step = 0; step < 30; ++step) {
    optimizer.zero_grad();
    at::Tensor loss = UnitModel::Loss(model->Forward(data.narrow(1, 0, 32)),
                                      data.narrow(1, 1, 32));
    loss.backward();
    optimizer.step();
    (step == 0 ? first : last) = loss.item<double>();
  }
  EXPECT_LT(last, first - 1.0) << "first " << first << ", last " << last;
}

TEST(LlamaTest, BadTokensAndLengthThrow) {
  std::shared_ptr<Llama> model = Build(TinyConfig());
  EXPECT_THROW(model->Forward(at::full({1, 4}, 256, at::kLong)),
               std::invalid_argument);
  EXPECT_THROW(model->Forward(at::zeros({1, 129}, at::kLong)),
               std::invalid_argument);
}

TEST(LlamaTest, ForwardOnDeferredModelFailsClearly) {
  std::shared_ptr<Llama> model = Build(TinyConfig(), 0, /*deferred=*/true);
  try {
    model->Forward(at::zeros({1, 4}, at::kLong));
    FAIL() << "expected std::invalid_argument";
  } catch (const std::invalid_argument& e) {
    EXPECT_THAT(e.what(), HasSubstr("'tok_embeddings.weight'"));
  }
}

}  // namespace
}  // namespace strata::models
