// Strata's GPT-2 and Llama, after converting Hugging Face weights, compute
// the logits of a forward written from Hugging Face's published modeling
// math (testdata/hf_reference.py: numpy, float64, Conv1D layouts, gelu_new,
// rotate-half RoPE, repeat_kv) on the same random HF-layout weights.
#include <ATen/ATen.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>
#include <string>

#include "base/file_io.h"
#include "base/testing/status_matchers.h"
#include "base/testing/temp_dir.h"
#include "models/config.h"
#include "models/factory.h"
#include "models/hf_config.h"
#include "models/hf_layout.h"
#include "models/state_dict.h"
#include "serialization/safetensors.h"
#include "serialization/testing/python_runner.h"

namespace strata::models {
namespace {

using serialization::testing::RunPython;
using ::strata::testing::IsOk;

constexpr double kTolerance = 1e-5;

std::string ScriptPath() {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  return std::string(srcdir != nullptr ? srcdir : ".") +
         "/strata/models/testdata/hf_reference.py";
}

// Runs the reference for `name` ("gpt2", "llama", "llama-tied",
// "llama3-scaled"), converts
// its weights as `strata_ckpt convert --from=<layout>` does, loads them like
// --load_weights and returns max |Strata logits - reference logits|.
double MaxLogitError(const std::string& name, const std::string& family) {
  const std::string dir = strata::testing::FreshTempDir("hf_ref_" + name);
  EXPECT_THAT(RunPython({ScriptPath(), name, dir}, dir + "/log"), IsOk());
  absl::StatusOr<std::string> config_text = ReadWholeFile(HfConfigPath(dir));
  EXPECT_THAT(config_text, IsOk());
  absl::StatusOr<models::ModelConfig> config =
      ModelConfigFromHfJson(*config_text, "config.json", family);
  EXPECT_THAT(config, IsOk());
  absl::StatusOr<NamedTensors> hf = ReadHfWeights(dir);
  EXPECT_THAT(hf, IsOk());
  absl::StatusOr<NamedTensors> strata = ImportHf(*hf, *config, dir);
  EXPECT_THAT(strata, IsOk());
  const std::string weights = dir + "/strata.pt";
  EXPECT_THAT(models::SaveStateDict(*strata, weights), IsOk());

  absl::StatusOr<std::shared_ptr<models::UnitModel>> model =
      models::BuildModel(*config, models::BuildOptions{});
  EXPECT_THAT(model, IsOk());
  EXPECT_THAT(models::LoadStateDict(**model, weights, /*strict=*/true), IsOk());
  absl::StatusOr<std::shared_ptr<const serialization::SafetensorsFile>> tokens =
      serialization::SafetensorsFile::Open(dir + "/tokens.safetensors");
  absl::StatusOr<std::shared_ptr<const serialization::SafetensorsFile>> logits =
      serialization::SafetensorsFile::Open(dir + "/logits.safetensors");
  EXPECT_THAT(tokens, IsOk());
  EXPECT_THAT(logits, IsOk());
  if (!tokens.ok() || !logits.ok() || !model.ok()) return 1e9;
  const at::Tensor expected = *(*logits)->View("logits");
  (*model)->eval();
  at::NoGradGuard no_grad;
  const at::Tensor got = (*model)->Forward(*(*tokens)->View("tokens"));
  EXPECT_EQ(got.sizes(), expected.sizes());
  // The comparison must not pass by being empty or constant.
  EXPECT_GT(expected.std().item<double>(), 0.1);
  return (got.to(at::kDouble) - expected).abs().max().item<double>();
}

TEST(HfReferenceTest, Gpt2LogitsMatchTheHuggingFaceMath) {
  EXPECT_LT(MaxLogitError("gpt2", "gpt"), kTolerance);
}

TEST(HfReferenceTest, LlamaWithGroupedQueryAttentionLogitsMatch) {
  EXPECT_LT(MaxLogitError("llama", "llama"), kTolerance);
}

TEST(HfReferenceTest, TiedLlamaLogitsMatch) {
  EXPECT_LT(MaxLogitError("llama-tied", "llama"), kTolerance);
}

// Scaling moves the angles of 6 of the 8 frequencies by up to ~1 rad at the
// sequence's last position, far beyond the tolerance if it were ignored.
TEST(HfReferenceTest, Llama3RopeScalingLogitsMatch) {
  EXPECT_LT(MaxLogitError("llama3-scaled", "llama"), kTolerance);
}

}  // namespace
}  // namespace strata::models
