// comm::Group's CUDA path: choosing NCCL or host staging for collectives on
// CUDA tensors (comm/cuda_backend.h), and running them on the group's NCCL
// communicator (comm/nccl_communicator.h) where this build has one:
// USE_C10D_NCCL, defined by //third_party:cuda (`bazel --config=cuda`,
// `cmake -DSTRATA_CUDA=ON`).
#include <glog/logging.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "base/status.h"
#include "comm/collective_trace.h"
#include "comm/cuda_backend.h"
#include "comm/group.h"
#include "comm/group_internal.h"
#include "comm/wait_clock.h"
#ifdef USE_C10D_NCCL
#include "comm/nccl_communicator.h"
#endif

namespace strata::comm {
namespace {

using internal::NcclCall;

#ifdef USE_C10D_NCCL
constexpr bool kNcclBuilt = true;

ncclRedOp_t ToNccl(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return ncclSum;
    case ReduceOp::kAverage:
      return ncclAvg;
    case ReduceOp::kMax:
      return ncclMax;
    case ReduceOp::kMin:
      return ncclMin;
  }
  return ncclSum;
}

// A collective on the group's NCCL communicator. Wait waits on the host
// (GroupOptions::nccl_host_wait) or orders the caller's stream after it; a
// failure breaks the group and is explained as Gloo's are (peers' progress).
class NcclGroupWork final : public Work {
 public:
  NcclGroupWork(std::unique_ptr<NcclWork> work, bool host_wait,
                cudaStream_t stream, std::shared_ptr<std::atomic<bool>> broken,
                std::function<absl::Status(absl::Status)> explain)
      : work_(std::move(work)),
        host_wait_(host_wait),
        stream_(stream),
        broken_(std::move(broken)),
        explain_(std::move(explain)) {}

  absl::Status Wait() override {
    absl::MutexLock lock(&mu_);
    if (waited_) return status_;
    waited_ = true;
    if (host_wait_) {
      CollectiveWaitTimer timer;
      status_ = work_->WaitOnHost();
    } else {
      status_ = work_->WaitOnStream(stream_);
    }
    trace_.Complete();
    if (!status_.ok()) {
      broken_->store(true);
      status_ = explain_(std::move(status_));
      LOG(ERROR) << status_.message();
    }
    return status_;
  }

 private:
  absl::Mutex mu_;
  std::unique_ptr<NcclWork> work_;
  bool host_wait_;
  cudaStream_t stream_;
  std::shared_ptr<std::atomic<bool>> broken_;
  std::function<absl::Status(absl::Status)> explain_;
  bool waited_ = false;
  absl::Status status_;
  internal::CollectiveTrace trace_ = internal::TakeIssuedCollective();
};
#else
constexpr bool kNcclBuilt = false;
#endif

}  // namespace

absl::StatusOr<int> Group::NcclDevice(
    std::initializer_list<const at::Tensor*> tensors, bool may_choose) {
  const at::Tensor* cuda = nullptr;
  for (const at::Tensor* t : tensors) {
    if (t->defined() && t->is_cuda()) {
      cuda = t;
      break;
    }
  }
  if (cuda == nullptr) return -1;
  if (cuda_backend_ == CudaBackend::kAuto) {
    // A broken group chooses nothing: the call fails in Precheck.
    if (!may_choose || broken_->load()) return -1;
    absl::Status chosen = ChooseCudaPath(cuda->device().index());
    if (!chosen.ok()) {
      broken_->store(true);
      LOG(ERROR) << chosen.message();
      return chosen;
    }
  }
  return cuda_backend_ == CudaBackend::kNccl ? nccl_device_ : -1;
}

