#include "strategies/gradient_arrival_hooks.h"

#include <memory>

namespace strata::strategies {

GradientArrivalHooks::GradientArrivalHooks(
    const std::vector<at::Tensor>& parameters, Callback callback) {
  // Shared by the hooks: each is a copy of a lambda holding it.
  auto shared = std::make_shared<Callback>(std::move(callback));
  for (const at::Tensor& p : parameters) {
    if (!p.requires_grad()) continue;
    const unsigned handle =
        p.register_hook([shared](const at::Tensor&) { (*shared)(); });
    hooks_.emplace_back(p, handle);
  }
}

GradientArrivalHooks::~GradientArrivalHooks() {
  for (auto& [parameter, handle] : hooks_) parameter.remove_hook(handle);
}

}  // namespace strata::strategies
