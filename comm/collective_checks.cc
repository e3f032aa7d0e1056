#include "comm/collective_checks.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/fnv.h"

namespace strata::comm::internal {

absl::string_view OpKindName(OpKind kind) {
  switch (kind) {
    case OpKind::kAllReduce:
      return "all_reduce";
    case OpKind::kBroadcast:
      return "broadcast";
    case OpKind::kAllGather:
      return "all_gather";
    case OpKind::kReduceScatter:
      return "reduce_scatter";
    case OpKind::kBarrier:
      return "barrier";
    case OpKind::kSplit:
      return "split";
  }
  return "unknown";
}

absl::Status CheckTensor(const at::Tensor& t, absl::string_view role,
                         int cuda_device) {
  if (!t.defined()) {
    return absl::InvalidArgumentError(
        absl::StrCat(role, " tensor is undefined"));
  }
  if (!t.is_contiguous()) {
    return absl::InvalidArgumentError(absl::StrCat(
        role,
        " tensor is not contiguous; collectives work on contiguous "
        "memory (call .contiguous() first)"));
  }
  if (cuda_device >= 0) {
    if (!t.is_cuda() || t.device().index() != cuda_device) {
      return absl::InvalidArgumentError(absl::StrCat(
          role, " tensor is on ", t.device().str(),
          "; this group's NCCL communicator works on cuda:", cuda_device));
    }
    return absl::OkStatus();
  }
  if (!t.device().is_cpu()) {
    return absl::InvalidArgumentError(
        absl::StrCat(role, " tensor is on ", t.device().str(),
                     "; this group's Gloo backend works on CPU tensors"));
  }
  return absl::OkStatus();
}

absl::Status CheckReducible(const at::Tensor& t, bool average) {
  if (average && !at::isFloatingType(t.scalar_type())) {
    return absl::InvalidArgumentError(
        absl::StrCat("average needs a floating dtype, got ",
                     c10::toString(t.scalar_type())));
  }
  if (t.scalar_type() == at::kBool) {
    return absl::InvalidArgumentError("cannot reduce a Bool tensor");
  }
  return absl::OkStatus();
}

absl::Status CheckCounts(absl::Span<const int64_t> counts, int world_size) {
  if (static_cast<int>(counts.size()) != world_size) {
    return absl::InvalidArgumentError(
        absl::StrFormat("counts has %d entries; expected one per rank (%d)",
                        counts.size(), world_size));
  }
  for (size_t i = 0; i < counts.size(); ++i) {
    if (counts[i] < 0) {
      return absl::InvalidArgumentError(
          absl::StrFormat("counts[%d] = %d is negative", i, counts[i]));
    }
  }
  return absl::OkStatus();
}

int64_t CountsHash(absl::Span<const int64_t> counts) {
  const uint64_t h =
      Fnv1a(kFnv1aOffset, counts.data(), counts.size() * sizeof(int64_t));
  return static_cast<int64_t>(h >> 1);
}

CollectiveDescriptor::Row CollectiveDescriptor::ToRow(
    bool locally_valid) const {
  return {static_cast<int64_t>(kind),
          static_cast<int64_t>(dtype),
          input_numel,
          output_numel,
          root,
          counts_hash,
          locally_valid ? 1 : 0};
}

CollectiveDescriptor CollectiveDescriptor::FromRow(const int64_t* row) {
  return {static_cast<OpKind>(row[0]),
          static_cast<at::ScalarType>(row[1]),
          row[2],
          row[3],
          row[4],
          row[5]};
}

std::string CollectiveDescriptor::ToString() const {
  std::string s =
      absl::StrFormat("%s(%s", OpKindName(kind), c10::toString(dtype));
  absl::StrAppendFormat(&s, ", %d -> %d elements", input_numel, output_numel);
  if (root >= 0) absl::StrAppendFormat(&s, ", root/op %d", root);
  if (counts_hash != 0) absl::StrAppendFormat(&s, ", counts #%x", counts_hash);
  return s + ")";
}

}  // namespace strata::comm::internal
