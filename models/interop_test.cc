// The Python interop acceptance test: a Strata GPT and a plain PyTorch GPT-2
// (testdata/gpt_reference.py) exchange state dicts through PyTorch files and
// compute the same logits.
//
// Tolerance. Both sides run the same LibTorch 1.13.1 CPU kernels on the same
// op sequence (embedding, layer_norm, linear, matmul, softmax, gelu), so the
// only differences come from GEMM summation order: Python runs one thread,
// this process may split GEMMs over two OpenBLAS threads. A K-term fp32 dot
// product differs by at most K * u * sum|a_i b_i| (u = 2^-24 = 6e-8) and in
// practice by ~sqrt(K) * u * sum|a_i b_i|. Here K <= 256 (the MLP) and the
// activations and weights are O(1) and O(0.1), so each matmul contributes
// ~16 * 6e-8 * O(1) = 1e-6 relative, a handful of sequential matmuls (with
// LayerNorm renormalising in between) stay at a few 1e-6 on O(1) logits.
// 1e-5 bounds that with margin, while a real mismatch (GELU erf instead of
// tanh, a transposed weight, a missing bias) moves logits by >= 1e-4.
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/testing/status_matchers.h"
#include "models/config.h"
#include "models/factory.h"
#include "models/state_dict.h"
#include "models/unit.h"
#include "serialization/testing/python_runner.h"
#include "serialization/torch_file.h"

namespace strata::models {
namespace {

using ::strata::testing::IsOk;

using serialization::testing::RunPython;

constexpr double kTolerance = 1e-5;

std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir != nullptr ? dir : "/tmp") + "/" + name;
}

std::string ScriptPath() {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  return std::string(srcdir != nullptr ? srcdir : ".") +
         "/strata/models/testdata/gpt_reference.py";
}

ModelConfig TinyConfig() {
  ModelConfig config = *ConfigByName("gpt-tiny");
  config.dropout = 0.0;
  return config;
}

std::string ConfigJson(const ModelConfig& c) {
  return absl::StrCat(
      "{\"vocab_size\": ", c.vocab_size, ", \"seq_len\": ", c.seq_len,
      ", \"num_layers\": ", c.num_layers, ", \"num_heads\": ", c.num_heads,
      ", \"dim\": ", c.dim, ", \"ffn_dim\": ", c.ffn_dim,
      ", \"norm_eps\": ", c.norm_eps, "}");
}

// Fixed tokens [2, 32], written as a tensor file both sides read.
at::Tensor WriteTokens(const std::string& path) {
  at::Generator generator = at::detail::createCPUGenerator(42);
  const at::Tensor tokens = at::randint(256, {2, 32}, generator, at::kLong);
  const absl::Status written =
      serialization::WriteTorchFile(path, c10::IValue(tokens));
  EXPECT_TRUE(written.ok()) << written;
  return tokens;
}

at::Tensor ReadTensor(const std::string& path) {
  absl::StatusOr<c10::IValue> value = serialization::ReadTorchFile(path);
  EXPECT_THAT(value, IsOk());
  if (!value.ok() || !value->isTensor()) return at::Tensor();
  return value->toTensor();
}

std::shared_ptr<UnitModel> Build(uint64_t seed) {
  BuildOptions options;
  options.seed = seed;
  absl::StatusOr<std::shared_ptr<UnitModel>> model =
      BuildModel(TinyConfig(), options);
  EXPECT_THAT(model, IsOk());
  (*model)->eval();
  return *model;
}

TEST(InteropTest, PythonLoadsStrataStateDictAndMatchesLogits) {
  const std::string tokens_path = TempPath("a_tokens.pt");
  const std::string state_path = TempPath("a_state.pt");
  const std::string logits_path = TempPath("a_logits.pt");
  const at::Tensor tokens = WriteTokens(tokens_path);
  std::shared_ptr<UnitModel> model = Build(1234);
  ASSERT_THAT(SaveStateDict(*model, state_path), IsOk());

  const absl::Status ran =
      RunPython({ScriptPath(), "forward", ConfigJson(TinyConfig()), state_path,
                 tokens_path, logits_path},
                TempPath("a_python.log"));
  ASSERT_THAT(ran, IsOk());

  const at::Tensor python_logits = ReadTensor(logits_path);
  at::NoGradGuard no_grad;
  const at::Tensor logits = model->Forward(tokens);
  ASSERT_EQ(python_logits.sizes(), logits.sizes());
  const double diff = (python_logits - logits).abs().max().item<double>();
  ::testing::Test::RecordProperty("max_abs_diff", absl::StrCat(diff));
  EXPECT_LE(diff, kTolerance)
      << "max |logit| " << logits.abs().max().item<double>();
}

TEST(InteropTest, StrataLoadsPythonStateDictAndMatchesLogits) {
  const std::string tokens_path = TempPath("b_tokens.pt");
  const std::string state_path = TempPath("b_state.pt");
  const std::string logits_path = TempPath("b_logits.pt");
  const at::Tensor tokens = WriteTokens(tokens_path);
  const absl::Status ran =
      RunPython({ScriptPath(), "init", ConfigJson(TinyConfig()), "7",
                 tokens_path, state_path, logits_path},
                TempPath("b_python.log"));
  ASSERT_THAT(ran, IsOk());

  std::shared_ptr<UnitModel> model = Build(0);
  const absl::Status loaded = LoadStateDict(*model, state_path, true);
  ASSERT_THAT(loaded, IsOk());

  const at::Tensor python_logits = ReadTensor(logits_path);
  at::NoGradGuard no_grad;
  const at::Tensor logits = model->Forward(tokens);
  ASSERT_EQ(python_logits.sizes(), logits.sizes());
  // The Python init makes logits O(1), so the absolute tolerance is tight.
  EXPECT_GT(logits.abs().max().item<double>(), 0.5);
  const double diff = (python_logits - logits).abs().max().item<double>();
  ::testing::Test::RecordProperty("max_abs_diff", absl::StrCat(diff));
  EXPECT_LE(diff, kTolerance)
      << "max |logit| " << logits.abs().max().item<double>();
}

}  // namespace
}  // namespace strata::models
