// comm::Group's bookkeeping around every collective: descriptions, the
// argument and cross-rank checks before it starts (check_collectives), and
// the explanation of a failure from the peers' progress records.
#include <ATen/ops/empty.h>
#include <c10/core/ScalarType.h>

#include <algorithm>
#include <functional>
#include <memory>
#include <string>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/fault_point.h"
#include "base/status.h"
#include "comm/collective_checks.h"
#include "comm/collective_trace.h"
#include "comm/group.h"
#include "comm/group_internal.h"
#include "comm/progress.h"
#include "comm/wait_clock.h"

namespace strata::comm {
namespace {

using internal::kBrokenMessage;
using internal::OpKindName;

// How long a failed collective waits for its peers' progress records: a
// stopped store host (rank 0) must not hold up the error.
constexpr absl::Duration kProgressReadDeadline = absl::Seconds(2);

}  // namespace

std::string Group::Describe(absl::string_view op, const at::Tensor& tensor,
                            absl::string_view detail) const {
  std::string what(op);
  if (!detail.empty()) absl::StrAppend(&what, "(", detail, ")");
  if (tensor.defined()) {
    absl::StrAppendFormat(&what, " of %d x %s", tensor.numel(),
                          c10::toString(tensor.scalar_type()));
  }
  return absl::StrFormat("%s on group '%s' (rank %d of %d)", what,
                         options_.name, options_.rank, options_.world_size);
}

void Group::SetTrainingStep(int64_t step) { progress_->SetStep(step); }

void Group::SetGlobalRanks(std::vector<int> global_ranks) {
  CHECK_EQ(static_cast<int>(global_ranks.size()), size());
  auto peers = std::make_shared<std::vector<int>>(global_ranks);
  peers->erase(peers->begin() + rank());
  peers_ = std::move(peers);
  global_ranks_ = std::move(global_ranks);
}

std::function<absl::Status(absl::Status)> Group::Explainer(
    int64_t seq, absl::string_view op, std::string description) {
  // Owns what it uses: a Work may be waited on after the group is gone.
  return [progress = progress_, peers = peers_, name = options_.name,
          timeout = options_.timeout, seq, op = std::string(op),
          description = std::move(description)](absl::Status status) {
    if (status.ok() || peers->empty()) return status;
    return ExplainCollectiveFailure(status, description, op, name, seq, timeout,
                                    *progress, *peers, kProgressReadDeadline);
  };
}

absl::Status Group::Precheck(const Descriptor& descriptor, absl::Status local) {
  ++num_calls_;
  internal::NoteIssue(descriptor, options_.name, num_calls_);
  if (broken_->load()) {
    return absl::FailedPreconditionError(
        absl::StrFormat("group '%s' (rank %d of %d): %s", options_.name,
                        options_.rank, options_.world_size, kBrokenMessage));
  }
  const int64_t numel =
      std::max(descriptor.input_numel, descriptor.output_numel);
  progress_->Enter(OpKindName(descriptor.kind), options_.name, num_calls_,
                   numel, numel * c10::elementSize(descriptor.dtype));
  ReachFaultPoint(FaultSite::kCollective);  // Chaos tests (base/fault_point.h).
  if (!options_.check_collectives) return local;

  // Every rank contributes its descriptor, valid or not, so that one rank's
  // bad arguments fail all ranks now instead of hanging the others.
  at::Tensor mine = at::empty({Descriptor::kFields}, at::kLong);
  const Descriptor::Row row = descriptor.ToRow(/*locally_valid=*/local.ok());
  std::copy(row.begin(), row.end(), mine.data_ptr<int64_t>());
  std::vector<std::vector<at::Tensor>> outputs(1);
  for (int i = 0; i < options_.world_size; ++i) {
    outputs[0].push_back(at::empty({Descriptor::kFields}, at::kLong));
  }
  std::vector<at::Tensor> inputs = {mine};
  const std::string exchange = absl::StrFormat(
      "check_collectives: exchanging call #%d (%s) on group '%s' (rank %d of "
      "%d)",
      num_calls_, descriptor.ToString(), options_.name, options_.rank,
      options_.world_size);
  absl::Status exchanged = StatusFromCall(exchange, [&] {
    CollectiveWaitTimer timer;
    process_group_->allgather(outputs, inputs)->wait();
  });
  if (!exchanged.ok()) {
    broken_->store(true);
    return Explainer(num_calls_, OpKindName(descriptor.kind),
                     exchange)(exchanged);
  }
  if (!local.ok()) return local;
  std::vector<std::string> differences;
  for (int r = 0; r < options_.world_size; ++r) {
    const int64_t* d = outputs[0][r].data_ptr<int64_t>();
    if (d[Descriptor::kFields - 1] == 0) {
      differences.push_back(
          absl::StrFormat("rank %d passed invalid arguments (see its log)", r));
      continue;
    }
    const Descriptor theirs = Descriptor::FromRow(d);
    // Counts may legitimately differ per rank for the V variants only in the
    // local block; the hash covers the whole list, which must agree.
    if (theirs.ToString() != descriptor.ToString()) {
      differences.push_back(
          absl::StrFormat("rank %d calls %s", r, theirs.ToString()));
    }
  }
  if (!differences.empty()) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "collective mismatch at call #%d on group '%s': rank %d calls %s, "
        "but %s. Every rank must call the same collectives in the same order "
        "with the same sizes and dtypes",
        num_calls_, options_.name, options_.rank, descriptor.ToString(),
        absl::StrJoin(differences, "; ")));
  }
  return absl::OkStatus();
}

}  // namespace strata::comm
