// Model state dicts as PyTorch files.
//
// SaveStateDict writes what Python's torch.load reads as a dict of tensors
// (parameter and buffer names as in named_parameters()/named_buffers());
// LoadStateDict reads that, and files saved by Python's
// `torch.save(model.state_dict(), path)`.
#ifndef STRATA_MODELS_STATE_DICT_H_
#define STRATA_MODELS_STATE_DICT_H_

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>

#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"

namespace strata::models {

// The module's parameters, then its buffers, with full names, in
// registration order. (LibTorch has no non-persistent buffers: all count.)
std::vector<std::pair<std::string, at::Tensor>> NamedStateTensors(
    const torch::nn::Module& model);

// Writes NamedStateTensors(model) as a {name: tensor} dict, a PyTorch file
// (serialization::WriteTorchFile; torch.load reads it, weights_only or not):
// contiguous CPU tensors, each with its own storage.
// Atomic: written to a temporary file beside `path`, synced, then renamed
// over it, so readers never see a partial file. Errors name the file (or the
// tensor: a parameter still on the meta device cannot be saved).
absl::Status SaveStateDict(const torch::nn::Module& model,
                           const std::string& path);

// The same for named tensors (e.g. a strategy's gathered full state), in the
// given order.
absl::Status SaveStateDict(
    const std::vector<std::pair<std::string, at::Tensor>>& tensors,
    const std::string& path);

// Loads a {name: tensor} dict (dict or OrderedDict; see ReadTorchFile) into
// the model's parameters and buffers, converting each value to the dtype and
// device of the tensor it replaces. Errors (InvalidArgument unless the file
// is missing, NotFound) name the file and: not a PyTorch file / unreadable;
// not a dict of tensors (naming the first key whose value is not a tensor);
// under `strict`, the missing and unexpected keys (all listed); shapes that
// differ (key and both shapes). Everything is validated and converted
// before any value is copied: on error the model is unchanged. Without
// `strict`, keys the model lacks are ignored and tensors the file lacks keep
// their values. Parameters on the meta device (a deferred model) take the
// loaded values without being initialised first.
absl::Status LoadStateDict(torch::nn::Module& model, const std::string& path,
                           bool strict);

}  // namespace strata::models

#endif  // STRATA_MODELS_STATE_DICT_H_
