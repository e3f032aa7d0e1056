#include "models/state_dict.h"

#include <ATen/ATen.h>

#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status.h"
#include "models/init.h"
#include "serialization/torch_file.h"

namespace strata::models {
namespace {

std::string ListKeys(const std::vector<std::string>& keys) {
  return absl::StrCat("'", absl::StrJoin(keys, "', '"), "'");
}

}  // namespace

std::vector<std::pair<std::string, at::Tensor>> NamedStateTensors(
    const torch::nn::Module& model) {
  std::vector<std::pair<std::string, at::Tensor>> tensors;
  for (const auto& item : model.named_parameters(/*recurse=*/true)) {
    tensors.emplace_back(item.key(), item.value());
  }
  for (const auto& item : model.named_buffers(/*recurse=*/true)) {
    tensors.emplace_back(item.key(), item.value());
  }
  return tensors;
}

absl::Status SaveStateDict(const torch::nn::Module& model,
                           const std::string& path) {
  return SaveStateDict(NamedStateTensors(model), path);
}

absl::Status SaveStateDict(
    const std::vector<std::pair<std::string, at::Tensor>>& tensors,
    const std::string& path) {
  c10::Dict<std::string, at::Tensor> dict;
  for (const auto& [name, tensor] : tensors) {
    if (tensor.is_meta()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "cannot save the state dict to ", path, ": '", name,
          "' is on the meta device (a deferred model not materialised)"));
    }
    at::Tensor value = tensor.detach().to(at::kCPU).contiguous();
    // A view into a larger buffer (e.g. a flat parameter) would drag the
    // whole buffer into the file.
    if (value.storage_offset() != 0 ||
        value.storage().nbytes() != value.nbytes()) {
      value = value.clone();
    }
    dict.insert(name, value);
  }
  return serialization::WriteTorchFile(path, c10::IValue(dict));
}

absl::Status LoadStateDict(torch::nn::Module& model, const std::string& path,
                           bool strict) {
  absl::StatusOr<c10::IValue> loaded = serialization::ReadTorchFile(path);
  if (!loaded.ok()) return loaded.status();
  if (!loaded->isGenericDict()) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": expected a dict of tensors (a state dict), found ",
        loaded->tagKind()));
  }
  std::map<std::string, at::Tensor> file_tensors;
  for (const auto& entry : loaded->toGenericDict()) {
    if (!entry.key().isString()) {
      return absl::InvalidArgumentError(
          absl::StrCat(path,
                       ": expected a dict of tensors with string keys, "
                       "found a key of type ",
                       entry.key().tagKind()));
    }
    const std::string& key = entry.key().toStringRef();
    if (!entry.value().isTensor()) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": expected a dict of tensors, but the value of '",
                       key, "' is ", entry.value().tagKind(),
                       " (a full checkpoint? load its 'state_dict' entry)"));
    }
    file_tensors.emplace(key, entry.value().toTensor());
  }

  const std::vector<std::pair<std::string, at::Tensor>> targets =
      NamedStateTensors(model);
  std::vector<std::string> missing, unexpected, mismatched;
  std::set<std::string> target_names;
  for (const auto& [name, target] : targets) {
    target_names.insert(name);
    auto it = file_tensors.find(name);
    if (it == file_tensors.end()) {
      missing.push_back(name);
    } else if (it->second.sizes() != target.sizes()) {
      mismatched.push_back(absl::StrCat(
          "'", name, "': file has shape ", c10::str(it->second.sizes()),
          ", model expects ", c10::str(target.sizes())));
    }
  }
  for (const auto& [name, tensor] : file_tensors) {
    if (target_names.count(name) == 0) unexpected.push_back(name);
  }
  std::vector<std::string> problems;
  if (strict && !missing.empty()) {
    problems.push_back(
        absl::StrCat(missing.size(), " missing key(s): ", ListKeys(missing)));
  }
  if (strict && !unexpected.empty()) {
    problems.push_back(absl::StrCat(
        unexpected.size(), " unexpected key(s): ", ListKeys(unexpected)));
  }
  if (!mismatched.empty()) {
    problems.push_back(
        absl::StrCat("shape mismatch for ", absl::StrJoin(mismatched, "; ")));
  }
  if (!problems.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot load the state dict in ", path, " into model '",
                     model.name(), "': ", absl::StrJoin(problems, "; ")));
  }

  // Convert everything first (dtype, device) so nothing is half-loaded.
  std::vector<std::pair<at::Tensor, at::Tensor>> copies;  // target, value
  STRATA_RETURN_IF_ERROR(
      StatusFromCall(absl::StrCat("converting the state dict in ", path), [&] {
        for (const auto& [name, target] : targets) {
          auto it = file_tensors.find(name);
          if (it == file_tensors.end()) continue;
          const c10::Device device =
              target.is_meta() ? c10::Device(at::kCPU) : target.device();
          at::Tensor value = it->second.to(device, target.scalar_type());
          // Meta targets adopt the value: give each its own storage (values
          // in the file may share one).
          if (target.is_meta())
            value = value.clone(at::MemoryFormat::Contiguous);
          copies.emplace_back(target, std::move(value));
        }
      }));
  at::NoGradGuard no_grad;
  for (auto& [target, value] : copies) {
    if (target.is_meta()) {
      ReplaceParameterData(target, value);
    } else {
      target.copy_(value);
    }
  }
  return absl::OkStatus();
}

}  // namespace strata::models
