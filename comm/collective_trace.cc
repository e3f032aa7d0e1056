#include "comm/collective_trace.h"

#include <c10/core/ScalarType.h>

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

namespace strata::comm::internal {
namespace {

thread_local CollectiveTrace issued;

}  // namespace

void NoteIssueSlow(const CollectiveDescriptor& descriptor,
                   const std::string& group, int64_t seq) {
  CollectiveTrace t;
  t.issue_us_ = trace::NowMicros();
  t.op_ = std::string(OpKindName(descriptor.kind));
  t.group_ = group;
  t.seq_ = seq;
  t.bytes_ = std::max(descriptor.input_numel, descriptor.output_numel) *
             static_cast<int64_t>(c10::elementSize(descriptor.dtype));
  issued = std::move(t);
}

CollectiveTrace TakeIssuedCollectiveSlow() {
  return std::exchange(issued, CollectiveTrace());
}

int64_t CollectiveTrace::RunStartMicros() const {
  return issue_us_ >= 0 && trace::Enabled() ? trace::NowMicros() : -1;
}

void CollectiveTrace::Complete(int64_t run_start_us) const {
  if (issue_us_ < 0 || !trace::Enabled()) return;
  const int64_t now = trace::NowMicros();
  std::vector<trace::Arg> args = {trace::IntArg("bytes", bytes_),
                                  trace::IntArg("seq", seq_),
                                  trace::StringArg("group", group_)};
  if (run_start_us >= 0) {
    trace::Record(absl::StrCat("run ", op_), "comm", run_start_us, now, args);
  }
  trace::RecordOnTrack(absl::StrCat(group_, " collectives"), op_, "comm",
                       issue_us_, now, std::move(args));
}

}  // namespace strata::comm::internal
