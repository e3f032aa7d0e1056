#include "models/gpt.h"

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
using ::testing::Pair;

ModelConfig TinyConfig() {
  absl::StatusOr<ModelConfig> config = ConfigByName("gpt-tiny");
  EXPECT_THAT(config, IsOk());
  return *config;
}

std::shared_ptr<Gpt> TinyGpt(uint64_t seed = 0, bool deferred = false) {
  BuildOptions options;
  options.seed = seed;
  options.deferred = deferred;
  absl::StatusOr<std::shared_ptr<Gpt>> model =
      Gpt::Create(TinyConfig(), options);
  EXPECT_THAT(model, IsOk());
  return *model;
}

at::Tensor RandomTokens(int64_t batch, int64_t seq, int64_t vocab,
                        uint64_t seed) {
  at::Generator generator = at::detail::createCPUGenerator(seed);
  return at::randint(vocab, {batch, seq}, generator, at::kLong);
}

TEST(GptTest, ParameterNamesAndShapes) {
  std::map<std::string, std::vector<int64_t>> shapes;
  for (const auto& item : TinyGpt()->named_parameters()) {
    shapes[item.key()] = item.value().sizes().vec();
  }
  std::map<std::string, std::vector<int64_t>> expected = {
      {"wte.weight", {256, 64}},
      {"wpe.weight", {128, 64}},
      {"ln_f.weight", {64}},
      {"ln_f.bias", {64}}};
  for (int i = 0; i < 2; ++i) {
    const std::string b = "blocks." + std::to_string(i) + ".";
    expected[b + "ln_1.weight"] = {64};
    expected[b + "ln_1.bias"] = {64};
    expected[b + "attn.qkv.weight"] = {192, 64};
    expected[b + "attn.qkv.bias"] = {192};
    expected[b + "attn.proj.weight"] = {64, 64};
    expected[b + "attn.proj.bias"] = {64};
    expected[b + "ln_2.weight"] = {64};
    expected[b + "ln_2.bias"] = {64};
    expected[b + "mlp.fc.weight"] = {256, 64};
    expected[b + "mlp.fc.bias"] = {256};
    expected[b + "mlp.proj.weight"] = {64, 256};
    expected[b + "mlp.proj.bias"] = {64};
  }
  EXPECT_EQ(shapes, expected);
}

TEST(GptTest, ParameterCountMatchesConfigCount) {
  int64_t count = 0;
  for (const at::Tensor& p : TinyGpt()->parameters()) count += p.numel();
  EXPECT_EQ(count, NumParameters(TinyConfig()));
}

TEST(GptTest, UnitsInForwardOrder) {
  std::shared_ptr<Gpt> model = TinyGpt();
  std::vector<std::string> names, types;
  for (const UnitInfo& unit : model->units()) {
    names.push_back(unit.name);
    types.push_back(unit.type);
  }
  EXPECT_THAT(names, ElementsAre("embed", "blocks.0", "blocks.1", "head"));
  EXPECT_THAT(types, ElementsAre("Embedding", "GPTBlock", "GPTBlock", "Head"));
}

TEST(GptTest, UnitsOwnEveryParameterOnce) {
  std::shared_ptr<Gpt> model = TinyGpt();
  std::map<std::string, int> owners;
  for (const UnitInfo& unit : model->units()) {
    for (const std::string& name : unit.parameters) ++owners[name];
  }
  EXPECT_EQ(owners.size(), model->named_parameters().size());
  for (const auto& [name, count] : owners) EXPECT_EQ(count, 1) << name;
  EXPECT_THAT(model->units()[0].parameters,
              ElementsAre("wte.weight", "wpe.weight"));
  EXPECT_THAT(model->units()[3].parameters,
              ElementsAre("ln_f.weight", "ln_f.bias"));
  EXPECT_EQ(model->units()[1].parameters.front(), "blocks.0.ln_1.weight");
}

TEST(GptTest, HeadSharesTheTokenEmbedding) {
  EXPECT_THAT(TinyGpt()->SharedParameters(),
              ElementsAre(Pair("wte.weight", ElementsAre("head"))));
}

TEST(GptTest, ForwardShapeAndDtype) {
  const at::Tensor logits = TinyGpt()->Forward(RandomTokens(2, 16, 256, 1));
  EXPECT_EQ(logits.sizes(), at::IntArrayRef({2, 16, 256}));
  EXPECT_EQ(logits.scalar_type(), at::kFloat);
}

TEST(GptTest, InitialLossIsLogVocab) {
  // Logits at init have std ~ 0.02 * sqrt(64) = 0.16, so the loss is
  // ln(256) + O(0.16^2 / 2).
  const at::Tensor tokens = RandomTokens(4, 32, 256, 2);
  const at::Tensor loss =
      UnitModel::Loss(TinyGpt()->Forward(tokens), RandomTokens(4, 32, 256, 3));
  EXPECT_NEAR(loss.item<double>(), std::log(256.0), 0.05);
}

