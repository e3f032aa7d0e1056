#include "comm/cuda_current_stream.h"

// Debian's CPU LibTorch ships the c10/cuda headers without the generated
// c10/cuda/impl/cuda_cmake_macros.h (a CUDA LibTorch has it); its only macro,
// C10_CUDA_BUILD_SHARED_LIBS, matters when building c10_cuda itself.
#if !__has_include(<c10/cuda/impl/cuda_cmake_macros.h>)
#define C10_USING_CUSTOM_GENERATED_MACROS
#endif
#include <c10/cuda/CUDAStream.h>

namespace strata::comm {

std::function<void*(int device)> LibTorchCurrentStream() {
  return [](int device) -> void* {
    return c10::cuda::getCurrentCUDAStream(
               static_cast<c10::DeviceIndex>(device))
        .stream();
  };
}

}  // namespace strata::comm
