// The local checkpoint format (mmengine's default for sharded strategies): a
// directory with one `rank<i>.pth` per rank holding that rank's runs exactly
// as the strategy keeps them (a PyTorch file: {"rank", "world_size",
// "strategy", "runs": [{"section", "name", "global_shape", "offset",
// "tensor", "crc32c"}, ...]}), plus metadata.pb (metadata.h: the contents
// and every tensor's global shape and dtype, without chunks).
//
// Cheap to write (no planning across ranks beyond the commit) but loadable
// only by the same world size, strategy and layout: anything else is refused
// with a message saying what differs. Keys must match exactly (strict and
// revise_keys do not apply). Saves are atomic (io.h's staged directories).
#ifndef STRATA_CHECKPOINT_LOCAL_H_
#define STRATA_CHECKPOINT_LOCAL_H_

#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "checkpoint/contents.h"
#include "comm/group.h"

namespace strata::checkpoint {

// A collective over `group` (null: one process). `strategy` names the
// layout (e.g. "zero2"); `contents` from rank 0.
absl::Status SaveLocal(const std::string& dir, const TensorState& state,
                       const Contents& contents, const std::string& strategy,
                       comm::Group* group);

// A collective over `group`. Refuses (InvalidArgument, naming what differs)
// another world size, another strategy, or runs that differ from this
// rank's (the first differing run: its name, offset and length in both);
// DataLoss for a corrupted rank file (naming the file and the zip record
// that fails its CRC-32, or the run that fails its CRC-32C). Nothing
// changes on any rank unless all succeed.
absl::StatusOr<Contents> LoadLocal(const std::string& dir,
                                   const TensorState& live,
                                   const std::string& strategy,
                                   bool load_optimizer, comm::Group* group);

// Reads every rank file of a local checkpoint (verifying checksums): all
// runs of all ranks (a replicated tensor appears once per rank) and the
// contents. For tools.
absl::StatusOr<std::pair<TensorState, Contents>> ReadLocalCheckpoint(
    const std::string& dir);

}  // namespace strata::checkpoint

#endif  // STRATA_CHECKPOINT_LOCAL_H_
