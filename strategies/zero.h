// ZeroStrategy: ZeRO stages 1 and 2 (Rajbhandari et al.), fp32, over one flat
// parameter buffer, with the bucketed, backward-overlapped communication of
// DdpStrategy (ddp.h).
//
// Layout. Parameters are flattened in REVERSE registration order (gradients
// become ready roughly in reverse) into a buffer padded to a multiple of the
// world size N. The buffer is cut into buckets of contiguous elements whose
// boundaries are multiples of N (the first at most first_bucket_bytes, the
// others at most bucket_bytes, each rounded up to a multiple of N; a
// parameter may straddle a bucket boundary and then belongs to both). Every
// bucket therefore shards evenly: rank r owns the r-th 1/N of EVERY bucket
// (per-bucket shards, so that ZeRO-2 can reduce-scatter bucket by bucket).
// A rank's shard is thus a set of runs, one per bucket; parameters may
// straddle shard boundaries (flat sharding).
//
// Optimizer. One AdamW per bucket, over narrow() views of this rank's shard
// of the flat parameters and of the gradients (ZeRO-1: the flat gradient
// buffer; ZeRO-2: the gradient shard buffer), with FlatParameters::
// MatrixDecayRanges cut to the shard (SliceParamRanges). Optimizer state is
// therefore 8 bytes per owned element: 8 * padded / N per rank.
//
// Communication. During the last micro-batch's backward, gradient-accumulator
// post-hooks count ready parameters per bucket and launch buckets in bucket
// order (same order on every rank), as DDP does:
//   zero1: AllReduceAsync(bucket gradients, kAverage), as DDP;
//   zero2: ReduceScatterAsync(bucket gradients, this rank's gradient shard of
//          the bucket, kAverage) into a separate gradient shard buffer.
// Step() launches what is left, waits, clips, runs the bucket optimizers, then
// all-gathers the updated parameters bucket by bucket. AllGather's input must
// not alias its output, so each rank first copies its shard of a bucket into
// a staging buffer (4 * padded / N bytes per rank in all, one region per
// bucket so that all gathers are in flight at once): one extra copy of 1/N of
// the parameters per step, reported as communication_bytes.
//
// Clipping. zero1: gradients are replicated after the all-reduce, so the norm
// is computed over the full flat gradient buffer (exactly DDP's computation).
// zero2: the sum of squares of this rank's gradient shard buffer is summed
// across ranks with an AllReduce (double) inside ClipGradNorm's
// sum_squares_across_shards hook; every rank scales its shard by the same
// factor. The norm equals DDP's up to float rounding.
//
// Memory (honest accounting, Memory()): parameters are replicated (4 * padded
// bytes). The full flat gradient buffer stays allocated on every rank in both
// stages because autograd accumulates into it (.grad views); ZeRO-2 adds its
// gradient shard buffer (4 * padded / N) on top, so in this first version
// ZeRO-2 uses MORE gradient memory than ZeRO-1, not less. Freeing the full
// gradient buffer between reduce-scatter and the next backward (releasing its
// storage as FSDP does for parameters) is future work.
//
// Creation is a collective. It checks that every rank has the same parameter
// count and element count (an all-gather of two integers), broadcasts
// parameters and buffers from rank 0, and adds the hooks.
//
// Threading: as DdpStrategy (collectives from the training thread and from
// autograd's hooks on the same thread).
#ifndef STRATA_STRATEGIES_ZERO_H_
#define STRATA_STRATEGIES_ZERO_H_

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
#include "optim/optimizer.h"
#include "strategies/bucket_readiness.h"
#include "strategies/single.h"
#include "strategies/strategy.h"

namespace strata::strategies {

class ZeroStrategy : public SingleStrategy {
 public:
  // A run [offset, offset + numel) of the flat buffers, communicated as one;
  // numel is a multiple of the world size.
  struct Bucket {
    int64_t offset = 0;  // Elements.
    int64_t numel = 0;
    // Indices into flat().entries() of the parameters overlapping it.
    std::vector<size_t> entries;
    // This rank's shard: flat elements [shard_offset, shard_offset +
    // numel / N); in the gradient shard and staging buffers at
    // buffer_offset.
    int64_t shard_offset = 0;
    int64_t buffer_offset = 0;
  };

  // options.kind: "zero1" or "zero2". `group` is borrowed and must outlive
  // the strategy. A collective: every rank of the group calls it.
  static absl::StatusOr<std::unique_ptr<ZeroStrategy>> Create(
      const StrategyOptions& options, std::shared_ptr<models::UnitModel> model,
      comm::Group* group, const OptimizerConfig& config,
      const optim::LrScheduleOptions& schedule);

  ~ZeroStrategy() override;

  std::string name() const override { return options_.kind; }
  absl::StatusOr<StepResult> Step(int64_t step) override;
  MemoryReport Memory() const override;
  // Per bucket, per parameter overlapping this rank's shard of the bucket:
  // "<param>.exp_avg", "<param>.exp_avg_sq" with the parameter's shape and the
  // run's offset within the flattened parameter (a parameter straddling a
  // shard boundary appears on two ranks, or twice on one rank when it
  // straddles a bucket boundary, with different offsets); then "step".
  std::vector<ShardedTensor> OptimizerState() const override;

  const std::vector<Bucket>& buckets() const { return buckets_; }
  // Bucket reductions started so far from gradient hooks (during backward)
  // and from Step().
  int64_t buckets_launched_in_backward() const { return launched_in_backward_; }
  int64_t buckets_launched_at_step() const { return launched_at_step_; }

 protected:
  absl::Status BeforeMicroBatch(bool last_micro_batch) override;
  absl::Status AfterBackward(bool last_micro_batch) override;
  absl::Status FinishGradients() override;

 private:
  struct Layout;

  ZeroStrategy(std::shared_ptr<models::UnitModel> model,
               const OptimizerConfig& config, Parts parts, Layout layout,
               const StrategyOptions& options, comm::Group* group);

  bool stage2() const { return options_.kind == "zero2"; }
  void LaunchBucket(size_t bucket, bool from_backward);
  void ResetStep();
  absl::Status GatherParameters();

  const StrategyOptions options_;
  const OptimizerConfig config_;
  comm::Group* const group_;
  const optim::LrSchedule* schedule_;  // Owned by SingleStrategy.
  std::vector<Bucket> buckets_;
  // One optimizer per bucket; the first is owned by SingleStrategy, the
  // others by owned_optimizers_.
  std::vector<optim::Optimizer*> optimizers_;
  std::vector<std::unique_ptr<optim::Optimizer>> owned_optimizers_;
  at::Tensor grad_shard_;               // zero2: sum over buckets of numel / N.
  at::Tensor staging_;                  // Same size: all-gather inputs.
  std::vector<at::Tensor> grad_views_;  // Per bucket, of flat().grads().
  std::vector<at::Tensor> shard_views_;  // zero2: per bucket, of grad_shard_.
  // Per-step readiness of buckets_ and the gradient hooks; owned, created by
  // the constructor.
  std::unique_ptr<BucketReadiness> readiness_;

  // Per-step state: the bucket reductions in flight, in launch order.
  std::vector<std::unique_ptr<comm::Work>> works_;

  int64_t launched_in_backward_ = 0;
  int64_t launched_at_step_ = 0;
};

}  // namespace strata::strategies

#endif  // STRATA_STRATEGIES_ZERO_H_
