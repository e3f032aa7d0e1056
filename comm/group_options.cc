// The parts of comm::Group that need no process group: option checks, names,
// and the staging of CUDA tensors through host memory (group_internal.h).
#include <ATen/ops/empty.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "comm/group.h"
#include "comm/group_internal.h"

namespace strata::comm {

absl::string_view ReduceOpName(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return "sum";
    case ReduceOp::kAverage:
      return "average";
    case ReduceOp::kMax:
      return "max";
    case ReduceOp::kMin:
      return "min";
  }
  return "unknown";
}

absl::Status ValidateGroupOptions(const GroupOptions& options) {
  if (options.world_size < 1) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "GroupOptions.world_size must be >= 1, got %d", options.world_size));
  }
  if (options.rank < 0 || options.rank >= options.world_size) {
    return absl::InvalidArgumentError(
        absl::StrFormat("GroupOptions.rank must be in [0, %d), got %d",
                        options.world_size, options.rank));
  }
  if (options.timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("GroupOptions.timeout must be positive, got ",
                     absl::FormatDuration(options.timeout)));
  }
  if (options.ring_segment_bytes < 1024) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "GroupOptions.ring_segment_bytes must be >= 1024, got %d",
        options.ring_segment_bytes));
  }
  if (options.num_gloo_threads < 1) {
    return absl::InvalidArgumentError(
        absl::StrFormat("GroupOptions.num_gloo_threads must be >= 1, got %d",
                        options.num_gloo_threads));
  }
  if (options.name.empty()) {
    return absl::InvalidArgumentError("GroupOptions.name must not be empty");
  }
  if (options.name.find_first_of(" \t\n\r\f\v,:=") != std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat(
        "GroupOptions.name must not contain whitespace, ',', ':' or '=', got '",
        options.name, "'"));
  }
  if (options.progress_refresh_interval <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "GroupOptions.progress_refresh_interval must be positive (infinite: "
        "never refresh), got ",
        absl::FormatDuration(options.progress_refresh_interval)));
  }
  if (options.host.find_first_of(" \t\n\r\f\v") != std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("GroupOptions.host must not contain whitespace, got '",
                     options.host, "'"));
  }
  return absl::OkStatus();
}

namespace internal {

ProgressTrackerOptions TrackerOptions(const GroupOptions& options) {
  ProgressTrackerOptions tracker;
  tracker.scope = options.name;
  tracker.global_rank = options.rank;
  tracker.publish_interval = options.progress_interval;
  tracker.refresh_interval = options.progress_refresh_interval;
  tracker.node = options.node;
  tracker.host = options.host;
  return tracker;
}

namespace {

// A collective run on host copies of CUDA tensors (see group.h): Wait copies
// the results back to the device tensors.
class StagedWork final : public Work {
 public:
  StagedWork(std::unique_ptr<Work> work, std::vector<at::Tensor> host,
             std::vector<at::Tensor> device)
      : work_(std::move(work)),
        host_(std::move(host)),
        device_(std::move(device)) {}
  absl::Status Wait() override {
    absl::MutexLock lock(&mu_);
    if (waited_) return status_;
    waited_ = true;
    status_ = work_->Wait();
    if (status_.ok()) {
      for (size_t i = 0; i < device_.size(); ++i) device_[i].copy_(host_[i]);
    }
    host_.clear();
    device_.clear();
    return status_;
  }

 private:
  absl::Mutex mu_;
  bool waited_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status status_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<Work> work_;
  std::vector<at::Tensor> host_;
  std::vector<at::Tensor> device_;
};

}  // namespace

bool Staged(const at::Tensor& t) {
  return t.defined() && t.is_cuda() && t.is_contiguous();
}
at::Tensor HostCopy(const at::Tensor& t) { return t.to(at::kCPU); }
at::Tensor HostLike(const at::Tensor& t) {
  return at::empty(t.sizes(), t.options().device(at::kCPU));
}

std::unique_ptr<Work> CopyBackAfter(std::unique_ptr<Work> work,
                                    std::vector<at::Tensor> host,
                                    std::vector<at::Tensor> device) {
  return std::make_unique<StagedWork>(std::move(work), std::move(host),
                                      std::move(device));
}

}  // namespace internal
}  // namespace strata::comm
