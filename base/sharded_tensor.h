// ShardedTensor: how a rank holds one tensor of the model or optimizer state.
// It is the contract between the strategies (which own the state) and the
// checkpoint formats (which write and read it), kept here, below both, so
// that the file formats need nothing of the Strategy interface.
#ifndef STRATA_BASE_SHARDED_TENSOR_H_
#define STRATA_BASE_SHARDED_TENSOR_H_

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <vector>

namespace strata {

// A tensor of the model or optimizer state as this rank holds it: the global
// (unsharded) shape and this rank's chunk, a contiguous run
// [offset, offset + local.numel()) of the flattened global tensor (the whole
// tensor for replicated state). `local` aliases the live state.
struct ShardedTensor {
  std::string name;
  std::vector<int64_t> global_shape;
  int64_t offset = 0;
  at::Tensor local;
};

}  // namespace strata

#endif  // STRATA_BASE_SHARDED_TENSOR_H_
