// strata_generate as a subprocess: the weights of a model saved as a PyTorch
// state dict (as train's model.pt) give the tokens the library samples from
// the same model in this process, as text and as ids; bad flags fail with a
// message naming them.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "base/testing/status_matchers.h"
#include "base/testing/subprocess.h"
#include "launch/generate/generate.h"
#include "launch/testing/run_output.h"
#include "models/config.h"
#include "models/factory.h"
#include "models/state_dict.h"

namespace strata::launch {
namespace {

using ::strata::launch::testing::TempDir;
using ::strata::testing::RunfilePath;
using ::strata::testing::RunResult;
using ::testing::HasSubstr;

// Saves llama-tiny initialised from `seed` as a PyTorch state dict.
std::string SavedWeights(uint64_t seed) {
  auto config = models::ConfigByName("llama-tiny");
  CHECK(config.ok()) << config.status();
  models::BuildOptions build;
  build.seed = seed;
  auto model = models::BuildModel(*config, build);
  CHECK(model.ok()) << model.status();
  const std::string path = TempDir("llama_tiny_" + std::to_string(seed));
  const absl::Status saved = models::SaveStateDict(**model, path);
  CHECK(saved.ok()) << saved;
  return path;
}

RunResult RunGenerate(const std::vector<std::string>& flags) {
  std::vector<std::string> argv = {
      RunfilePath("launch/generate/strata_generate")};
  argv.insert(argv.end(), flags.begin(), flags.end());
  return ::strata::testing::Run(argv, {}, absl::Seconds(60));
}

TEST(GenerateMainTest, PrintsWhatTheLibrarySamplesFromTheWeights) {
  const std::string weights = SavedWeights(21);
  GenerateOptions o;
  o.model = "llama-tiny";
  o.load_weights = weights;
  o.prompt = "Once upon";
  o.max_new_tokens = 20;
  o.temperature = 0.8;
  o.top_k = 50;
  o.seed = 5;
  ASSERT_OK_AND_ASSIGN(Generation expected, Generate(o));
  RunResult r = RunGenerate({"--model=llama-tiny", "--load_weights=" + weights,
                             "--prompt=Once upon", "--max_new_tokens=20",
                             "--temperature=0.8", "--top_k=50", "--seed=5"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, expected.Render() + "\n");
  EXPECT_EQ(r.out.rfind("Once upon", 0), 0u) << r.out;

  // Ids in, ids out; greedy.
  o.prompt = "";
  o.prompt_tokens = "7,8,9";
  o.temperature = 0;
  ASSERT_OK_AND_ASSIGN(expected, Generate(o));
  r = RunGenerate({"--model=llama-tiny", "--load_weights=" + weights,
                   "--prompt_tokens=7,8,9", "--max_new_tokens=20",
                   "--temperature=0"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, expected.Render() + "\n");
  EXPECT_EQ(r.out.rfind("7,8,9,", 0), 0u) << r.out;
}

// gpt-tiny with GPT-2's vocabulary (50257 ids), saved as a state dict.
std::string SavedGpt2VocabWeights() {
  auto config = models::ConfigByName("gpt-tiny");
  CHECK(config.ok()) << config.status();
  config->vocab_size = 50257;
  auto model = models::BuildModel(*config, {});
  CHECK(model.ok()) << model.status();
  const std::string path = TempDir("gpt_tiny_gpt2_vocab");
  const absl::Status saved = models::SaveStateDict(**model, path);
  CHECK(saved.ok()) << saved;
  return path;
}

TEST(GenerateMainTest, TokenizerEncodesThePromptAndDecodesTheOutput) {
  const std::string weights = SavedGpt2VocabWeights();
  const std::string tokenizer =
      RunfilePath("text/testdata/gpt2/tokenizer.json");
  GenerateOptions o;
  o.model = "gpt-tiny";
  o.vocab_size = 50257;
  o.load_weights = weights;
  o.prompt = "Hello world";
  o.tokenizer = tokenizer;
  o.max_new_tokens = 8;
  o.seed = 3;
  ASSERT_OK_AND_ASSIGN(Generation expected, Generate(o));
  // GPT-2: "Hello" 15496, " world" 995; no template tokens.
  EXPECT_EQ(expected.prompt, (std::vector<int64_t>{15496, 995}));
  ASSERT_TRUE(expected.decoded.has_value());
  EXPECT_EQ(expected.decoded->rfind("Hello world", 0), 0u) << *expected.decoded;
  RunResult r =
      RunGenerate({"--model=gpt-tiny", "--vocab_size=50257",
                   "--load_weights=" + weights, "--tokenizer=" + tokenizer,
                   "--prompt=Hello world", "--max_new_tokens=8", "--seed=3"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, *expected.decoded + "\n");
}

TEST(GenerateMainTest, TokenizerLargerThanTheModelIsRefused) {
  RunResult r = RunGenerate(
      {"--model=llama-tiny", "--load_weights=/x", "--prompt=hi",
       "--tokenizer=" + RunfilePath("text/testdata/gpt2/tokenizer.json")});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("--tokenizer"));
  EXPECT_THAT(r.err, HasSubstr("has 50257 ids but model 'llama-tiny'"));
}

TEST(GenerateMainTest, BadFlagsFailNamingThem) {
  RunResult r = RunGenerate({"--prompt=hi"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("--load_weights: is required"));
  r = RunGenerate({"--load_weights=/x", "--prompt=hi", "--temperature=-1"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("--temperature"));
  EXPECT_EQ(r.out, "") << "nothing printed on failure";
}

}  // namespace
}  // namespace strata::launch
