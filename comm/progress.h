// Progress records: what each rank last did, published where its peers can
// read it (the rendezvous store), so that a collective that fails can name
// the ranks that never arrived and what they were doing instead:
//
//   all_gather #4123 of 1000 x Float on group 'world' (rank 0 of 2) timed out
//   after 10s: rank 1 never arrived (last entered all_gather #4122 on group
//   'world' at step 17, 12.0 s ago)
//
// A ProgressTracker belongs to one process's world Group and is shared with
// the groups split from it. Entering a collective updates an in-memory record
// (a mutex and a few stores, well under a microsecond); a background thread
// writes the latest record to the store at most once per publish interval,
// so the training thread never waits for the store. Peers' records are read
// only when a collective failed, from a helper thread with a deadline, so a
// stopped peer (or a stopped store host) cannot block the reader.
#ifndef STRATA_COMM_PROGRESS_H_
#define STRATA_COMM_PROGRESS_H_

#include <c10/util/intrusive_ptr.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "absl/types/optional.h"
#include "absl/types/span.h"

namespace c10d {
class Store;
}  // namespace c10d

namespace strata::comm {

// One rank's progress as its peers read it.
struct ProgressRecord {
  // The training step the process last reported (Group::SetTrainingStep);
  // -1 before the first.
  int64_t step = -1;
  // The last collective entered: its op ("all_gather"), group name, sequence
  // number in that group (1 for the group's first collective), elements and
  // bytes of its (input) tensor, the training step when it was entered and
  // the wall-clock time it was entered. `seq` 0: none yet.
  std::string op;
  std::string group;
  int64_t seq = 0;
  int64_t numel = 0;
  int64_t bytes = 0;
  int64_t op_step = -1;
  absl::Time entered = absl::UnixEpoch();
  // The last sequence number entered in every group this process took part
  // in, by group name: whether the rank arrived at a given collective.
  std::map<std::string, int64_t> group_seqs;
  // Where the process runs: its node's index in the job (torchrun's
  // GROUP_RANK, Slurm's SLURM_NODEID; -1 when unknown) and its host name
  // (empty when unknown). Set once, when the tracker is made.
  int node = -1;
  std::string host;
  // When this copy was written to the store, by the writer's clock. The
  // writer refreshes it even when nothing changed (ProgressTrackerOptions::
  // refresh_interval), so a copy that grows old tells that the rank, or the
  // link to its node, is gone. UnixEpoch: not published (or an older writer).
  absl::Time published = absl::UnixEpoch();

