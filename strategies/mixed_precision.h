// Pieces of mixed-precision training shared by SingleStrategy, DdpStrategy
// and ZeroStrategy (strategy.h, MixedPrecisionOptions): the fp32 master copy
// of a flat parameter buffer, folding low-precision gradients into an fp32
// accumulation buffer, casting buffers, and buffers whose memory is released
// and re-allocated in place (ZeRO-2's bucket gradients, FSDP's gathered
// parameters and full gradients).
//
// Threading: none of this is thread-safe; call from the training thread (or
// autograd's hooks on it).
#ifndef STRATA_STRATEGIES_MIXED_PRECISION_H_
#define STRATA_STRATEGIES_MIXED_PRECISION_H_

#include <ATen/core/Tensor.h>
#include <c10/core/ScalarType.h>

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "models/unit.h"
#include "optim/flat_parameters.h"
#include "strategies/strategy.h"
#include "strategies/unit_buffer_pool.h"

namespace strata::strategies {

// Whether `options` computes with parameters below fp32 (and so keeps fp32
// master parameters).
inline bool UsesMasterParameters(const MixedPrecisionOptions& options) {
  return options.param_dtype != at::kFloat;
}

// The values of `params` converted to fp32, concatenated in the given order
// and zero-padded to a multiple of `align_elems` (>= 1): the layout
// optim::FlatParameters::Create gives the same list. Call before Create,
// which converts the parameters to the compute dtype.
at::Tensor ConcatenateFp32(const std::vector<optim::NamedParameter>& params,
                           int64_t align_elems);

// Converts every floating-point buffer of `model` to `dtype` in place
// (Tensor::set_data: the module keeps the same tensor objects).
void CastBuffers(models::UnitModel& model, at::ScalarType dtype);

// Whether this LibTorch can train in `dtype` on the CPU: runs a tiny
// forward and backward of the ops the models use (linear, layer norm, GELU,
// log-softmax, embedding) in `dtype` and returns FailedPrecondition naming
// the op that failed and the LibTorch version when one throws (LibTorch
// 1.13 has no Half matmul on the CPU, for instance). OK for kFloat without
// running anything. Call at set-up, before a run is committed to `dtype`.
absl::Status CheckCpuComputeDtype(at::ScalarType dtype);

// fp32 += low (any floating dtype, same numel), then low = 0: moves one
// micro-batch's low-precision gradients into the fp32 accumulation buffer.
void FoldGradients(const at::Tensor& low, const at::Tensor& fp32);

// A tensor whose memory can be released and re-allocated while the tensor
// and every view of it stay valid objects (autograd keeps .grad views of a
// flat gradient buffer): the storage's data is freed (StorageImpl::reset)
// and later re-allocated at the same size (set_data_ptr_noswap) from the
// current allocator of the tensor's device (so a TrackingAllocator installed
// since counts it), as FSDP does for gathered parameters (docs/ARCHITECTURE.md
// "Freeing gathered parameters"). While released, the tensor and its views must
// not be read or written. With a UnitBufferPool (unit_buffer_pool.h) the
// memory is handed to the pool on release and taken from it on allocation
// (FSDP reuses it within a step); the same in-place mechanism either way.
class ReleasableBuffer {
 public:
  ReleasableBuffer() = default;
  // Borrows `tensor`'s storage (shares ownership); the tensor must be
  // contiguous and cover its whole storage. `pool` (borrowed, may be null:
  // none; must outlive this buffer's releases and allocations) counts the
  // tensor's memory as live (UnitBufferPool::Track).
  explicit ReleasableBuffer(at::Tensor tensor, UnitBufferPool* pool = nullptr);

  const at::Tensor& tensor() const { return tensor_; }
  bool defined() const { return tensor_.defined(); }
  bool allocated() const;
  // Bytes held now: the full size when allocated, else 0.
  int64_t held_bytes() const;
  int64_t full_bytes() const { return full_bytes_; }

  // Frees the memory; no-op when released already.
  void Release();
  // Re-allocates uninitialised memory when released (e.g. to be filled by
  // an all-gather); no-op otherwise.
  void Allocate();
  // Re-allocates zero-filled memory when released; no-op otherwise.
  void AllocateZeroed();

 private:
  at::Tensor tensor_;
  int64_t full_bytes_ = 0;
  UnitBufferPool* pool_ = nullptr;
};

}  // namespace strata::strategies

#endif  // STRATA_STRATEGIES_MIXED_PRECISION_H_
