// Continuing a Strata run in PyTorch, for each optimizer: Strata trains
// gpt-tiny 3 steps and saves a full checkpoint; a Python script builds the
// same GPT in plain PyTorch (models/testdata/gpt_reference.py), loads
// "state_dict" into it and "optimizer" into the torch.optim class the
// checkpoint's meta names (AdamW, Adam or SGD) over the same param groups
// (checking that the groups' keys are that class's), and takes step 4 on
// the batch Strata takes; its parameters match Strata's.
//
// Tolerance. Both sides compute the same loss (mean cross-entropy) with the
// same LibTorch 1.13 CPU kernels; gradients differ only by GEMM summation
// order, ~1e-6 relative (models/interop_test.cc derives it).
//   AdamW and Adam: the new gradient enters m with weight 1 - beta1 = 0.1
//   and v with 0.001, and the update is lr * m / (sqrt(v) + eps) with lr
//   1e-3, so it moves by ~1e-3 * 1e-6 = 1e-9 at most (Adam's L2 term
//   wd * p is computed from the same parameters on both sides).
//   SGD: the update is lr * (momentum * buf + (1 - dampening) * d) (or
//   Nesterov's d + momentum * buf) with the buffer loaded exactly, so the
//   gradient's noise moves it by at most lr * 2 * 1e-6 * |g| = 2e-9 |g|,
//   and |g| < 1 (the test's gradients; the global norm is ~1).
// Both are under 1e-6 of every tensor's largest |value| (>= 3.9e-3 in
// gpt-tiny after 4 steps: 3.9e-9). Measured (the test's
// max_relative_diff): 6.3e-8 for AdamW and Adam, 1.0e-7 to 1.1e-7 for SGD.
// The attention key bias is the exception (below). A wrong lr, beta, eps,
// momentum, dampening, nesterov, group weight decay, step (bias
// correction) or a momentum buffer not loaded moves elements by >= 1e-5
// relative.
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/testing/status_matchers.h"
#include "checkpoint/strategy/checkpoint.h"
#include "models/config.h"
#include "models/factory.h"
#include "models/state_dict.h"
#include "serialization/testing/python_runner.h"
#include "serialization/torch_file.h"
#include "strategies/factory.h"

namespace strata::checkpoint {
namespace {

using serialization::testing::RunPython;
using serialization::testing::WriteTextFile;
using ::strata::testing::IsOk;

constexpr double kRelativeTolerance = 1e-6;
constexpr double kLr = 1e-3;

std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir != nullptr ? dir : "/tmp") + "/" + name;
}

std::string ReferencePath() {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  return std::string(srcdir != nullptr ? srcdir : ".") +
         "/strata/models/testdata/gpt_reference.py";
}

std::string ConfigJson(const models::ModelConfig& c) {
  return absl::StrCat(
      "{\"vocab_size\": ", c.vocab_size, ", \"seq_len\": ", c.seq_len,
      ", \"num_layers\": ", c.num_layers, ", \"num_heads\": ", c.num_heads,
      ", \"dim\": ", c.dim, ", \"ffn_dim\": ", c.ffn_dim,
      ", \"norm_eps\": ", c.norm_eps, "}");
}

constexpr char kScript[] = R"PY(
import json, os, sys, torch
import torch.nn.functional as F
sys.path.insert(0, os.path.dirname(sys.argv[1]))
import gpt_reference
cfg = json.loads(sys.argv[2])
ck = torch.load(sys.argv[3])
tokens = torch.load(sys.argv[4], weights_only=True)["tokens"]
torch.set_num_threads(1)
model = gpt_reference.Gpt(cfg)
model.load_state_dict(ck["state_dict"])
params, names = dict(model.named_parameters()), ck["optimizer"]["param_names"]
cls = {"adamw": torch.optim.AdamW, "adam": torch.optim.Adam,
       "sgd": torch.optim.SGD, "sgd_momentum": torch.optim.SGD}[
           ck["meta"]["optimizer"]]
assert cls.__name__ == sys.argv[6], (cls.__name__, sys.argv[6])
# lr: SGD's is required; load_state_dict replaces every hyperparameter.
opt = cls([{"params": [params[names[i]] for i in g["params"]]}
           for g in ck["optimizer"]["param_groups"]], lr=0.0)
# The class's own keys (each PyTorch's set: 2.x adds some, which loading
# fills with their defaults).
fresh = set(opt.state_dict()["param_groups"][0].keys())
for g in ck["optimizer"]["param_groups"]:
    assert set(g.keys()) <= fresh, (sorted(g.keys()), sorted(fresh))
opt.load_state_dict(ck["optimizer"])
logits = model(tokens[:, :-1])
loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                       tokens[:, 1:].reshape(-1))
opt.zero_grad()
loss.backward()
opt.step()
torch.save(dict(model.state_dict()), sys.argv[5])
)PY";

// One step of `strategy` on `tokens` [B, T + 1].
void Step(strategies::Strategy& strategy, const at::Tensor& tokens,
          int64_t step) {
  strategy.ZeroGrad();
  const int64_t t = tokens.size(1) - 1;
  ASSERT_THAT(strategy
                  .ForwardBackward(tokens.narrow(1, 0, t),
                                   tokens.narrow(1, 1, t), 1.0, true)
                  .status(),
              IsOk());
  ASSERT_THAT(strategy.Step(step).status(), IsOk());
}

struct InteropCase {
  std::string name;
  strategies::OptimizerConfig optimizer;
  std::string torch_class;  // What the script must pick.
};

