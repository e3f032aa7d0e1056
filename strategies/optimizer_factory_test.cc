// CreateOptimizer builds the optimizer an OptimizerConfig names, and each
// one equals its torch.optim class in Debian's python3-torch: Strata writes
// the initial parameters (three ranges with weight decays 0.1, 0 and 0.01,
// which become three PyTorch param groups), six gradients and six learning
// rates into a PyTorch file; a Python script (/usr/bin/python3) runs
// torch.optim.<Class> over them and saves the final parameters and, per
// element, the path length sum_t |p_t - p_(t-1)|; Strata runs the same steps
// and compares.
//
// Tolerance, per element: |strata - torch| <= 1e-6 * (|torch| + path).
// Both sides run the same float operations in the same order (optim/adamw.h,
// optim/sgd.h); they differ only where one side fuses a multiply-add
// (LibTorch's vectorised add with alpha) that the other rounds twice: one
// rounding of 2^-24 relative to the operation's result, with about two such
// roundings per step reaching a parameter (its update and the state it
// reads). Those results are bounded by the element's largest value over
// the run, |p_t| <= |p_T| + path, and by the step's update,
// |p_t - p_(t-1)| <= path; state (moments, momentum buffers) carries a
// rounding of the same relative size into later updates. Six steps give at
// most 6 * 2 * 2^-24 = 7.2e-7 relative; measured: 1.6e-7 to 2.0e-7 (the
// test's max_relative_error). `path` is the absolute floor: an element
// that ends near zero (|p_T| small after a move of `path`) keeps the
// rounding of the values it passed through. A wrong
// hyperparameter (beta, eps, momentum, dampening, nesterov, the decay mode
// or a range's weight decay) moves elements by far more than 1e-6 relative.
#include "strategies/optimizer_factory.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/testing/status_matchers.h"
#include "optim/optimizer.h"
#include "serialization/testing/python_runner.h"
#include "serialization/torch_file.h"
#include "strategies/options.h"

namespace strata::strategies {
namespace {

using serialization::testing::RunPython;
using serialization::testing::WriteTextFile;
using ::strata::testing::IsOk;
using ::testing::HasSubstr;

const std::vector<int64_t> kSizes = {5000, 7, 3001};
const std::vector<double> kWeightDecays = {0.1, 0.0, 0.01};
const std::vector<double> kLrs = {1e-2, 3e-3, 5e-3, 1e-2, 2e-3, 7e-3};

std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir != nullptr ? dir : "/tmp") + "/" + name;
}

std::vector<optim::ParamRange> Ranges() {
  std::vector<optim::ParamRange> ranges;
  int64_t offset = 0;
  for (size_t i = 0; i < kSizes.size(); ++i) {
    ranges.push_back({offset, kSizes[i], kWeightDecays[i]});
    offset += kSizes[i];
  }
  return ranges;
}

// One N(0, 1) tensor per range, scaled by `scale`.
std::vector<at::Tensor> RandomParts(at::Generator& generator, double scale) {
  std::vector<at::Tensor> parts;
  for (int64_t size : kSizes) {
    parts.push_back(at::randn({size}, generator, at::kFloat) * scale);
  }
  return parts;
}

// The torch.optim class and keyword arguments `config` stands for.
std::string PythonSpec(const OptimizerConfig& config) {
  switch (config.kind) {
    case OptimizerKind::kAdamW:
    case OptimizerKind::kAdam:
      return absl::StrCat(
          "{\"class\": \"",
          config.kind == OptimizerKind::kAdam ? "Adam" : "AdamW",
          "\", \"kwargs\": {\"betas\": [", config.adamw.beta1, ", ",
          config.adamw.beta2, "], \"eps\": ", config.adamw.eps, "}}");
    case OptimizerKind::kSgd:
      return absl::StrCat(
          "{\"class\": \"SGD\", \"kwargs\": {\"momentum\": ",
          config.sgd.momentum, ", \"dampening\": ", config.sgd.dampening,
          ", \"nesterov\": ", config.sgd.nesterov ? "true" : "false", "}}");
  }
  return "";
}

constexpr char kScript[] = R"PY(
import json, sys, torch
spec = json.loads(sys.argv[1])
data = torch.load(sys.argv[2])
torch.set_num_threads(1)
params = [p.clone().requires_grad_() for p in data["params"]]
groups = [{"params": [p], "weight_decay": wd}
          for p, wd in zip(params, data["weight_decays"].tolist())]
opt = getattr(torch.optim, spec["class"])(groups, lr=0.0, **spec["kwargs"])
path = [torch.zeros_like(p) for p in params]
for lr, grads in zip(data["lrs"].tolist(), data["grads"]):
    for group in opt.param_groups:
        group["lr"] = lr
    before = [p.detach().clone() for p in params]
    for p, g in zip(params, grads):
        p.grad = g.clone()
    opt.step()
    for total, p, b in zip(path, params, before):
        total += (p.detach() - b).abs()
torch.save({"params": [p.detach() for p in params], "path": path},
           sys.argv[3])
)PY";

c10::impl::GenericList TensorList(const std::vector<at::Tensor>& tensors) {
  c10::impl::GenericList list(c10::TensorType::get());
  for (const at::Tensor& t : tensors) list.push_back(t);
  return list;
}

struct TorchCase {
  std::string name;
  OptimizerConfig config;
};

class MatchesTorchOptimTest : public ::testing::TestWithParam<TorchCase> {};

