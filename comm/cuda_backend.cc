#include "comm/cuda_backend.h"

#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace strata::comm {

absl::string_view CudaBackendName(CudaBackend backend) {
  switch (backend) {
    case CudaBackend::kAuto:
      return "auto";
    case CudaBackend::kNccl:
      return "nccl";
    case CudaBackend::kHostStaging:
      return "host_staging";
  }
  return "unknown";
}

absl::StatusOr<CudaBackendChoice> ChooseCudaBackend(
    CudaBackend requested, bool nccl_built,
    absl::Span<const std::string> device_ids, absl::string_view group) {
  if (requested == CudaBackend::kHostStaging) {
    return CudaBackendChoice{CudaBackend::kHostStaging,
                             "GroupOptions.cuda_backend is host_staging"};
  }
  if (!nccl_built) {
    if (requested == CudaBackend::kNccl) {
      return absl::FailedPreconditionError(absl::StrCat(
          "group '", group,
          "': GroupOptions.cuda_backend is nccl, but this build has no NCCL "
          "(build with `bazel --config=cuda` or `cmake -DSTRATA_CUDA=ON`)"));
    }
    return CudaBackendChoice{CudaBackend::kHostStaging,
                             "this build has no NCCL"};
  }
  for (size_t i = 0; i < device_ids.size(); ++i) {
    for (size_t j = i + 1; j < device_ids.size(); ++j) {
      if (device_ids[i] != device_ids[j]) continue;
      const std::string shared = absl::StrFormat(
          "ranks %d and %d of group '%s' use the same GPU (%s), and NCCL "
          "needs a GPU of its own for every rank",
          i, j, group, device_ids[i]);
      if (requested == CudaBackend::kNccl) {
        return absl::FailedPreconditionError(
            absl::StrCat(shared,
                         "; give each rank its own device (LOCAL_RANK) or set "
                         "GroupOptions.cuda_backend to auto or host_staging"));
      }
      return CudaBackendChoice{CudaBackend::kHostStaging, shared};
    }
  }
  return CudaBackendChoice{CudaBackend::kNccl,
                           "every rank has a GPU of its own"};
}

std::string NcclErrorMessage(absl::string_view what, absl::string_view group,
                             int rank, int world_size,
                             absl::string_view error_string,
                             absl::string_view last_error) {
  std::string message =
      absl::StrFormat("%s on group '%s' (rank %d of %d): NCCL error '%s'", what,
                      group, rank, world_size, error_string);
  if (!last_error.empty()) absl::StrAppend(&message, ": ", last_error);
  return message;
}

}  // namespace strata::comm