TEST(GptTest, LaterTokensDoNotChangeEarlierLogits) {
  std::shared_ptr<Gpt> model = TinyGpt();
  at::Tensor tokens = RandomTokens(1, 8, 256, 4);
  const at::Tensor before = model->Forward(tokens);
  tokens[0][7] = (tokens[0][7].item<int64_t>() + 1) % 256;
  const at::Tensor after = model->Forward(tokens);
  EXPECT_TRUE(at::allclose(before.narrow(1, 0, 7), after.narrow(1, 0, 7)));
  EXPECT_FALSE(at::allclose(before.narrow(1, 7, 1), after.narrow(1, 7, 1)));
}

TEST(GptTest, TrainsOnARepeatedBatch) {
  std::shared_ptr<Gpt> model = TinyGpt();
  const at::Tensor data = RandomTokens(4, 33, 256, 5);
  const at::Tensor inputs = data.narrow(1, 0, 32);
  const at::Tensor targets = data.narrow(1, 1, 32);
  torch::optim::AdamW optimizer(model->parameters(),
                                torch::optim::AdamWOptions(3e-3));
  double first = 0, last = 0;
  for (int step = 0; step < 30; ++step) {
    optimizer.zero_grad();
    at::Tensor loss = UnitModel::Loss(model->Forward(inputs), targets);
    loss.backward();
    optimizer.step();
    (step == 0 ? first : last) = loss.item<double>();
  }
  EXPECT_LT(last, first - 1.0) << "first " << first << ", last " << last;
}

TEST(GptTest, TokenOutOfRangeNamesMaxIdAndVocab) {
  at::Tensor tokens = at::zeros({1, 4}, at::kLong);
  tokens[0][2] = 300;
  try {
    TinyGpt()->Forward(tokens);
    FAIL() << "expected std::invalid_argument";
  } catch (const std::invalid_argument& e) {
    EXPECT_THAT(e.what(), HasSubstr("to 300"));
    EXPECT_THAT(e.what(), HasSubstr("vocab_size 256"));
  }
}

TEST(GptTest, SequenceLongerThanContextNamesBoth) {
  try {
    TinyGpt()->Forward(at::zeros({1, 129}, at::kLong));
    FAIL() << "expected std::invalid_argument";
  } catch (const std::invalid_argument& e) {
    EXPECT_THAT(e.what(), HasSubstr("sequence length 129"));
    EXPECT_THAT(e.what(), HasSubstr("seq_len = 128"));
  }
}

TEST(GptTest, ForwardOnDeferredModelFailsClearly) {
  std::shared_ptr<Gpt> model = TinyGpt(0, /*deferred=*/true);
  try {
    model->Forward(at::zeros({1, 4}, at::kLong));
    FAIL() << "expected std::invalid_argument";
  } catch (const std::invalid_argument& e) {
    EXPECT_THAT(e.what(), HasSubstr("meta device"));
    EXPECT_THAT(e.what(), HasSubstr("'wte.weight'"));
  }
}

TEST(GptTest, CreateRejectsOtherFamily) {
  absl::StatusOr<ModelConfig> llama = ConfigByName("llama-tiny");
  ASSERT_THAT(llama, IsOk());
  absl::StatusOr<std::shared_ptr<Gpt>> model =
      Gpt::Create(*llama, BuildOptions());
  EXPECT_FALSE(model.ok());
  EXPECT_THAT(model.status().message(), HasSubstr("\"llama\""));
}

TEST(GptTest, InitialParameterOfUnknownNameIsNotFound) {
  EXPECT_EQ(TinyGpt()->InitialParameter("lm_head.weight", 0).status().code(),
            absl::StatusCode::kNotFound);
}

TEST(GptTest, DropoutOnlyInTraining) {
  ModelConfig config = TinyConfig();
  config.dropout = 0.1;
  absl::StatusOr<std::shared_ptr<Gpt>> model =
      Gpt::Create(config, BuildOptions());
  ASSERT_THAT(model, IsOk());
  const at::Tensor tokens = RandomTokens(1, 8, 256, 6);
  EXPECT_FALSE(at::equal((*model)->Forward(tokens), (*model)->Forward(tokens)));
  (*model)->eval();
  EXPECT_TRUE(at::equal((*model)->Forward(tokens), (*model)->Forward(tokens)));
}

std::shared_ptr<Gpt> TinyGptWithDropout() {
  ModelConfig config = TinyConfig();
  config.dropout = 0.1;
  absl::StatusOr<std::shared_ptr<Gpt>> model =
      Gpt::Create(config, BuildOptions());
  EXPECT_THAT(model, IsOk());
  return *model;
}