absl::Status Group::ChooseCudaPath(int device) {
  std::vector<std::string> ids;  // Each rank's GPU; empty without NCCL.
  auto store =
      c10::make_intrusive<c10d::PrefixStore>(options_.name + "/nccl", store_);
#ifdef USE_C10D_NCCL
  if (options_.cuda_backend != CudaBackend::kHostStaging) {
    STRATA_ASSIGN_OR_RETURN(std::string mine,
                            NcclCommunicator::DeviceId(device));
    const std::string what = absl::StrFormat(
        "group '%s' (rank %d of %d): exchanging GPU identities (store keys "
        "'%s/nccl/device/<rank>', timeout %s)",
        options_.name, rank(), size(), options_.name,
        absl::FormatDuration(options_.timeout));
    STRATA_RETURN_IF_ERROR(StatusFromCall(what, [&] {
      store->set(absl::StrCat("device/", rank()),
                 std::vector<uint8_t>(mine.begin(), mine.end()));
      for (int r = 0; r < size(); ++r) {
        const std::vector<uint8_t> id = store->get(absl::StrCat("device/", r));
        ids.emplace_back(id.begin(), id.end());
      }
    }));
  }
#endif
  STRATA_ASSIGN_OR_RETURN(
      CudaBackendChoice choice,
      ChooseCudaBackend(options_.cuda_backend, kNcclBuilt, ids, options_.name));
  if (rank() == 0) {
    LOG(INFO) << "group '" << options_.name
              << "': collectives on CUDA tensors use "
              << CudaBackendName(choice.backend) << " (" << choice.reason
              << ")";
  }
#ifdef USE_C10D_NCCL
  if (choice.backend == CudaBackend::kNccl) {
    NcclCommunicatorOptions nccl_options;
    nccl_options.name = options_.name;
    nccl_options.rank = rank();
    nccl_options.world_size = size();
    nccl_options.device = device;
    nccl_options.timeout = options_.timeout;
    STRATA_ASSIGN_OR_RETURN(std::unique_ptr<NcclCommunicator> communicator,
                            NcclCommunicator::Create(store, nccl_options));
    nccl_ = std::move(communicator);
    nccl_device_ = device;
  }
#endif
  cuda_backend_ = choice.backend;
  return absl::OkStatus();
}

std::unique_ptr<Work> Group::RunNccl(NcclCall call,
                                     const std::string& description,
                                     absl::string_view op) {
#ifdef USE_C10D_NCCL
  auto stream = static_cast<cudaStream_t>(
      options_.cuda_stream ? options_.cuda_stream(nccl_device_) : nullptr);
  NcclCommunicator& nccl = *nccl_;
  NcclCommunicator::Launched launched = [&]() -> NcclCommunicator::Launched {
    switch (call.kind) {
      case NcclCall::Kind::kAllReduce:
        return nccl.AllReduce(call.input, ToNccl(call.op), stream);
      case NcclCall::Kind::kBroadcast:
        return nccl.Broadcast(call.input, call.peer, stream);
      case NcclCall::Kind::kAllGatherV:
        return nccl.AllGatherV(call.input, call.output, call.counts, stream);
      case NcclCall::Kind::kReduceScatterV:
        return nccl.ReduceScatterV(call.input, call.output, call.counts,
                                   ToNccl(call.op), stream);
      case NcclCall::Kind::kSend:
        return nccl.Send(call.input, call.peer, stream);
      case NcclCall::Kind::kRecv:
        return nccl.Recv(call.input, call.peer, stream);
    }
    return absl::InternalError("unknown NcclCall kind");
  }();
  // Send and recv are not collectives: no progress records to quote.
  const bool point_to_point =
      call.kind == NcclCall::Kind::kSend || call.kind == NcclCall::Kind::kRecv;
  std::function<absl::Status(absl::Status)> explain =
      point_to_point ? [](absl::Status s) { return s; }
                     : Explainer(num_calls_, op, description);
  if (!launched.ok()) {
    broken_->store(true);
    absl::Status status = explain(launched.status());
    LOG(ERROR) << status.message();
    return Failed(std::move(status));
  }
  return std::make_unique<NcclGroupWork>(std::move(*launched),
                                         options_.nccl_host_wait, stream,
                                         broken_, std::move(explain));
#else
  // cuda_backend_ never becomes kNccl in a build without NCCL.
  LOG(FATAL) << description << " (" << op
             << ") took the NCCL path in a build without NCCL";
  return nullptr;
#endif
}

}  // namespace strata::comm
