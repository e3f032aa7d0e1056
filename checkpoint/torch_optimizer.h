// The full format's "optimizer" entry as torch.optim.AdamW.state_dict()
// writes it (PyTorch 1.13), and its mapping to and from Strata's optimizer
// tensors ("<param>.exp_avg", "<param>.exp_avg_sq", "step").
//
// Written layout:
//   {"state": {<index>: {"step": float32 scalar tensor,
//                        "exp_avg": tensor, "exp_avg_sq": tensor}},
//    "param_groups": [{"lr", "betas": (beta1, beta2), "eps",
//                      "weight_decay", "amsgrad": False, "foreach": None,
//                      "maximize": False, "capturable": False,
//                      "params": [<index>, ...]}, ...],
//    "param_names": ["<parameter>", ...]}   (a Strata addition; PyTorch's
//                                            load_state_dict ignores it)
// The groups are the ones Strata applies (optim::DecayRanges): first the
// matrices and embeddings (ndim >= 2, weight_decay = the run's), then the
// biases and norm gains (weight_decay 0); an empty group is left out. Each
// group's parameters keep the model's named_parameters() order. Indices are
// numbered as PyTorch numbers them, 0, 1, ... over the groups in order, and
// "param_names"[i] names index i. Frozen parameters (requires_grad false)
// are in no group and have no state, as when a PyTorch user builds the
// optimizer over the trainable parameters only. Every parameter's "step" is
// a tensor of its own (PyTorch increments each in place).
//
// Reading maps a state dict back to Strata's names: by "param_names" when
// present (Strata's files, including the older one-group layout); otherwise
// (a file torch.save'd by PyTorch) by position, when the groups are
// Strata's two groups (same sizes) or one group of every trainable
// parameter, in named_parameters() order. A parameter with no state (frozen,
// or never stepped in PyTorch) gets zero moments, which is what Strata and
// PyTorch hold for it; no state at all gives step 0.
#ifndef STRATA_CHECKPOINT_TORCH_OPTIMIZER_H_
#define STRATA_CHECKPOINT_TORCH_OPTIMIZER_H_

#include <ATen/core/Dict.h>
#include <ATen/core/Tensor.h>
#include <ATen/core/ivalue.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace strata::checkpoint {

// AdamW's hyperparameters as a param group records them. The defaults are
// Strata's (strategies::OptimizerConfig, --lr): what a file written by a
// tool that does not know the run's values (strata_ckpt convert) carries.
struct AdamWHyperparameters {
  // The learning rate of the next step (PyTorch's group lr after the
  // scheduler stepped).
  double lr = 3e-4;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  // Of the decay group (matrices and embeddings); the other group has 0.
  double weight_decay = 0.1;
};

// A model parameter, in named_parameters() order.
struct TorchParameter {
  std::string name;
  std::vector<int64_t> shape;
  bool frozen = false;  // requires_grad false.
};

// A param group: positions into the parameter list, and its weight decay.
struct TorchParamGroup {
  std::vector<size_t> members;
  bool decay = false;
};

// Strata's groups over `params` (decay first; empty groups left out).
std::vector<TorchParamGroup> TorchParamGroups(
    const std::vector<TorchParameter>& params);

// The "optimizer" dict. `state` maps a parameter name to its state tensors
// by key ("exp_avg", "exp_avg_sq", ...); parameters absent from it get no
// state entry. Each state entry gets a fresh float32 "step" tensor holding
// `step`. `extra` (tensors that belong to no parameter) goes under
// "strata_state" when not empty.
c10::impl::GenericDict BuildTorchOptimizer(
    const std::vector<TorchParameter>& params,
    const AdamWHyperparameters& hyper,
    const std::map<std::string,
                   std::vector<std::pair<std::string, at::Tensor>>>& state,
    int64_t step, const std::vector<std::pair<std::string, at::Tensor>>& extra);

// Strata's optimizer tensors from an "optimizer" value (as above): one
// "<param>.<key>" per state tensor, one int64 scalar "step", zero moments
// for parameters of `params` without state (when their shape is known:
// non-empty `shape`), and "strata_state" entries as named. Errors name
// `where` (the file and key): not a dict, indices that are not ints or that
// no name maps, groups that cannot be mapped (their sizes and what was
// expected), parameters whose steps differ, amsgrad.
absl::StatusOr<std::vector<std::pair<std::string, at::Tensor>>>
ReadTorchOptimizer(const std::string& where, const c10::IValue& optimizer,
                   const std::vector<TorchParameter>& params);

}  // namespace strata::checkpoint

#endif  // STRATA_CHECKPOINT_TORCH_OPTIMIZER_H_
