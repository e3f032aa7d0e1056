// Joins the world: connects to the c10d TCPStore that rank 0 hosts at
// MASTER_ADDR:MASTER_PORT and forms the world Group on it.
#ifndef STRATA_COMM_RENDEZVOUS_H_
#define STRATA_COMM_RENDEZVOUS_H_

#include <memory>

#include "absl/status/statusor.h"
#include "comm/environment.h"
#include "comm/group.h"

namespace strata::comm {

// Forms the world group described by `info` (see RendezvousInfoFromEnv).
// Rank 0 serves the store; the others connect to it, retrying until
// `base.timeout`. `base` supplies the group options other than rank, world
// size and transport address, which come from `info`. A world of one needs no
// network and uses an in-memory store.
//
// Errors name the master address and port and the likely cause: an
// unreachable master, a port already in use on rank 0, or a rank that never
// joined.
absl::StatusOr<std::unique_ptr<Group>> ConnectWorld(const RendezvousInfo& info,
                                                    const GroupOptions& base);

}  // namespace strata::comm

#endif  // STRATA_COMM_RENDEZVOUS_H_
