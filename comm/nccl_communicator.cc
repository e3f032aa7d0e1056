#include "comm/nccl_communicator.h"

#include <glog/logging.h>

#include <algorithm>
#include <deque>
#include <functional>
#include <numeric>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/status.h"
#include "comm/cuda_backend.h"

namespace strata::comm {
namespace internal {

struct NcclShared {
  ~NcclShared();

  NcclCommunicatorOptions options;
  absl::Mutex mu;
  ncclComm_t comm ABSL_GUARDED_BY(mu) = nullptr;
  bool aborted ABSL_GUARDED_BY(mu) = false;
  absl::Status abort_reason ABSL_GUARDED_BY(mu);
  int64_t num_launches ABSL_GUARDED_BY(mu) = 0;
  // Collectives run here, ordered after the caller's stream by `ready`.
  cudaStream_t stream = nullptr;
  cudaEvent_t ready = nullptr;
  float* barrier_buffer = nullptr;  // One float on the device.
  // Works dropped (or failed) before their completion was known: their
  // tensors stay alive until `done` passed.
  struct Pending {
    cudaEvent_t done;
    std::vector<at::Tensor> tensors;
  };
  std::deque<Pending> pending ABSL_GUARDED_BY(mu);
};

}  // namespace internal

namespace {

using internal::NcclShared;

// Sets the current device for a scope and restores the previous one.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device) : device_(device) {
    if (cudaGetDevice(&previous_) != cudaSuccess) previous_ = device;
    if (previous_ != device_) set_ = cudaSetDevice(device_);
  }
  ~DeviceGuard() {
    if (previous_ != device_) cudaSetDevice(previous_);
  }
  cudaError_t status() const { return set_; }

 private:
  int device_;
  int previous_ = 0;
  cudaError_t set_ = cudaSuccess;
};

// " on group 'world' (rank 0 of 2)": what follows a collective's label.
std::string Where(const NcclCommunicatorOptions& o) {
  return absl::StrFormat(" on group '%s' (rank %d of %d)", o.name, o.rank,
                         o.world_size);
}

// The helpers below append the group, rank (and device) to `what`.
absl::Status CudaStatus(cudaError_t error, absl::string_view what,
                        const NcclCommunicatorOptions& o) {
  if (error == cudaSuccess) return absl::OkStatus();
  return absl::InternalError(absl::StrFormat(
      "%s on group '%s' (rank %d of %d, cuda:%d): CUDA error '%s'", what,
      o.name, o.rank, o.world_size, o.device, cudaGetErrorString(error)));
}

absl::Status NcclStatus(ncclResult_t result, absl::string_view what,
                        const NcclCommunicatorOptions& o, ncclComm_t comm) {
  const char* last = comm != nullptr ? ncclGetLastError(comm) : nullptr;
  return absl::InternalError(
      NcclErrorMessage(what, o.name, o.rank, o.world_size,
                       ncclGetErrorString(result), last ? last : ""));
}

// Waits for a non-blocking NCCL call (`result`) to settle: polls
// ncclCommGetAsyncError while it says ncclInProgress, until `deadline`.
absl::Status Settle(NcclShared& s, ncclResult_t result, absl::string_view what,
                    absl::Time deadline) ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu) {
  absl::Duration backoff = absl::Microseconds(10);
  while (result == ncclInProgress) {
    if (absl::Now() > deadline) {
      return absl::DeadlineExceededError(absl::StrFormat(
          "%s on group '%s' (rank %d of %d) did not finish within %s", what,
          s.options.name, s.options.rank, s.options.world_size,
          absl::FormatDuration(s.options.timeout)));
    }
    absl::SleepFor(backoff);
    backoff = std::min(backoff * 2, absl::Milliseconds(1));
    ncclResult_t state = ncclSuccess;
    const ncclResult_t asked = ncclCommGetAsyncError(s.comm, &state);
    result = asked != ncclSuccess ? asked : state;
  }
  if (result == ncclSuccess) return absl::OkStatus();
  return NcclStatus(result, what, s.options, s.comm);
}

