// GradientArrivalHooks: runs a callback just before autograd accumulates a
// gradient into any of a set of leaf parameters (a hook on each parameter,
// Tensor::register_hook: it sees the gradient before AccumulateGrad adds it
// to .grad), so that a strategy can give .grad its memory only when the
// first gradient arrives.
//
// Why FsdpStrategy needs it: a parameter read by several units (GPT's tied
// wte.weight, read by the embedding and the head) gets one AccumulateGrad
// node, and autograd keeps the first gradient in that node's input buffer
// until the last use's gradient arrives (the embedding, at the end of
// backward). The root's full gradient allocated at the head's backward would
// sit unused beside that buffer through the whole backward; allocated here it
// exists only from the first accumulation on.
//
// The callback runs on the thread that runs backward (the training thread on
// CPU), once per gradient that arrives, before it is accumulated; it must be
// cheap when there is nothing to do. Hooks are registered at construction
// (parameters without requires_grad get none) and removed at destruction;
// the parameters (shared tensors) are held until then.
#ifndef STRATA_STRATEGIES_GRADIENT_ARRIVAL_HOOKS_H_
#define STRATA_STRATEGIES_GRADIENT_ARRIVAL_HOOKS_H_

#include <ATen/core/Tensor.h>

#include <functional>
#include <utility>
#include <vector>

namespace strata::strategies {

class GradientArrivalHooks {
 public:
  using Callback = std::function<void()>;

  GradientArrivalHooks(const std::vector<at::Tensor>& parameters,
                       Callback callback);
  ~GradientArrivalHooks();

  GradientArrivalHooks(const GradientArrivalHooks&) = delete;
  GradientArrivalHooks& operator=(const GradientArrivalHooks&) = delete;

  // Parameters that got a hook (those with requires_grad).
  size_t num_hooks() const { return hooks_.size(); }

 private:
  std::vector<std::pair<at::Tensor, unsigned>> hooks_;  // Parameter, handle.
};

}  // namespace strata::strategies

#endif  // STRATA_STRATEGIES_GRADIENT_ARRIVAL_HOOKS_H_
