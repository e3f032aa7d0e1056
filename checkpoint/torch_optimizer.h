// The full format's "optimizer" entry as torch.optim.AdamW, Adam or SGD's
// state_dict() writes it (PyTorch 1.13), and its mapping to and from
// Strata's optimizer tensors ("<param>.exp_avg", "<param>.exp_avg_sq",
// "<param>.momentum_buffer", "step").
//
// Written layout:
//   {"state": {<index>: {"step": float32 scalar tensor, <the optimizer's
//                        tensors: "exp_avg", "exp_avg_sq" (AdamW, Adam);
//                        "momentum_buffer" (SGD with momentum)>}},
//    "param_groups": [{<the class's hyperparameters>,
//                      "params": [<index>, ...]}, ...],
//    "param_names": ["<parameter>", ...]}   (a Strata addition; PyTorch's
//                                            load_state_dict ignores it)
// with the hyperparameter keys of PyTorch 1.13's classes:
//   AdamW: "lr", "betas": (beta1, beta2), "eps", "weight_decay",
//          "amsgrad": False, "foreach": None, "maximize": False,
//          "capturable": False
//   Adam:  AdamW's, plus "differentiable": False, "fused": False
//   SGD:   "lr", "momentum", "dampening", "weight_decay", "nesterov",
//          "maximize": False, "foreach": None, "differentiable": False
// The groups are the ones Strata applies (optim::DecayRanges): first the
// matrices and embeddings (ndim >= 2, weight_decay = the run's), then the
// biases and norm gains (weight_decay 0); an empty group is left out. Each
// group's parameters keep the model's named_parameters() order. Indices are
// numbered as PyTorch numbers them, 0, 1, ... over the groups in order, and
// "param_names"[i] names index i. Frozen parameters (requires_grad false)
// are in no group and have no state, as when a PyTorch user builds the
// optimizer over the trainable parameters only. Every trainable parameter
// has a state entry with a "step" tensor of its own (PyTorch's Adam family
// increments each in place; PyTorch's SGD keeps no step and ignores it,
// but Strata's SGD reads it back). A checkpoint saved before SGD's first
// step holds zero momentum buffers, which PyTorch's SGD takes as buffers:
// its next step adds (1 - dampening) * d to them where Strata's sets them
// to d, the same unless dampening != 0.
//
// Reading maps a state dict back to Strata's names: by "param_names" when
// present (Strata's files, including the older one-group layout); otherwise
// (a file torch.save'd by PyTorch) by position, when the groups are
// Strata's two groups (same sizes) or one group of every trainable
// parameter, in named_parameters() order. The param groups tell the
// optimizer: SGD's have a "momentum" key (with momentum or not by its
// value); otherwise the Adam family, whose classes they cannot tell apart
// (kAdamOrAdamW). A parameter with no state (frozen, or never stepped in
// PyTorch) gets zero state tensors, which is what Strata and PyTorch hold
// for it; no step at all gives step 0, except for SGD state with momentum
// buffers, which PyTorch saves without a step: it reads as step 1 (Strata's
// SGD reads its step only to know whether the buffers exist).
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
#include "checkpoint/contents.h"

namespace strata::checkpoint {

// The hyperparameters param groups record (each class writes its own). The
// defaults are Strata's (strategies::OptimizerConfig, --lr): what a file
// written by a tool that does not know the run's values (strata_ckpt
// convert) carries.
struct OptimizerHyperparameters {
  // The learning rate of the next step (PyTorch's group lr after the
  // scheduler stepped).
  double lr = 3e-4;
  // Of the decay group (matrices and embeddings); the other group has 0.
  double weight_decay = 0.1;
  // AdamW, Adam.
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  // SGD.
  double momentum = 0.0;
  double dampening = 0.0;
  bool nesterov = false;
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

// The "optimizer" dict of `kind` (Meta::optimizer's values: "adamw",
// "adam", "sgd", "sgd_momentum"; empty: "adamw"), whose param groups get
// that class's keys with `hyper`'s values. `state` maps a parameter name to
// its state tensors by key ("exp_avg", "exp_avg_sq", "momentum_buffer");
// every trainable parameter gets a state entry with a fresh float32 "step"
// tensor holding `step`, plus its tensors from `state`. `extra` (tensors
// that belong to no parameter) goes under "strata_state" when not empty.
c10::impl::GenericDict BuildTorchOptimizer(
    const std::vector<TorchParameter>& params, const std::string& kind,
    const OptimizerHyperparameters& hyper,
    const std::map<std::string,
                   std::vector<std::pair<std::string, at::Tensor>>>& state,
    int64_t step, const std::vector<std::pair<std::string, at::Tensor>>& extra);

// An "optimizer" value read back.
struct TorchOptimizerState {
  // What the param groups show (Meta::optimizer's values): "sgd",
  // "sgd_momentum" or kAdamOrAdamW.
  std::string optimizer;
  // One "<param>.<key>" per state tensor, one int64 scalar "step", zero
  // state tensors of that optimizer for parameters of `params` without
  // state (when their shape is known: non-empty `shape`), and
  // "strata_state" entries as named.
  std::vector<std::pair<std::string, at::Tensor>> tensors;
};

// Strata's optimizer tensors from an "optimizer" value (as above). Errors
// name `where` (the file and key): not a dict, indices that are not ints or
// that no name maps, groups that cannot be mapped (their sizes and what was
// expected), parameters whose steps differ, amsgrad, maximize.
absl::StatusOr<TorchOptimizerState> ReadTorchOptimizer(
    const std::string& where, const c10::IValue& optimizer,
    const std::vector<TorchParameter>& params);

}  // namespace strata::checkpoint

#endif  // STRATA_CHECKPOINT_TORCH_OPTIMIZER_H_
