// The parts of comm::Group's CUDA path that need no CUDA: which backend runs
// collectives on CUDA tensors (NCCL or host staging through Gloo), and the
// text of NCCL errors. Built and tested on every machine; the NCCL calls are
// in comm/nccl_communicator.h (only with --config=cuda / STRATA_CUDA=ON).
#ifndef STRATA_COMM_CUDA_BACKEND_H_
#define STRATA_COMM_CUDA_BACKEND_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace strata::comm {

// How a Group runs collectives on CUDA tensors (GroupOptions::cuda_backend).
enum class CudaBackend {
  // NCCL when Strata was built with it and every rank of the group has a GPU
  // of its own; host staging otherwise (one log line says why).
  kAuto,
  // NCCL, or an error when it cannot be used (not built, two ranks on one
  // GPU).
  kNccl,
  // Copies to host memory, Gloo, copies back (group.h): any placement.
  kHostStaging,
};

// "auto", "nccl", "host_staging".
absl::string_view CudaBackendName(CudaBackend backend);

// The backend a group uses and why ("every rank has a GPU of its own", ...).
struct CudaBackendChoice {
  CudaBackend backend = CudaBackend::kHostStaging;
  std::string reason;
};

// Chooses the backend of group `group` from the requested one, whether this
// build has NCCL, and each rank's GPU identity (`device_ids[r]`: rank r's
// device UUID; empty when NCCL is not built). NCCL refuses two ranks on one
// GPU, so equal identities mean host staging under kAuto and an error under
// kNccl. The result never says kAuto. Every rank passes the same identities
// (read from the store) and so reaches the same choice.
absl::StatusOr<CudaBackendChoice> ChooseCudaBackend(
    CudaBackend requested, bool nccl_built,
    absl::Span<const std::string> device_ids, absl::string_view group);

// The message of a failed NCCL call: "<what> on group '<group>' (rank r of
// n): NCCL error '<error_string>'" plus ": <last_error>" when NCCL said more
// (ncclGetLastError).
std::string NcclErrorMessage(absl::string_view what, absl::string_view group,
                             int rank, int world_size,
                             absl::string_view error_string,
                             absl::string_view last_error);

}  // namespace strata::comm

#endif  // STRATA_COMM_CUDA_BACKEND_H_
