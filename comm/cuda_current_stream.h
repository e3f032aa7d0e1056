// LibTorch's current CUDA stream as GroupOptions::cuda_stream wants it: the
// only piece of comm/ that needs a CUDA LibTorch (libc10_cuda), so that
// everything else (comm/nccl_communicator.h, Group's NCCL path) builds and
// links against a CPU LibTorch plus the CUDA toolkit. Built by the CMake
// CUDA build (-DSTRATA_CUDA=ON against a CUDA LibTorch) and, with Bazel, as
// the manual target //comm:cuda_current_stream.
//
//   GroupOptions options;
//   options.cuda_stream = LibTorchCurrentStream();
//   options.nccl_host_wait = false;  // Order streams, do not block the host.
#ifndef STRATA_COMM_CUDA_CURRENT_STREAM_H_
#define STRATA_COMM_CUDA_CURRENT_STREAM_H_

#include <functional>

namespace strata::comm {

// Returns a function giving c10::cuda::getCurrentCUDAStream(device)'s
// cudaStream_t (as void*): the stream LibTorch's kernels on `device` run on
// in the calling thread (CUDAStreamGuard changes it).
std::function<void*(int device)> LibTorchCurrentStream();

}  // namespace strata::comm

#endif  // STRATA_COMM_CUDA_CURRENT_STREAM_H_
