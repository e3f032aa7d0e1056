// ZeroStrategy: ZeRO stages 1 and 2 (Rajbhandari et al.), fp32 or mixed
// precision, over one flat parameter buffer, with the bucketed,
// backward-overlapped communication of DdpStrategy (ddp.h).
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
// Optimizer. One optimizer per bucket (CreateOptimizer: AdamW, Adam or SGD,
// as OptimizerConfig says), over narrow() views of this rank's shard of the
// flat parameters and of the gradients (ZeRO-1: the flat gradient buffer;
// ZeRO-2: the gradient shard buffer), with FlatParameters::
// MatrixDecayRanges cut to the shard (SliceParamRanges). Optimizer state is
// therefore sharded too: for AdamW and Adam 8 bytes per owned element,
// 8 * padded / N per rank (SGD: 4 with momentum, none without).
//
// Communication. During the backward, gradient-accumulator post-hooks count
// ready parameters per bucket and launch buckets in bucket order (same order
// on every rank), as DDP does:
//   zero1: AllReduceAsync(bucket gradients, kAverage), as DDP, during the
//          last micro-batch's backward (accumulation micro-batches add into
//          the local gradients without communication);
//   zero2: ReduceScatterAsync(the bucket's fp32 gradient storage, this
//          rank's gradient shard of the bucket, kAverage) into a separate
//          gradient shard buffer, during EVERY micro-batch's backward, as
//          DeepSpeed's stage 2 does (see "Memory"). The step's first
//          reduce-scatter of a bucket writes its shard; those of later
//          micro-batches are written apart (into a released-between-uses
//          buffer of the bucket's shard size, or the reduce_dtype shard) and
//          added to it, so the shard holds the sum over micro-batches of
//          their averaged gradients. An accumulation micro-batch launches
//          what its backward did not and waits for all of them before it
//          returns.
// Step() launches what is left, waits, clips, runs the bucket optimizers, then
// all-gathers the updated parameters bucket by bucket. AllGather's input must
// not alias its output, so each rank first copies its shard of a bucket into
// a staging buffer (4 * padded / N bytes per rank in all, one region per
// bucket so that all gathers are in flight at once): one extra copy of 1/N of
// the parameters per step, reported as communication_bytes.
//
// Clipping. zero1: gradients are replicated after the all-reduce, so the norm
// is computed over the full flat gradient buffer (exactly DDP's computation).
// zero2: this rank's part of the norm over its gradient shard buffer (the
// sum of |g|^p, or its largest |g| for p = infinity) is combined across ranks
// with an AllReduce (double; sum, or max) inside ClipGradNorm's
// parts_across_shards hook (ClipGradients, replicas.h); every rank scales its
// shard by the same factor. The norm equals DDP's up to float rounding.
//
// Memory (honest accounting, Memory(), counted from what is allocated when
// it is called): parameters are replicated (4 * padded bytes). ZeRO-1 keeps
// the full flat gradient buffer (autograd accumulates into it through .grad
// views, and it is all-reduced in place). ZeRO-2 keeps no full-size
// gradient buffer: between steps it holds only its fp32 gradient shard
// (4 * padded / N). During backward, as DeepSpeed does, autograd allocates
// each parameter's gradient, and a post-hook on the parameter's gradient
// accumulator (added before the readiness hooks, so it runs first) adds it
// into its bucket's fp32 storage (the parts of a parameter straddling a
// bucket boundary into both) and frees it. A bucket's storage is allocated,
// zero-filled, when its first gradient of the micro-batch arrives and released
// once its reduce-scatter is done: each launch waits for the reduce-scatter
// launched kBucketsInFlight buckets earlier, and Step() (or the end of an
// accumulation micro-batch) for the rest. With gradient accumulation every
// micro-batch is reduce-scattered, so no full-size gradient is held between
// micro-batches either: a step's communication is one reduce-scatter per
// micro-batch, its memory the shard and a few buckets.
// transient_gradient_bytes reports the most bucket storage (with the
// accumulation outputs) held at once so far (a high-water mark); autograd's
// per-parameter gradients, freed by the hooks, are not counted. The extra copy
// (each gradient into its bucket) is DeepSpeed's too.
//
// Mixed precision (MixedPrecisionOptions, single.h): the flat buffer, and so
// the model's parameters, all-gathers and the gradients autograd writes, are
// in param_dtype (bf16); the fp32 master parameters are this rank's shard
// (laid out as the gradient shard: bucket runs at buffer_offset) with fp32
// optimizer state. zero1: accumulation micro-batches fold their bf16
// gradients into a full-size fp32 buffer after backward; in the last
// micro-batch each bucket is folded when ready and reduced in reduce_dtype
// (bf16: a bf16 copy is reduced). zero2: the hooks fold every gradient into
// its fp32 bucket storage; with reduce_dtype bf16 a bf16 copy of the bucket
// is reduce-scattered into a bf16 shard, copied (the step's first
// micro-batch) or added (later ones) into the fp32 shard. After the
// optimizers, each rank casts its master shard into the bf16 staging buffer
// and all-gathers it into the parameters. ModelState() is then the fp32
// master shard runs (sharded as OptimizerState()), and AfterStateLoaded()
// re-gathers the bf16 parameters from them. The fp32 masters are broadcast
// from rank 0 at creation.
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
#include "strategies/mixed_precision.h"
#include "strategies/single.h"
#include "strategies/strategy.h"

