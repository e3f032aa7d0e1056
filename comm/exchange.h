// Small cross-rank exchanges (used by the checkpoint formats): every rank's
// bytes to every rank, and agreeing on success so that no rank goes on (to a
// collective, or to changing its live state) while another failed.
//
// Every function is a collective over `group` (each rank calls it in the same
// order); a null group means one process and needs no communication.
#ifndef STRATA_COMM_EXCHANGE_H_
#define STRATA_COMM_EXCHANGE_H_

#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "comm/group.h"

namespace strata::comm {

// Every rank's `bytes`, indexed by rank (one entry without a group).
absl::StatusOr<std::vector<std::string>> AllGatherBytes(
    Group* group, const std::string& bytes);

// The union over ranks of `names`.
absl::StatusOr<std::set<std::string>> AllGatherNames(
    Group* group, const std::vector<std::string>& names);

// Returns OK on every rank if `local` is OK on every rank; otherwise the same
// error on every rank: the first failed rank's code and message, prefixed
// with "rank <r>: " (and "(and <k> more ranks failed)" when several did). A
// failed exchange itself is returned as is.
absl::Status AgreeOnStatus(Group* group, const absl::Status& local);

}  // namespace strata::comm

#endif  // STRATA_COMM_EXCHANGE_H_