void AbortLocked(NcclShared& s, const absl::Status& reason)
    ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu) {
  if (s.aborted) return;
  s.aborted = true;
  s.abort_reason = reason;
  LOG(ERROR) << "aborting the NCCL communicator of group '" << s.options.name
             << "' (rank " << s.options.rank << "): " << reason.message();
  if (s.options.on_abort) s.options.on_abort(reason);
  if (s.comm != nullptr) ncclCommAbort(s.comm);
}

// Drops the tensors of dropped works whose collective has finished.
void ReleaseFinished(NcclShared& s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu) {
  while (!s.pending.empty() &&
         cudaEventQuery(s.pending.front().done) == cudaSuccess) {
    cudaEventDestroy(s.pending.front().done);
    s.pending.pop_front();
  }
}

using NcclCall = std::function<ncclResult_t(ncclComm_t, cudaStream_t)>;

// Launches `call` on the communicator's stream after the caller's pending
// work, and records its completion event.
NcclCommunicator::Launched Launch(const std::shared_ptr<NcclShared>& s,
                                  absl::string_view op, int64_t bytes,
                                  std::vector<at::Tensor> tensors,
                                  cudaStream_t caller, const NcclCall& call) {
  const NcclCommunicatorOptions& o = s->options;
  absl::MutexLock lock(&s->mu);
  const int64_t seq = ++s->num_launches;
  std::string label = absl::StrFormat("%s #%d of %d bytes", op, seq, bytes);
  if (s->aborted) {
    return absl::FailedPreconditionError(
        absl::StrCat(label, Where(o),
                     ": the NCCL communicator was aborted after an earlier "
                     "failure (",
                     s->abort_reason.message(), ")"));
  }
  DeviceGuard guard(o.device);
  STRATA_RETURN_IF_ERROR(CudaStatus(guard.status(), label, o));
  ReleaseFinished(*s);
  STRATA_RETURN_IF_ERROR(CudaStatus(cudaEventRecord(s->ready, caller),
                                    "cudaEventRecord on the caller's stream "
                                    "before " +
                                        label,
                                    o));
  STRATA_RETURN_IF_ERROR(CudaStatus(cudaStreamWaitEvent(s->stream, s->ready, 0),
                                    "cudaStreamWaitEvent before " + label, o));
  absl::Status launched =
      Settle(*s, call(s->comm, s->stream), label, absl::Now() + o.timeout);
  if (!launched.ok()) {
    AbortLocked(*s, launched);
    return launched;
  }
  cudaEvent_t done = nullptr;
  absl::Status recorded =
      CudaStatus(cudaEventCreateWithFlags(&done, cudaEventDisableTiming),
                 "cudaEventCreate after " + label, o);
  if (recorded.ok()) {
    recorded = CudaStatus(cudaEventRecord(done, s->stream),
                          "cudaEventRecord after " + label, o);
  }
  if (!recorded.ok()) {
    if (done != nullptr) cudaEventDestroy(done);
    AbortLocked(*s, recorded);
    return recorded;
  }
  return std::make_unique<NcclWork>(s, done, std::move(tensors),
                                    std::move(label));
}

int64_t Bytes(const at::Tensor& t) { return t.numel() * t.element_size(); }

absl::string_view RedOpName(ncclRedOp_t op) {
  switch (op) {
    case ncclSum:
      return "sum";
    case ncclAvg:
      return "average";
    case ncclMax:
      return "max";
    case ncclMin:
      return "min";
    default:
      return "other";
  }
}

// Runs `calls` inside ncclGroupStart/End; the first failure wins, but the
// group is always closed.
ncclResult_t Grouped(const std::function<ncclResult_t()>& calls) {
  ncclResult_t result = ncclGroupStart();
  if (result != ncclSuccess) return result;
  const ncclResult_t inner = calls();
  const ncclResult_t end = ncclGroupEnd();
  return inner != ncclSuccess ? inner : end;
}

std::vector<int64_t> Offsets(absl::Span<const int64_t> counts) {
  std::vector<int64_t> offsets(counts.size() + 1, 0);
  std::partial_sum(counts.begin(), counts.end(), offsets.begin() + 1);
  return offsets;
}