  // Compares what the rank did and where it runs; not `published`, which is
  // when a copy was written.
  bool operator==(const ProgressRecord& other) const;
};

// "node 1, host n1"; "host n1" or "node 1" when one is unknown; empty when
// both are.
std::string DescribeLocation(const ProgressRecord& record);

// The record as one line of text, e.g. "v1 step=17 op=all_gather
// group=world seq=4122 numel=1000 bytes=4000 op_step=17
// entered_us=1764090000123456 groups=world:4122,world/shard0:12".
// Group names hold no spaces, ',' ':' or '=' (ValidateGroupOptions).
std::string FormatProgressRecord(const ProgressRecord& record);

// Parses FormatProgressRecord's output. InvalidArgument naming the field and
// what was expected for anything else (unknown fields are ignored, so newer
// writers may add some).
absl::StatusOr<ProgressRecord> ParseProgressRecord(absl::string_view text);

// "last entered all_gather #4122 on group 'world' at step 17, 12.0 s ago";
// "has entered no collective yet (at step 3)" for a record without one.
std::string DescribeLastOp(const ProgressRecord& record, absl::Time now);

// Why a collective failed, as far as the peers' records tell: every peer
// whose record shows it never entered call `seq` of `group`, with its last
// operation, e.g. "rank 1 never arrived (last entered all_gather #4122 ...)".
// `peers` maps global ranks to their record (absent: nothing recorded yet).
// When every peer entered the call: "every rank entered it".
//
// A peer whose record was last written more than `stale_after` before `now`
// has stopped refreshing it: its process is stopped or gone, or its node
// cannot reach the store. Such peers are named after the above, by node:
// "every rank entered it; ranks 2, 3 (node 1, host n1) have not refreshed
// their progress records for 9.8 s: that node is unreachable, or their
// processes are stopped". Records without a publication time are never
// stale. The times compare the writers' clocks with this host's.
std::string DescribeMissingRanks(
    absl::string_view group, int64_t seq,
    const std::vector<std::pair<int, absl::optional<ProgressRecord>>>& peers,
    absl::Time now, absl::Duration stale_after = absl::InfiniteDuration());

class ProgressTracker;

// The error that ends the run when call `seq` (`op`, e.g. "all_gather") of
// group `group` failed with `status`, whose message starts with
// `description`: "<description>: all_gather #4123 timed out after 10s: rank
// 1 never arrived (last entered ...). Cause: <the rest of status>" ("failed"
// instead of "timed out after" when the cause is not a timeout). The records
// of `peers` (global ranks) are read through `tracker` within
// `read_deadline`; when they cannot be, the message says why. Peers whose
// records are older than tracker.stale_after() are named as unreachable or
// stopped (DescribeMissingRanks). Keeps the status's code.
absl::Status ExplainCollectiveFailure(
    const absl::Status& status, absl::string_view description,
    absl::string_view op, absl::string_view group, int64_t seq,
    absl::Duration timeout, const ProgressTracker& tracker,
    absl::Span<const int> peers, absl::Duration read_deadline);

struct ProgressTrackerOptions {
  // Separates trackers sharing a store (the world group's name).
  std::string scope = "world";
  int global_rank = 0;
  // A change is written at most this often (zero or less: at every change).
  absl::Duration publish_interval = absl::Milliseconds(20);
  // The record is written again at least this often when nothing changed
  // (never more often than publish_interval), so that peers can tell a
  // record that is old because the rank waits from one that is old because
  // the rank or its node is gone. Infinite: never.
  absl::Duration refresh_interval = absl::Seconds(1);
  // Where the process runs (ProgressRecord::node and ::host).
  int node = -1;
  std::string host;
};

// Owns this process's record and the thread that publishes it under
// "strata_progress/<scope>/<global rank>" of a store shared by the ranks.
// Enter and SetStep may be called from any thread; ReadPeers too.
class ProgressTracker {
 public:
  // Borrows `store` (shares ownership). Starts the publishing thread.
  ProgressTracker(c10::intrusive_ptr<c10d::Store> store,
                  ProgressTrackerOptions options);
  // Stops the publishing thread; waits for it at most about one second (a
  // store that does not answer leaves the thread behind, detached).
  ~ProgressTracker();
  ProgressTracker(const ProgressTracker&) = delete;
  ProgressTracker& operator=(const ProgressTracker&) = delete;

  int global_rank() const { return global_rank_; }
  // How old a peer's record may grow before it counts as not refreshed: a
  // few refresh intervals (at least 3 s, for writers delayed by load).
  absl::Duration stale_after() const { return stale_after_; }

  void SetStep(int64_t step);
  // Records that this process entered call `seq` of `group`.
  void Enter(absl::string_view op, absl::string_view group, int64_t seq,
             int64_t numel, int64_t bytes);
  // This process's record now.
  ProgressRecord Current() const;
  // Writes the current record to the store now (not waiting out the publish
  // interval) and waits until it is there, at most `deadline`. Returns
  // whether it was written.
  bool Flush(absl::Duration deadline);
  // How many times the record was written to the store so far.
  int64_t num_published() const;

  // The records of `global_ranks` (absent: not published yet), read from the
  // store on a helper thread. DeadlineExceeded if the store did not answer
  // within `deadline` (the helper is left behind); the store's error
  // otherwise.
  absl::StatusOr<std::vector<std::pair<int, absl::optional<ProgressRecord>>>>
  ReadPeers(absl::Span<const int> global_ranks, absl::Duration deadline) const;

 private:
  struct Shared;
  static void Publish(std::shared_ptr<Shared> shared);

  const int global_rank_;
  const absl::Duration stale_after_;
  std::shared_ptr<Shared> shared_;
  std::thread publisher_;
};

}  // namespace strata::comm

#endif  // STRATA_COMM_PROGRESS_H_
