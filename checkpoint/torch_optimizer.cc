#include "checkpoint/torch_optimizer.h"

#include <ATen/core/List.h>
#include <ATen/ops/full.h>
#include <ATen/ops/zeros.h>

#include <cmath>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status.h"

namespace strata::checkpoint {
namespace {

using GenericDict = c10::impl::GenericDict;
using GenericList = c10::impl::GenericList;
using NamedTensors = std::vector<std::pair<std::string, at::Tensor>>;

bool IsSgd(const std::string& optimizer) {
  return optimizer == "sgd" || optimizer == "sgd_momentum";
}

// A param group of `optimizer`'s class, with the keys PyTorch 1.13's
// state_dict() writes, in its order (torch_optimizer.h).
GenericDict ParamGroup(const std::string& optimizer,
                       const OptimizerHyperparameters& hyper, bool decay,
                       c10::List<int64_t> indices) {
  GenericDict group(c10::StringType::get(), c10::AnyType::get());
  group.insert("lr", hyper.lr);
  const double weight_decay = decay ? hyper.weight_decay : 0.0;
  if (IsSgd(optimizer)) {
    group.insert("momentum", hyper.momentum);
    group.insert("dampening", hyper.dampening);
    group.insert("weight_decay", weight_decay);
    group.insert("nesterov", hyper.nesterov);
    group.insert("maximize", false);
    group.insert("foreach", c10::IValue());
    group.insert("differentiable", false);
  } else {
    group.insert("betas", c10::ivalue::Tuple::create(hyper.beta1, hyper.beta2));
    group.insert("eps", hyper.eps);
    group.insert("weight_decay", weight_decay);
    group.insert("amsgrad", false);
    if (optimizer == "adam") {
      group.insert("maximize", false);
      group.insert("foreach", c10::IValue());
      group.insert("capturable", false);
      group.insert("differentiable", false);
      group.insert("fused", false);
    } else {
      group.insert("foreach", c10::IValue());
      group.insert("maximize", false);
      group.insert("capturable", false);
    }
  }
  group.insert("params", std::move(indices));
  return group;
}

// The state tensors each trainable parameter has under `optimizer` (a
// Meta::optimizer value, or kAdamOrAdamW).
std::vector<const char*> StateKeys(const std::string& optimizer) {
  if (optimizer == "sgd") return {};
  if (optimizer == "sgd_momentum") return {"momentum_buffer"};
  return {"exp_avg", "exp_avg_sq"};
}

// A number a param group holds as an int or a float (PyTorch writes
// SGD's default momentum as the int 0).
double Number(const c10::IValue& value) {
  return value.isInt()      ? static_cast<double>(value.toInt())
         : value.isDouble() ? value.toDouble()
                            : 0.0;
}

// Index -> parameter name of a state dict without "param_names": the
// groups' indices, in order, map onto Strata's groups (same sizes) or onto
// one group of every trainable parameter.
absl::StatusOr<std::map<int64_t, std::string>> NamesByPosition(
    const std::string& where, const std::vector<std::vector<int64_t>>& groups,
    const std::vector<TorchParameter>& params) {
  std::vector<size_t> trainable;
  for (size_t i = 0; i < params.size(); ++i) {
    if (!params[i].frozen) trainable.push_back(i);
  }
  std::vector<size_t> strata_sizes;
  for (const TorchParamGroup& g : TorchParamGroups(params)) {
    strata_sizes.push_back(g.members.size());
  }
  std::vector<size_t> sizes;
  for (const auto& g : groups) sizes.push_back(g.size());
  std::vector<std::vector<size_t>> members;
  if (sizes == strata_sizes) {
    for (const TorchParamGroup& g : TorchParamGroups(params)) {
      members.push_back(g.members);
    }
  } else if (sizes.size() == 1 && sizes[0] == trainable.size()) {
    members.push_back(trainable);
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        where, " has no \"param_names\" and its param groups (sizes [",
        absl::StrJoin(sizes, ", "),
        "]) cannot be mapped to the model's parameters: expected Strata's "
        "groups (matrices and embeddings, then biases and norms: [",
        absl::StrJoin(strata_sizes, ", "), "]) or one group of all ",
        trainable.size(),
        " trainable parameters, in named_parameters() order"));
  }
  std::map<int64_t, std::string> names;
  for (size_t g = 0; g < groups.size(); ++g) {
    for (size_t k = 0; k < groups[g].size(); ++k) {
      names[groups[g][k]] = params[members[g][k]].name;
    }
  }
  return names;
}

