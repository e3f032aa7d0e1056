// Internal to comm::Group (group*.cc): CUDA tensors in collectives go through
// host memory or NCCL; the progress tracker's options. Not part of the
// library's interface.
#ifndef STRATA_COMM_GROUP_INTERNAL_H_
#define STRATA_COMM_GROUP_INTERNAL_H_

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "comm/group.h"
#include "comm/progress.h"

namespace strata::comm::internal {

// The options of the world group's progress tracker (comm/progress.h).
ProgressTrackerOptions TrackerOptions(const GroupOptions& options);

// What a call on a broken group says.
inline constexpr char kBrokenMessage[] =
    "the group is unusable because an earlier collective on it failed (see "
    "the first error on this rank); ranks cannot resynchronise after a "
    "failure, so restart the job (from the last checkpoint)";

// A collective for the NCCL path (group_cuda.cc), after Group's checks.
struct NcclCall {
  enum class Kind {
    kAllReduce,
    kBroadcast,
    kAllGatherV,
    kReduceScatterV,
    kSend,
    kRecv
  };
  Kind kind = Kind::kAllReduce;
  // All-reduce, broadcast, send, recv: `input` is the tensor.
  at::Tensor input;
  at::Tensor output;
  std::vector<int64_t> counts;  // The V collectives.
  ReduceOp op = ReduceOp::kSum;
  int peer = -1;  // Broadcast root, send destination or recv source.
};

// Whether a collective's tensor goes through host memory: contiguous CUDA
// tensors do (others reach the checks, which name the problem).
bool Staged(const at::Tensor& t);
// A host copy of `t` (waits for the device's pending work on it).
at::Tensor HostCopy(const at::Tensor& t);
// An uninitialised host tensor of `t`'s shape and dtype.
at::Tensor HostLike(const at::Tensor& t);
// `work` on host tensors; its Wait copies host[i] into device[i] after a
// successful collective. Takes ownership of `work`; the tensors share
// storage with the caller's.
std::unique_ptr<Work> CopyBackAfter(std::unique_ptr<Work> work,
                                    std::vector<at::Tensor> host,
                                    std::vector<at::Tensor> device);

}  // namespace strata::comm::internal

#endif  // STRATA_COMM_GROUP_INTERNAL_H_