std::shared_ptr<const DropoutContext> Context(std::vector<int64_t> ids,
                                              int64_t step) {
  auto context = std::make_shared<DropoutContext>();
  context->seed = 5;
  context->step = step;
  context->sample_ids = std::move(ids);
  return context;
}

TEST(GptTest, DropoutWithContextIsAFunctionOfTheSampleNotItsRank) {
  // Samples 10..13 as one batch, and as two batches in another order (what
  // two ranks would run): every sample's logits agree. The rows go through
  // GEMMs of different sizes, so equality is to fp32 rounding (1e-5
  // relative for these O(1) logits), but the dropout masks are identical: a
  // mask differing in one element would move the logits by ~1e-2.
  std::shared_ptr<Gpt> model = TinyGptWithDropout();
  const at::Tensor tokens = RandomTokens(4, 16, 256, 8);
  model->SetDropoutContext(Context({10, 11, 12, 13}, 2));
  const at::Tensor whole = model->Forward(tokens);
  model->SetDropoutContext(Context({13, 11}, 2));
  const at::Tensor first = model->Forward(at::stack({tokens[3], tokens[1]}));
  model->SetDropoutContext(Context({10, 12}, 2));
  const at::Tensor second = model->Forward(at::stack({tokens[0], tokens[2]}));
  EXPECT_TRUE(at::allclose(first[0], whole[3], 1e-5, 1e-5));
  EXPECT_TRUE(at::allclose(first[1], whole[1], 1e-5, 1e-5));
  EXPECT_TRUE(at::allclose(second[0], whole[0], 1e-5, 1e-5));
  EXPECT_TRUE(at::allclose(second[1], whole[2], 1e-5, 1e-5));
}

TEST(GptTest, DropoutWithContextRepeatsExactlyAndChangesWithTheStep) {
  std::shared_ptr<Gpt> model = TinyGptWithDropout();
  const at::Tensor tokens = RandomTokens(2, 16, 256, 9);
  model->SetDropoutContext(Context({0, 1}, 4));
  const at::Tensor a = model->Forward(tokens);
  const at::Tensor b = model->Forward(tokens);
  EXPECT_TRUE(at::equal(a, b));
  model->SetDropoutContext(Context({0, 1}, 5));
  EXPECT_FALSE(at::allclose(model->Forward(tokens), a));
  model->eval();
  const at::Tensor eval = model->Forward(tokens);
  EXPECT_FALSE(at::allclose(eval, a));  // Dropout was active in training.
}

class CountingInterceptor : public UnitInterceptor {
 public:
  at::Tensor Run(const UnitInfo& unit, const at::Tensor& input,
                 const UnitForward& forward) override {
    seen.push_back(unit.name);
    return forward(input);
  }
  std::vector<std::string> seen;
};

TEST(GptTest, CountingInterceptorSeesUnitsInOrder) {
  std::shared_ptr<Gpt> model = TinyGpt();
  auto counter = std::make_shared<CountingInterceptor>();
  model->AddInterceptor(counter);
  model->Forward(RandomTokens(1, 4, 256, 7));
  EXPECT_THAT(counter->seen,
              ElementsAre("embed", "blocks.0", "blocks.1", "head"));
}

// Runs every unit twice and returns the second output, like a recomputing
// interceptor.
class TwiceInterceptor : public UnitInterceptor {
 public:
  at::Tensor Run(const UnitInfo& unit, const at::Tensor& input,
                 const UnitForward& forward) override {
    forward(input);
    return forward(input);
  }
};

std::map<std::string, at::Tensor> Gradients(Gpt& model,
                                            const at::Tensor& tokens) {
  model.zero_grad();
  UnitModel::Loss(model.Forward(tokens.narrow(1, 0, 8)), tokens.narrow(1, 1, 8))
      .backward();
  std::map<std::string, at::Tensor> grads;
  for (const auto& item : model.named_parameters()) {
    grads[item.key()] = item.value().grad().clone();
  }
  return grads;
}

TEST(GptTest, InterceptorCallingForwardTwiceGivesSameGradients) {
  std::shared_ptr<Gpt> model = TinyGpt();
  const at::Tensor tokens = RandomTokens(2, 9, 256, 8);
  const auto expected = Gradients(*model, tokens);
  model->AddInterceptor(std::make_shared<TwiceInterceptor>());
  const auto actual = Gradients(*model, tokens);
  ASSERT_EQ(actual.size(), expected.size());
  for (const auto& [name, grad] : expected) {
    EXPECT_TRUE(at::allclose(actual.at(name), grad, 1e-6, 1e-7)) << name;
  }
}

}  // namespace
}  // namespace strata::models
