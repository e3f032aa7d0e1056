// NcclCommunicator: one NCCL communicator on one GPU, driven through NCCL's C
// API, with its own CUDA stream. comm::Group uses it for CUDA tensors
// (GroupOptions::cuda_backend); built only with `bazel --config=cuda` or
// `cmake -DSTRATA_CUDA=ON` (it links the CUDA runtime and NCCL).
//
// Why NCCL's C API and not c10d's ProcessGroupNCCL:
//  - It builds and links wherever the CUDA toolkit and NCCL are. A CPU
//    LibTorch (Debian's, the CI machines') has ProcessGroupNCCL's headers but
//    none of its symbols, so a ProcessGroupNCCL backend would compile only
//    against a CUDA LibTorch, on the GPU machines that are lent for minutes.
//    This file uses no c10 CUDA symbol: the caller passes the cudaStream_t
//    its tensors were produced on (comm/cuda_current_stream.h reads
//    LibTorch's current stream; only that piece needs a CUDA LibTorch).
//  - Explicit control: the stream collectives run on, the events that order
//    them after the caller's work, how errors are polled
//    (ncclCommGetAsyncError), and when the communicator is aborted. A
//    timed-out or failed collective aborts the communicator
//    (ncclCommAbort) and returns a status naming the collective; it never
//    hangs, and no watchdog thread is needed (ProcessGroupNCCL's watchdog
//    tears down the process instead).
//  - It mirrors Group's contract (V variants, averages, statuses) without
//    c10d's option structs, whose fields change between LibTorch versions.
//
// Streams and events. Each collective records an event on the caller's
// stream and makes the communicator's stream (cudaStreamNonBlocking) wait for
// it, so it reads its inputs after the caller's kernels that produced them;
// it then runs on the communicator's stream and records a completion event.
// NcclWork::WaitOnStream makes a caller stream wait for that event (no host
// blocking: the normal path for overlap); NcclWork::WaitOnHost polls the
// event and NCCL's async error until completion, an error or the timeout.
//
// Tensors crossing streams. The caching allocator would hand a tensor's
// memory to new tensors of its allocating (caller) stream as soon as the
// tensor is freed, while the communicator's stream may still use it. A CUDA
// LibTorch's c10::cuda::CUDACachingAllocator::recordStream marks the block
// as in use by the other stream; that call needs libc10_cuda. Here each
// NcclWork holds references to its tensors until completion is known
// instead: WaitOnHost saw the event; or WaitOnStream ordered the caller's
// stream after it (later reuse on that stream comes after completion); or,
// for a Work dropped unwaited or failed, the communicator keeps them until
// its event has passed (checked at each later launch and at destruction).
// A CUDA-LibTorch layer that gives tensors to other streams without Waiting
// would call recordStream(tensor.storage().data_ptr(), comm stream) right
// after the launch instead.
//
// Uneven V variants: equal counts use ncclAllGather / ncclReduceScatter;
// uneven ones run one ncclBroadcast (all-gather) or ncclReduce
// (reduce-scatter) per rank's block, rooted at that rank, inside one
// ncclGroupStart/End. NCCL fuses the group into one launch; each block's
// bytes cross each link once, as in the even collectives' rings, and no
// padding or staging buffer is needed.
//
// Threading: launches and Abort may come from any thread (a mutex orders
// them); an NcclWork may be waited on from any thread.
#ifndef STRATA_COMM_NCCL_COMMUNICATOR_H_
#define STRATA_COMM_NCCL_COMMUNICATOR_H_

#include <ATen/core/Tensor.h>
#include <c10/util/intrusive_ptr.h>
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "absl/types/span.h"

namespace c10d {
class Store;
}  // namespace c10d

namespace strata::comm {

struct NcclCommunicatorOptions {
  // The group's name (errors) and this rank's place in it.
  std::string name = "world";
  int rank = 0;
  int world_size = 1;
  // The CUDA device (index) of this rank's tensors.
  int device = 0;
  // Bounds forming the communicator and every host wait.
  absl::Duration timeout = absl::Minutes(10);
  // Called with the reason just before the communicator is aborted, on the
  // aborting thread (tests release what they held back; may be empty).
  std::function<void(const absl::Status&)> on_abort;
};

namespace internal {
struct NcclShared;  // The communicator's state, shared with its works.
}  // namespace internal

// One collective launched on the communicator's stream.
class NcclWork {
 public:
  // `label`: "all_reduce(sum) #3 of 4096 bytes".
  NcclWork(std::shared_ptr<internal::NcclShared> shared, cudaEvent_t done,
           std::vector<at::Tensor> tensors, std::string label);
  // Unwaited (or failed): the communicator keeps the tensors until the
  // completion event passed.
  ~NcclWork();
  NcclWork(const NcclWork&) = delete;
  NcclWork& operator=(const NcclWork&) = delete;

