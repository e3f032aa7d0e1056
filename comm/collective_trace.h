// Internal to comm::Group: a collective's timeline-trace span (base/trace.h)
// from issue to completion. Not part of the library's interface.
//
// Group::Precheck, which every collective passes on the calling thread,
// notes the issue (op, group, call number, bytes, time) in a thread-local
// slot; the Work built right after on the same thread takes it and completes
// it where completion is known: on the group's worker thread when a ring
// collective's body returns (which also records the body's run on that
// thread), or at Wait for a collective run by c10d (Gloo signals no earlier
// completion this code can see). The span goes on the virtual track
// "<group> collectives", split into lanes where asynchronous collectives
// overlap. When tracing is off every call here is one relaxed load and a
// branch.
#ifndef STRATA_COMM_COLLECTIVE_TRACE_H_
#define STRATA_COMM_COLLECTIVE_TRACE_H_

#include <cstdint>
#include <string>

#include "base/trace.h"
#include "comm/collective_checks.h"

namespace strata::comm::internal {

class CollectiveTrace {
 public:
  CollectiveTrace() = default;  // Inactive: Complete records nothing.

  // When the work starts running on this thread: now, or -1 when inactive.
  int64_t RunStartMicros() const;
  // Records the span from issue to now on the group's collectives track and,
  // with run_start_us >= 0, the run [run_start_us, now) on this thread. Call
  // once (copies share nothing).
  void Complete(int64_t run_start_us = -1) const;

 private:
  friend void NoteIssueSlow(const CollectiveDescriptor& descriptor,
                            const std::string& group, int64_t seq);
  friend CollectiveTrace TakeIssuedCollectiveSlow();
  int64_t issue_us_ = -1;
  std::string op_;
  std::string group_;
  int64_t seq_ = 0;
  int64_t bytes_ = 0;
};

void NoteIssueSlow(const CollectiveDescriptor& descriptor,
                   const std::string& group, int64_t seq);
CollectiveTrace TakeIssuedCollectiveSlow();

// Notes call `seq` of `group` as issued now on this thread.
inline void NoteIssue(const CollectiveDescriptor& descriptor,
                      const std::string& group, int64_t seq) {
  if (trace::Enabled()) NoteIssueSlow(descriptor, group, seq);
}

// The span of the collective this thread issued last (inactive when tracing
// is off or it was taken already).
inline CollectiveTrace TakeIssuedCollective() {
  if (!trace::Enabled()) return CollectiveTrace();
  return TakeIssuedCollectiveSlow();
}

}  // namespace strata::comm::internal

#endif  // STRATA_COMM_COLLECTIVE_TRACE_H_
