#include "checkpoint/torch_optimizer.h"

#include <ATen/ops/arange.h>
#include <ATen/ops/equal.h>
#include <ATen/ops/full.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "base/testing/status_matchers.h"

namespace strata::checkpoint {
namespace {

using ::strata::testing::IsOk;
using ::testing::HasSubstr;
using GenericDict = c10::impl::GenericDict;
using GenericList = c10::impl::GenericList;
using NamedTensors = std::vector<std::pair<std::string, at::Tensor>>;

// wte (matrix), b (bias), w (matrix), ln (norm gain, frozen), g (norm gain).
std::vector<TorchParameter> Params() {
  return {{"wte", {3, 2}, false},
          {"b", {2}, false},
          {"w", {2, 2}, false},
          {"ln", {2}, true},
          {"g", {2}, false}};
}

at::Tensor Filled(std::vector<int64_t> shape, double value) {
  return at::full(shape, value, at::kFloat);
}

// Moments: exp_avg = 1 + position, exp_avg_sq = 10 + position.
std::map<std::string, NamedTensors> State() {
  std::map<std::string, NamedTensors> state;
  const std::vector<TorchParameter> params = Params();
  for (size_t i = 0; i < params.size(); ++i) {
    if (params[i].frozen) continue;
    state[params[i].name] = {{"exp_avg", Filled(params[i].shape, 1.0 + i)},
                             {"exp_avg_sq", Filled(params[i].shape, 10.0 + i)}};
  }
  return state;
}

OptimizerHyperparameters Hyper() {
  OptimizerHyperparameters h;
  h.lr = 2e-3;
  h.beta1 = 0.8;
  h.beta2 = 0.95;
  h.eps = 1e-6;
  h.weight_decay = 0.05;
  h.momentum = 0.9;
  h.dampening = 0.1;
  h.nesterov = false;
  return h;
}

TEST(TorchOptimizerTest, GroupsAreDecayThenNoDecayWithoutFrozen) {
  const std::vector<TorchParamGroup> groups = TorchParamGroups(Params());
  ASSERT_EQ(groups.size(), 2u);
  EXPECT_TRUE(groups[0].decay);
  EXPECT_EQ(groups[0].members, (std::vector<size_t>{0, 2}));
  EXPECT_FALSE(groups[1].decay);
  EXPECT_EQ(groups[1].members, (std::vector<size_t>{1, 4}));
}

TEST(TorchOptimizerTest, BuildWritesAdamWStateDictLayout) {
  const GenericDict opt =
      BuildTorchOptimizer(Params(), "adamw", Hyper(), State(), 7, {});
  const auto groups = opt.at("param_groups").toListRef();
  ASSERT_EQ(groups.size(), 2u);
  const GenericDict decay = groups[0].toGenericDict();
  EXPECT_EQ(decay.at("lr").toDouble(), 2e-3);
  EXPECT_EQ(decay.at("betas").toTupleRef().elements()[0].toDouble(), 0.8);
  EXPECT_EQ(decay.at("betas").toTupleRef().elements()[1].toDouble(), 0.95);
  EXPECT_EQ(decay.at("eps").toDouble(), 1e-6);
  EXPECT_EQ(decay.at("weight_decay").toDouble(), 0.05);
  EXPECT_FALSE(decay.at("amsgrad").toBool());
  EXPECT_TRUE(decay.at("foreach").isNone());
  EXPECT_FALSE(decay.at("maximize").toBool());
  EXPECT_FALSE(decay.at("capturable").toBool());
  EXPECT_EQ(decay.at("params").toIntVector(), (std::vector<int64_t>{0, 1}));
  const GenericDict no_decay = groups[1].toGenericDict();
  EXPECT_EQ(no_decay.at("weight_decay").toDouble(), 0.0);
  EXPECT_EQ(no_decay.at("params").toIntVector(), (std::vector<int64_t>{2, 3}));
  std::vector<std::string> names;
  const c10::IValue param_names = opt.at("param_names");
  for (const auto& v : param_names.toListRef()) {
    names.push_back(v.toStringRef());
  }
  EXPECT_EQ(names, (std::vector<std::string>{"wte", "w", "b", "g"}));
  const GenericDict state = opt.at("state").toGenericDict();
  ASSERT_EQ(state.size(), 4u);
  // Index 1 is "w" (position 2): exp_avg 3.
  const GenericDict w = state.at(int64_t{1}).toGenericDict();
  EXPECT_TRUE(at::equal(w.at("exp_avg").toTensor(), Filled({2, 2}, 3.0)));
  const at::Tensor step_w = w.at("step").toTensor();
  const at::Tensor step_wte =
      state.at(int64_t{0}).toGenericDict().at("step").toTensor();
  EXPECT_EQ(step_w.scalar_type(), at::kFloat);
  EXPECT_EQ(step_w.dim(), 0);
  EXPECT_EQ(step_w.item<float>(), 7.0f);
  // PyTorch increments each step in place: they must not share memory.
  EXPECT_NE(step_w.data_ptr(), step_wte.data_ptr());
  EXPECT_FALSE(opt.contains("strata_state"));
}

std::map<std::string, at::Tensor> ByName(const NamedTensors& tensors) {
  std::map<std::string, at::Tensor> out;
  for (const auto& [name, t] : tensors) out[name] = t;
  return out;
}

TEST(TorchOptimizerTest, ReadInvertsBuild) {
  const GenericDict opt = BuildTorchOptimizer(
      Params(), "adamw", Hyper(), State(), 7, {{"scaler", Filled({1}, 4.0)}});
  auto read = ReadTorchOptimizer("opt", opt, Params());
  ASSERT_THAT(read, IsOk());
  EXPECT_EQ(read->optimizer, kAdamOrAdamW);
  const auto got = ByName(read->tensors);
  const std::vector<TorchParameter> params = Params();
  // 4 trainable x 2 moments, the frozen one's 2 zero moments, step, scaler.
  EXPECT_EQ(got.size(), 12u);
  for (const auto& [name, tensors] : State()) {
    for (const auto& [key, t] : tensors) {
      ASSERT_EQ(got.count(name + "." + key), 1u) << name << "." << key;
      EXPECT_TRUE(at::equal(got.at(name + "." + key), t)) << name;
    }
  }
  EXPECT_TRUE(at::equal(got.at("ln.exp_avg"), Filled({2}, 0.0)));
  EXPECT_TRUE(at::equal(got.at("ln.exp_avg_sq"), Filled({2}, 0.0)));
  EXPECT_EQ(got.at("step").scalar_type(), at::kLong);
  EXPECT_EQ(got.at("step").item<int64_t>(), 7);
  EXPECT_TRUE(at::equal(got.at("scaler"), Filled({1}, 4.0)));
}

// A dict as torch.optim.AdamW.state_dict() writes it: groups of consecutive
// indices, no "param_names"; moments = index + 1.
GenericDict PyTorchDict(
    const std::vector<std::vector<int64_t>>& shapes_by_index,
    const std::vector<int64_t>& group_sizes, const std::vector<double>& steps) {
  GenericDict opt(c10::StringType::get(), c10::AnyType::get());
  GenericDict state(c10::IntType::get(), c10::AnyType::get());
  for (size_t i = 0; i < shapes_by_index.size(); ++i) {
    GenericDict s(c10::StringType::get(), c10::TensorType::get());
    s.insert("step", at::full({}, steps[i], at::kFloat));
    s.insert("exp_avg", Filled(shapes_by_index[i], 1.0 + i));
    s.insert("exp_avg_sq", Filled(shapes_by_index[i], 1.0 + i));
    state.insert(static_cast<int64_t>(i), s);
  }
  GenericList groups(c10::AnyType::get());
  int64_t next = 0;
  for (int64_t size : group_sizes) {
    GenericDict g(c10::StringType::get(), c10::AnyType::get());
    c10::List<int64_t> params;
    for (int64_t k = 0; k < size; ++k) params.push_back(next++);
    g.insert("params", params);
    g.insert("amsgrad", false);
    groups.push_back(g);
  }
  opt.insert("state", state);
  opt.insert("param_groups", groups);
  return opt;
}

TEST(TorchOptimizerTest, PyTorchTwoGroupsMapByPosition) {
  // Strata's groups: wte, w (decay) then b, g; "ln" is frozen.
  auto read = ReadTorchOptimizer(
      "opt", PyTorchDict({{3, 2}, {2, 2}, {2}, {2}}, {2, 2}, {5, 5, 5, 5}),
      Params());
  ASSERT_THAT(read, IsOk());
  const auto got = ByName(read->tensors);
  EXPECT_TRUE(at::equal(got.at("wte.exp_avg"), Filled({3, 2}, 1.0)));
  EXPECT_TRUE(at::equal(got.at("w.exp_avg"), Filled({2, 2}, 2.0)));
  EXPECT_TRUE(at::equal(got.at("b.exp_avg"), Filled({2}, 3.0)));
  EXPECT_TRUE(at::equal(got.at("g.exp_avg_sq"), Filled({2}, 4.0)));
  EXPECT_EQ(got.at("step").item<int64_t>(), 5);
}

TEST(TorchOptimizerTest, PyTorchOneGroupMapsInNamedParametersOrder) {
  // One group over the trainable parameters: wte, b, w, g.
  auto read = ReadTorchOptimizer(
      "opt", PyTorchDict({{3, 2}, {2}, {2, 2}, {2}}, {4}, {3, 3, 3, 3}),
      Params());
  ASSERT_THAT(read, IsOk());
  const auto got = ByName(read->tensors);
  EXPECT_TRUE(at::equal(got.at("b.exp_avg"), Filled({2}, 2.0)));
  EXPECT_TRUE(at::equal(got.at("w.exp_avg"), Filled({2, 2}, 3.0)));
}

TEST(TorchOptimizerTest, UnmappableGroupsNameTheirSizes) {
  auto read = ReadTorchOptimizer(
      "'x.pth' \"optimizer\"",
      PyTorchDict({{3, 2}, {2}, {2, 2}}, {1, 2}, {1, 1, 1}), Params());
  ASSERT_FALSE(read.ok());
  EXPECT_THAT(read.status().message(), HasSubstr("'x.pth' \"optimizer\""));
  EXPECT_THAT(read.status().message(), HasSubstr("sizes [1, 2]"));
  EXPECT_THAT(read.status().message(), HasSubstr("[2, 2]"));
}

TEST(TorchOptimizerTest, DifferentStepsAreAnError) {
  auto read = ReadTorchOptimizer(
      "opt", PyTorchDict({{3, 2}, {2}, {2, 2}, {2}}, {4}, {3, 3, 2, 3}),
      Params());
  ASSERT_FALSE(read.ok());
  EXPECT_THAT(read.status().message(), HasSubstr("'w' 2"));
}

TEST(TorchOptimizerTest, AmsgradIsAnError) {
  GenericDict opt = PyTorchDict({{3, 2}, {2}, {2, 2}, {2}}, {4}, {1, 1, 1, 1});
  opt.at("param_groups")
      .toListRef()[0]
      .toGenericDict()
      .insert_or_assign("amsgrad", true);
  auto read = ReadTorchOptimizer("opt", opt, Params());
  ASSERT_FALSE(read.ok());
  EXPECT_THAT(read.status().message(), HasSubstr("amsgrad"));
}

TEST(TorchOptimizerTest, NoStateIsZeroMomentsAtStepZero) {
  auto read = ReadTorchOptimizer("opt", PyTorchDict({}, {2, 2}, {}), Params());
  ASSERT_THAT(read, IsOk());
  const auto got = ByName(read->tensors);
  EXPECT_EQ(got.size(), 11u);  // 5 parameters x 2 moments, step.
  EXPECT_TRUE(at::equal(got.at("wte.exp_avg"), Filled({3, 2}, 0.0)));
  EXPECT_EQ(got.at("step").item<int64_t>(), 0);
}

TEST(TorchOptimizerTest, MaximizeIsAnError) {
  GenericDict opt = PyTorchDict({{3, 2}, {2}, {2, 2}, {2}}, {4}, {1, 1, 1, 1});
  opt.at("param_groups")
      .toListRef()[0]
      .toGenericDict()
      .insert_or_assign("maximize", true);
  auto read = ReadTorchOptimizer("opt", opt, Params());
  ASSERT_FALSE(read.ok());
  EXPECT_THAT(read.status().message(), HasSubstr("maximize=True"));
}

// Momentum buffers = 1 + position.
std::map<std::string, NamedTensors> SgdState() {
  std::map<std::string, NamedTensors> state;
  const std::vector<TorchParameter> params = Params();
  for (size_t i = 0; i < params.size(); ++i) {
    if (params[i].frozen) continue;
    state[params[i].name] = {
        {"momentum_buffer", Filled(params[i].shape, 1.0 + i)}};
  }
  return state;
}

std::vector<std::string> Keys(const GenericDict& dict) {
  std::vector<std::string> keys;
  for (const auto& kv : dict) keys.push_back(kv.key().toStringRef());
  return keys;
}

TEST(TorchOptimizerTest, BuildWritesSgdStateDictLayout) {
  const GenericDict opt =
      BuildTorchOptimizer(Params(), "sgd_momentum", Hyper(), SgdState(), 7, {});
  const auto groups = opt.at("param_groups").toListRef();
  ASSERT_EQ(groups.size(), 2u);
  const GenericDict decay = groups[0].toGenericDict();
  // torch.optim.SGD(...).state_dict()'s keys in PyTorch 1.13, in order.
  EXPECT_EQ(Keys(decay),
            (std::vector<std::string>{"lr", "momentum", "dampening",
                                      "weight_decay", "nesterov", "maximize",
                                      "foreach", "differentiable", "params"}));
  EXPECT_EQ(decay.at("lr").toDouble(), 2e-3);
  EXPECT_EQ(decay.at("momentum").toDouble(), 0.9);
  EXPECT_EQ(decay.at("dampening").toDouble(), 0.1);
  EXPECT_EQ(decay.at("weight_decay").toDouble(), 0.05);
  EXPECT_FALSE(decay.at("nesterov").toBool());
  EXPECT_EQ(groups[1].toGenericDict().at("weight_decay").toDouble(), 0.0);
  const GenericDict state = opt.at("state").toGenericDict();
  ASSERT_EQ(state.size(), 4u);
  // Index 1 is "w" (position 2): buffer 3.
  const GenericDict w = state.at(int64_t{1}).toGenericDict();
  EXPECT_TRUE(
      at::equal(w.at("momentum_buffer").toTensor(), Filled({2, 2}, 3.0)));
  EXPECT_EQ(w.at("step").toTensor().item<float>(), 7.0f);
}

TEST(TorchOptimizerTest, BuildWritesAdamsKeys) {
  const GenericDict opt =
      BuildTorchOptimizer(Params(), "adam", Hyper(), State(), 7, {});
  // torch.optim.Adam(...).state_dict()'s keys in PyTorch 1.13, in order.
  EXPECT_EQ(Keys(opt.at("param_groups").toListRef()[0].toGenericDict()),
            (std::vector<std::string>{
                "lr", "betas", "eps", "weight_decay", "amsgrad", "maximize",
                "foreach", "capturable", "differentiable", "fused", "params"}));
}

TEST(TorchOptimizerTest, SgdReadInvertsBuild) {
  const GenericDict opt =
      BuildTorchOptimizer(Params(), "sgd_momentum", Hyper(), SgdState(), 7, {});
  auto read = ReadTorchOptimizer("opt", opt, Params());
  ASSERT_THAT(read, IsOk());
  EXPECT_EQ(read->optimizer, "sgd_momentum");
  const auto got = ByName(read->tensors);
  // 4 trainable buffers, the frozen one's zero buffer, step.
  EXPECT_EQ(got.size(), 6u);
  EXPECT_TRUE(at::equal(got.at("w.momentum_buffer"), Filled({2, 2}, 3.0)));
  EXPECT_TRUE(at::equal(got.at("ln.momentum_buffer"), Filled({2}, 0.0)));
  EXPECT_EQ(got.at("step").item<int64_t>(), 7);
}

TEST(TorchOptimizerTest, SgdWithoutMomentumKeepsTheStepOnly) {
  OptimizerHyperparameters hyper = Hyper();
  hyper.momentum = 0;
  const GenericDict opt =
      BuildTorchOptimizer(Params(), "sgd", hyper, {}, 5, {});
  EXPECT_EQ(opt.at("state").toGenericDict().size(), 4u);
  auto read = ReadTorchOptimizer("opt", opt, Params());
  ASSERT_THAT(read, IsOk());
  EXPECT_EQ(read->optimizer, "sgd");
  ASSERT_EQ(read->tensors.size(), 1u);
  EXPECT_EQ(read->tensors[0].first, "step");
  EXPECT_EQ(read->tensors[0].second.item<int64_t>(), 5);
}

TEST(TorchOptimizerTest, PyTorchSgdBuffersWithoutAStepReadAsStepOne) {
  // As torch.optim.SGD(params, lr, momentum=0.9).state_dict() writes it:
  // momentum buffers and no step.
  GenericDict opt(c10::StringType::get(), c10::AnyType::get());
  GenericDict state(c10::IntType::get(), c10::AnyType::get());
  const std::vector<std::vector<int64_t>> shapes = {{3, 2}, {2}, {2, 2}, {2}};
  for (size_t i = 0; i < shapes.size(); ++i) {
    GenericDict s(c10::StringType::get(), c10::TensorType::get());
    s.insert("momentum_buffer", Filled(shapes[i], 1.0 + i));
    state.insert(static_cast<int64_t>(i), s);
  }
  GenericList groups(c10::AnyType::get());
  GenericDict g(c10::StringType::get(), c10::AnyType::get());
  g.insert("momentum", 0.9);
  g.insert("params", c10::List<int64_t>({0, 1, 2, 3}));
  groups.push_back(g);
  opt.insert("state", state);
  opt.insert("param_groups", groups);
  auto read = ReadTorchOptimizer("opt", opt, Params());
  ASSERT_THAT(read, IsOk());
  EXPECT_EQ(read->optimizer, "sgd_momentum");
  const auto got = ByName(read->tensors);
  EXPECT_TRUE(at::equal(got.at("b.momentum_buffer"), Filled({2}, 2.0)));
  EXPECT_EQ(got.at("step").item<int64_t>(), 1);
}

TEST(TorchOptimizerTest, PyTorchSgdWithIntMomentumZeroIsPlainSgd) {
  GenericDict opt = PyTorchDict({}, {4}, {});
  opt.at("param_groups")
      .toListRef()[0]
      .toGenericDict()
      .insert_or_assign("momentum", int64_t{0});
  auto read = ReadTorchOptimizer("opt", opt, Params());
  ASSERT_THAT(read, IsOk());
  EXPECT_EQ(read->optimizer, "sgd");
}

}  // namespace
}  // namespace strata::checkpoint
