// DdpStrategy: data parallelism with replicated parameters, gradients
// all-reduced (averaged) in buckets that overlap backward, as PyTorch's
// DistributedDataParallel does.
//
// Creation (a collective: every rank of the group calls it):
//   1. Checks that every rank holds the same parameters and buffers (names,
//      shapes) before any variable-size collective, with a fixed-size
//      descriptor (count, elements, FNV-1a hash) all-gathered; on a mismatch
//      every rank fails with an error naming the first differing tensor, the
//      ranks and both shapes (or the counts).
//   2. Broadcasts parameters and buffers from rank 0.
//   3. Flattens the parameters in REVERSE registration order (gradients
//      become ready roughly in reverse) and cuts the gradient buffer into
//      buckets of contiguous ranges: the first at most first_bucket_bytes,
//      the others at most bucket_bytes (a larger parameter gets a bucket of
//      its own). Buckets are narrow() views of the buffer: no copies.
//   4. Adds a post-hook to every parameter's gradient accumulator.
//
// During the backward of a step's last micro-batch the hooks count ready
// parameters per bucket; buckets are launched (AllReduceAsync, kAverage) in
// bucket order, each as soon as it and all buckets before it are complete,
// so the launch order is the same on every rank. Accumulation micro-batches
// communicate nothing. Step() launches what is left, waits for every bucket,
// then clips by global norm (gradients are replicated: no cross-rank
// reduction is needed) and runs the optimizer (OptimizerConfig: AdamW, Adam
// or SGD) over the whole flat buffer.
//
// Unused parameters (no gradient in the last backward): Step() fails naming
// them unless allow_unused_parameters, in which case their buckets are
// reduced at Step(). Every rank must see the same set of unused parameters.
//
// Mixed precision (MixedPrecisionOptions, single.h): bf16 parameters and
// gradients with fp32 masters, optimizer state and accumulation. Accumulation
// micro-batches fold their bf16 gradients into the fp32 buffer after
// backward; in the last micro-batch each bucket is folded when it is ready,
// then all-reduced in reduce_dtype: fp32 in place, or bf16 (cast into the
// bf16 gradient buffer, reduced, cast back at Step()). Bucket caps count
// bytes in reduce_dtype. The fp32 masters are broadcast at creation and the
// bf16 parameters re-derived from them after every step.
//
// Threading: the group's collectives are called from the training thread
// and, during backward, from autograd's hooks on the same thread (CPU).
#ifndef STRATA_STRATEGIES_DDP_H_
#define STRATA_STRATEGIES_DDP_H_

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "comm/group.h"
#include "models/unit.h"
#include "optim/lr_schedule.h"
#include "strategies/bucket_readiness.h"
#include "strategies/single.h"
#include "strategies/strategy.h"

namespace strata::strategies {

class DdpStrategy : public SingleStrategy {
 public:
  // A contiguous range of the flat gradient buffer, reduced as one.
  struct Bucket {
    int64_t offset = 0;  // Elements.
    int64_t numel = 0;
    // Indices into flat().entries().
    std::vector<size_t> entries;
  };

  // `group` is borrowed and must outlive the strategy.
  static absl::StatusOr<std::unique_ptr<DdpStrategy>> Create(
      const StrategyOptions& options, std::shared_ptr<models::UnitModel> model,
      comm::Group* group, const OptimizerConfig& config,
      const optim::LrScheduleOptions& schedule);

  ~DdpStrategy() override;

  std::string name() const override { return "ddp"; }
  // SingleStrategy's, plus the bf16 reduce buffer of fp32 parameters with
  // reduce_dtype bf16 (communication_bytes).
  MemoryReport Memory() const override;

  const std::vector<Bucket>& buckets() const { return buckets_; }
  // Bucket all-reduces started so far from gradient hooks (during backward)
  // and from Step().
  int64_t buckets_launched_in_backward() const { return launched_in_backward_; }
  int64_t buckets_launched_at_step() const { return launched_at_step_; }

 protected:
  absl::Status BeforeMicroBatch(bool last_micro_batch) override;
  absl::Status AfterMicroBatch(bool last_micro_batch,
                               absl::Status backward) override;
  absl::Status FinishGradients() override;
  comm::Group* step_group() const override { return group_; }

 private:
  DdpStrategy(std::shared_ptr<models::UnitModel> model,
              const OptimizerConfig& config, Parts parts,
              const StrategyOptions& options, comm::Group* group);

  // Builds buckets_, bucket_views_ and readiness_ (with its hooks); called
  // once, by Create().
  void BuildBuckets();
  void LaunchBucket(size_t bucket, bool from_backward);
  void ResetStep();

  const StrategyOptions options_;
  comm::Group* const group_;
  std::vector<Bucket> buckets_;
  // Per bucket: what is all-reduced, and the fp32 accumulated gradients
  // (the same tensor unless cast_for_reduce_).
  std::vector<at::Tensor> bucket_views_;
  std::vector<at::Tensor> accumulated_views_;
  bool cast_for_reduce_ = false;
  // reduce_dtype bf16 with fp32 parameters: the bf16 copy that is reduced.
  at::Tensor reduce_buffer_;
  // Per-step readiness of buckets_ and the gradient hooks; owned, created by
  // BuildBuckets().
  std::unique_ptr<BucketReadiness> readiness_;

  // Per-step state: the bucket reductions in flight, in launch order.
  std::vector<std::unique_ptr<comm::Work>> works_;

  int64_t launched_in_backward_ = 0;
  int64_t launched_at_step_ = 0;
};

}  // namespace strata::strategies

#endif  // STRATA_STRATEGIES_DDP_H_
