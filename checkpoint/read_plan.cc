#include "checkpoint/read_plan.h"

#include <c10/core/ScalarType.h>

#include <algorithm>
#include <tuple>

#include "base/status.h"
#include "checkpoint/contents.h"

namespace strata::checkpoint {

bool ChunkRead::operator==(const ChunkRead& other) const {
  return std::tie(chunk, file, file_offset, num_bytes, first_block, end_block,
                  skip_bytes, copy_bytes, out_offset) ==
         std::tie(other.chunk, other.file, other.file_offset, other.num_bytes,
                  other.first_block, other.end_block, other.skip_bytes,
                  other.copy_bytes, other.out_offset);
}

absl::StatusOr<std::vector<ChunkRead>> PlanRangeReads(
    const proto::Tensor& tensor, int64_t begin, int64_t end) {
  STRATA_ASSIGN_OR_RETURN(at::ScalarType dtype, DtypeFromName(tensor.dtype()));
  const int64_t item = c10::elementSize(dtype);
  std::vector<ChunkRead> reads;
  // The first chunk that ends after `begin`.
  auto first = std::upper_bound(tensor.chunks().begin(), tensor.chunks().end(),
                                begin, [](int64_t v, const proto::Chunk& c) {
                                  return v < c.offset() + c.numel();
                                });
  for (auto it = first; it != tensor.chunks().end() && it->offset() < end;
       ++it) {
    const proto::Chunk& c = *it;
    // Wanted elements [ea, eb), bytes [rb, re) of the chunk.
    const int64_t ea = std::max(begin, c.offset());
    const int64_t eb = std::min(end, c.offset() + c.numel());
    if (ea >= eb) continue;
    const int64_t rb = (ea - c.offset()) * item;
    const int64_t re = (eb - c.offset()) * item;
    // Rounded out to whole blocks [fb, lb): bytes [lo, hi).
    const int64_t bs = c.block_bytes();
    const int64_t fb = rb / bs, lb = (re + bs - 1) / bs;
    const int64_t lo = fb * bs, hi = std::min(lb * bs, c.num_bytes());
    ChunkRead read;
    read.chunk = static_cast<int>(it - tensor.chunks().begin());
    read.file = c.file();
    read.file_offset = c.byte_offset() + lo;
    read.num_bytes = hi - lo;
    read.first_block = fb;
    read.end_block = lb;
    read.skip_bytes = rb - lo;
    read.copy_bytes = re - rb;
    read.out_offset = (ea - begin) * item;
    reads.push_back(std::move(read));
  }
  return reads;
}

}  // namespace strata::checkpoint