bool AllEqual(absl::Span<const int64_t> counts) {
  return std::adjacent_find(counts.begin(), counts.end(),
                            std::not_equal_to<int64_t>()) == counts.end();
}

// One look at an unfinished collective: the CUDA error of its event query,
// NCCL's async error, or the deadline passed.
absl::Status PollOnce(NcclShared& s, cudaError_t query,
                      const std::string& label, absl::Time deadline)
    ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu) {
  const NcclCommunicatorOptions& o = s.options;
  if (query != cudaErrorNotReady) {
    return CudaStatus(query, "waiting for " + label, o);
  }
  ncclResult_t state = ncclSuccess;
  const ncclResult_t asked = ncclCommGetAsyncError(s.comm, &state);
  if (asked != ncclSuccess) return NcclStatus(asked, label, o, s.comm);
  if (state != ncclSuccess && state != ncclInProgress) {
    return NcclStatus(state, label, o, s.comm);
  }
  if (absl::Now() > deadline) {
    return absl::DeadlineExceededError(absl::StrFormat(
        "%s%s timed out after %s; the NCCL communicator was aborted", label,
        Where(o), absl::FormatDuration(o.timeout)));
  }
  return absl::OkStatus();
}

}  // namespace

namespace internal {

NcclShared::~NcclShared() {
  absl::MutexLock lock(&mu);
  DeviceGuard guard(options.device);
  if (comm != nullptr && !aborted) {
    absl::Status finalized =
        Settle(*this, ncclCommFinalize(comm), "ncclCommFinalize",
               absl::Now() + options.timeout);
    if (finalized.ok()) {
      ncclCommDestroy(comm);
    } else {
      AbortLocked(*this, finalized);
    }
  }
  // After a clean finalize the stream has nothing left; after an abort the
  // group is broken and its tensors are dropped with it.
  if (!aborted && stream != nullptr) cudaStreamSynchronize(stream);
  for (Pending& p : pending) cudaEventDestroy(p.done);
  pending.clear();
  if (barrier_buffer != nullptr) cudaFree(barrier_buffer);
  if (ready != nullptr) cudaEventDestroy(ready);
  if (stream != nullptr) cudaStreamDestroy(stream);
}

}  // namespace internal

absl::StatusOr<ncclDataType_t> NcclDataType(at::ScalarType dtype) {
  switch (dtype) {
    case at::kFloat:
      return ncclFloat32;
    case at::kDouble:
      return ncclFloat64;
    case at::kHalf:
      return ncclFloat16;
    case at::kBFloat16:
      return ncclBfloat16;
    case at::kInt:
      return ncclInt32;
    case at::kLong:
      return ncclInt64;
    case at::kChar:
      return ncclInt8;
    case at::kByte:
    case at::kBool:
      return ncclUint8;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("NCCL has no data type for ", c10::toString(dtype)));
  }
}

// --- NcclWork ----------------------------------------------------------------

NcclWork::NcclWork(std::shared_ptr<internal::NcclShared> shared,
                   cudaEvent_t done, std::vector<at::Tensor> tensors,
                   std::string label)
    : shared_(std::move(shared)),
      done_(done),
      tensors_(std::move(tensors)),
      label_(std::move(label)),
      description_(label_ + Where(shared_->options)) {}

NcclWork::~NcclWork() {
  absl::MutexLock lock(&mu_);
  if (waited_ && status_.ok()) {
    cudaEventDestroy(done_);  // Released once the device passed it.
    return;
  }
  absl::MutexLock shared_lock(&shared_->mu);
  shared_->pending.push_back({done_, std::move(tensors_)});
}

