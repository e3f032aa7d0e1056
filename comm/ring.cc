#include "comm/ring.h"

#include <ATen/ops/add.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/maximum.h>
#include <ATen/ops/minimum.h>
#include <glog/logging.h>
#include <gloo/context.h>
#include <gloo/transport/unbound_buffer.h>
#include <gloo/types.h>

#include <algorithm>
#include <memory>
#include <numeric>

namespace strata::comm::internal {
namespace {

// Gloo slot prefix for Strata's rings; Gloo's algorithms use 0x01..0x08.
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

// The blocks of a ring collective and their segments.
class RingPlan {
 public:
  RingPlan(const gloo::Context& context, const std::vector<int64_t>& counts,
           int64_t element_bytes, int64_t segment_bytes, uint32_t tag)
      : n(context.size),
        rank(context.rank),
        right((context.rank + 1) % context.size),
        left((context.rank + context.size - 1) % context.size),
        counts_(counts),
        offsets_(counts.size() + 1, 0),
        element_bytes_(element_bytes),
        segment_elems_(std::max<int64_t>(1, segment_bytes / element_bytes)),
        tag_(tag) {
    CHECK_EQ(static_cast<int>(counts.size()), n);
    std::partial_sum(counts.begin(), counts.end(), offsets_.begin() + 1);
  }

  int64_t offset(int block) const { return offsets_[block]; }
  int64_t total() const { return offsets_[n]; }
  int64_t count(int block) const { return counts_[block]; }
  int64_t num_segments(int block) const {
    return (counts_[block] + segment_elems_ - 1) / segment_elems_;
  }
  // Element offset of segment s within its block, and its length.
  int64_t segment_begin(int64_t s) const { return s * segment_elems_; }
  int64_t segment_len(int block, int64_t s) const {
    return std::min(segment_elems_, counts_[block] - s * segment_elems_);
  }
  size_t bytes(int64_t elems) const { return elems * element_bytes_; }
  uint64_t slot(int step) const {
    return gloo::Slot::build(kRingSlotPrefix, tag_) +
           static_cast<uint8_t>(step & 0xff);
  }

  const int n;
  const int rank;
  const int right;
  const int left;

