// The sharded checkpoint format: a directory in which every rank writes its
// own data file (`rank<i>.data`) in parallel, plus one metadata file
// (metadata.pb, see metadata.h and metadata.proto) listing every tensor's
// global shape, dtype and chunks (element offsets, file, byte range and
// per-block CRC-32C checksums).
//
// Saving follows a plan all ranks agree on (save_plan.h): replicated state is
// written once, split between its holders. The directory appears atomically
// (io.h's staged-directory protocol).
//
// Loading works under any world size and any strategy (N -> M resharding):
// each rank reads, with pread, only the checksum blocks of the chunks that
// overlap the runs it holds, verifies them and stages the values; only when
// every rank has validated everything (keys, shapes, dtypes, checksums) are
// the live tensors written. On any error no rank's live state changes.
#ifndef STRATA_CHECKPOINT_SHARDED_H_
#define STRATA_CHECKPOINT_SHARDED_H_

#include <cstdint>
#include <functional>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "checkpoint/contents.h"
#include "checkpoint/metadata.pb.h"
#include "comm/group.h"

namespace strata::checkpoint {

struct WriteOptions {
  // Checksum granularity: a chunk's bytes are checksummed in blocks of this
  // size, the unit a reader reads and verifies.
  int64_t block_bytes = int64_t{1} << 20;
  // Replicated ranges of at least this many bytes are split between their
  // holders (see save_plan.h).
  int64_t split_bytes = int64_t{1} << 20;
  // Test hook (chaos and crash tests): when set, called after this rank's
  // data file is synced and before the checkpoint is committed, on the thread
  // that saves; it may pause, or kill the process.
  std::function<void()> before_commit;
};

// A collective over `group` (null: one process): every rank calls it with
// its own `state`; `contents` is taken from rank 0. Replaces an existing
// checkpoint at `dir` atomically. Errors (the same on every rank) name the
// file and the failing rank.
absl::Status SaveSharded(const std::string& dir, const TensorState& state,
                         const Contents& contents, comm::Group* group,
                         const WriteOptions& options = WriteOptions());

// A collective over `group` (null: one process). Loads the tensors of the
// runs in `live` (whose `local` tensors are overwritten only on success on
// every rank) and returns the checkpoint's contents. Errors name the path
// and: not a checkpoint (or not a sharded one), a truncated or corrupted
// chunk (tensor, chunk index, file and byte range), missing or unexpected
// keys under `strict`, shape mismatches (key and both shapes).
absl::StatusOr<Contents> LoadSharded(const std::string& dir,
                                     const TensorState& live,
                                     const ReadOptions& options,
                                     comm::Group* group);

// Reads the tensor data of `tensor` elements [offset, offset + numel) from a
// sharded checkpoint into `out` (numel elements of the tensor's dtype),
// verifying checksums: what LoadSharded does per run, for tools.
absl::Status ReadShardedRange(const std::string& dir,
                              const proto::Tensor& tensor, int64_t offset,
                              int64_t numel, void* out);

// Reads a whole sharded checkpoint (verifying checksums) as one process's
// state: every tensor whole (offset 0), and its contents. For tools.
absl::StatusOr<std::pair<TensorState, Contents>> ReadShardedCheckpoint(
    const std::string& dir);

// Verifies every block of every chunk; returns the number of bytes checked.
absl::StatusOr<int64_t> VerifySharded(const std::string& dir);

}  // namespace strata::checkpoint

#endif  // STRATA_CHECKPOINT_SHARDED_H_