absl::Status NcclWork::WaitOnStream(cudaStream_t stream) {
  absl::MutexLock lock(&mu_);
  if (waited_) return status_;
  waited_ = true;
  const NcclCommunicatorOptions& o = shared_->options;
  absl::MutexLock shared_lock(&shared_->mu);
  if (shared_->aborted) {
    status_ = absl::FailedPreconditionError(
        absl::StrCat(description_, ": the NCCL communicator was aborted (",
                     shared_->abort_reason.message(), ")"));
    return status_;
  }
  ncclResult_t state = ncclSuccess;
  const ncclResult_t asked = ncclCommGetAsyncError(shared_->comm, &state);
  if (asked != ncclSuccess ||
      (state != ncclSuccess && state != ncclInProgress)) {
    status_ = NcclStatus(asked != ncclSuccess ? asked : state, label_, o,
                         shared_->comm);
    AbortLocked(*shared_, status_);
    return status_;
  }
  DeviceGuard guard(o.device);
  status_ = CudaStatus(cudaStreamWaitEvent(stream, done_, 0),
                       "cudaStreamWaitEvent after " + label_, o);
  // `stream` now runs after the collective: reuse of the tensors' memory on
  // it is ordered after completion (nccl_communicator.h).
  if (status_.ok()) tensors_.clear();
  return status_;
}

absl::Status NcclWork::WaitOnHost() {
  absl::MutexLock lock(&mu_);
  if (waited_) return status_;
  waited_ = true;
  const NcclCommunicatorOptions& o = shared_->options;
  DeviceGuard guard(o.device);
  const absl::Time deadline = absl::Now() + o.timeout;
  absl::Duration backoff = absl::Microseconds(10);
  while (true) {
    const cudaError_t query = cudaEventQuery(done_);
    if (query == cudaSuccess) {
      tensors_.clear();
      status_ = absl::OkStatus();
      return status_;
    }
    {
      absl::MutexLock shared_lock(&shared_->mu);
      if (shared_->aborted) {
        status_ = absl::FailedPreconditionError(
            absl::StrCat(description_, ": the NCCL communicator was aborted (",
                         shared_->abort_reason.message(), ")"));
        return status_;
      }
      status_ = PollOnce(*shared_, query, label_, deadline);
      if (!status_.ok()) {
        AbortLocked(*shared_, status_);
        return status_;
      }
    }  // Launches and other waits proceed while this one sleeps.
    absl::SleepFor(backoff);
    backoff = std::min(backoff * 2, absl::Milliseconds(1));
  }
}

// --- NcclCommunicator --------------------------------------------------------

NcclCommunicator::NcclCommunicator(NcclCommunicatorOptions options,
                                   std::shared_ptr<internal::NcclShared> shared)
    : options_(std::move(options)), shared_(std::move(shared)) {}

NcclCommunicator::~NcclCommunicator() = default;

absl::StatusOr<std::string> NcclCommunicator::DeviceId(int device) {
  cudaDeviceProp properties;
  const cudaError_t error = cudaGetDeviceProperties(&properties, device);
  if (error != cudaSuccess) {
    return absl::FailedPreconditionError(
        absl::StrFormat("cudaGetDeviceProperties(cuda:%d): %s", device,
                        cudaGetErrorString(error)));
  }
  std::string id = "GPU-";
  for (int i = 0; i < 16; ++i) {
    absl::StrAppendFormat(&id, "%02x",
                          static_cast<unsigned char>(properties.uuid.bytes[i]));
  }
  return id;
}

