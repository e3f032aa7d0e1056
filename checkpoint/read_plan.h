// The N -> M read plan of a sharded checkpoint (sharded.h): for the elements
// [begin, end) of a saved tensor that a live run holds, which byte ranges of
// which data files to read and which checksum blocks those ranges are. Reads
// are whole checksum blocks (a reader verifies every byte it reads), so a
// range that starts or ends inside a block reads the whole block and copies
// only the wanted bytes out of it.
//
// Pure logic over the metadata (metadata.proto's Tensor and Chunk); the
// reading itself (pread, CRC-32C, copy) is sharded.cc's.
#ifndef STRATA_CHECKPOINT_READ_PLAN_H_
#define STRATA_CHECKPOINT_READ_PLAN_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "checkpoint/metadata.pb.h"

namespace strata::checkpoint {

// One read: bytes [file_offset, file_offset + num_bytes) of `file`, which are
// checksum blocks [first_block, end_block) of chunk `chunk` of the tensor.
// Of those bytes, [skip_bytes, skip_bytes + copy_bytes) are wanted; they go
// to byte `out_offset` of the destination (the elements [begin, end) laid
// out contiguously).
struct ChunkRead {
  int chunk = 0;  // Index into the tensor's chunks.
  std::string file;
  int64_t file_offset = 0;
  int64_t num_bytes = 0;
  int64_t first_block = 0;
  int64_t end_block = 0;
  int64_t skip_bytes = 0;
  int64_t copy_bytes = 0;
  int64_t out_offset = 0;

  // The read is exactly the wanted bytes: it may go straight into the
  // destination.
  bool direct() const { return skip_bytes == 0 && copy_bytes == num_bytes; }
  bool operator==(const ChunkRead& other) const;
};

// The reads of elements [begin, end) of `tensor`, in offset order (one per
// chunk the range overlaps; none for an empty range). `tensor` must be
// valid: chunks in offset order covering its elements, each with a positive
// block size and its block checksums (sharded.cc validates this before
// planning). InvalidArgument for an unknown dtype.
absl::StatusOr<std::vector<ChunkRead>> PlanRangeReads(
    const proto::Tensor& tensor, int64_t begin, int64_t end);

}  // namespace strata::checkpoint

#endif  // STRATA_CHECKPOINT_READ_PLAN_H_