// The groups' parameter indices and the optimizer they show ("sgd",
// "sgd_momentum" or kAdamOrAdamW); errors for malformed groups, amsgrad and
// maximize.
struct Groups {
  std::vector<std::vector<int64_t>> indices;
  std::string optimizer = kAdamOrAdamW;
};

absl::StatusOr<Groups> GroupIndices(const std::string& where,
                                    const GenericDict& optimizer) {
  Groups out;
  std::vector<std::vector<int64_t>>& groups = out.indices;
  if (!optimizer.contains("param_groups")) return out;
  const c10::IValue& value = optimizer.at("param_groups");
  if (!value.isList()) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, "[\"param_groups\"] is not a list"));
  }
  for (const c10::IValue& g : value.toListRef()) {
    if (!g.isGenericDict() || !g.toGenericDict().contains("params") ||
        !g.toGenericDict().at("params").isList()) {
      return absl::InvalidArgumentError(absl::StrCat(
          where,
          "[\"param_groups\"] holds a group that is not a dict with a "
          "\"params\" list"));
    }
    const GenericDict group = g.toGenericDict();
    if (group.contains("amsgrad") && group.at("amsgrad").isBool() &&
        group.at("amsgrad").toBool()) {
      return absl::InvalidArgumentError(
          absl::StrCat(where,
                       " has a group with amsgrad=True; Strata's Adam and "
                       "AdamW have none"));
    }
    if (group.contains("maximize") && group.at("maximize").isBool() &&
        group.at("maximize").toBool()) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, " has a group with maximize=True; Strata minimises"));
    }
    if (group.contains("momentum")) {
      if (out.optimizer == kAdamOrAdamW) out.optimizer = "sgd";
      if (Number(group.at("momentum")) != 0) out.optimizer = "sgd_momentum";
    }
    std::vector<int64_t> indices;
    const c10::IValue params = group.at("params");
    for (const c10::IValue& i : params.toListRef()) {
      if (!i.isInt()) {
        return absl::InvalidArgumentError(absl::StrCat(
            where, "[\"param_groups\"] has a parameter index that is a ",
            i.tagKind(), ", expected an int"));
      }
      indices.push_back(i.toInt());
    }
    groups.push_back(std::move(indices));
  }
  return out;
}

absl::StatusOr<std::map<int64_t, std::string>> IndexNames(
    const std::string& where, const GenericDict& optimizer,
    const std::vector<std::vector<int64_t>>& groups,
    const std::vector<TorchParameter>& params) {
  if (!optimizer.contains("param_names")) {
    return NamesByPosition(where, groups, params);
  }
  std::map<int64_t, std::string> names;
  const c10::IValue& list = optimizer.at("param_names");
  if (!list.isList()) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, "[\"param_names\"] is not a list"));
  }
  for (const c10::IValue& v : list.toListRef()) {
    if (!v.isString()) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, "[\"param_names\"] holds a ", v.tagKind(),
                       ", expected parameter names"));
    }
    names.emplace(static_cast<int64_t>(names.size()), v.toStringRef());
  }
  return names;
}

}  // namespace

std::vector<TorchParamGroup> TorchParamGroups(
    const std::vector<TorchParameter>& params) {
  TorchParamGroup decay{{}, true}, no_decay{{}, false};
  for (size_t i = 0; i < params.size(); ++i) {
    if (params[i].frozen) continue;
    (params[i].shape.size() >= 2 ? decay : no_decay).members.push_back(i);
  }
  std::vector<TorchParamGroup> groups;
  for (TorchParamGroup* g : {&decay, &no_decay}) {
    if (!g->members.empty()) groups.push_back(std::move(*g));
  }
  return groups;
}

GenericDict BuildTorchOptimizer(
    const std::vector<TorchParameter>& params, const std::string& kind,
    const OptimizerHyperparameters& hyper,
    const std::map<std::string, NamedTensors>& state, int64_t step,
    const NamedTensors& extra) {
  GenericDict optimizer(c10::StringType::get(), c10::AnyType::get());
  GenericDict saved_state(c10::IntType::get(), c10::AnyType::get());
  GenericList groups(c10::AnyType::get());
  c10::List<std::string> names;
  int64_t index = 0;
  for (const TorchParamGroup& g : TorchParamGroups(params)) {
    c10::List<int64_t> indices;
    for (size_t member : g.members) {
      const std::string& name = params[member].name;
      GenericDict s(c10::StringType::get(), c10::TensorType::get());
      // float32, as PyTorch 1.13 keeps it; exact for steps below 2^24.
      s.insert("step", at::full({}, static_cast<double>(step), at::kFloat));
      auto it = state.find(name);
      if (it != state.end()) {
        for (const auto& [key, tensor] : it->second) s.insert(key, tensor);
      }
      saved_state.insert(index, s);
      indices.push_back(index++);
      names.push_back(name);
    }
    groups.push_back(ParamGroup(kind.empty() ? "adamw" : kind, hyper, g.decay,
                                std::move(indices)));
  }
  optimizer.insert("state", saved_state);
  optimizer.insert("param_groups", groups);
  optimizer.insert("param_names", names);
  if (!extra.empty()) {
    GenericDict others(c10::StringType::get(), c10::TensorType::get());
    for (const auto& [name, tensor] : extra) others.insert(name, tensor);
    optimizer.insert("strata_state", others);
  }
  return optimizer;
}

