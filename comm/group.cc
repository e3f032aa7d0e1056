#include "comm/group.h"

#include <ATen/ops/empty.h>
#include <ATen/ops/full.h>
#include <c10/core/ScalarType.h>
#include <glog/logging.h>
#include <gloo/context.h>

#include <algorithm>
#include <deque>
#include <functional>
#include <memory>
#include <numeric>
#include <thread>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "base/fault_point.h"
#include "base/status.h"
#include "comm/collective_checks.h"
#include "comm/collective_trace.h"
#include "comm/group_internal.h"
#include "comm/progress.h"
#include "comm/ring.h"
#include "comm/ring_context.h"
#include "comm/wait_clock.h"

namespace strata::comm {
namespace {

using internal::CheckCounts;
using internal::CheckReducible;
using internal::CheckTensor;
using internal::CopyBackAfter;
using internal::CountsHash;
using internal::HostCopy;
using internal::HostLike;
using internal::kBrokenMessage;
using internal::NcclCall;
using internal::OpKind;
using internal::RingReduction;
using internal::Staged;

std::chrono::milliseconds ToChrono(absl::Duration d) {
  return std::chrono::milliseconds(absl::ToInt64Milliseconds(d));
}

c10d::ReduceOp ToC10d(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAverage:
      return c10d::ReduceOp::SUM;
    case ReduceOp::kMax:
      return c10d::ReduceOp::MAX;
    case ReduceOp::kMin:
      return c10d::ReduceOp::MIN;
  }
  return c10d::ReduceOp::SUM;
}

RingReduction ToRing(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAverage:
      return RingReduction::kSum;
    case ReduceOp::kMax:
      return RingReduction::kMax;
    case ReduceOp::kMin:
      return RingReduction::kMin;
  }
  return RingReduction::kSum;
}

// A Work that is already finished.
class DoneWork final : public Work {
 public:
  explicit DoneWork(absl::Status status) : status_(std::move(status)) {}
  absl::Status Wait() override { return status_; }

 private:
  absl::Status status_;
};

// A collective run by c10d's ProcessGroupGloo.
class C10dWork final : public Work {
 public:
  // `explain` (may be null) turns a failure into the error returned.
  C10dWork(c10::intrusive_ptr<c10d::Work> work, std::vector<at::Tensor> tensors,
           std::string description, std::function<void()> finish,
           std::shared_ptr<std::atomic<bool>> broken,
           std::function<absl::Status(absl::Status)> explain)
      : work_(std::move(work)),
        tensors_(std::move(tensors)),
        description_(std::move(description)),
        finish_(std::move(finish)),
        broken_(std::move(broken)),
        explain_(std::move(explain)) {}

  absl::Status Wait() override {
    absl::MutexLock lock(&mu_);
    if (waited_) return status_;
    waited_ = true;
    status_ = StatusFromCall(description_, [&] {
      {
        CollectiveWaitTimer timer;
        work_->wait();
      }
      if (finish_) finish_();
    });
    trace_.Complete();
    if (!status_.ok()) {
      broken_->store(true);
      if (explain_) status_ = explain_(std::move(status_));
      LOG(ERROR) << status_.message();
    }
    work_.reset();
    tensors_.clear();
    return status_;
  }

 private:
  absl::Mutex mu_;
  c10::intrusive_ptr<c10d::Work> work_;
  std::vector<at::Tensor> tensors_;  // Kept alive until the work finished.
  std::string description_;
  std::function<void()> finish_;
  std::shared_ptr<std::atomic<bool>> broken_;
  std::function<absl::Status(absl::Status)> explain_;
  bool waited_ = false;
  absl::Status status_;
  internal::CollectiveTrace trace_ = internal::TakeIssuedCollective();
};

// A collective run on the group's worker thread.
class TaskWork final : public Work {
 public:
  struct State {
    absl::Notification done;
    absl::Status status;
  };
  explicit TaskWork(std::shared_ptr<State> state) : state_(std::move(state)) {}
  absl::Status Wait() override {
    {
      CollectiveWaitTimer timer;
      state_->done.WaitForNotification();
    }
    return state_->status;
  }

 private:
  std::shared_ptr<State> state_;
};

}  // namespace

