// Runs N ranks as threads of one process, each with its own comm::Group over
// a shared in-memory HashStore and Gloo's loopback transport: fast multi-rank
// unit tests without processes. Tests that need real processes (killing a
// rank, the launcher) run them through //launch:launch instead.
#ifndef STRATA_COMM_TESTING_MULTI_RANK_H_
#define STRATA_COMM_TESTING_MULTI_RANK_H_

#include <functional>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "comm/group.h"

namespace strata::comm::testing {

// Options for test groups: loopback, check_collectives on, and a 30 s
// timeout: half a small test's 60 s limit, so that a rank left waiting (its
// peer's body returned early on a failed ASSERT, or a real deadlock) fails
// the test with the group's error, naming the collective and rank, before
// the test runner kills the process without saying where it hung.
GroupOptions TestGroupOptions();

// Forms a group of `world_size` ranks (threads) and runs `body(group)` on
// each, concurrently; returns when every rank returned. `base` supplies all
// options but rank and world_size.
//
// Returns an error when any rank could not join the group — a test must
// ASSERT on it, so that a group that cannot form fails the test rather than
// skipping it. gtest assertions inside `body` are reported normally (they are
// thread-safe); an ASSERT_* returns from that rank's body only.
absl::Status RunOnRanks(int world_size,
                        const std::function<void(Group& group)>& body,
                        const GroupOptions& base = TestGroupOptions());

}  // namespace strata::comm::testing

#endif  // STRATA_COMM_TESTING_MULTI_RANK_H_