absl::StatusOr<std::unique_ptr<NcclCommunicator>> NcclCommunicator::Create(
    c10::intrusive_ptr<c10d::Store> store,
    const NcclCommunicatorOptions& options) {
  auto s = std::make_shared<internal::NcclShared>();
  s->options = options;
  // `forming` for the helpers, which add the group, rank and device.
  const std::string forming = "forming the NCCL communicator";
  const std::string what = absl::StrFormat(
      "%s of group '%s' (rank %d of %d, cuda:%d)", forming, options.name,
      options.rank, options.world_size, options.device);
  DeviceGuard guard(options.device);
  STRATA_RETURN_IF_ERROR(CudaStatus(guard.status(), forming, options));
  ncclUniqueId id;
  constexpr char kKey[] = "nccl_unique_id";
  if (options.rank == 0) {
    const ncclResult_t made = ncclGetUniqueId(&id);
    if (made != ncclSuccess)
      return NcclStatus(made, "ncclGetUniqueId", options, nullptr);
    const auto* bytes = reinterpret_cast<const uint8_t*>(&id);
    STRATA_RETURN_IF_ERROR(StatusFromCall(what, [&] {
      store->set(kKey, std::vector<uint8_t>(bytes, bytes + sizeof(id)));
    }));
  } else {
    std::vector<uint8_t> bytes;
    STRATA_RETURN_IF_ERROR(StatusFromCall(
        absl::StrCat(what, ": reading rank 0's NCCL unique id (store key '",
                     kKey, "')"),
        [&] { bytes = store->get(kKey); }));
    if (bytes.size() != sizeof(id)) {
      return absl::InternalError(
          absl::StrFormat("%s: store key '%s' holds %d bytes, expected %d",
                          what, kKey, bytes.size(), sizeof(id)));
    }
    std::copy(bytes.begin(), bytes.end(), reinterpret_cast<uint8_t*>(&id));
  }
  STRATA_RETURN_IF_ERROR(
      CudaStatus(cudaStreamCreateWithFlags(&s->stream, cudaStreamNonBlocking),
                 forming, options));
  STRATA_RETURN_IF_ERROR(
      CudaStatus(cudaEventCreateWithFlags(&s->ready, cudaEventDisableTiming),
                 forming, options));
  STRATA_RETURN_IF_ERROR(CudaStatus(
      cudaMalloc(reinterpret_cast<void**>(&s->barrier_buffer), sizeof(float)),
      forming, options));
  absl::MutexLock lock(&s->mu);
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;  // Init and collectives can be polled and aborted.
  absl::Status joined = Settle(
      *s,
      ncclCommInitRankConfig(&s->comm, options.world_size, id, options.rank,
                             &config),
      absl::StrCat(forming, " (ncclCommInitRankConfig, cuda:", options.device,
                   ")"),
      absl::Now() + options.timeout);
  if (!joined.ok()) {
    AbortLocked(*s, joined);
    return joined;
  }
  return std::unique_ptr<NcclCommunicator>(
      new NcclCommunicator(options, std::move(s)));
}

void NcclCommunicator::Abort() {
  absl::MutexLock lock(&shared_->mu);
  AbortLocked(*shared_, absl::CancelledError("NcclCommunicator::Abort"));
}

bool NcclCommunicator::aborted() const {
  absl::MutexLock lock(&shared_->mu);
  return shared_->aborted;
}

// --- Collectives -------------------------------------------------------------

NcclCommunicator::Launched NcclCommunicator::AllReduce(const at::Tensor& tensor,
                                                       ncclRedOp_t op,
                                                       cudaStream_t caller) {
  STRATA_ASSIGN_OR_RETURN(ncclDataType_t type,
                          NcclDataType(tensor.scalar_type()));
  void* data = tensor.data_ptr();
  const size_t count = tensor.numel();
  return Launch(
      shared_, absl::StrCat("all_reduce(", RedOpName(op), ")"), Bytes(tensor),
      {tensor}, caller, [=](ncclComm_t comm, cudaStream_t stream) {
        return ncclAllReduce(data, data, count, type, op, comm, stream);
      });
}

NcclCommunicator::Launched NcclCommunicator::Broadcast(const at::Tensor& tensor,
                                                       int root,
                                                       cudaStream_t caller) {
  STRATA_ASSIGN_OR_RETURN(ncclDataType_t type,
                          NcclDataType(tensor.scalar_type()));
  void* data = tensor.data_ptr();
  const size_t count = tensor.numel();
  return Launch(
      shared_, absl::StrCat("broadcast(root ", root, ")"), Bytes(tensor),
      {tensor}, caller, [=](ncclComm_t comm, cudaStream_t stream) {
        return ncclBroadcast(data, data, count, type, root, comm, stream);
      });
}