absl::StatusOr<TorchOptimizerState> ReadTorchOptimizer(
    const std::string& where, const c10::IValue& value,
    const std::vector<TorchParameter>& params) {
  if (!value.isGenericDict()) {
    return absl::InvalidArgumentError(absl::StrCat(
        where, " is a ", value.tagKind(), ", expected an optimizer dict"));
  }
  const GenericDict optimizer = value.toGenericDict();
  STRATA_ASSIGN_OR_RETURN(const Groups groups, GroupIndices(where, optimizer));
  using IndexToName = std::map<int64_t, std::string>;
  STRATA_ASSIGN_OR_RETURN(const IndexToName names,
                          IndexNames(where, optimizer, groups.indices, params));
  TorchOptimizerState result;
  result.optimizer = groups.optimizer;
  NamedTensors& out = result.tensors;
  bool has_buffers = false;  // SGD's momentum buffers.
  // The first parameter's step and its name, to name a disagreement.
  std::string step_owner;
  double step = -1;
  if (optimizer.contains("state")) {
    if (!optimizer.at("state").isGenericDict()) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, "[\"state\"] is not a dict"));
    }
    for (const auto& entry : optimizer.at("state").toGenericDict()) {
      if (!entry.key().isInt() || !entry.value().isGenericDict()) {
        return absl::InvalidArgumentError(absl::StrCat(
            where, "[\"state\"] must map parameter indices to dicts"));
      }
      auto name = names.find(entry.key().toInt());
      if (name == names.end()) {
        return absl::InvalidArgumentError(absl::StrCat(
            where, "[\"state\"] has parameter index ", entry.key().toInt(),
            " but ", names.size(), " parameters are named"));
      }
      for (const auto& kv : entry.value().toGenericDict()) {
        if (!kv.key().isString() || !kv.value().isTensor()) continue;
        const std::string key = kv.key().toStringRef();
        const at::Tensor tensor = kv.value().toTensor();
        if (key != "step") {
          has_buffers = has_buffers || key == "momentum_buffer";
          out.emplace_back(absl::StrCat(name->second, ".", key), tensor);
          continue;
        }
        const double s = tensor.to(at::kDouble).reshape({-1})[0].item<double>();
        if (step_owner.empty()) {
          step_owner = name->second;
          step = s;
        } else if (s != step) {
          return absl::InvalidArgumentError(
              absl::StrCat(where, ": parameters have different steps ('",
                           step_owner, "' ", step, ", '", name->second, "' ", s,
                           "); Strata keeps one step for all parameters"));
        }
      }
    }
  }
  std::set<std::string> read;
  for (const auto& [name, tensor] : out) read.insert(name);
  for (const TorchParameter& p : params) {
    if (p.shape.empty()) continue;
    for (const char* key : StateKeys(result.optimizer)) {
      const std::string name = absl::StrCat(p.name, ".", key);
      if (read.count(name) == 0) {
        out.emplace_back(name, at::zeros(p.shape, at::kFloat));
      }
    }
  }
  // PyTorch's SGD keeps no step; its buffers mean a step was taken, which
  // is all Strata's SGD reads its step for (torch_optimizer.h).
  if (step_owner.empty() && has_buffers) step = 1;
  out.emplace_back(
      "step",
      at::full({}, static_cast<int64_t>(std::llround(std::max(step, 0.0))),
               at::kLong));
  if (optimizer.contains("strata_state") &&
      optimizer.at("strata_state").isGenericDict()) {
    for (const auto& kv : optimizer.at("strata_state").toGenericDict()) {
      if (!kv.key().isString() || !kv.value().isTensor()) continue;
      out.emplace_back(kv.key().toStringRef(), kv.value().toTensor());
    }
  }
  return result;
}

}  // namespace strata::checkpoint
