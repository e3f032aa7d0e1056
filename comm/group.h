// comm::Group: the process group the rest of Strata uses.
//
// A Group is a set of ranks that run collectives together over tensors. On
// CPU it is backed by c10d's ProcessGroupGloo (all-reduce, broadcast, barrier,
// send/recv) plus a Gloo context of its own on the same store for the
// collectives c10d's Gloo backend lacks in LibTorch 1.13 — reduce-scatter and
// all-gather into one flat tensor — done with bandwidth-optimal rings (see
// ring.h). Collectives on CUDA tensors run on NCCL (nccl_communicator.h, in
// CUDA builds) or through host memory on Gloo: GroupOptions::cuda_backend.
//
// The collective contract (as with NCCL and Gloo): every rank of the group
// calls the same collectives in the same order, with the same element counts
// and dtypes, and the same root. Gloo aborts the whole process when peers
// pass different sizes; with `GroupOptions::check_collectives` each call first
// exchanges a small descriptor (op, dtype, counts, root) and fails cleanly on
// every rank, naming the ranks that differ, instead. It costs one small
// all-gather per collective: use it in tests and when debugging.
//
// Errors: collectives return absl::Status (or a Work whose Wait does). A peer
// that exits or stops calling collectives makes the others fail with an error
// naming the collective within `timeout` (within a few milliseconds when the
// peer's process dies: its sockets close). After a failed collective the group
// is unusable: later calls fail at once.
//
// Threading: a Group's methods may be called from one thread at a time (the
// training loop, or autograd's backward thread that runs gradient hooks —
// not both at once). Work::Wait may be called from any thread.
//
// Usage (see comm/README.md):
//
//   // The world from the environment of torchrun, srun, mpirun or `launch`.
//   absl::StatusOr<RendezvousInfo> world = RendezvousInfoFromEnv(ProcessEnv());
//   if (!world.ok()) return world.status();
//   GroupOptions options;
//   options.timeout = absl::Minutes(5);
//   absl::StatusOr<std::unique_ptr<Group>> group = ConnectWorld(*world,
//   options); if (!group.ok()) return group.status();
//
//   at::Tensor loss = at::full({1}, local_loss, at::kDouble);
//   STRATA_RETURN_IF_ERROR((*group)->AllReduce(loss, ReduceOp::kAverage));
//
//   // Async: `grads` stays alive and untouched until Wait returns.
//   std::unique_ptr<Work> work = (*group)->AllReduceAsync(grads);
//   ...  // Overlap other computation.
//   STRATA_RETURN_IF_ERROR(work->Wait());
#ifndef STRATA_COMM_GROUP_H_
#define STRATA_COMM_GROUP_H_

#include <ATen/core/Tensor.h>
#include <c10/util/intrusive_ptr.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "comm/cuda_backend.h"

namespace c10d {
class Store;
class ProcessGroupGloo;
}  // namespace c10d
namespace gloo {
class Context;
namespace transport {
class Device;
}  // namespace transport
}  // namespace gloo

