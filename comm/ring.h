// Bandwidth-optimal collectives that c10d's Gloo backend lacks in LibTorch
// 1.13, written against a Gloo context directly. Used by comm::Group; not a
// public interface.
#ifndef STRATA_COMM_RING_H_
#define STRATA_COMM_RING_H_

#include <ATen/core/Tensor.h>

#include <chrono>
#include <cstdint>
#include <vector>

namespace gloo {
class Context;
}

namespace strata::comm::internal {

enum class RingReduction { kSum, kMax, kMin };

// Ring reduce-scatter. `input` is a contiguous 1-D view of sum(counts)
// elements, rank i's block starting at sum(counts[0..i)); on return `output`
// (counts[rank] elements, same dtype) holds the element-wise reduction of
// that block over all ranks.
//
// Every rank sends and receives (N-1)/N of the data once — half of what an
// all-reduce followed by a slice moves. Blocks are cut into segments of about
// `segment_bytes` so that reducing one segment overlaps receiving the next.
//
// The last step receives straight into `output` and reduces in place, so two
// ranks need no staging memory; with more ranks, partial blocks are staged in
// `*workspace`, which the caller keeps across calls (grown here as needed)
// so that large collectives do not page-fault fresh memory every time.
//
// Blocking; call from one thread per context at a time, with the same
// `tag` on every rank. Throws gloo::IoException when a peer fails or
// `timeout` passes.
void RingReduceScatter(gloo::Context& context, const at::Tensor& input,
                       at::Tensor& output, const std::vector<int64_t>& counts,
                       RingReduction reduction, int64_t segment_bytes,
                       uint32_t tag, std::chrono::milliseconds timeout,
                       at::Tensor* workspace);

// Ring all-gather: `input` (counts[rank] elements) from every rank into
// `output` (sum(counts) elements, rank i's block at sum(counts[0..i))).
// This rank's block is sent straight from `input`, and copied into `output`
// while the transfer runs; received segments are forwarded as they arrive.
// Same calling rules as RingReduceScatter.
void RingAllGather(gloo::Context& context, const at::Tensor& input,
                   at::Tensor& output, const std::vector<int64_t>& counts,
                   int64_t segment_bytes, uint32_t tag,
                   std::chrono::milliseconds timeout);

}  // namespace strata::comm::internal

#endif  // STRATA_COMM_RING_H_
