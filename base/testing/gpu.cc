#include "base/testing/gpu.h"

#include <torch/cuda.h>

#include <string>

namespace strata::testing {

std::string NoGpuReason() {
  if (!torch::cuda::is_available()) {
    return "needs a GPU: LibTorch reports no CUDA device "
           "(torch::cuda::is_available() is false: a CPU-only LibTorch, or "
           "no GPU visible)";
  }
  return "";
}

}  // namespace strata::testing