namespace strata::comm {

namespace internal {
struct CollectiveDescriptor;  // comm/collective_checks.h
struct NcclCall;              // comm/group_internal.h
}  // namespace internal
class NcclCommunicator;  // comm/nccl_communicator.h (CUDA builds only)
class ProgressTracker;   // comm/progress.h

enum class ReduceOp { kSum, kAverage, kMax, kMin };

absl::string_view ReduceOpName(ReduceOp op);

struct GroupOptions {
  // This process's rank in the group and the group's size.
  int rank = 0;
  int world_size = 1;
  // Used in error messages and as the store prefix; sub-groups append to it.
  std::string name = "world";
  // How long a collective (or forming the group) may wait for a peer.
  absl::Duration timeout = absl::Minutes(10);
  // Exchange and compare a descriptor before every collective (see above).
  bool check_collectives = false;
  // Gloo transport: the network interface to use (e.g. "eth0"); when empty,
  // the address `hostname` resolves to.
  std::string interface;
  std::string hostname = "127.0.0.1";
  // Ring segment size: reducing one segment overlaps receiving the next.
  int64_t ring_segment_bytes = int64_t{1} << 20;
  // Worker threads of the ProcessGroupGloo (concurrent async all-reduces).
  int num_gloo_threads = 2;
  // This process's progress record (comm/progress.h: the last collective it
  // entered and the training step) is written to the store at most this
  // often (zero or less: at every change), by a background thread; a failed
  // collective's error names the ranks that never arrived with their last
  // record, which is therefore at most this old.
  absl::Duration progress_interval = absl::Milliseconds(20);
  // The record is written again at least this often when nothing changed, so
  // that a failed collective can name the peers (and nodes) whose records
  // stopped being refreshed: gone, stopped or cut off (comm/progress.h).
  absl::Duration progress_refresh_interval = absl::Seconds(1);
  // Where this process runs, for those messages: its node's index in the
  // job (-1: unknown) and its host name (empty: unknown). ConnectWorld fills
  // them in from the rendezvous.
  int node = -1;
  std::string host;
  // How collectives on CUDA tensors run (comm/cuda_backend.h): NCCL, or
  // host staging through Gloo. kAuto: NCCL where this build has it and every
  // rank of the group has a GPU of its own (decided at the group's first
  // collective on CUDA tensors; one log line on rank 0 says which and why).
  CudaBackend cuda_backend = CudaBackend::kAuto;
  // NCCL path: the cudaStream_t (as void*) that this rank's CUDA tensors on
  // device `device` are produced and consumed on. Empty: the legacy default
  // stream, which is LibTorch's current stream unless the program set
  // another; comm/cuda_current_stream.h gives LibTorch's current stream.
  std::function<void*(int device)> cuda_stream;
  // NCCL path: Work::Wait blocks the host until the collective completed,
  // bounded by `timeout` (true); or only makes `cuda_stream` wait for it
  // (false: the host runs ahead, for overlap; a failure or hang then
  // surfaces at the next host wait of the group).
  bool nccl_host_wait = true;
};

// Checks option values; names the field and what was expected. Group names
// hold no whitespace, ',', ':' or '=' (they appear in progress records).
absl::Status ValidateGroupOptions(const GroupOptions& options);

// A collective in flight. Owned by the caller; the tensors it was given are
// borrowed and must stay alive, untouched, until Wait returns.
class Work {
 public:
  virtual ~Work() = default;
  Work(const Work&) = delete;
  Work& operator=(const Work&) = delete;

  // Blocks until the collective finishes; returns its status. Results (for
  // kAverage, the division too) are in the output tensor only after Wait
  // returned OK. May be called more than once; later calls return the same
  // status.
  virtual absl::Status Wait() = 0;

 protected:
  Work() = default;
};

class Group {
 public:
  // Forms a group: every rank of `options` calls this with a store all of
  // them share (a TCPStore served by rank 0, or a HashStore for ranks that are
  // threads of one process). Blocks until all ranks joined or
  // `options.timeout` passed. Borrows `store` (shares ownership).
  static absl::StatusOr<std::unique_ptr<Group>> Create(
      c10::intrusive_ptr<c10d::Store> store, const GroupOptions& options);

  ~Group();
  Group(const Group&) = delete;
  Group& operator=(const Group&) = delete;

  int rank() const { return options_.rank; }
  int size() const { return options_.world_size; }
  const std::string& name() const { return options_.name; }
  const GroupOptions& options() const { return options_; }
  // The backend of collectives on CUDA tensors: kNccl or kHostStaging once
  // the group's first such collective chose it; kAuto before.
  CudaBackend cuda_backend() const { return cuda_backend_; }

  // Tells this group and every group split from it (they share one progress
  // record) the training step now, for the progress records peers read when
  // a collective fails. Cheap (no communication); any thread, any time.
  void SetTrainingStep(int64_t step);

