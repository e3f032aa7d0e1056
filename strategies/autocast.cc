#include "strategies/autocast.h"

#include <ATen/autocast_mode.h>

#include "base/torch_compat.h"

namespace strata::strategies {

at::Tensor AutocastInterceptor::Run(const models::UnitInfo& unit,
                                    const at::Tensor& input,
                                    const models::UnitForward& forward) {
  const torch_compat::AutocastState was =
      torch_compat::GetAutocastState(c10::kCPU);
  torch_compat::SetAutocastState(c10::kCPU, {true, at::kBFloat16});
  at::Tensor output = forward(input);
  torch_compat::SetAutocastState(c10::kCPU, was);
  if (!was.enabled) at::autocast::clear_cache();
  return output;
}

}  // namespace strata::strategies
