#include "base/torch_compat.h"

#include <ATen/autocast_mode.h>
#include <glog/logging.h>
#include <torch/version.h>

namespace strata::torch_compat {
namespace {

void CheckDevice(c10::DeviceType device) {
  CHECK(device == c10::kCPU || device == c10::kCUDA)
      << "autocast is only handled for CPU and CUDA, got "
      << c10::DeviceTypeName(device);
}

}  // namespace

int TorchVersion() { return TORCH_VERSION_MAJOR * 100 + TORCH_VERSION_MINOR; }

// LibTorch 2.4 introduced at::autocast::{is,set}_autocast_enabled(device) and
// {get,set}_autocast_dtype(device); earlier releases only have per-device
// functions.
#if STRATA_TORCH_AT_LEAST(2, 4)

bool IsAutocastEnabled(c10::DeviceType device) {
  CheckDevice(device);
  return at::autocast::is_autocast_enabled(device);
}

void SetAutocastEnabled(c10::DeviceType device, bool enabled) {
  CheckDevice(device);
  at::autocast::set_autocast_enabled(device, enabled);
}

c10::ScalarType AutocastDtype(c10::DeviceType device) {
  CheckDevice(device);
  return at::autocast::get_autocast_dtype(device);
}

void SetAutocastDtype(c10::DeviceType device, c10::ScalarType dtype) {
  CheckDevice(device);
  at::autocast::set_autocast_dtype(device, dtype);
}

#else  // LibTorch < 2.4: per-device functions ("gpu" means CUDA).

bool IsAutocastEnabled(c10::DeviceType device) {
  CheckDevice(device);
  return device == c10::kCPU ? at::autocast::is_cpu_enabled()
                             : at::autocast::is_enabled();
}

void SetAutocastEnabled(c10::DeviceType device, bool enabled) {
  CheckDevice(device);
  if (device == c10::kCPU) {
    at::autocast::set_cpu_enabled(enabled);
  } else {
    at::autocast::set_enabled(enabled);
  }
}

c10::ScalarType AutocastDtype(c10::DeviceType device) {
  CheckDevice(device);
  return device == c10::kCPU ? at::autocast::get_autocast_cpu_dtype()
                             : at::autocast::get_autocast_gpu_dtype();
}

void SetAutocastDtype(c10::DeviceType device, c10::ScalarType dtype) {
  CheckDevice(device);
  if (device == c10::kCPU) {
    at::autocast::set_autocast_cpu_dtype(dtype);
  } else {
    at::autocast::set_autocast_gpu_dtype(dtype);
  }
}
#endif

AutocastState GetAutocastState(c10::DeviceType device) {
  return {IsAutocastEnabled(device), AutocastDtype(device)};
}

void SetAutocastState(c10::DeviceType device, const AutocastState& state) {
  SetAutocastEnabled(device, state.enabled);
  SetAutocastDtype(device, state.dtype);
}

}  // namespace strata::torch_compat
