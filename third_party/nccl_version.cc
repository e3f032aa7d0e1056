// Prints the NCCL and CUDA runtime versions this build links: checks that the
// --config=cuda wrappers resolve (no GPU needed).
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <cstdio>

int main() {
  int nccl_version = 0;
  if (ncclGetVersion(&nccl_version) != ncclSuccess) return 1;
  int runtime_version = 0;
  cudaRuntimeGetVersion(&runtime_version);
  std::printf("NCCL %d, CUDA runtime %d\n", nccl_version, runtime_version);
  return 0;
}
