#include "strategies/activation_checkpointing.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/autocast_mode.h>
#include <ATen/core/Generator.h>
#include <ATen/core/ivalue.h>
#include <c10/core/GradMode.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/functions/accumulate_grad.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status.h"
#include "base/torch_compat.h"
#include "glog/logging.h"

namespace strata::strategies {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// What the backward of one checkpointed unit call needs; lives in the
// autograd node (as a capsule) until the graph is freed.
struct RecomputeState : torch::CustomClassHolder {
  std::string unit_name;
  // The interceptor chain inside the checkpointing interceptor, then the
  // unit's forward; it owns what it calls.
  models::UnitForward forward;
  // The parameters passed to the node, in the node's input order after the
  // activation input.
  std::vector<at::Tensor> parameters;
  bool input_requires_grad = false;
  bool preserve_rng_state = true;
  at::Tensor rng_state;  // The CPU generator's state before the forward.
  // Autocast as the forward ran (an outer interceptor may have enabled it);
  // the recomputation runs under the same settings.
  torch_compat::AutocastState autocast_cpu{false, at::kBFloat16};
  torch_compat::AutocastState autocast_gpu{false, at::kHalf};
  std::shared_ptr<std::atomic<int64_t>> recomputations;
};

// Sets the default CPU generator's state to `state` (when given) and restores
// the state it had when the guard was created.
class CpuRngStateGuard {
 public:
  explicit CpuRngStateGuard(const at::Tensor* state) {
    if (state == nullptr) return;
    at::Generator generator = at::detail::getDefaultCPUGenerator();
    std::lock_guard<std::mutex> lock(generator.mutex());
    previous_ = generator.get_state();
    generator.set_state(*state);
  }
  ~CpuRngStateGuard() {
    if (!previous_.defined()) return;
    at::Generator generator = at::detail::getDefaultCPUGenerator();
    std::lock_guard<std::mutex> lock(generator.mutex());
    generator.set_state(previous_);
  }
  CpuRngStateGuard(const CpuRngStateGuard&) = delete;
  CpuRngStateGuard& operator=(const CpuRngStateGuard&) = delete;

 private:
  at::Tensor previous_;
};

// Sets autocast (CPU and GPU: enabled, dtype) as `state` records it for the
// guard's lifetime, then restores what was set before (clearing autocast's
// cast cache if autocast was off before, as leaving an autocast region does).
class AutocastStateGuard {
 public:
  explicit AutocastStateGuard(const RecomputeState& state)
      : cpu_(torch_compat::GetAutocastState(c10::kCPU)),
        gpu_(torch_compat::GetAutocastState(c10::kCUDA)) {
    torch_compat::SetAutocastState(c10::kCPU, state.autocast_cpu);
    torch_compat::SetAutocastState(c10::kCUDA, state.autocast_gpu);
  }
  ~AutocastStateGuard() {
    torch_compat::SetAutocastState(c10::kCPU, cpu_);
    torch_compat::SetAutocastState(c10::kCUDA, gpu_);
    if (!cpu_.enabled && !gpu_.enabled) at::autocast::clear_cache();
  }
  AutocastStateGuard(const AutocastStateGuard&) = delete;
  AutocastStateGuard& operator=(const AutocastStateGuard&) = delete;