namespace torch::autograd {
struct Node;
}  // namespace torch::autograd

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

  // options.kind: kZero1 or kZero2. `group` is borrowed and must outlive
  // the strategy. A collective: every rank of the group calls it.
  static absl::StatusOr<std::unique_ptr<ZeroStrategy>> Create(
      const StrategyOptions& options, std::shared_ptr<models::UnitModel> model,
      comm::Group* group, const OptimizerConfig& config,
      const optim::LrScheduleOptions& schedule);

  ~ZeroStrategy() override;

  std::string name() const override { return StrategyKindName(options_.kind); }
  // zero2: re-allocates the released full-size gradient buffers.
  void ZeroGrad() override;
  MemoryReport Memory() const override;
  // fp32: the full, replicated parameters (SingleStrategy's). Mixed
  // precision: the fp32 master shard, per bucket, per parameter overlapping
  // this rank's shard of the bucket (offsets as OptimizerState()).
  std::vector<ShardedTensor> ModelState() const override;
  // Mixed precision: all-gathers the bf16 parameters from the loaded fp32
  // master shards (a collective). fp32: nothing to do.
  absl::Status AfterStateLoaded() override;
  // Mixed precision: all-gathers the fp32 master shards (a collective; call
  // between steps). fp32: Strategy's (the replicated parameters).
  absl::StatusOr<std::vector<std::pair<std::string, at::Tensor>>>
  FullModelState() override;
  // Per bucket, per parameter overlapping this rank's shard of the bucket:
  // "<param>.exp_avg", "<param>.exp_avg_sq" with the parameter's shape and the
  // run's offset within the flattened parameter (a parameter straddling a
  // shard boundary appears on two ranks, or twice on one rank when it
  // straddles a bucket boundary, with different offsets); then "step".
  std::vector<ShardedTensor> OptimizerState() const override;

  const std::vector<Bucket>& buckets() const { return buckets_; }
  // Bucket reductions started so far from gradient hooks (during backward)
  // and after it (Step(), or zero2's accumulation micro-batches).
  int64_t buckets_launched_in_backward() const { return launched_in_backward_; }
  int64_t buckets_launched_at_step() const { return launched_at_step_; }

 protected:
  absl::Status BeforeMicroBatch(bool last_micro_batch) override;
  // Completes the buckets' communication, clips, runs the bucket
  // optimizers and all-gathers the updated parameters.
  absl::StatusOr<StepResult> DoStep(int64_t step) override;
  absl::Status AfterMicroBatch(bool last_micro_batch,
                               absl::Status backward) override;
  absl::Status FinishGradients() override;

 private:
  struct Layout;

  ZeroStrategy(std::shared_ptr<models::UnitModel> model,
               const OptimizerConfig& config, Parts parts, Layout layout,
               const StrategyOptions& options, comm::Group* group);

  bool stage2() const { return options_.kind == StrategyKind::kZero2; }
  void LaunchBucket(size_t bucket, bool from_backward);
  void ResetStep();
  absl::Status GatherParameters();

  // zero2 (see "Memory"). A run of a parameter inside one bucket.
  struct Segment {
    size_t bucket = 0;
    int64_t entry_offset = 0;   // Elements, into the parameter.
    int64_t bucket_offset = 0;  // Elements, into the bucket.
    int64_t numel = 0;
  };
  class BucketGradientHook;
  // Buckets whose reduce-scatter may be in flight (with their storage)
  // while backward goes on.
  static constexpr size_t kBucketsInFlight = 2;
  // Creates the bucket storage (released), the shard views and the
  // gradient hooks; releases the flat gradient buffer. Constructor only.
  void BuildStageTwoGradients();
  // Called by the hook of `entry` after autograd accumulated its gradient.
  void MoveGradientToBuckets(size_t entry);
  void AllocateBucket(size_t bucket);
  void ReleaseBucket(size_t bucket);
  // Waits for `bucket`'s reduce-scatter (once per launch), keeps its status,
  // writes or adds its result into the fp32 shard (a bf16 reduce, or a later
  // micro-batch's) and releases the storage.
  void FinishBucket(size_t bucket);
  void NoteHeldBuckets();
  // Waits for every reduction launched since the last reset (zero2:
  // FinishBucket), returning the first failure, annotated.
  absl::Status WaitForBuckets();

  const StrategyOptions options_;
  const OptimizerConfig config_;
  comm::Group* const group_;
  const optim::LrSchedule* schedule_;  // Owned by SingleStrategy.
  std::vector<Bucket> buckets_;
  // One optimizer per bucket; the first is owned by SingleStrategy, the
  // others by owned_optimizers_.
  std::vector<optim::Optimizer*> optimizers_;
  std::vector<std::unique_ptr<optim::Optimizer>> owned_optimizers_;
  at::Tensor grad_shard_;  // zero2: fp32, sum over buckets of numel / N.
  at::Tensor staging_;     // Same size, param_dtype: all-gather inputs.
  // reduce_dtype bf16: zero1's bf16 copy that is all-reduced when the bf16
  // gradient buffer cannot be reused (fp32 parameters), and zero2's bf16
  // reduced shard.
  at::Tensor reduce_buffer_;
  at::Tensor reduce_shard_;
  bool cast_for_reduce_ = false;  // reduce_dtype is not fp32.
  // zero1, per bucket: what is all-reduced, and the fp32 accumulated
  // gradients (the same tensor unless cast_for_reduce_).
  std::vector<at::Tensor> grad_views_;
  std::vector<at::Tensor> accumulated_views_;
  // zero2, per bucket: of grad_shard_, and what the reduce-scatter writes
  // (of reduce_shard_ when cast_for_reduce_, else the same).
  std::vector<at::Tensor> shard_views_;
  std::vector<at::Tensor> reduced_shard_views_;
  // zero2, per bucket: the fp32 gradient storage and, when
  // cast_for_reduce_, the reduce_dtype copy that is reduce-scattered; both
  // released between uses (see "Memory").
  std::vector<ReleasableBuffer> bucket_grads_;
  std::vector<ReleasableBuffer> bucket_reduce_;
  // zero2 without cast_for_reduce_, per bucket: the reduce-scatter output of
  // the step's later micro-batches (numel / N, fp32), added to the shard;
  // released between uses.
  std::vector<ReleasableBuffer> bucket_incoming_;
  // zero2: the micro-batches reduce-scattered so far this step (0: the next
  // reduce-scatter overwrites the shard).
  int64_t step_reductions_ = 0;
  // zero2: per entry, its runs in buckets.
  std::vector<std::vector<Segment>> segments_;
  // zero2, per bucket, this step: the reduce-scatter's status once
  // finished.
  std::vector<absl::Status> bucket_status_;
  std::vector<bool> bucket_finished_;
  // zero2: gradient accumulators kept alive, with the keys of our hooks
  // (removed at destruction).
  std::vector<std::pair<std::shared_ptr<torch::autograd::Node>, uintptr_t>>
      gradient_hooks_;
  int64_t peak_bucket_bytes_ = 0;
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