  // Makes `stream` wait for the collective's completion (device side; the
  // host does not block). Returns an error when NCCL already reports one
  // (then aborts the communicator); a later failure surfaces at the next
  // host wait. Later calls return the first call's status.
  absl::Status WaitOnStream(cudaStream_t stream);
  // Blocks until the collective completed: polls the completion event and
  // ncclCommGetAsyncError. On an async error or after the communicator's
  // timeout it aborts the communicator and returns Internal or
  // DeadlineExceeded naming the collective. Later calls return the same.
  absl::Status WaitOnHost();

  // "all_reduce(sum) #3 of 4096 bytes on group 'world' (rank 0 of 1)".
  const std::string& description() const { return description_; }

 private:
  absl::Mutex mu_;
  std::shared_ptr<internal::NcclShared> shared_;
  cudaEvent_t done_ = nullptr;
  std::vector<at::Tensor> tensors_ ABSL_GUARDED_BY(mu_);
  std::string label_;
  std::string description_;
  bool waited_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status status_ ABSL_GUARDED_BY(mu_);
};

class NcclCommunicator {
 public:
  using Launched = absl::StatusOr<std::unique_ptr<NcclWork>>;

  // Forms the communicator (a collective of all ranks): rank 0 makes the
  // unique id (ncclGetUniqueId) and sets it in `store` under
  // "nccl_unique_id" (the caller prefixes the store with the group's name);
  // every rank then joins non-blocking (ncclCommInitRankConfig, blocking=0),
  // polled until done, an error or the timeout (then aborted).
  static absl::StatusOr<std::unique_ptr<NcclCommunicator>> Create(
      c10::intrusive_ptr<c10d::Store> store,
      const NcclCommunicatorOptions& options);

  // Finalizes the communicator once every Work is gone (ncclCommFinalize,
  // then ncclCommDestroy; abort when that times out).
  ~NcclCommunicator();
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  const NcclCommunicatorOptions& options() const { return options_; }

  // The UUID of CUDA device `device` ("GPU-" and 32 hex digits, from
  // cudaDeviceProp::uuid): one GPU has the same identity in every process.
  static absl::StatusOr<std::string> DeviceId(int device);

  // The collectives: tensors contiguous on options().device, produced on
  // `caller`. Element counts as in comm::Group (group.h); the caller checked
  // shapes and dtypes. `op` is ncclSum, ncclAvg, ncclMax or ncclMin.
  Launched AllReduce(const at::Tensor& tensor, ncclRedOp_t op,
                     cudaStream_t caller);
  Launched Broadcast(const at::Tensor& tensor, int root, cudaStream_t caller);
  Launched AllGatherV(const at::Tensor& input, const at::Tensor& output,
                      absl::Span<const int64_t> counts, cudaStream_t caller);
  Launched ReduceScatterV(const at::Tensor& input, const at::Tensor& output,
                          absl::Span<const int64_t> counts, ncclRedOp_t op,
                          cudaStream_t caller);
  Launched Send(const at::Tensor& tensor, int peer, cudaStream_t caller);
  Launched Recv(const at::Tensor& tensor, int peer, cudaStream_t caller);
  // A one-element all-reduce on a buffer of the communicator's own.
  Launched Barrier(cudaStream_t caller);

  // Aborts the communicator (ncclCommAbort): in-flight collectives stop,
  // later launches fail. Idempotent.
  void Abort();
  bool aborted() const;

 private:
  NcclCommunicator(NcclCommunicatorOptions options,
                   std::shared_ptr<internal::NcclShared> shared);

  NcclCommunicatorOptions options_;
  std::shared_ptr<internal::NcclShared> shared_;
};

// The NCCL data type of `dtype`; InvalidArgument for dtypes NCCL lacks.
absl::StatusOr<ncclDataType_t> NcclDataType(at::ScalarType dtype);

}  // namespace strata::comm

#endif  // STRATA_COMM_NCCL_COMMUNICATOR_H_