// Runs posted closures one at a time in posting order.
class Group::Worker {
 public:
  explicit Worker(std::string name)
      : thread_([this, name] {
          trace::SetThreadName(name);
          Run();
        }) {}
  ~Worker() {
    {
      absl::MutexLock lock(&mu_);
      stopping_ = true;
    }
    thread_.join();
  }
  void Post(std::function<void()> fn) {
    absl::MutexLock lock(&mu_);
    queue_.push_back(std::move(fn));
  }

 private:
  void Run() {
    while (true) {
      std::function<void()> fn;
      {
        absl::MutexLock lock(&mu_);
        mu_.Await(absl::Condition(
            +[](Worker* w) { return w->stopping_ || !w->queue_.empty(); },
            this));
        if (queue_.empty()) return;  // Stopping and drained.
        fn = std::move(queue_.front());
        queue_.pop_front();
      }
      fn();
    }
  }

  absl::Mutex mu_;
  std::deque<std::function<void()>> queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

Group::Group(c10::intrusive_ptr<c10d::Store> store, const GroupOptions& options)
    : options_(options),
      store_(std::move(store)),
      worker_(std::make_unique<Worker>("comm " + options.name)),
      broken_(std::make_shared<std::atomic<bool>>(false)) {}

Group::~Group() {
  // Drains queued collectives (they fail fast if the group is broken) before
  // the Gloo context they use goes away.
  worker_.reset();
}

absl::StatusOr<std::unique_ptr<Group>> Group::Create(
    c10::intrusive_ptr<c10d::Store> store, const GroupOptions& options) {
  STRATA_RETURN_IF_ERROR(ValidateGroupOptions(options));
  if (!store) return absl::InvalidArgumentError("Group::Create: store is null");
  std::shared_ptr<gloo::transport::Device> device;
  absl::Status status = StatusFromCall(
      absl::StrCat("creating the Gloo transport device (",
                   options.interface.empty()
                       ? absl::StrCat("host '", options.hostname, "'")
                       : absl::StrCat("interface '", options.interface, "'"),
                   ")"),
      [&] {
        if (!options.interface.empty()) {
          device = c10d::ProcessGroupGloo::createDeviceForInterface(
              options.interface);
        } else if (!options.hostname.empty()) {
          device =
              c10d::ProcessGroupGloo::createDeviceForHostname(options.hostname);
        } else {
          device = c10d::ProcessGroupGloo::createDefaultDevice();
        }
      });
  STRATA_RETURN_IF_ERROR(status);
  store->setTimeout(ToChrono(options.timeout));
  std::unique_ptr<Group> group(new Group(store, options));
  group->progress_ = std::make_shared<ProgressTracker>(
      std::move(store), internal::TrackerOptions(options));
  std::vector<int> ranks(options.world_size);
  std::iota(ranks.begin(), ranks.end(), 0);
  group->SetGlobalRanks(std::move(ranks));
  STRATA_RETURN_IF_ERROR(group->Connect(std::move(device)));
  return group;
}

absl::Status Group::Connect(std::shared_ptr<gloo::transport::Device> device) {
  device_ = std::move(device);
  const std::string context =
      absl::StrFormat("forming group '%s' (rank %d of %d, timeout %s)",
                      options_.name, options_.rank, options_.world_size,
                      absl::FormatDuration(options_.timeout));
  absl::Status status = StatusFromCall(context, [&] {
    auto pg_options =
        c10d::ProcessGroupGloo::Options::create(ToChrono(options_.timeout));
    pg_options->devices.push_back(device_);
    pg_options->threads = options_.num_gloo_threads;
    process_group_ = c10::make_intrusive<c10d::ProcessGroupGloo>(
        c10::make_intrusive<c10d::PrefixStore>(options_.name + "/pg", store_),
        options_.rank, options_.world_size, pg_options);

    internal::RingContext ring = internal::ConnectRingContext(
        c10::make_intrusive<c10d::PrefixStore>(options_.name + "/ring", store_),
        options_.rank, options_.world_size, device_,
        ToChrono(options_.timeout));
    ring_owner_ = std::move(ring.owner);
    context_ = std::move(ring.context);
  });
  if (!status.ok()) {
    return absl::UnavailableError(absl::StrCat(
        status.message(),
        ". Likely causes: a rank did not start or crashed before joining, "
        "ranks disagree on the world size, or they use different "
        "MASTER_ADDR/MASTER_PORT values"));
  }
  return absl::OkStatus();
}

std::unique_ptr<Work> Group::Failed(absl::Status status) {
  return std::make_unique<DoneWork>(std::move(status));
}

std::unique_ptr<Work> Group::Enqueue(
    std::string description, std::function<void()> body,
    std::function<absl::Status(absl::Status)> explain) {
  auto state = std::make_shared<TaskWork::State>();
  worker_->Post([state, description = std::move(description),
                 body = std::move(body), broken = broken_,
                 explain = std::move(explain),
                 trace = internal::TakeIssuedCollective()]() {
    const int64_t run_start_us = trace.RunStartMicros();
    if (broken->load()) {
      state->status = absl::FailedPreconditionError(
          absl::StrCat(description, ": ", kBrokenMessage));
    } else {
      state->status = StatusFromCall(description, body);
      if (!state->status.ok()) {
        broken->store(true);
        state->status = explain(std::move(state->status));
        LOG(ERROR) << state->status.message();
      }
    }
    trace.Complete(run_start_us);
    state->done.Notify();
  });
  return std::make_unique<TaskWork>(std::move(state));
}

// --- All-reduce ------------------------------------------------------------

absl::Status Group::AllReduce(at::Tensor& tensor, ReduceOp op) {
  return AllReduceAsync(tensor, op)->Wait();
}

std::unique_ptr<Work> Group::AllReduceAsync(at::Tensor& tensor, ReduceOp op) {
  const absl::StatusOr<int> nccl = NcclDevice({&tensor}, true);
  if (!nccl.ok()) return Failed(nccl.status());
  if (*nccl < 0 && Staged(tensor)) {
    at::Tensor host = HostCopy(tensor);
    return CopyBackAfter(AllReduceAsync(host, op), {host}, {tensor});
  }
  const std::string description =
      Describe("all_reduce", tensor, ReduceOpName(op));
  absl::Status local = CheckTensor(tensor, "all_reduce", *nccl);
  if (local.ok()) local = CheckReducible(tensor, op == ReduceOp::kAverage);
  local = Annotate(local, description);
  Descriptor descriptor{
      OpKind::kAllReduce, tensor.defined() ? tensor.scalar_type() : at::kFloat,
      tensor.defined() ? tensor.numel() : 0,
      tensor.defined() ? tensor.numel() : 0, static_cast<int64_t>(op)};
  if (absl::Status s = Precheck(descriptor, local); !s.ok()) return Failed(s);
  if (*nccl >= 0) {
    return RunNccl({NcclCall::Kind::kAllReduce, tensor, {}, {}, op},
                   description, "all_reduce");
  }
  if (tensor.scalar_type() == at::kBFloat16) {
    // c10d's Gloo all-reduce has no bf16 kernel in 1.13: reduce-scatter then
    // all-gather on the ring, which moves the same bytes as Gloo's own ring.
    const int n = size();
    std::vector<int64_t> counts(n, tensor.numel() / n);
    for (int64_t i = 0; i < tensor.numel() % n; ++i) ++counts[i];
    const uint32_t tag = next_tag_;
    next_tag_ += 2;
    return Enqueue(
        description,
        [this, tensor, op, counts, tag] {
          at::Tensor flat = tensor.view({-1});
          at::Tensor block = at::empty({counts[rank()]}, tensor.options());
          internal::RingReduceScatter(*context_, flat, block, counts,
                                      ToRing(op), options_.ring_segment_bytes,
                                      tag, ToChrono(options_.timeout),
                                      &ring_workspace_);
          if (op == ReduceOp::kAverage) block.div_(size());
          internal::RingAllGather(*context_, block, flat, counts,
                                  options_.ring_segment_bytes, tag + 1,
                                  ToChrono(options_.timeout));
        },
        Explainer(num_calls_, "all_reduce", description));
  }
  std::vector<at::Tensor> tensors = {tensor};
  c10d::AllreduceOptions c10d_options;
  c10d_options.reduceOp = ToC10d(op);
  c10::intrusive_ptr<c10d::Work> work;
  absl::Status started = StatusFromCall(description, [&] {
    work = process_group_->allreduce(tensors, c10d_options);
  });
  if (!started.ok()) {
    broken_->store(true);
    return Failed(started);
  }
  std::function<void()> finish;
  if (op == ReduceOp::kAverage) {
    finish = [tensor, n = size()]() mutable { tensor.div_(n); };
  }
  return std::make_unique<C10dWork>(
      std::move(work), std::move(tensors), description, std::move(finish),
      broken_, Explainer(num_calls_, "all_reduce", description));
}

// --- Broadcast -------------------------------------------------------------

absl::Status Group::Broadcast(at::Tensor& tensor, int root) {
  return BroadcastAsync(tensor, root)->Wait();
}

std::unique_ptr<Work> Group::BroadcastAsync(at::Tensor& tensor, int root) {
  const absl::StatusOr<int> nccl = NcclDevice({&tensor}, true);
  if (!nccl.ok()) return Failed(nccl.status());
  if (*nccl < 0 && Staged(tensor)) {
    at::Tensor host = HostCopy(tensor);
    return CopyBackAfter(BroadcastAsync(host, root), {host}, {tensor});
  }
  const std::string description =
      Describe("broadcast", tensor, absl::StrCat("root ", root));
  absl::Status local = CheckTensor(tensor, "broadcast", *nccl);
  if (local.ok() && (root < 0 || root >= size())) {
    local = absl::InvalidArgumentError(absl::StrFormat(
        "root %d is not a rank of the group (size %d)", root, size()));
  }
  local = Annotate(local, description);
  Descriptor descriptor{OpKind::kBroadcast,
                        tensor.defined() ? tensor.scalar_type() : at::kFloat,
                        tensor.defined() ? tensor.numel() : 0,
                        tensor.defined() ? tensor.numel() : 0, root};
  if (absl::Status s = Precheck(descriptor, local); !s.ok()) return Failed(s);
  if (*nccl >= 0) {
    NcclCall call;
    call.kind = NcclCall::Kind::kBroadcast;
    call.input = tensor;
    call.peer = root;
    return RunNccl(std::move(call), description, "broadcast");
  }
  // Broadcast only moves bytes; c10d's Gloo backend has no bf16 kernel in
  // 1.13, so bf16 goes through as fp16 bits (a view of the same memory).
  std::vector<at::Tensor> tensors = {
      tensor.scalar_type() == at::kBFloat16 ? tensor.view(at::kHalf) : tensor};
  c10d::BroadcastOptions c10d_options;
  c10d_options.rootRank = root;
  c10::intrusive_ptr<c10d::Work> work;
  absl::Status started = StatusFromCall(description, [&] {
    work = process_group_->broadcast(tensors, c10d_options);
  });
  if (!started.ok()) {
    broken_->store(true);
    return Failed(started);
  }
  return std::make_unique<C10dWork>(
      std::move(work), std::move(tensors), description, nullptr, broken_,
      Explainer(num_calls_, "broadcast", description));
}

// --- All-gather --------------------------------------------------------------

absl::Status Group::AllGather(const at::Tensor& input, at::Tensor& output) {
  return AllGatherAsync(input, output)->Wait();
}

std::unique_ptr<Work> Group::AllGatherAsync(const at::Tensor& input,
                                            at::Tensor& output) {
  std::vector<int64_t> counts(size(), input.defined() ? input.numel() : 0);
  return AllGatherVAsync(input, output, counts);
}

absl::Status Group::AllGatherV(const at::Tensor& input, at::Tensor& output,
                               absl::Span<const int64_t> counts) {
  return AllGatherVAsync(input, output, counts)->Wait();
}

std::unique_ptr<Work> Group::AllGatherVAsync(const at::Tensor& input,
                                             at::Tensor& output,
                                             absl::Span<const int64_t> counts) {
  const absl::StatusOr<int> nccl = NcclDevice({&input, &output}, true);
  if (!nccl.ok()) return Failed(nccl.status());
  if (*nccl < 0 && (Staged(input) || Staged(output))) {
    at::Tensor in = Staged(input) ? HostCopy(input) : input;
    at::Tensor out = Staged(output) ? HostLike(output) : output;
    std::unique_ptr<Work> work = AllGatherVAsync(in, out, counts);
    if (!Staged(output)) return work;
    return CopyBackAfter(std::move(work), {out}, {output});
  }
  const std::string description = Describe("all_gather", input);
  absl::Status local = CheckTensor(input, "all_gather input", *nccl);
  if (local.ok()) local = CheckTensor(output, "all_gather output", *nccl);
  if (local.ok()) local = CheckCounts(counts, size());
  const int64_t total =
      std::accumulate(counts.begin(), counts.end(), int64_t{0});
  if (local.ok() && input.scalar_type() != output.scalar_type()) {
    local = absl::InvalidArgumentError(absl::StrCat(
        "input dtype ", c10::toString(input.scalar_type()),
        " differs from output dtype ", c10::toString(output.scalar_type())));
  }
  if (local.ok() && input.numel() != counts[rank()]) {
    local = absl::InvalidArgumentError(
        absl::StrFormat("input has %d elements but counts[%d] = %d",
                        input.numel(), rank(), counts[rank()]));
  }
  if (local.ok() && output.numel() != total) {
    local = absl::InvalidArgumentError(absl::StrFormat(
        "output has %d elements; expected the sum of counts, %d",
        output.numel(), total));
  }
  local = Annotate(local, description);
  Descriptor descriptor{OpKind::kAllGather,
                        input.defined() ? input.scalar_type() : at::kFloat,
                        total,
                        total,
                        -1,
                        CountsHash(counts)};
  if (absl::Status s = Precheck(descriptor, local); !s.ok()) return Failed(s);
  if (*nccl >= 0) {
    return RunNccl({NcclCall::Kind::kAllGatherV, input, output,
                    std::vector<int64_t>(counts.begin(), counts.end())},
                   description, "all_gather");
  }
  const uint32_t tag = next_tag_++;
  return Enqueue(
      description,
      [this, input, output,
       counts = std::vector<int64_t>(counts.begin(), counts.end()),
       tag]() mutable {
        internal::RingAllGather(*context_, input, output, counts,
                                options_.ring_segment_bytes, tag,
                                ToChrono(options_.timeout));
      },
      Explainer(num_calls_, "all_gather", description));
}

// --- Reduce-scatter ----------------------------------------------------------

absl::Status Group::ReduceScatter(const at::Tensor& input, at::Tensor& output,
                                  ReduceOp op) {
  return ReduceScatterAsync(input, output, op)->Wait();
}

std::unique_ptr<Work> Group::ReduceScatterAsync(const at::Tensor& input,
                                                at::Tensor& output,
                                                ReduceOp op) {
  std::vector<int64_t> counts(size(), output.defined() ? output.numel() : 0);
  return ReduceScatterVAsync(input, output, counts, op);
}

absl::Status Group::ReduceScatterV(const at::Tensor& input, at::Tensor& output,
                                   absl::Span<const int64_t> counts,
                                   ReduceOp op) {
  return ReduceScatterVAsync(input, output, counts, op)->Wait();
}

std::unique_ptr<Work> Group::ReduceScatterVAsync(
    const at::Tensor& input, at::Tensor& output,
    absl::Span<const int64_t> counts, ReduceOp op) {
  const absl::StatusOr<int> nccl = NcclDevice({&input, &output}, true);
  if (!nccl.ok()) return Failed(nccl.status());
  if (*nccl < 0 && (Staged(input) || Staged(output))) {
    at::Tensor in = Staged(input) ? HostCopy(input) : input;
    at::Tensor out = Staged(output) ? HostLike(output) : output;
    std::unique_ptr<Work> work = ReduceScatterVAsync(in, out, counts, op);
    if (!Staged(output)) return work;
    return CopyBackAfter(std::move(work), {out}, {output});
  }
  const std::string description =
      Describe("reduce_scatter", input, ReduceOpName(op));
  absl::Status local = CheckTensor(input, "reduce_scatter input", *nccl);
  if (local.ok()) {
    local = CheckTensor(output, "reduce_scatter output", *nccl);
  }
  if (local.ok()) local = CheckReducible(input, op == ReduceOp::kAverage);
  if (local.ok()) local = CheckCounts(counts, size());
  const int64_t total =
      std::accumulate(counts.begin(), counts.end(), int64_t{0});
  if (local.ok() && input.scalar_type() != output.scalar_type()) {
    local = absl::InvalidArgumentError(absl::StrCat(
        "input dtype ", c10::toString(input.scalar_type()),
        " differs from output dtype ", c10::toString(output.scalar_type())));
  }
  if (local.ok() && input.numel() != total) {
    local = absl::InvalidArgumentError(absl::StrFormat(
        "input has %d elements; expected the sum of counts, %d (for the even "
        "form: size() x output elements)",
        input.numel(), total));
  }
  if (local.ok() && output.numel() != counts[rank()]) {
    local = absl::InvalidArgumentError(
        absl::StrFormat("output has %d elements but counts[%d] = %d",
                        output.numel(), rank(), counts[rank()]));
  }
  local = Annotate(local, description);
  Descriptor descriptor{OpKind::kReduceScatter,
                        input.defined() ? input.scalar_type() : at::kFloat,
                        total,
                        total,
                        static_cast<int64_t>(op),
                        CountsHash(counts)};
  if (absl::Status s = Precheck(descriptor, local); !s.ok()) return Failed(s);
  if (*nccl >= 0) {
    return RunNccl({NcclCall::Kind::kReduceScatterV, input, output,
                    std::vector<int64_t>(counts.begin(), counts.end()), op},
                   description, "reduce_scatter");
  }
  const uint32_t tag = next_tag_++;
  return Enqueue(
      description,
      [this, input, output, op,
       counts = std::vector<int64_t>(counts.begin(), counts.end()),
       tag]() mutable {
        internal::RingReduceScatter(*context_, input, output, counts,
                                    ToRing(op), options_.ring_segment_bytes,
                                    tag, ToChrono(options_.timeout),
                                    &ring_workspace_);
        if (op == ReduceOp::kAverage) output.div_(size());
      },
      Explainer(num_calls_, "reduce_scatter", description));
}

// --- Barrier, send/recv ----------------------------------------------------

absl::Status Group::Barrier() {
  const std::string description = Describe("barrier", at::Tensor());
  if (absl::Status s = Precheck(Descriptor{OpKind::kBarrier}, absl::OkStatus());
      !s.ok()) {
    return s;
  }
  const internal::CollectiveTrace trace = internal::TakeIssuedCollective();
  absl::Status status = StatusFromCall(description, [&] {
    CollectiveWaitTimer timer;
    process_group_->barrier()->wait();
  });
  trace.Complete();
  if (!status.ok()) {
    broken_->store(true);
    status = Explainer(num_calls_, "barrier", description)(std::move(status));
  }
  return status;
}

absl::Status Group::Send(const at::Tensor& tensor, int dst_rank, int tag) {
  return SendAsync(tensor, dst_rank, tag)->Wait();
}

std::unique_ptr<Work> Group::SendAsync(const at::Tensor& tensor, int dst_rank,
                                       int tag) {
  // Only two ranks take part: NCCL only once a collective chose it.
  const absl::StatusOr<int> nccl = NcclDevice({&tensor}, false);
  if (!nccl.ok()) return Failed(nccl.status());
  if (*nccl < 0 && Staged(tensor)) {
    at::Tensor host = HostCopy(tensor);
    return CopyBackAfter(SendAsync(host, dst_rank, tag), {}, {});
  }
  const std::string description = Describe(
      "send", tensor, absl::StrFormat("to rank %d, tag %d", dst_rank, tag));
  absl::Status local = CheckTensor(tensor, "send", *nccl);
  if (local.ok() &&
      (dst_rank < 0 || dst_rank >= size() || dst_rank == rank())) {
    local = absl::InvalidArgumentError(absl::StrFormat(
        "destination rank %d is not another rank of the group (size %d)",
        dst_rank, size()));
  }
  if (!local.ok()) return Failed(Annotate(local, description));
  if (broken_->load()) {
    return Failed(absl::FailedPreconditionError(
        absl::StrCat(description, ": ", kBrokenMessage)));
  }
  if (*nccl >= 0) {
    NcclCall call;
    call.kind = NcclCall::Kind::kSend;
    call.input = tensor;
    call.peer = dst_rank;
    return RunNccl(std::move(call), description, "send");
  }
  std::vector<at::Tensor> tensors = {tensor};
  c10::intrusive_ptr<c10d::Work> work;
  absl::Status started = StatusFromCall(description, [&] {
    work = process_group_->send(tensors, dst_rank, tag);
  });
  if (!started.ok()) return Failed(started);
  return std::make_unique<C10dWork>(std::move(work), std::move(tensors),
                                    description, nullptr, broken_, nullptr);
}

absl::Status Group::Recv(at::Tensor& tensor, int src_rank, int tag) {
  return RecvAsync(tensor, src_rank, tag)->Wait();
}

std::unique_ptr<Work> Group::RecvAsync(at::Tensor& tensor, int src_rank,
                                       int tag) {
  const absl::StatusOr<int> nccl = NcclDevice({&tensor}, false);
  if (!nccl.ok()) return Failed(nccl.status());
  if (*nccl < 0 && Staged(tensor)) {
    at::Tensor host = HostLike(tensor);
    return CopyBackAfter(RecvAsync(host, src_rank, tag), {host}, {tensor});
  }
  const std::string description = Describe(
      "recv", tensor, absl::StrFormat("from rank %d, tag %d", src_rank, tag));
  absl::Status local = CheckTensor(tensor, "recv", *nccl);
  if (local.ok() &&
      (src_rank < 0 || src_rank >= size() || src_rank == rank())) {
    local = absl::InvalidArgumentError(absl::StrFormat(
        "source rank %d is not another rank of the group (size %d)", src_rank,
        size()));
  }
  if (!local.ok()) return Failed(Annotate(local, description));
  if (broken_->load()) {
    return Failed(absl::FailedPreconditionError(
        absl::StrCat(description, ": ", kBrokenMessage)));
  }
  if (*nccl >= 0) {
    NcclCall call;
    call.kind = NcclCall::Kind::kRecv;
    call.input = tensor;
    call.peer = src_rank;
    return RunNccl(std::move(call), description, "recv");
  }
  std::vector<at::Tensor> tensors = {tensor};
  c10::intrusive_ptr<c10d::Work> work;
  absl::Status started = StatusFromCall(description, [&] {
    work = process_group_->recv(tensors, src_rank, tag);
  });
  if (!started.ok()) return Failed(started);
  return std::make_unique<C10dWork>(std::move(work), std::move(tensors),
                                    description, nullptr, broken_, nullptr);
}

// --- Split -----------------------------------------------------------------

absl::StatusOr<std::unique_ptr<Group>> Group::Split(int color,
                                                    absl::string_view suffix) {
  if (color < 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("Split on group '%s': color must be >= 0, got %d",
                        options_.name, color));
  }
  at::Tensor mine = at::full({1}, static_cast<int64_t>(color), at::kLong);
  at::Tensor colors = at::empty({size()}, at::kLong);
  STRATA_RETURN_IF_ERROR(AllGather(mine, colors));
  GroupOptions sub = options_;
  sub.world_size = 0;
  std::vector<int> members;  // Their ranks in the group Create made.
  for (int r = 0; r < size(); ++r) {
    if (colors[r].item<int64_t>() != color) continue;
    if (r == rank()) sub.rank = sub.world_size;
    ++sub.world_size;
    members.push_back(global_ranks_[r]);
  }
  sub.name = absl::StrCat(options_.name, "/", suffix, color);
  const int split_index = num_splits_++;
  auto store = c10::make_intrusive<c10d::PrefixStore>(
      absl::StrCat(options_.name, "/split", split_index), store_);
  std::unique_ptr<Group> group(new Group(std::move(store), sub));
  group->progress_ = progress_;
  group->SetGlobalRanks(std::move(members));
  STRATA_RETURN_IF_ERROR(group->Connect(device_));
  return group;
}

}  // namespace strata::comm
