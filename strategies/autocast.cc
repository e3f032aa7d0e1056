#include "strategies/autocast.h"

#include <ATen/autocast_mode.h>

namespace strata::strategies {

at::Tensor AutocastInterceptor::Run(const models::UnitInfo& unit,
                                    const at::Tensor& input,
                                    const models::UnitForward& forward) {
  const bool was_enabled = at::autocast::is_cpu_enabled();
  const at::ScalarType was_dtype = at::autocast::get_autocast_cpu_dtype();
  at::autocast::set_cpu_enabled(true);
  at::autocast::set_autocast_cpu_dtype(at::kBFloat16);
  at::Tensor output = forward(input);
  at::autocast::set_cpu_enabled(was_enabled);
  at::autocast::set_autocast_cpu_dtype(was_dtype);
  if (!was_enabled) at::autocast::clear_cache();
  return output;
}

}  // namespace strata::strategies