NcclCommunicator::Launched NcclCommunicator::AllGatherV(
    const at::Tensor& input, const at::Tensor& output,
    absl::Span<const int64_t> counts, cudaStream_t caller) {
  STRATA_ASSIGN_OR_RETURN(ncclDataType_t type,
                          NcclDataType(input.scalar_type()));
  const void* in = input.data_ptr();
  auto* out = static_cast<char*>(output.data_ptr());
  const int64_t element = output.element_size();
  const std::vector<int64_t> offsets = Offsets(counts);
  const std::vector<int64_t> count_list(counts.begin(), counts.end());
  return Launch(
      shared_, "all_gather", Bytes(output), {input, output}, caller,
      [=](ncclComm_t comm, cudaStream_t stream) {
        if (AllEqual(count_list)) {
          return ncclAllGather(in, out, count_list[0], type, comm, stream);
        }
        return Grouped([&] {
          for (size_t r = 0; r < count_list.size(); ++r) {
            if (count_list[r] == 0) continue;
            // sendbuff is read only on the root (r == this rank).
            const ncclResult_t result =
                ncclBroadcast(in, out + offsets[r] * element, count_list[r],
                              type, static_cast<int>(r), comm, stream);
            if (result != ncclSuccess) return result;
          }
          return ncclSuccess;
        });
      });
}

NcclCommunicator::Launched NcclCommunicator::ReduceScatterV(
    const at::Tensor& input, const at::Tensor& output,
    absl::Span<const int64_t> counts, ncclRedOp_t op, cudaStream_t caller) {
  STRATA_ASSIGN_OR_RETURN(ncclDataType_t type,
                          NcclDataType(input.scalar_type()));
  const auto* in = static_cast<const char*>(input.data_ptr());
  void* out = output.data_ptr();
  const int64_t element = input.element_size();
  const std::vector<int64_t> offsets = Offsets(counts);
  const std::vector<int64_t> count_list(counts.begin(), counts.end());
  return Launch(shared_, absl::StrCat("reduce_scatter(", RedOpName(op), ")"),
                Bytes(input), {input, output}, caller,
                [=](ncclComm_t comm, cudaStream_t stream) {
                  if (AllEqual(count_list)) {
                    return ncclReduceScatter(in, out, count_list[0], type, op,
                                             comm, stream);
                  }
                  return Grouped([&] {
                    for (size_t r = 0; r < count_list.size(); ++r) {
                      if (count_list[r] == 0) continue;
                      // recvbuff is read only on the root (r == rank: the
                      // output).
                      const ncclResult_t result = ncclReduce(
                          in + offsets[r] * element, out, count_list[r], type,
                          op, static_cast<int>(r), comm, stream);
                      if (result != ncclSuccess) return result;
                    }
                    return ncclSuccess;
                  });
                });
}

NcclCommunicator::Launched NcclCommunicator::Send(const at::Tensor& tensor,
                                                  int peer,
                                                  cudaStream_t caller) {
  STRATA_ASSIGN_OR_RETURN(ncclDataType_t type,
                          NcclDataType(tensor.scalar_type()));
  const void* data = tensor.data_ptr();
  const size_t count = tensor.numel();
  return Launch(shared_, absl::StrCat("send(to rank ", peer, ")"),
                Bytes(tensor), {tensor}, caller,
                [=](ncclComm_t comm, cudaStream_t stream) {
                  return ncclSend(data, count, type, peer, comm, stream);
                });
}

NcclCommunicator::Launched NcclCommunicator::Recv(const at::Tensor& tensor,
                                                  int peer,
                                                  cudaStream_t caller) {
  STRATA_ASSIGN_OR_RETURN(ncclDataType_t type,
                          NcclDataType(tensor.scalar_type()));
  void* data = tensor.data_ptr();
  const size_t count = tensor.numel();
  return Launch(shared_, absl::StrCat("recv(from rank ", peer, ")"),
                Bytes(tensor), {tensor}, caller,
                [=](ncclComm_t comm, cudaStream_t stream) {
                  return ncclRecv(data, count, type, peer, comm, stream);
                });
}

NcclCommunicator::Launched NcclCommunicator::Barrier(cudaStream_t caller) {
  float* buffer = shared_->barrier_buffer;
  return Launch(shared_, "barrier", sizeof(float), {}, caller,
                [=](ncclComm_t comm, cudaStream_t stream) {
                  return ncclAllReduce(buffer, buffer, 1, ncclFloat32, ncclSum,
                                       comm, stream);
                });
}

}  // namespace strata::comm