 private:
  torch_compat::AutocastState cpu_;
  torch_compat::AutocastState gpu_;
};

// Throws if the graph of `output` reaches a leaf requiring grad that is not
// in `allowed`: its gradient would not be returned by the node.
void CheckRecomputedGraph(const at::Tensor& output,
                          const std::vector<at::Tensor>& allowed,
                          const std::string& unit_name) {
  if (output.grad_fn() == nullptr) return;
  std::unordered_set<const c10::TensorImpl*> allowed_impls;
  for (const at::Tensor& t : allowed)
    allowed_impls.insert(t.unsafeGetTensorImpl());
  std::unordered_set<const torch::autograd::Node*> seen;
  std::vector<torch::autograd::Node*> stack = {output.grad_fn().get()};
  seen.insert(stack.back());
  while (!stack.empty()) {
    torch::autograd::Node* node = stack.back();
    stack.pop_back();
    for (const torch::autograd::Edge& edge : node->next_edges()) {
      torch::autograd::Node* next = edge.function.get();
      if (next == nullptr || !seen.insert(next).second) continue;
      if (auto* leaf = dynamic_cast<torch::autograd::AccumulateGrad*>(next)) {
        if (allowed_impls.count(leaf->variable.unsafeGetTensorImpl()) == 0) {
          throw std::runtime_error(absl::StrCat(
              "activation checkpointing of unit '", unit_name,
              "': its forward reads a tensor requiring grad (shape ",
              c10::str(leaf->variable.sizes()), ", ",
              c10::toString(leaf->variable.scalar_type()),
              ") that is neither its input nor one of its parameters "
              "(UnitInfo::parameters) or shared parameters declared for it "
              "(SharedParameters()); its gradient cannot be returned. A unit "
              "must not capture activations or parameters of other units "
              "(models/README.md)"));
        }
        continue;
      }
      stack.push_back(next);
    }
  }
}

class CheckpointFunction
    : public torch::autograd::Function<CheckpointFunction> {
 public:
  // Runs the unit without keeping activations. Called by Function::apply
  // with grad mode off.
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& input,
                            at::TensorList parameters,
                            c10::intrusive_ptr<RecomputeState> state) {
    if (state->preserve_rng_state) {
      at::Generator generator = at::detail::getDefaultCPUGenerator();
      std::lock_guard<std::mutex> lock(generator.mutex());
      state->rng_state = generator.get_state();
    }
    state->autocast_cpu = torch_compat::GetAutocastState(c10::kCPU);
    state->autocast_gpu = torch_compat::GetAutocastState(c10::kCUDA);
    ctx->save_for_backward({input});
    at::Tensor output = state->forward(input);
    ctx->saved_data["state"] = at::IValue::make_capsule(std::move(state));
    return output;
  }

  // Recomputes the unit and returns the gradients of its input, parameters
  // and (none) of the state.
  static variable_list backward(AutogradContext* ctx,
                                variable_list grad_outputs) {
    c10::intrusive_ptr<RecomputeState> state =
        c10::static_intrusive_pointer_cast<RecomputeState>(
            ctx->saved_data["state"].toCapsule());
    const at::Tensor input = ctx->get_saved_variables()[0];
    at::Tensor detached = input.detach();
    if (state->input_requires_grad) detached.requires_grad_(true);
    at::Tensor output;
    {
      at::AutoGradMode enable_grad(true);
      AutocastStateGuard autocast(*state);
      CpuRngStateGuard rng(state->preserve_rng_state ? &state->rng_state
                                                     : nullptr);
      output = state->forward(detached);
    }
    state->recomputations->fetch_add(1);

    std::vector<at::Tensor> wrt;
    if (state->input_requires_grad) wrt.push_back(detached);
    wrt.insert(wrt.end(), state->parameters.begin(), state->parameters.end());
    variable_list grads(wrt.size());
    if (output.requires_grad()) {
      CheckRecomputedGraph(output, wrt, state->unit_name);
      grads = torch::autograd::grad({output}, wrt, {grad_outputs[0]},
                                    /*retain_graph=*/false,
                                    /*create_graph=*/false,
                                    /*allow_unused=*/true);
    }
    variable_list result;
    result.reserve(state->parameters.size() + 2);
    size_t next = 0;
    result.push_back(state->input_requires_grad ? grads[next++] : at::Tensor());
    for (size_t i = 0; i < state->parameters.size(); ++i) {
      result.push_back(grads[next++]);
    }
    result.push_back(at::Tensor());  // The state.
    return result;
  }
};

}  // namespace

absl::StatusOr<std::vector<int>> SelectCheckpointedUnits(
    const std::vector<models::UnitInfo>& units,
    const ActivationCheckpointingOptions& options,
    const std::string& model_name) {
  if (options.every < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--checkpoint_every must be >= 1 (1: every unit --checkpoint_units "
        "selects), got ",
        options.every));
  }
  std::vector<bool> candidate(units.size(), false);
  for (const std::string& entry : options.units) {
    if (entry.empty()) {
      return absl::InvalidArgumentError(
          "--checkpoint_units has an empty entry; expected unit types or "
          "names separated by commas");
    }
    bool matched = false;
    for (const models::UnitInfo& unit : units) {
      if (unit.type == entry || unit.name == entry) {
        candidate[unit.index] = true;
        matched = true;
      }
    }
    if (!matched) {
      std::vector<std::string> types, names;
      for (const models::UnitInfo& unit : units) {
        if (std::find(types.begin(), types.end(), unit.type) == types.end()) {
          types.push_back(unit.type);
        }
        names.push_back(unit.name);
      }
      return absl::InvalidArgumentError(absl::StrCat(
          "--checkpoint_units: '", entry, "' matches no unit of model '",
          model_name, "'; its unit types are ", absl::StrJoin(types, ", "),
          " and its unit names are ", absl::StrJoin(names, ", ")));
    }
  }
  if (options.predicate) {
    for (const models::UnitInfo& unit : units) {
      if (options.predicate(unit)) candidate[unit.index] = true;
    }
  }
  std::vector<int> selected;
  int seen = 0;
  for (size_t i = 0; i < candidate.size(); ++i) {
    if (candidate[i] && ++seen % options.every == 0) {
      selected.push_back(static_cast<int>(i));
    }
  }
  return selected;
}

