#include "models/init.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <cmath>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "base/fnv.h"
#include "glog/logging.h"

namespace strata::models {
namespace {

// The second-to-last dotted component: the name of the module that
// registered the parameter ("ln_1" in "blocks.0.ln_1.weight").
absl::string_view OwnerModule(const std::string& name) {
  std::vector<absl::string_view> parts = absl::StrSplit(name, '.');
  if (parts.size() < 2) return "";
  return parts[parts.size() - 2];
}

}  // namespace

InitScheme InitSchemeFor(const ModelConfig& config) {
  InitScheme scheme;
  scheme.family =
      config.family == "llama" ? InitFamily::kLlama : InitFamily::kGpt2;
  scheme.std = 0.02;
  scheme.num_layers = config.num_layers;
  return scheme;
}

ParameterInit InitFor(const std::string& name, const InitScheme& scheme) {
  if (absl::EndsWith(name, ".bias") || name == "bias") {
    return {InitRule::kZeros, 0.0};
  }
  const absl::string_view owner = OwnerModule(name);
  switch (scheme.family) {
    case InitFamily::kGpt2:
      if (absl::StartsWith(owner, "ln_")) return {InitRule::kOnes, 0.0};
      if (absl::EndsWith(name, "attn.proj.weight") ||
          absl::EndsWith(name, "mlp.proj.weight")) {
        CHECK_GT(scheme.num_layers, 0);
        return {InitRule::kNormal,
                scheme.std /
                    std::sqrt(2.0 * static_cast<double>(scheme.num_layers))};
      }
      return {InitRule::kNormal, scheme.std};
    case InitFamily::kLlama:
      if (absl::EndsWith(owner, "norm")) return {InitRule::kOnes, 0.0};
      return {InitRule::kNormal, scheme.std};
  }
  LOG(FATAL) << "unknown init family " << static_cast<int>(scheme.family);
}

uint64_t ParameterSeed(uint64_t seed, std::string_view name) {
  unsigned char little_endian[8];
  for (int i = 0; i < 8; ++i) little_endian[i] = (seed >> (8 * i)) & 0xff;
  return Fnv1a(Fnv1a(kFnv1aOffset, little_endian, 8), name);
}

at::Tensor InitialValue(const std::string& name, at::IntArrayRef shape,
                        uint64_t seed, const InitScheme& scheme) {
  const ParameterInit init = InitFor(name, scheme);
  const auto options = at::TensorOptions().dtype(at::kFloat);
  switch (init.rule) {
    case InitRule::kZeros:
      return at::zeros(shape, options);
    case InitRule::kOnes:
      return at::ones(shape, options);
    case InitRule::kNormal: {
      at::Generator generator =
          at::detail::createCPUGenerator(ParameterSeed(seed, name));
      return at::empty(shape, options).normal_(0.0, init.std, generator);
    }
  }
  LOG(FATAL) << "unknown init rule " << static_cast<int>(init.rule);
}

at::Tensor MetaTensor(at::IntArrayRef shape) {
  return at::empty(shape,
                   at::TensorOptions().dtype(at::kFloat).device(at::kMeta));
}

void ReplaceParameterData(const at::Tensor& parameter,
                          const at::Tensor& value) {
  CHECK(parameter.sizes() == value.sizes())
      << "ReplaceParameterData: shape " << parameter.sizes() << " vs "
      << value.sizes();
  if (!parameter.is_meta()) {
    parameter.set_data(value);
    return;
  }
  // Tensor::set_data refuses meta -> CPU ("incompatible tensor type"); its
  // remaining work is this shallow copy (storage, sizes, strides, dtype,
  // device, dispatch keys), which keeps the TensorImpl, its autograd meta
  // (requires_grad) and its version counter.
  CHECK(parameter.is_leaf()) << "ReplaceParameterData: not a leaf";
  parameter.unsafeGetTensorImpl()->shallow_copy_from(value.getIntrusivePtr());
}

absl::Status Materialize(
    UnitModel& model, const BuildOptions& options,
    const std::function<bool(const std::string& name)>& filter) {
  for (const auto& item : model.named_parameters(/*recurse=*/true)) {
    const at::Tensor& parameter = item.value();
    if (!parameter.is_meta()) continue;
    if (filter && !filter(item.key())) continue;
    absl::StatusOr<at::Tensor> value =
        model.InitialParameter(item.key(), options.seed);
    if (!value.ok()) return value.status();
    if (value->sizes() != parameter.sizes()) {
      return absl::InternalError(
          absl::StrCat("Materialize: initial value of parameter '", item.key(),
                       "' has shape ", c10::str(value->sizes()),
                       ", the parameter has ", c10::str(parameter.sizes())));
    }
    at::Tensor data = value->to(parameter.scalar_type()).contiguous();
    ReplaceParameterData(parameter, data);
  }
  return absl::OkStatus();
}

}  // namespace strata::models
