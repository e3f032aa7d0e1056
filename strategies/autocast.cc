#include "strategies/autocast.h"

#include <ATen/autocast_mode.h>

#include "base/torch_compat.h"

namespace strata::strategies {

at::Tensor AutocastInterceptor::Run(const models::UnitInfo& unit,
                                    const at::Tensor& input,
                                    const models::UnitForward& forward) {
  // Autocast of the device the unit runs on (its input's: token ids or
  // activations), CPU or CUDA.
  const c10::DeviceType device = input.is_cuda() ? c10::kCUDA : c10::kCPU;
  const torch_compat::AutocastState was =
      torch_compat::GetAutocastState(device);
  torch_compat::SetAutocastState(device, {true, at::kBFloat16});
  at::Tensor output = forward(input);
  torch_compat::SetAutocastState(device, was);
  if (!was.enabled) at::autocast::clear_cache();
  return output;
}

}  // namespace strata::strategies