  // --- Collectives. Tensors: contiguous, on the CPU or a CUDA device;
  // floating dtypes for reductions. Sync forms are Async(...)->Wait().
  // CUDA tensors run on NCCL or go through host memory
  // (GroupOptions::cuda_backend). NCCL: the collective runs on the
  // communicator's stream after the work pending on `cuda_stream`, and all
  // of a call's tensors are on the communicator's device. Host staging: the
  // call copies them to the host (waiting for the device's pending work on
  // them), the collective runs on the copies, and Wait copies the results
  // back (correct, not fast). Send/Recv use NCCL only once a collective
  // chose it (choosing takes every rank).

  // In place: `tensor` becomes the reduction over all ranks.
  absl::Status AllReduce(at::Tensor& tensor, ReduceOp op = ReduceOp::kSum);
  std::unique_ptr<Work> AllReduceAsync(at::Tensor& tensor,
                                       ReduceOp op = ReduceOp::kSum);

  // In place: every rank's `tensor` becomes root's.
  absl::Status Broadcast(at::Tensor& tensor, int root);
  std::unique_ptr<Work> BroadcastAsync(at::Tensor& tensor, int root);

  // `output` (size() * input.numel() elements) receives every rank's `input`,
  // rank i's at offset i * input.numel().
  absl::Status AllGather(const at::Tensor& input, at::Tensor& output);
  std::unique_ptr<Work> AllGatherAsync(const at::Tensor& input,
                                       at::Tensor& output);
  // Uneven blocks: rank i contributes counts[i] elements (`input` has
  // counts[rank()]); `output` holds sum(counts), rank i's at
  // sum(counts[0..i)).
  absl::Status AllGatherV(const at::Tensor& input, at::Tensor& output,
                          absl::Span<const int64_t> counts);
  std::unique_ptr<Work> AllGatherVAsync(const at::Tensor& input,
                                        at::Tensor& output,
                                        absl::Span<const int64_t> counts);

  // `input` holds size() blocks of output.numel() elements; `output` receives
  // the reduction over ranks of block rank().
  absl::Status ReduceScatter(const at::Tensor& input, at::Tensor& output,
                             ReduceOp op = ReduceOp::kSum);
  std::unique_ptr<Work> ReduceScatterAsync(const at::Tensor& input,
                                           at::Tensor& output,
                                           ReduceOp op = ReduceOp::kSum);
  // Uneven blocks, laid out as for AllGatherV.
  absl::Status ReduceScatterV(const at::Tensor& input, at::Tensor& output,
                              absl::Span<const int64_t> counts,
                              ReduceOp op = ReduceOp::kSum);
  std::unique_ptr<Work> ReduceScatterVAsync(const at::Tensor& input,
                                            at::Tensor& output,
                                            absl::Span<const int64_t> counts,
                                            ReduceOp op = ReduceOp::kSum);

  absl::Status Barrier();

  // Point to point. Not collectives: only the two ranks take part, matched by
  // `tag`; not covered by check_collectives.
  absl::Status Send(const at::Tensor& tensor, int dst_rank, int tag = 0);
  std::unique_ptr<Work> SendAsync(const at::Tensor& tensor, int dst_rank,
                                  int tag = 0);
  absl::Status Recv(at::Tensor& tensor, int src_rank, int tag = 0);
  std::unique_ptr<Work> RecvAsync(at::Tensor& tensor, int src_rank,
                                  int tag = 0);

  // Splits the group (a collective, like MPI_Comm_split): ranks passing the
  // same `color` form a new group, ordered by their rank here, named
  // "<name>/<suffix><color>". Hybrid sharding uses two splits: color
  // rank / shard_size for the shard groups and rank % shard_size for the
  // replicate groups.
  absl::StatusOr<std::unique_ptr<Group>> Split(int color,
                                               absl::string_view suffix);