class TorchInteropTest : public ::testing::TestWithParam<InteropCase> {};

TEST_P(TorchInteropTest, PyTorchContinuesAStrataRunLikeStrata) {
  models::ModelConfig config = *models::ConfigByName("gpt-tiny");
  config.dropout = 0.0;
  models::BuildOptions build;
  build.seed = 3;
  auto model = models::BuildModel(config, build);
  ASSERT_THAT(model, IsOk());
  strategies::OptimizerConfig optimizer = GetParam().optimizer;
  optimizer.grad_clip = 0;  // PyTorch's step does not clip.
  optimizer.weight_decay = 0.1;
  optim::LrScheduleOptions schedule;
  schedule.kind = optim::LrScheduleKind::kConstant;
  schedule.base_lr = kLr;
  auto strategy = strategies::CreateStrategy(
      strategies::StrategyOptions(), *model, nullptr, optimizer, schedule);
  ASSERT_THAT(strategy, IsOk());

  at::Generator generator = at::detail::createCPUGenerator(11);
  const int64_t vocab = std::min<int64_t>(config.vocab_size, 256);
  std::vector<at::Tensor> batches;
  for (int i = 0; i < 4; ++i) {
    batches.push_back(at::randint(vocab, {2, 33}, generator, at::kLong));
  }
  for (int64_t s = 0; s < 3; ++s) Step(**strategy, batches[s], s);

  const std::string prefix = TempPath(GetParam().name);
  const std::string ckpt = prefix + "_step_3.pth";
  SaveOptions save;
  save.format = Format::kFull;
  save.optimizer_lr = kLr;  // The rest is the strategy's OptimizerConfig.
  Contents contents;
  contents.meta.step = 3;
  ASSERT_THAT(SaveCheckpoint(ckpt, **strategy, nullptr, contents, save),
              IsOk());
  const std::string tokens_path = prefix + "_tokens.pt";
  ASSERT_THAT(models::SaveStateDict({{"tokens", batches[3]}}, tokens_path),
              IsOk());

  Step(**strategy, batches[3], 3);
  auto strata = (*strategy)->FullModelState();
  ASSERT_THAT(strata, IsOk());

  const std::string script = prefix + "_continue.py";
  const std::string out = prefix + "_python_step_4.pt";
  ASSERT_THAT(WriteTextFile(script, kScript), IsOk());
  ASSERT_THAT(RunPython({script, ReferencePath(), ConfigJson(config), ckpt,
                         tokens_path, out, GetParam().torch_class},
                        prefix + "_continue.log"),
              IsOk());
  auto read = serialization::ReadTorchFile(out);
  ASSERT_THAT(read, IsOk());
  const auto python = read->toGenericDict();
  double worst = 0;
  for (const auto& [name, value] : *strata) {
    ASSERT_TRUE(python.contains(name)) << name;
    at::Tensor got = python.at(name).toTensor();
    at::Tensor want = value;
    const double scale = value.abs().max().item<double>();
    if (absl::EndsWith(name, "attn.qkv.bias")) {
      // The key bias's gradient is zero in exact arithmetic (it adds
      // q . b_k to every score of a row, which softmax ignores), so it is
      // rounding noise and Adam's update of it (lr * g / (sqrt(v) + eps))
      // is noise too: only bounded by Adam's step bound, lr * (1 - beta1) /
      // sqrt(1 - beta2) = 3.2 lr per side (Kingma & Ba, sec. 2.1). SGD's
      // update of it is lr times that noise, far inside the bound.
      const int64_t dim = config.dim;
      const double key_diff =
          (got.narrow(0, dim, dim) - want.narrow(0, dim, dim))
              .abs()
              .max()
              .item<double>();
      EXPECT_LE(key_diff, 2 * 3.2 * kLr) << name << " (key part)";
      got = at::cat({got.narrow(0, 0, dim), got.narrow(0, 2 * dim, dim)});
      want = at::cat({want.narrow(0, 0, dim), want.narrow(0, 2 * dim, dim)});
    }
    const double diff = (got - want).abs().max().item<double>();
    EXPECT_LE(diff, kRelativeTolerance * scale) << name;
    worst = std::max(worst, diff / scale);
  }
  ::testing::Test::RecordProperty("max_relative_diff", absl::StrCat(worst));
}

strategies::OptimizerConfig Sgd(double momentum, double dampening,
                                bool nesterov) {
  strategies::OptimizerConfig config;
  config.kind = strategies::OptimizerKind::kSgd;
  config.sgd.momentum = momentum;
  config.sgd.dampening = dampening;
  config.sgd.nesterov = nesterov;
  return config;
}

strategies::OptimizerConfig Adam() {
  strategies::OptimizerConfig config;
  config.kind = strategies::OptimizerKind::kAdam;
  return config;
}

INSTANTIATE_TEST_SUITE_P(
    Optimizers, TorchInteropTest,
    ::testing::Values(
        InteropCase{"AdamW", strategies::OptimizerConfig(), "AdamW"},
        InteropCase{"Adam", Adam(), "Adam"},
        InteropCase{"SgdMomentumDampening", Sgd(0.9, 0.1, false), "SGD"},
        InteropCase{"SgdNesterov", Sgd(0.9, 0.0, true), "SGD"},
        InteropCase{"SgdPlain", Sgd(0.0, 0.0, false), "SGD"}),
    [](const ::testing::TestParamInfo<InteropCase>& info) {
      return info.param.name;
    });

}  // namespace
}  // namespace strata::checkpoint
