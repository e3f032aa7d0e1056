// Activation checkpointing (PyTorch's torch.utils.checkpoint /
// checkpoint_wrapper, for units of the unit protocol, models/unit.h): the
// units it selects run their forward without keeping activations, and run it
// again during backward to compute their gradients.
//
// How a selected unit runs:
//   forward   Saves the CPU RNG state, runs forward(input) under
//             at::NoGradGuard (nothing is kept but the input and the output)
//             and attaches the output to a custom autograd node whose inputs
//             are the unit's input and the parameters the unit reads (its own,
//             UnitInfo::parameters, and the shared ones it reads,
//             UnitModel::SharedParameters()), so that even the first unit,
//             whose input is the int64 token ids, gets gradients.
//   backward  Recomputes forward(input.detach()) with grad enabled, the
//             autocast settings the forward ran under (an outer interceptor
//             may have enabled bf16 autocast) and the RNG state restored to
//             the one saved before the forward (so dropout draws the same
//             masks; the state current before the recomputation is restored
//             after it), computes the gradients of the recomputed output
//             with the incoming gradient with respect to the input and the
//             parameters (torch::autograd::grad), and returns them from the
//             node. The outer backward then delivers each parameter's
//             gradient to the parameter's own AccumulateGrad node, once per
//             backward, summed with gradients from other units (a tied
//             embedding) exactly as without checkpointing: .grad views into
//             flat buffers are accumulated in place and gradient-accumulator
//             post-hooks (DDP, ZeRO, FSDP) fire once per parameter per
//             backward, at the same point of the backward order. Loss,
//             gradients and RNG draws are therefore bitwise those of the run
//             without checkpointing (also across micro-batches).
//
// Unlike PyTorch's reentrant checkpoint (torch.autograd.backward inside the
// node's backward), parameters are inputs of the node, not accumulated inside
// a nested backward: a nested backward would accumulate a tied parameter's
// gradient twice per backward (firing its post-hook before its gradient is
// complete, which breaks DDP's bucket readiness) and sum accumulated
// micro-batches in another order.
//
// The interceptor must be added after (inside) the interceptors that manage
// parameters (FSDP gathers a unit's parameters around both the forward and,
// through its output hook, the recomputation); CreateStrategy does that.
//
// Limits:
// - A unit's forward must read, besides its input, only its own parameters
//   and the shared parameters declared for it (models/README.md). A
//   recomputation that reaches any other tensor requiring grad throws
//   std::runtime_error naming the unit (its gradient would otherwise be
//   lost).
// - A parameter of a selected unit that the unit does not use still has its
//   AccumulateGrad node called (with no gradient) during backward, so
//   gradient-accumulator post-hooks fire for it; DDP's unused-parameter
//   detection therefore does not see unused parameters of checkpointed units.
// - The RNG state is the process's default CPU generator. Ranks run as
//   threads of one process share it, so their dropout masks (with or without
//   checkpointing) depend on thread interleaving; use dropout 0 there.
// - With grad mode off (evaluation), selected units run their forward
//   directly.
#ifndef STRATA_STRATEGIES_ACTIVATION_CHECKPOINTING_H_
#define STRATA_STRATEGIES_ACTIVATION_CHECKPOINTING_H_

#include <ATen/core/Tensor.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "models/unit.h"

namespace strata::strategies {

struct ActivationCheckpointingOptions {
  // Units to checkpoint, each entry a unit type (UnitInfo::type, e.g.
  // "GPTBlock") or a unit name (UnitInfo::name, e.g. "blocks.1"). Every entry
  // must match at least one unit of the model.
  std::vector<std::string> units;
  // PyTorch's check_fn (apply_activation_checkpointing): units for which it
  // returns true are candidates too (null: none). Called once per unit by
  // Create, on the calling thread.
  std::function<bool(const models::UnitInfo&)> predicate;
  // Selective checkpointing (torchtitan's selective_ac_option = "k"): of
  // the candidates, in forward order, only every `every`-th is checkpointed
  // (the every-th, 2 every-th, ...); 1: all of them. >= 1.
  int every = 1;
  // Restore the CPU RNG state around recomputation, so dropout matches.
  bool preserve_rng_state = true;
};

class ActivationCheckpointing : public models::UnitInterceptor {
 public:
  // Selects the units of `model` that options.units names or
  // options.predicate accepts, then every options.every-th of them. Errors
  // (InvalidArgument) name the entry that is empty or matches no unit and
  // list the model's unit types and names, or an `every` below 1
  // (--checkpoint_every). `model` is borrowed: it must outlive
  // the interceptor, which it normally owns once added (AddInterceptor).
  static absl::StatusOr<std::shared_ptr<ActivationCheckpointing>> Create(
      models::UnitModel& model, ActivationCheckpointingOptions options);

  at::Tensor Run(const models::UnitInfo& unit, const at::Tensor& input,
                 const models::UnitForward& forward) override;

  // Whether unit `unit_index` (UnitInfo::index) is checkpointed.
  bool selected(int unit_index) const;
  // Names of the checkpointed units, in forward order.
  std::vector<std::string> selected_names() const;
  // Recomputations run so far (one per selected unit per backward).
  int64_t num_recomputations() const { return counters_->recomputations; }

 private:
  struct Counters {
    std::atomic<int64_t> recomputations{0};
  };

  ActivationCheckpointing(models::UnitModel& model,
                          ActivationCheckpointingOptions options,
                          std::vector<bool> selected);

  // The parameters requiring grad that unit `unit` reads: its own, then the
  // shared ones it reads, each once.
  std::vector<at::Tensor> ParametersOf(const models::UnitInfo& unit) const;

  models::UnitModel* model_;  // Borrowed.
  ActivationCheckpointingOptions options_;
  std::vector<bool> selected_;  // By unit index.
  // Per unit index: full names of the shared parameters it reads but does
  // not own.
  std::vector<std::vector<std::string>> shared_reads_;
  // Shared with the autograd nodes, which may outlive this interceptor.
  std::shared_ptr<Counters> counters_ = std::make_shared<Counters>();
};

// Creates an ActivationCheckpointing for `options` and adds it to `model`
// (innermost of the interceptors added so far): after CreateStrategy, a
// user's predicate (PyTorch's check_fn) nests inside the strategy's
// interceptors as it must. Does nothing when options select no unit source
// (no units, no predicate). Call only while no forward or backward runs.
// Errors as Create.
absl::Status ApplyActivationCheckpointing(
    models::UnitModel& model, ActivationCheckpointingOptions options);

// The indices (UnitInfo::index) of the units `options` selects among
// `units`, in forward order, as Create selects them. Errors as Create;
// `model_name` is for messages.
absl::StatusOr<std::vector<int>> SelectCheckpointedUnits(
    const std::vector<models::UnitInfo>& units,
    const ActivationCheckpointingOptions& options,
    const std::string& model_name);

}  // namespace strata::strategies

#endif  // STRATA_STRATEGIES_ACTIVATION_CHECKPOINTING_H_
