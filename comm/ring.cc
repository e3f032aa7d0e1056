#include "comm/ring.h"

#include <ATen/ops/add.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/from_blob.h>
#include <ATen/ops/maximum.h>
#include <ATen/ops/minimum.h>
#include <glog/logging.h>
#include <gloo/allgatherv.h>
#include <gloo/context.h>
#include <gloo/transport/unbound_buffer.h>
#include <gloo/types.h>

#include <algorithm>
#include <memory>
#include <numeric>

namespace strata::comm::internal {
namespace {

// Gloo slot prefix for Strata's own ring; Gloo's algorithms use 0x01..0x08.
constexpr uint8_t kRingSlotPrefix = 0x53;

void Reduce(RingReduction reduction, const at::Tensor& a, const at::Tensor& b,
            at::Tensor& out) {
  switch (reduction) {
    case RingReduction::kSum:
      at::add_out(out, a, b);
      return;
    case RingReduction::kMax:
      at::maximum_out(out, a, b);
      return;
    case RingReduction::kMin:
      at::minimum_out(out, a, b);
      return;
  }
}

}  // namespace

void RingReduceScatter(gloo::Context& context, const at::Tensor& input,
                       at::Tensor& output, const std::vector<int64_t>& counts,
                       RingReduction reduction, int64_t segment_bytes,
                       uint32_t tag, std::chrono::milliseconds timeout) {
  const int n = context.size;
  const int rank = context.rank;
  CHECK_EQ(static_cast<int>(counts.size()), n);
  CHECK(input.is_contiguous() && output.is_contiguous());
  std::vector<int64_t> offsets(n + 1, 0);
  std::partial_sum(counts.begin(), counts.end(), offsets.begin() + 1);
  CHECK_EQ(input.numel(), offsets[n]);
  CHECK_EQ(output.numel(), counts[rank]);
  if (n == 1) {
    output.copy_(input);
    return;
  }

  const int64_t element_bytes = input.element_size();
  const int64_t segment_elems =
      std::max<int64_t>(1, segment_bytes / element_bytes);
  const int64_t max_count = *std::max_element(counts.begin(), counts.end());
  const int right = (rank + 1) % n;
  const int left = (rank + n - 1) % n;
  auto num_segments = [&](int block) {
    return (counts[block] + segment_elems - 1) / segment_elems;
  };
  auto segment_len = [&](int block, int64_t s) {
    return std::min(segment_elems, counts[block] - s * segment_elems);
  };
  const at::Tensor flat_input = input.view({-1});
  at::Tensor flat_output = output.view({-1});

  // Two staging buffers used alternately by steps: a step receives a partial
  // block into one, reduces in place, and sends it on from there while the
  // next step receives into the other.
  at::Tensor staging[2] = {at::empty({max_count}, input.options()),
                           at::empty({max_count}, input.options())};
  std::unique_ptr<gloo::transport::UnboundBuffer> staging_buffer[2];
  for (int i = 0; i < 2; ++i) {
    staging_buffer[i] = context.createUnboundBuffer(staging[i].data_ptr(),
                                                    max_count * element_bytes);
  }
  auto input_buffer = context.createUnboundBuffer(
      const_cast<void*>(input.data_ptr()), input.numel() * element_bytes);
  int pending_sends[2] = {0, 0};
  int pending_input_sends = 0;
  auto slot = [&](int step) {
    return gloo::Slot::build(kRingSlotPrefix, tag) +
           static_cast<uint8_t>(step & 0xff);
  };

  // Step 0 sends this rank's own contribution to block (rank - 1).
  {
    const int block = (rank + n - 1) % n;
    for (int64_t s = 0; s < num_segments(block); ++s) {
      input_buffer->send(right, slot(0),
                         (offsets[block] + s * segment_elems) * element_bytes,
                         segment_len(block, s) * element_bytes);
      ++pending_input_sends;
    }
  }
  for (int step = 0; step < n - 1; ++step) {
    const int block = (rank + 2 * n - step - 2) % n;  // received this step
    const bool last = step == n - 2;                  // block == rank
    const int b = step % 2;
    // The buffer's previous contents (step - 2) must have left before reuse.
    for (; pending_sends[b] > 0; --pending_sends[b]) {
      staging_buffer[b]->waitSend(timeout);
    }
    const int64_t segments = num_segments(block);
    for (int64_t s = 0; s < segments; ++s) {
      staging_buffer[b]->recv(left, slot(step),
                              s * segment_elems * element_bytes,
                              segment_len(block, s) * element_bytes);
    }
    for (int64_t s = 0; s < segments; ++s) {
      staging_buffer[b]->waitRecv(timeout);  // Segments arrive in order.
      const int64_t begin = s * segment_elems;
      const int64_t len = segment_len(block, s);
      at::Tensor received = staging[b].narrow(0, begin, len);
      at::Tensor mine = flat_input.narrow(0, offsets[block] + begin, len);
      if (last) {
        at::Tensor out = flat_output.narrow(0, begin, len);
        Reduce(reduction, received, mine, out);
      } else {
        Reduce(reduction, received, mine, received);
        staging_buffer[b]->send(right, slot(step + 1), begin * element_bytes,
                                len * element_bytes);
        ++pending_sends[b];
      }
    }
  }
  for (; pending_input_sends > 0; --pending_input_sends) {
    input_buffer->waitSend(timeout);
  }
  for (int b = 0; b < 2; ++b) {
    for (; pending_sends[b] > 0; --pending_sends[b]) {
      staging_buffer[b]->waitSend(timeout);
    }
  }
}

void RingAllGather(gloo::Context& context, const at::Tensor& input,
                   at::Tensor& output, const std::vector<int64_t>& counts,
                   uint32_t tag, std::chrono::milliseconds timeout) {
  const int n = context.size;
  CHECK_EQ(static_cast<int>(counts.size()), n);
  CHECK(input.is_contiguous() && output.is_contiguous());
  CHECK_EQ(input.numel(), counts[context.rank]);
  CHECK_EQ(output.numel(),
           std::accumulate(counts.begin(), counts.end(), int64_t{0}));
  if (n == 1) {
    output.copy_(input);
    return;
  }
  // Gloo's allgatherv is a ring that moves each block once per hop; it only
  // copies bytes, so any dtype goes through as raw bytes.
  const size_t element_bytes = input.element_size();
  std::vector<size_t> byte_counts(counts.begin(), counts.end());
  for (size_t& c : byte_counts) c *= element_bytes;
  gloo::AllgathervOptions options(
      std::shared_ptr<gloo::Context>(&context, [](gloo::Context*) {}));
  options.setInput(static_cast<uint8_t*>(const_cast<void*>(input.data_ptr())),
                   byte_counts[context.rank]);
  options.setOutput(static_cast<uint8_t*>(output.data_ptr()), byte_counts);
  options.setTag(tag);
  options.setTimeout(timeout);
  gloo::allgatherv(options);
}

}  // namespace strata::comm::internal