 private:
  const std::vector<int64_t>& counts_;
  std::vector<int64_t> offsets_;
  const int64_t element_bytes_;
  const int64_t segment_elems_;
  const uint32_t tag_;
};

// Waits for `*pending` completed sends on `buffer`.
void DrainSends(gloo::transport::UnboundBuffer& buffer, int* pending,
                std::chrono::milliseconds timeout) {
  for (; *pending > 0; --*pending) buffer.waitSend(timeout);
}

}  // namespace

void RingReduceScatter(gloo::Context& context, const at::Tensor& input,
                       at::Tensor& output, const std::vector<int64_t>& counts,
                       RingReduction reduction, int64_t segment_bytes,
                       uint32_t tag, std::chrono::milliseconds timeout,
                       at::Tensor* workspace) {
  CHECK(input.is_contiguous() && output.is_contiguous());
  const RingPlan plan(context, counts, input.element_size(), segment_bytes,
                      tag);
  const int n = plan.n;
  const int rank = plan.rank;
  CHECK_EQ(input.numel(), plan.total());
  CHECK_EQ(output.numel(), plan.count(rank));
  if (n == 1) {
    output.copy_(input);
    return;
  }
  const at::Tensor flat_input = input.view({-1});
  at::Tensor flat_output = output.view({-1});

  // Steps 0..n-3 receive a partial block into a staging half, reduce it in
  // place and send it on from there while the next step uses the other half;
  // the last step (n-2) receives this rank's block into `output`.
  const int num_staged_steps = n - 2;
  const int64_t max_count = *std::max_element(counts.begin(), counts.end());
  at::Tensor staging[2];
  std::unique_ptr<gloo::transport::UnboundBuffer> staging_buffer[2];
  if (num_staged_steps > 0) {
    CHECK(workspace != nullptr);
    const int64_t needed = 2 * max_count;
    if (!workspace->defined() || workspace->numel() < needed ||
        workspace->scalar_type() != input.scalar_type()) {
      *workspace = at::empty({needed}, input.options());
    }
    for (int b = 0; b < 2; ++b) {
      staging[b] = workspace->narrow(0, b * max_count, max_count);
      staging_buffer[b] = context.createUnboundBuffer(staging[b].data_ptr(),
                                                      plan.bytes(max_count));
    }
  }
  auto input_buffer =
      context.createUnboundBuffer(input.data_ptr(), plan.bytes(input.numel()));
  auto output_buffer = context.createUnboundBuffer(
      output.data_ptr(), plan.bytes(std::max<int64_t>(output.numel(), 0)));
  int pending_sends[2] = {0, 0};
  int pending_input_sends = 0;

  // Step 0 sends this rank's own contribution to block (rank - 1).
  {
    const int block = (rank + n - 1) % n;
    for (int64_t s = 0; s < plan.num_segments(block); ++s) {
      input_buffer->send(plan.right, plan.slot(0),
                         plan.bytes(plan.offset(block) + plan.segment_begin(s)),
                         plan.bytes(plan.segment_len(block, s)));
      ++pending_input_sends;
    }
  }
  for (int step = 0; step < n - 1; ++step) {
    const int block = (rank + 2 * n - step - 2) % n;  // Received this step.
    const bool last = step == n - 2;                  // Then block == rank.
    const int b = step % 2;
    gloo::transport::UnboundBuffer& target =
        last ? *output_buffer : *staging_buffer[b];
    // A staging half's previous contents (step - 2) must have left.
    if (!last) DrainSends(*staging_buffer[b], &pending_sends[b], timeout);
    const int64_t segments = plan.num_segments(block);
    for (int64_t s = 0; s < segments; ++s) {
      target.recv(plan.left, plan.slot(step), plan.bytes(plan.segment_begin(s)),
                  plan.bytes(plan.segment_len(block, s)));
    }
    for (int64_t s = 0; s < segments; ++s) {
      target.waitRecv(timeout);  // Segments arrive in order.
      const int64_t begin = plan.segment_begin(s);
      const int64_t len = plan.segment_len(block, s);
      const at::Tensor mine =
          flat_input.narrow(0, plan.offset(block) + begin, len);
      at::Tensor received =
          (last ? flat_output : staging[b]).narrow(0, begin, len);
      Reduce(reduction, received, mine, received);
      if (!last) {
        staging_buffer[b]->send(plan.right, plan.slot(step + 1),
                                plan.bytes(begin), plan.bytes(len));
        ++pending_sends[b];
      }
    }
  }
  DrainSends(*input_buffer, &pending_input_sends, timeout);
  for (int b = 0; b < 2 && num_staged_steps > 0; ++b) {
    DrainSends(*staging_buffer[b], &pending_sends[b], timeout);
  }
}

void RingAllGather(gloo::Context& context, const at::Tensor& input,
                   at::Tensor& output, const std::vector<int64_t>& counts,
                   int64_t segment_bytes, uint32_t tag,
                   std::chrono::milliseconds timeout) {
  CHECK(input.is_contiguous() && output.is_contiguous());
  const RingPlan plan(context, counts, input.element_size(), segment_bytes,
                      tag);
  const int n = plan.n;
  const int rank = plan.rank;
  CHECK_EQ(input.numel(), plan.count(rank));
  CHECK_EQ(output.numel(), plan.total());
  at::Tensor flat_output = output.view({-1});
  if (n == 1) {
    flat_output.copy_(input.view({-1}));
    return;
  }
  auto input_buffer =
      context.createUnboundBuffer(input.data_ptr(), plan.bytes(input.numel()));
  auto output_buffer = context.createUnboundBuffer(output.data_ptr(),
                                                   plan.bytes(output.numel()));
  int pending_input_sends = 0;
  int pending_output_sends = 0;

  // Step s forwards block (rank - s) to the right and receives block
  // (rank - s - 1) from the left; step 0 sends straight from `input`.
  for (int64_t s = 0; s < plan.num_segments(rank); ++s) {
    input_buffer->send(plan.right, plan.slot(0),
                       plan.bytes(plan.segment_begin(s)),
                       plan.bytes(plan.segment_len(rank, s)));
    ++pending_input_sends;
  }
  // Post the first step's receives, then copy this rank's block while the
  // transfers run.
  auto post_receives = [&](int step) {
    const int block = (rank + 2 * n - step - 1) % n;
    for (int64_t s = 0; s < plan.num_segments(block); ++s) {
      output_buffer->recv(
          plan.left, plan.slot(step),
          plan.bytes(plan.offset(block) + plan.segment_begin(s)),
          plan.bytes(plan.segment_len(block, s)));
    }
  };
  post_receives(0);
  flat_output.narrow(0, plan.offset(rank), plan.count(rank))
      .copy_(input.view({-1}));
  for (int step = 0; step < n - 1; ++step) {
    const int block = (rank + 2 * n - step - 1) % n;
    const bool last = step == n - 2;
    if (!last) post_receives(step + 1);
    for (int64_t s = 0; s < plan.num_segments(block); ++s) {
      output_buffer->waitRecv(timeout);  // Segments arrive in order.
      if (!last) {
        output_buffer->send(
            plan.right, plan.slot(step + 1),
            plan.bytes(plan.offset(block) + plan.segment_begin(s)),
            plan.bytes(plan.segment_len(block, s)));
        ++pending_output_sends;
      }
    }
  }
  DrainSends(*input_buffer, &pending_input_sends, timeout);
  DrainSends(*output_buffer, &pending_output_sends, timeout);
}

}  // namespace strata::comm::internal
