// What comm::Group checks before a collective starts, apart from the
// collective itself: each rank's own arguments (tensor, dtype and counts
// checks) and, with GroupOptions::check_collectives, the descriptor of the
// call that every rank exchanges and compares. Internal to comm: only
// comm/group.cc uses it. Pure functions; callable from any thread.
#ifndef STRATA_COMM_COLLECTIVE_CHECKS_H_
#define STRATA_COMM_COLLECTIVE_CHECKS_H_

#include <ATen/core/Tensor.h>
#include <c10/core/ScalarType.h>

#include <array>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace strata::comm::internal {

// The collectives whose descriptors are compared across ranks. The values
// travel between ranks: never renumber them.
enum class OpKind : int64_t {
  kAllReduce = 1,
  kBroadcast,
  kAllGather,
  kReduceScatter,
  kBarrier,
  kSplit,
};

// "all_reduce", "broadcast", ...; "unknown" for other values.
absl::string_view OpKindName(OpKind kind);

// A collective's tensor (`role`: "input", "output", ...) must be defined,
// contiguous and on the CPU, or with `cuda_device` >= 0 (the group's NCCL
// path) on that CUDA device. InvalidArgument naming the role otherwise.
absl::Status CheckTensor(const at::Tensor& t, absl::string_view role,
                         int cuda_device = -1);

// A tensor reduced with ReduceOp::kAverage (`average`) needs a floating
// dtype; no reduction works on Bool. InvalidArgument otherwise.
absl::Status CheckReducible(const at::Tensor& t, bool average);

// The per-rank counts of the V collectives: one entry per rank, none
// negative. InvalidArgument otherwise.
absl::Status CheckCounts(absl::Span<const int64_t> counts, int world_size);

// FNV-1a over the counts' bytes: the same on every process (absl::Hash is
// salted), shifted to fit a non-negative int64 descriptor slot.
int64_t CountsHash(absl::Span<const int64_t> counts);

// What a rank is about to do; compared across ranks by check_collectives.
struct CollectiveDescriptor {
  OpKind kind = OpKind::kBarrier;
  at::ScalarType dtype = at::kFloat;
  int64_t input_numel = 0;
  int64_t output_numel = 0;
  int64_t root = -1;  // Broadcast root, reduce op, or split color.
  int64_t counts_hash = 0;

  // The exchanged row: the fields above plus whether the rank's own
  // arguments were valid.
  static constexpr int kFields = 7;
  using Row = std::array<int64_t, kFields>;

  Row ToRow(bool locally_valid) const;
  // The descriptor of a row (the validity flag is row[kFields - 1]).
  static CollectiveDescriptor FromRow(const int64_t* row);

  // "all_reduce(Float, 10 -> 10 elements, root/op 0, counts #1f)"; root and
  // counts only when set.
  std::string ToString() const;
};

}  // namespace strata::comm::internal

#endif  // STRATA_COMM_COLLECTIVE_CHECKS_H_
