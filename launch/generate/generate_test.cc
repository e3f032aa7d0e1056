#include "launch/generate/generate.h"

#include <ATen/core/Tensor.h>
#include <ATen/ops/tensor.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <torch/csrc/autograd/grad_mode.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "base/testing/status_matchers.h"
#include "models/config.h"
#include "models/factory.h"

namespace strata::launch {
namespace {

using ::strata::testing::StatusIs;
using ::testing::AllOf;
using ::testing::HasSubstr;

std::shared_ptr<models::UnitModel> TinyModel(const std::string& name,
                                             uint64_t seed = 3) {
  auto config = models::ConfigByName(name);
  CHECK(config.ok()) << config.status();
  models::BuildOptions build;
  build.seed = seed;
  auto model = models::BuildModel(*config, build);
  CHECK(model.ok()) << model.status();
  return *model;
}

// The last position's logits for the last `context` tokens of `sequence`.
at::Tensor LastLogits(models::UnitModel& model,
                      const std::vector<int64_t>& sequence, int64_t context) {
  const int64_t n = static_cast<int64_t>(sequence.size());
  const int64_t window = std::min(n, context);
  std::vector<int64_t> tail(sequence.end() - window, sequence.end());
  at::NoGradGuard no_grad;
  return model.Forward(
      at::tensor(tail, at::kLong).view({1, window}))[0][window - 1];
}

// Greedy decoding written out plainly: run the model, take the argmax,
// append, repeat.
std::vector<int64_t> PlainGreedy(models::UnitModel& model,
                                 std::vector<int64_t> sequence, int64_t steps,
                                 int64_t context) {
  model.eval();
  std::vector<int64_t> out;
  for (int64_t i = 0; i < steps; ++i) {
    const int64_t next =
        LastLogits(model, sequence, context).argmax().item<int64_t>();
    sequence.push_back(next);
    out.push_back(next);
  }
  model.train();
  return out;
}

class GreedyTest : public ::testing::TestWithParam<std::string> {};

TEST_P(GreedyTest, EqualsTheStepwiseArgmaxOfTheLogits) {
  auto model = TinyModel(GetParam());
  const std::vector<int64_t> prompt = {5, 17, 200, 3, 42};
  SamplingOptions greedy;
  greedy.temperature = 0;
  greedy.max_new_tokens = 24;
  ASSERT_OK_AND_ASSIGN(std::vector<int64_t> got,
                       SampleTokens(*model, 128, prompt, greedy));
  EXPECT_EQ(got, PlainGreedy(*model, prompt, 24, 128));
  EXPECT_TRUE(model->is_training()) << "the model's mode is restored";
  // A context of 8 makes the window slide after 3 tokens.
  ASSERT_OK_AND_ASSIGN(got, SampleTokens(*model, 8, prompt, greedy));
  EXPECT_EQ(got, PlainGreedy(*model, prompt, 24, 8));
}

INSTANTIATE_TEST_SUITE_P(Models, GreedyTest,
                         ::testing::Values("gpt-tiny", "llama-tiny"));

TEST(SampleTokensTest, ASeedReproducesItsTokensAndSeedsDiffer) {
  auto model = TinyModel("gpt-tiny");
  SamplingOptions o;
  o.temperature = 1.0;
  o.max_new_tokens = 32;
  o.seed = 11;
  ASSERT_OK_AND_ASSIGN(std::vector<int64_t> a,
                       SampleTokens(*model, 128, {1, 2, 3}, o));
  ASSERT_OK_AND_ASSIGN(std::vector<int64_t> again,
                       SampleTokens(*model, 128, {1, 2, 3}, o));
  EXPECT_EQ(a, again);
  o.seed = 12;
  ASSERT_OK_AND_ASSIGN(std::vector<int64_t> b,
                       SampleTokens(*model, 128, {1, 2, 3}, o));
  // A fresh gpt-tiny's next-token distribution is near uniform over 256
  // ids: 32 equal draws from two seeds would be a ~256^-32 coincidence.
  EXPECT_NE(a, b);
  EXPECT_NE(a, PlainGreedy(*model, {1, 2, 3}, 32, 128)) << "sampled";
}

TEST(SampleTokensTest, TopKOneIsGreedy) {
  auto model = TinyModel("llama-tiny");
  SamplingOptions o;
  o.temperature = 1.5;
  o.top_k = 1;
  o.max_new_tokens = 16;
  for (uint64_t seed : {1, 2, 3}) {
    o.seed = seed;
    ASSERT_OK_AND_ASSIGN(std::vector<int64_t> got,
                         SampleTokens(*model, 128, {9, 8, 7}, o));
    EXPECT_EQ(got, PlainGreedy(*model, {9, 8, 7}, 16, 128)) << seed;
  }
}

TEST(SampleTokensTest, DrawsOnlyAmongTheTopKAndTheCandidates) {
  auto model = TinyModel("gpt-tiny");
  SamplingOptions o;
  o.temperature = 2.0;
  o.top_k = 3;
  o.max_new_tokens = 16;
  const std::vector<int64_t> prompt = {4, 4, 4};
  ASSERT_OK_AND_ASSIGN(std::vector<int64_t> got,
                       SampleTokens(*model, 128, prompt, o));
  std::vector<int64_t> sequence = prompt;
  model->eval();
  for (int64_t token : got) {
    const at::Tensor logits = LastLogits(*model, sequence, 128);
    // Fewer than 3 logits strictly above the drawn one's.
    const int64_t above =
        (logits > logits[token].item<float>()).sum().item<int64_t>();
    EXPECT_LT(above, 3) << "token " << token;
    sequence.push_back(token);
  }
  model->train();
  o.top_k = 0;
  o.candidate_vocab = 10;
  o.max_new_tokens = 64;
  ASSERT_OK_AND_ASSIGN(got, SampleTokens(*model, 128, prompt, o));
  for (int64_t token : got) EXPECT_LT(token, 10);
}

TEST(SampleTokensTest, RefusesBadOptionsNamingTheFlag) {
  auto model = TinyModel("gpt-tiny");
  const auto refused = [&](SamplingOptions o, std::vector<int64_t> prompt,
                           const std::string& flag) {
    EXPECT_THAT(SampleTokens(*model, 8, prompt, o).status(),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(flag)))
        << flag;
  };
  SamplingOptions o;
  o.max_new_tokens = 0;
  refused(o, {1}, "--max_new_tokens");
  o = SamplingOptions();
  o.temperature = -0.5;
  refused(o, {1}, "--temperature");
  o.temperature = std::numeric_limits<double>::quiet_NaN();
  refused(o, {1}, "--temperature");
  o = SamplingOptions();
  o.top_k = -1;
  refused(o, {1}, "--top_k");
  refused(SamplingOptions(), {}, "--prompt");
  // Longer than the context of 8.
  refused(SamplingOptions(), std::vector<int64_t>(9, 1), "context of 8");
}

GenerateOptions Valid() {
  GenerateOptions o;
  o.load_weights = "/nonexistent/model.pt";
  o.prompt = "hello";
  return o;
}

TEST(GenerateTest, RefusesBadFlagsNamingThem) {
  const auto refused = [](const GenerateOptions& o, const std::string& what) {
    EXPECT_THAT(Generate(o).status(),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(what)))
        << what;
  };
  GenerateOptions o = Valid();
  o.load_weights = "";
  refused(o, "--load_weights: is required");
  o = Valid();
  o.prompt_tokens = "1,2";
  refused(o, "--prompt or --prompt_tokens: give exactly one");
  o.prompt = "";
  o.prompt_tokens = "";
  refused(o, "--prompt or --prompt_tokens: give exactly one");
  o = Valid();
  o.model = "gpt-nope";
  refused(o, "--model");
  o = Valid();
  o.vocab_size = -2;
  refused(o, "--vocab_size");
  o = Valid();
  o.threads = -1;
  refused(o, "--threads");
  o = Valid();
  o.max_new_tokens = -1;
  refused(o, "--max_new_tokens");
  o = Valid();
  o.top_k = 257;  // Byte-level text: 256 candidates.
  refused(o, "--top_k: 257 is more than the 256 candidate tokens");
  o = Valid();
  o.vocab_size = 128;
  refused(o, "--prompt: byte-level text needs a vocabulary of at least 256");
  o = Valid();
  o.prompt = "";
  o.prompt_tokens = "1, 2,x";
  refused(o, "--prompt_tokens: 'x' (entry 2) is not a token id in [0, 256)");
  o.prompt_tokens = "1,256";
  refused(o, "--prompt_tokens: '256' (entry 1)");
  o.prompt_tokens = "1,,2";
  refused(o, "--prompt_tokens: '' (entry 1)");
}

TEST(GenerateTest, RefusesAPromptLongerThanTheContextBeforeLoading) {
  GenerateOptions o = Valid();
  o.prompt = std::string(129, 'a');  // gpt-tiny's context is 128.
  EXPECT_THAT(Generate(o).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("--prompt: 129 tokens"),
                             HasSubstr("context of 128"))));
  o.prompt = "";
  o.prompt_tokens = "1";
  for (int i = 0; i < 128; ++i) o.prompt_tokens += ",1";
  EXPECT_THAT(Generate(o).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("--prompt_tokens: 129 tokens")));
  // Within the context it gets as far as the (missing) weights.
  o.prompt_tokens = "1,2";
  EXPECT_THAT(Generate(o).status(),
              StatusIs(absl::StatusCode::kNotFound,
                       HasSubstr("--load_weights=/nonexistent/model.pt")));
}

TEST(GenerationTest, RendersTextOrIds) {
  Generation g;
  g.prompt = {'h', 'i'};
  g.continuation = {'!', 0xff};
  g.text = true;
  EXPECT_EQ(g.Render(), "hi!\xff");
  g.text = false;
  EXPECT_EQ(g.Render(), "104,105,33,255");
}

}  // namespace
}  // namespace strata::launch