absl::StatusOr<std::shared_ptr<ActivationCheckpointing>>
ActivationCheckpointing::Create(models::UnitModel& model,
                                ActivationCheckpointingOptions options) {
  STRATA_ASSIGN_OR_RETURN(
      const std::vector<int> indices,
      SelectCheckpointedUnits(model.units(), options, model.name()));
  std::vector<bool> selected(model.units().size(), false);
  for (int i : indices) selected[i] = true;
  return std::shared_ptr<ActivationCheckpointing>(new ActivationCheckpointing(
      model, std::move(options), std::move(selected)));
}

ActivationCheckpointing::ActivationCheckpointing(
    models::UnitModel& model, ActivationCheckpointingOptions options,
    std::vector<bool> selected)
    : model_(&model),
      options_(std::move(options)),
      selected_(std::move(selected)),
      shared_reads_(model.units().size()) {
  for (const auto& [parameter, readers] : model.SharedParameters()) {
    for (const std::string& reader : readers) {
      for (const models::UnitInfo& unit : model.units()) {
        if (unit.name == reader) {
          shared_reads_[unit.index].push_back(parameter);
        }
      }
    }
  }
}

bool ActivationCheckpointing::selected(int unit_index) const {
  CHECK_GE(unit_index, 0);
  CHECK_LT(unit_index, static_cast<int>(selected_.size()));
  return selected_[unit_index];
}

std::vector<std::string> ActivationCheckpointing::selected_names() const {
  std::vector<std::string> names;
  for (const models::UnitInfo& unit : model_->units()) {
    if (selected_[unit.index]) names.push_back(unit.name);
  }
  return names;
}

std::vector<at::Tensor> ActivationCheckpointing::ParametersOf(
    const models::UnitInfo& unit) const {
  std::vector<at::Tensor> parameters;
  std::unordered_set<const c10::TensorImpl*> seen;
  auto add = [&](const at::Tensor& parameter) {
    if (parameter.requires_grad() &&
        seen.insert(parameter.unsafeGetTensorImpl()).second) {
      parameters.push_back(parameter);
    }
  };
  // Read through the module when called: strategies may replace parameters.
  for (const at::Tensor& parameter :
       unit.module->parameters(/*recurse=*/true)) {
    add(parameter);
  }
  const std::vector<std::string>& shared = shared_reads_[unit.index];
  if (!shared.empty()) {
    const auto named = model_->named_parameters(/*recurse=*/true);
    for (const std::string& name : shared) {
      const at::Tensor* parameter = named.find(name);
      CHECK(parameter != nullptr)
          << "shared parameter '" << name << "' read by unit '" << unit.name
          << "' is not a parameter of the model";
      add(*parameter);
    }
  }
  return parameters;
}

at::Tensor ActivationCheckpointing::Run(const models::UnitInfo& unit,
                                        const at::Tensor& input,
                                        const models::UnitForward& forward) {
  if (!selected(unit.index) || !c10::GradMode::is_enabled()) {
    return forward(input);
  }
  auto state = c10::make_intrusive<RecomputeState>();
  state->parameters = ParametersOf(unit);
  state->input_requires_grad = input.requires_grad();
  if (!state->input_requires_grad && state->parameters.empty()) {
    return forward(input);  // Nothing to differentiate.
  }
  state->unit_name = unit.name;
  state->forward = forward;
  state->preserve_rng_state = options_.preserve_rng_state;
  state->recomputations = std::shared_ptr<std::atomic<int64_t>>(
      counters_, &counters_->recomputations);
  const std::vector<at::Tensor> parameters = state->parameters;
  return CheckpointFunction::apply(input, at::TensorList(parameters),
                                   std::move(state));
}

absl::Status ApplyActivationCheckpointing(
    models::UnitModel& model, ActivationCheckpointingOptions options) {
  if (options.units.empty() && !options.predicate) return absl::OkStatus();
  absl::StatusOr<std::shared_ptr<ActivationCheckpointing>> interceptor =
      ActivationCheckpointing::Create(model, std::move(options));
  if (!interceptor.ok()) return interceptor.status();
  model.AddInterceptor(*std::move(interceptor));
  return absl::OkStatus();
}

}  // namespace strata::strategies