 private:
  class Worker;
  using Descriptor = internal::CollectiveDescriptor;
  Group(c10::intrusive_ptr<c10d::Store> store, const GroupOptions& options);
  absl::Status Connect(std::shared_ptr<gloo::transport::Device> device);

  // "all_reduce(sum) of 1000 x Float on group 'world' (rank 0 of 2)".
  std::string Describe(absl::string_view op, const at::Tensor& tensor,
                       absl::string_view detail = "") const;
  // Local argument checks, then (with check_collectives) the cross-rank
  // descriptor comparison. On error the group is not left half-way: nothing
  // was sent.
  absl::Status Precheck(const Descriptor& descriptor, absl::Status local);
  std::unique_ptr<Work> Failed(absl::Status status);
  std::unique_ptr<Work> Enqueue(
      std::string description, std::function<void()> body,
      std::function<absl::Status(absl::Status)> explain);
  // Sets global_ranks_ (size() entries) and peers_.
  void SetGlobalRanks(std::vector<int> global_ranks);
  // Returns a function that turns the failure of this group's call `seq`
  // (`op`, e.g. "all_gather") into the error that ends the run: it names the
  // collective, whether it timed out, and the ranks that never arrived with
  // their last recorded operation (peers' records are read with a deadline).
  std::function<absl::Status(absl::Status)> Explainer(int64_t seq,
                                                      absl::string_view op,
                                                      std::string description);
  // The CUDA path (group_cuda.cc). The device of the group's NCCL
  // communicator when a call on `tensors` runs on NCCL, -1 when not (CPU
  // tensors, host staging). With `may_choose` (collectives: every rank
  // calls), the group's first call on CUDA tensors chooses the backend
  // (ranks exchange their GPUs' identities through the store) and forms the
  // communicator; an error then breaks the group.
  absl::StatusOr<int> NcclDevice(
      std::initializer_list<const at::Tensor*> tensors, bool may_choose);
  absl::Status ChooseCudaPath(int device);
  // Launches a checked collective (Precheck passed) on the communicator.
  std::unique_ptr<Work> RunNccl(internal::NcclCall call,
                                const std::string& description,
                                absl::string_view op);

  GroupOptions options_;
  c10::intrusive_ptr<c10d::Store> store_;
  std::shared_ptr<gloo::transport::Device> device_;
  c10::intrusive_ptr<c10d::ProcessGroupGloo> process_group_;
  // The rings' context and the c10d group that connected and owns it
  // (ring_context.h); context_ is released first.
  c10::intrusive_ptr<c10d::ProcessGroupGloo> ring_owner_;
  std::shared_ptr<gloo::Context> context_;
  // Runs the ring collectives in call order (same order on every rank).
  std::unique_ptr<Worker> worker_;
  // Staging memory of the reduce-scatter ring with more than two ranks (two
  // blocks of the largest reduce-scatter so far), kept across calls so large
  // collectives do not page-fault fresh memory each time. Used only on the
  // worker thread.
  at::Tensor ring_workspace_;
  // This process's progress record, shared with the groups split from the
  // group Create made.
  std::shared_ptr<ProgressTracker> progress_;
  // The rank in the group Create made of each rank of this group, and of
  // the others (shared with the Explainer functions of Work in flight).
  std::vector<int> global_ranks_;
  std::shared_ptr<const std::vector<int>> peers_;
  uint32_t next_tag_ = 1;
  int num_splits_ = 0;
  int64_t num_calls_ = 0;
  // Set once a collective failed: the peers' state is unknown, later calls
  // fail fast rather than hang. Shared with in-flight Work.
  std::shared_ptr<std::atomic<bool>> broken_;
  // The CUDA path (see cuda_backend()); nccl_ is set when it is kNccl.
  // Shared with the Work in flight.
  CudaBackend cuda_backend_ = CudaBackend::kAuto;
  std::shared_ptr<NcclCommunicator> nccl_;
  int nccl_device_ = -1;  // nccl_'s CUDA device.
};

}  // namespace strata::comm

#endif  // STRATA_COMM_GROUP_H_