TEST_P(MatchesTorchOptimTest, OnAFixedSequenceOfGradients) {
  const OptimizerConfig& config = GetParam().config;
  const std::string prefix = TempPath(GetParam().name);
  at::Generator generator = at::detail::createCPUGenerator(17);
  // Values of a few units: parameters and gradients of trained models.
  const std::vector<at::Tensor> initial = RandomParts(generator, 0.5);
  std::vector<std::vector<at::Tensor>> grads;
  c10::impl::GenericList grad_lists(c10::AnyType::get());
  for (size_t step = 0; step < kLrs.size(); ++step) {
    grads.push_back(RandomParts(generator, 1.0));
    grad_lists.push_back(TensorList(grads.back()));
  }
  c10::impl::GenericDict data(c10::StringType::get(), c10::AnyType::get());
  data.insert("params", TensorList(initial));
  data.insert("grads", grad_lists);
  data.insert("lrs", at::tensor(kLrs, at::kDouble));
  data.insert("weight_decays", at::tensor(kWeightDecays, at::kDouble));
  ASSERT_THAT(serialization::WriteTorchFile(prefix + "_in.pt", data), IsOk());
  ASSERT_THAT(WriteTextFile(prefix + ".py", kScript), IsOk());
  ASSERT_THAT(RunPython({prefix + ".py", PythonSpec(config), prefix + "_in.pt",
                         prefix + "_out.pt"},
                        prefix + ".log"),
              IsOk());

  at::Tensor params = at::cat(initial);
  at::Tensor flat_grads = at::zeros_like(params);
  auto optimizer = CreateOptimizer(config, params, flat_grads, Ranges());
  ASSERT_THAT(optimizer, IsOk());
  for (size_t step = 0; step < kLrs.size(); ++step) {
    flat_grads.copy_(at::cat(grads[step]));
    (*optimizer)->Step(kLrs[step]);
  }

  auto read = serialization::ReadTorchFile(prefix + "_out.pt");
  ASSERT_THAT(read, IsOk());
  const auto out = read->toGenericDict();
  std::vector<at::Tensor> torch_params, path;
  // Held by value: toListRef() refers into the IValue.
  const c10::IValue params_list = out.at("params");
  const c10::IValue steps = out.at("path");
  for (const c10::IValue& v : params_list.toListRef()) {
    torch_params.push_back(v.toTensor());
  }
  for (const c10::IValue& v : steps.toListRef()) {
    path.push_back(v.toTensor());
  }
  const at::Tensor want = at::cat(torch_params);
  const at::Tensor moved = at::cat(path);
  // Every element moved: the comparison is not of untouched values.
  ASSERT_GT(moved.min().item<double>(), 0) << GetParam().name;
  const at::Tensor error = (params - want).abs() / (want.abs() + moved);
  const double worst = error.max().item<double>();
  RecordProperty("max_relative_error", ::testing::PrintToString(worst));
  EXPECT_LE(worst, 1e-6) << GetParam().name << ": element "
                         << error.argmax().item<int64_t>();
}

OptimizerConfig Config(OptimizerKind kind) {
  OptimizerConfig config;
  config.kind = kind;
  config.adamw.beta1 = 0.9;
  config.adamw.beta2 = 0.95;
  config.adamw.eps = 1e-8;
  return config;
}

OptimizerConfig Sgd(double momentum, double dampening, bool nesterov) {
  OptimizerConfig config = Config(OptimizerKind::kSgd);
  config.sgd.momentum = momentum;
  config.sgd.dampening = dampening;
  config.sgd.nesterov = nesterov;
  return config;
}

INSTANTIATE_TEST_SUITE_P(
    Optimizers, MatchesTorchOptimTest,
    ::testing::Values(TorchCase{"AdamW", Config(OptimizerKind::kAdamW)},
                      TorchCase{"Adam", Config(OptimizerKind::kAdam)},
                      TorchCase{"SgdPlain", Sgd(0.0, 0.0, false)},
                      TorchCase{"SgdMomentumDampening", Sgd(0.9, 0.3, false)},
                      TorchCase{"SgdNesterov", Sgd(0.9, 0.0, true)}),
    [](const ::testing::TestParamInfo<TorchCase>& info) {
      return info.param.name;
    });

TEST(CreateOptimizerTest, BuildsTheKindTheConfigNames) {
  for (const auto& [kind, name] :
       std::vector<std::pair<OptimizerKind, std::string>>{
           {OptimizerKind::kAdamW, "adamw"},
           {OptimizerKind::kAdam, "adam"},
           {OptimizerKind::kSgd, "sgd"}}) {
    auto optimizer =
        CreateOptimizer(Config(kind), at::zeros({4}), at::zeros({4}), {});
    ASSERT_THAT(optimizer, IsOk());
    EXPECT_EQ((*optimizer)->name(), name);
  }
}

TEST(CreateOptimizerTest, SgdStateFollowsMomentum) {
  auto plain =
      CreateOptimizer(Sgd(0.0, 0.0, false), at::zeros({4}), at::zeros({4}), {});
  ASSERT_THAT(plain, IsOk());
  ASSERT_EQ((*plain)->State().size(), 1u);
  EXPECT_EQ((*plain)->State()[0].first, "step");
  auto momentum =
      CreateOptimizer(Sgd(0.9, 0.0, false), at::zeros({4}), at::zeros({4}), {});
  ASSERT_THAT(momentum, IsOk());
  ASSERT_EQ((*momentum)->State().size(), 2u);
  EXPECT_EQ((*momentum)->State()[0].first, "momentum_buffer");
}

TEST(CreateOptimizerTest, InvalidConfigNamesTheFlag) {
  auto optimizer =
      CreateOptimizer(Sgd(0.0, 0.0, true), at::zeros({4}), at::zeros({4}), {});
  EXPECT_THAT(
      optimizer.status().message(),
      HasSubstr("--nesterov needs --momentum > 0 and --dampening == 0"));
}

}  // namespace
}  // namespace strata::strategies
