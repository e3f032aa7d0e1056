#include "strategies/zero.h"

#include <ATen/ATen.h>
#include <glog/logging.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status.h"
#include "optim/flat_parameters.h"
#include "strategies/mixed_precision.h"
#include "strategies/optimizer_factory.h"
#include "strategies/replicas.h"

namespace strata::strategies {

struct ZeroStrategy::Layout {
  std::vector<Bucket> buckets;
  std::vector<std::unique_ptr<optim::Optimizer>> optimizers;
  optim::LrSchedule* schedule = nullptr;
  std::vector<optim::Optimizer*> all_optimizers;
  at::Tensor grad_shard;
  at::Tensor staging;
};

namespace {
bool Mixed(const StrategyOptions& options) {
  return UsesMasterParameters(options.mixed_precision);
}
}  // namespace

namespace {

int64_t RoundUp(int64_t n, int64_t multiple) {
  return (n + multiple - 1) / multiple * multiple;
}

// Buckets of `flat` as in zero.h: ends at multiples of `world`, sizes capped
// as DDP's (first_bucket_bytes, then bucket_bytes), with the parameters
// overlapping each and this rank's shard of it.
std::vector<ZeroStrategy::Bucket> BuildBuckets(
    const optim::FlatParameters& flat, const StrategyOptions& options,
    int world, int rank) {
  const auto& entries = flat.entries();
  // Caps count bytes as communicated (reduce_dtype).
  const int64_t elem = c10::elementSize(options.mixed_precision.reduce_dtype);
  const int64_t total = flat.padded_numel();
  CHECK_EQ(total % world, 0);
  // Natural (DDP) ends, rounded up to multiples of the world size.
  std::vector<int64_t> ends;
  int64_t start = 0, cap = options.first_bucket_bytes;
  for (const auto& e : entries) {
    const int64_t end = e.offset + e.numel;
    if (end > start && (end - start) * elem > cap && e.offset > start) {
      const int64_t cut = RoundUp(e.offset, world);
      ends.push_back(cut);
      start = cut;
      cap = options.bucket_bytes;
    }
  }
  if (ends.empty() || ends.back() < total) ends.push_back(total);
  std::vector<ZeroStrategy::Bucket> buckets;
  int64_t begin = 0, buffer_offset = 0;
  for (int64_t end : ends) {
    end = std::min(end, total);
    if (end <= begin) continue;
    ZeroStrategy::Bucket b;
    b.offset = begin;
    b.numel = end - begin;
    CHECK_EQ(b.numel % world, 0);
    b.shard_offset = begin + rank * (b.numel / world);
    b.buffer_offset = buffer_offset;
    buffer_offset += b.numel / world;
    for (size_t i = 0; i < entries.size(); ++i) {
      const auto& e = entries[i];
      if (e.numel > 0 && e.offset < end && e.offset + e.numel > begin) {
        b.entries.push_back(i);
      }
    }
    buckets.push_back(std::move(b));
    begin = end;
  }
  CHECK_EQ(begin, total);
  CHECK_EQ(buffer_offset * world, total);
  return buckets;
}

}  // namespace

absl::StatusOr<std::unique_ptr<ZeroStrategy>> ZeroStrategy::Create(
    const StrategyOptions& options, std::shared_ptr<models::UnitModel> model,
    comm::Group* group, const OptimizerConfig& config,
    const optim::LrScheduleOptions& schedule) {
  STRATA_RETURN_IF_ERROR(ValidateStrategyOptions(options));
  if (options.kind != StrategyKind::kZero1 &&
      options.kind != StrategyKind::kZero2) {
    return absl::InvalidArgumentError(
        absl::StrCat("ZeroStrategy: --strategy must be zero1 or zero2, got '",
                     StrategyKindName(options.kind), "'"));
  }
  const std::string kind = StrategyKindName(options.kind);
  if (group == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("--strategy ", kind, " needs a process group, got none"));
  }
  if (model == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("strategy '", kind, "': model is null"));
  }
  STRATA_RETURN_IF_ERROR(ValidateOptimizerConfig(config));
  STRATA_RETURN_IF_ERROR(optim::ValidateLrScheduleOptions(schedule));
  const int world = group->size();
  const int rank = group->rank();

  std::vector<optim::NamedParameter> named;
  for (const auto& item : model->named_parameters()) {
    named.push_back({item.key(), item.value()});
  }
  STRATA_RETURN_IF_ERROR(CheckSameModelOnAllRanks(*group, kind, *model));
  std::reverse(named.begin(), named.end());
  const bool mixed = Mixed(options);
  // Mixed precision: the full fp32 values, until the masters are cut out.
  at::Tensor full_master;
  if (mixed) full_master = ConcatenateFp32(named, /*align_elems=*/world);
  Parts parts;
  STRATA_ASSIGN_OR_RETURN(
      parts.flat,
      optim::FlatParameters::Create(std::move(named), /*align_elems=*/world,
                                    options.mixed_precision.param_dtype));
  CastBuffers(*model, options.mixed_precision.buffer_dtype);
  STRATA_ASSIGN_OR_RETURN(parts.schedule, optim::LrSchedule::Create(schedule));

  // Rank 0's weights everywhere (fp32 masters with mixed precision; the
  // bf16 parameters are derived from them).
  STRATA_RETURN_IF_ERROR(BroadcastFromRankZero(
      *group, kind, *model, mixed ? full_master : parts.flat->params()));
  if (mixed) {
    at::NoGradGuard no_grad;
    parts.flat->params().copy_(full_master);
    // zero2 accumulates in fp32 per bucket (zero.h, "Memory").
    if (options.kind != StrategyKind::kZero2) {
      parts.master_grads =
          at::zeros({parts.flat->padded_numel()}, full_master.options());
    }
  }

  Layout layout;
  layout.buckets = BuildBuckets(*parts.flat, options, world, rank);
  const int64_t shard_numel = parts.flat->padded_numel() / world;
  layout.staging = at::zeros({shard_numel}, parts.flat->params().options());
  const bool stage2 = options.kind == StrategyKind::kZero2;
  const at::TensorOptions fp32 = at::TensorOptions()
                                     .dtype(at::kFloat)
                                     .device(parts.flat->params().device());
  if (stage2) layout.grad_shard = at::zeros({shard_numel}, fp32);
  if (mixed) {
    parts.master_params = at::empty({shard_numel}, fp32);
    for (const Bucket& b : layout.buckets) {
      const int64_t n = b.numel / world;
      parts.master_params.narrow(0, b.buffer_offset, n)
          .copy_(full_master.narrow(0, b.shard_offset, n));
    }
    full_master = at::Tensor();
  }
  const at::Tensor accumulated =
      mixed ? parts.master_grads : parts.flat->grads();
  const std::vector<optim::ParamRange> ranges =
      parts.flat->MatrixDecayRanges(config.weight_decay);
  for (const Bucket& b : layout.buckets) {
    const int64_t n = b.numel / world;
    at::Tensor p = mixed ? parts.master_params.narrow(0, b.buffer_offset, n)
                         : parts.flat->params().narrow(0, b.shard_offset, n);
    at::Tensor g = stage2 ? layout.grad_shard.narrow(0, b.buffer_offset, n)
                          : accumulated.narrow(0, b.shard_offset, n);
    STRATA_ASSIGN_OR_RETURN(
        std::unique_ptr<optim::Optimizer> optimizer,
        CreateOptimizer(config, p, g,
                        optim::SliceParamRanges(ranges, b.shard_offset, n)));
    layout.all_optimizers.push_back(optimizer.get());
    layout.optimizers.push_back(std::move(optimizer));
  }
  CHECK(!layout.optimizers.empty());
  parts.optimizer = std::move(layout.optimizers.front());
  layout.schedule = parts.schedule.get();
  std::unique_ptr<ZeroStrategy> strategy(
      new ZeroStrategy(std::move(model), config, std::move(parts),
                       std::move(layout), options, group));
  VLOG(1) << kind << ": rank " << rank << ": " << strategy->buckets_.size()
          << " buckets, shard of " << shard_numel << " elements";
  return strategy;
}

ZeroStrategy::ZeroStrategy(std::shared_ptr<models::UnitModel> model,
                           const OptimizerConfig& config, Parts parts,
                           Layout layout, const StrategyOptions& options,
                           comm::Group* group)
    : SingleStrategy(std::move(model), config, std::move(parts),
                     options.mixed_precision),
      options_(options),
      config_(config),
      group_(group),
      schedule_(layout.schedule),
      buckets_(std::move(layout.buckets)),
      optimizers_(std::move(layout.all_optimizers)),
      grad_shard_(std::move(layout.grad_shard)),
      staging_(std::move(layout.staging)) {
  CHECK(schedule_ != nullptr);
  CHECK_EQ(optimizers_.size(), buckets_.size());
  // layout.optimizers[0] was moved to SingleStrategy (parts.optimizer).
  for (size_t k = 0; k < layout.optimizers.size(); ++k) {
    if (k == 0) {
      CHECK(layout.optimizers[0] == nullptr);
      continue;
    }
    owned_optimizers_.push_back(std::move(layout.optimizers[k]));
  }
  const at::ScalarType reduce_dtype = options_.mixed_precision.reduce_dtype;
  cast_for_reduce_ = reduce_dtype != at::kFloat;
  std::vector<std::vector<size_t>> bucket_entries;
  for (const Bucket& b : buckets_) bucket_entries.push_back(b.entries);
  if (stage2()) {
    BuildStageTwoGradients();
  } else {
    // What is communicated (as DdpStrategy): the fp32 accumulated gradients,
    // or with reduce_dtype bf16 a bf16 copy of them (in the bf16 gradient
    // buffer autograd writes, free once folded, or in a buffer of our own
    // for fp32 parameters).
    const at::Tensor accumulated = accumulated_grads();
    at::Tensor communicated = accumulated;
    if (cast_for_reduce_) {
      if (flat().grads().scalar_type() == reduce_dtype) {
        communicated = flat().grads();
      } else {
        reduce_buffer_ = at::zeros({flat().padded_numel()},
                                   accumulated.options().dtype(reduce_dtype));
        communicated = reduce_buffer_;
      }
    }
    for (const Bucket& b : buckets_) {
      grad_views_.push_back(communicated.narrow(0, b.offset, b.numel));
      accumulated_views_.push_back(accumulated.narrow(0, b.offset, b.numel));
    }
  }
  // After BuildStageTwoGradients' hooks: autograd runs an accumulator's
  // post-hooks in the order they were added, so a zero2 gradient is in its
  // bucket before the bucket can be launched.
  readiness_ = BucketReadiness::ForFlatParameters(
      flat(), std::move(bucket_entries),
      [this](size_t bucket) { LaunchBucket(bucket, /*from_backward=*/true); });
}

// zero2: moves a parameter's gradient, as autograd has just accumulated it
// into the parameter's .grad, into the fp32 bucket storage, then frees it.
class ZeroStrategy::BucketGradientHook
    : public torch::autograd::FunctionPostHook {
 public:
  BucketGradientHook(ZeroStrategy* owner, size_t entry)
      : owner_(owner), entry_(entry) {}
  torch::autograd::variable_list operator()(
      const torch::autograd::variable_list& outputs,
      const torch::autograd::variable_list& /*inputs*/) override {
    owner_->MoveGradientToBuckets(entry_);
    return outputs;
  }

 private:
  ZeroStrategy* const owner_;
  const size_t entry_;
};

void ZeroStrategy::BuildStageTwoGradients() {
  const int world = group_->size();
  const at::ScalarType reduce_dtype = options_.mixed_precision.reduce_dtype;
  if (cast_for_reduce_) {
    reduce_shard_ = at::zeros({grad_shard_.numel()},
                              grad_shard_.options().dtype(reduce_dtype));
  }
  const auto& entries = flat().entries();
  segments_.resize(entries.size());
  for (size_t k = 0; k < buckets_.size(); ++k) {
    const Bucket& b = buckets_[k];
    const at::TensorOptions fp32 =
        at::TensorOptions().dtype(at::kFloat).device(grad_shard_.device());
    bucket_grads_.emplace_back(at::zeros({b.numel}, fp32));
    bucket_grads_.back().Release();
    if (!cast_for_reduce_) {
      bucket_incoming_.emplace_back(at::zeros({b.numel / world}, fp32));
      bucket_incoming_.back().Release();
    }
    if (cast_for_reduce_) {
      bucket_reduce_.emplace_back(
          at::zeros({b.numel}, fp32.dtype(reduce_dtype)));
      bucket_reduce_.back().Release();
    }
    shard_views_.push_back(
        grad_shard_.narrow(0, b.buffer_offset, b.numel / world));
    reduced_shard_views_.push_back(
        cast_for_reduce_
            ? reduce_shard_.narrow(0, b.buffer_offset, b.numel / world)
            : shard_views_.back());
    for (size_t i : b.entries) {
      const auto& e = entries[i];
      const int64_t lo = std::max(b.offset, e.offset);
      const int64_t hi = std::min(b.offset + b.numel, e.offset + e.numel);
      if (lo < hi) {
        segments_[i].push_back({k, lo - e.offset, lo - b.offset, hi - lo});
      }
    }
  }
  bucket_status_.assign(buckets_.size(), absl::OkStatus());
  bucket_finished_.assign(buckets_.size(), false);
  // The full flat gradient buffer and the .grad views into it are not used:
  // autograd allocates each gradient, the hooks move it into its bucket.
  ReleasableBuffer(flat().grads()).Release();
  for (size_t i = 0; i < entries.size(); ++i) {
    if (!entries[i].requires_grad) continue;
    at::Tensor param = flat().parameter(i);
    param.mutable_grad().reset();
    std::shared_ptr<torch::autograd::Node> accumulator =
        torch::autograd::impl::grad_accumulator(param);
    CHECK(accumulator != nullptr) << entries[i].name;
    const uintptr_t key = accumulator->add_post_hook(
        std::make_unique<BucketGradientHook>(this, i));
    gradient_hooks_.emplace_back(std::move(accumulator), key);
  }
}

void ZeroStrategy::AllocateBucket(size_t bucket) {
  if (bucket_grads_[bucket].allocated()) return;
  bucket_grads_[bucket].AllocateZeroed();
  NoteHeldBuckets();
}

void ZeroStrategy::NoteHeldBuckets() {
  int64_t held = 0;
  for (const ReleasableBuffer& b : bucket_grads_) held += b.held_bytes();
  for (const ReleasableBuffer& b : bucket_reduce_) held += b.held_bytes();
  for (const ReleasableBuffer& b : bucket_incoming_) held += b.held_bytes();
  peak_bucket_bytes_ = std::max(peak_bucket_bytes_, held);
}

void ZeroStrategy::MoveGradientToBuckets(size_t entry) {
  at::Tensor param = flat().parameter(entry);
  at::Tensor& grad = param.mutable_grad();
  if (!grad.defined()) return;
  at::NoGradGuard no_grad;
  const at::Tensor flat_grad = grad.reshape({-1});
  for (const Segment& s : segments_[entry]) {
    AllocateBucket(s.bucket);
    bucket_grads_[s.bucket]
        .tensor()
        .narrow(0, s.bucket_offset, s.numel)
        .add_(flat_grad.narrow(0, s.entry_offset, s.numel));
  }
  grad.reset();
}

void ZeroStrategy::ReleaseBucket(size_t bucket) {
  bucket_grads_[bucket].Release();
  if (cast_for_reduce_) bucket_reduce_[bucket].Release();
  if (!bucket_incoming_.empty()) bucket_incoming_[bucket].Release();
}

void ZeroStrategy::FinishBucket(size_t bucket) {
  if (bucket_finished_[bucket]) return;
  bucket_finished_[bucket] = true;
  absl::Status wait = works_[bucket]->Wait();
  if (wait.ok()) {
    // The step's first reduce-scatter of the bucket overwrites its shard
    // (directly when fp32); later micro-batches' add to it.
    at::NoGradGuard no_grad;
    const bool accumulate = step_reductions_ > 0;
    if (cast_for_reduce_ && accumulate) {
      shard_views_[bucket].add_(reduced_shard_views_[bucket]);
    } else if (cast_for_reduce_) {
      shard_views_[bucket].copy_(reduced_shard_views_[bucket]);
    } else if (accumulate) {
      shard_views_[bucket].add_(bucket_incoming_[bucket].tensor());
    }
  }
  bucket_status_[bucket] = wait;
  ReleaseBucket(bucket);
}

void ZeroStrategy::ZeroGrad() {
  if (!stage2()) {
    SingleStrategy::ZeroGrad();
    return;
  }
  // Released bucket storage is re-allocated zero-filled when the next
  // gradient arrives, and the next reduce-scatter overwrites the shard.
  for (size_t k = 0; k < buckets_.size(); ++k) ReleaseBucket(k);
  step_reductions_ = 0;
}

ZeroStrategy::~ZeroStrategy() {
  readiness_.reset();  // Removes the hooks first.
  for (const auto& [node, key] : gradient_hooks_) node->del_post_hook(key);
  for (auto& work : works_) {
    absl::Status status = work->Wait();
    if (!status.ok()) LOG(WARNING) << name() << ": at destruction: " << status;
  }
}

absl::Status ZeroStrategy::BeforeMicroBatch(bool last_micro_batch) {
  STRATA_RETURN_IF_ERROR(
      readiness_->BeforeMicroBatch(name(), last_micro_batch));
  // zero2 reduce-scatters during every micro-batch's backward.
  if (stage2() && !last_micro_batch) readiness_->Arm();
  return absl::OkStatus();
}

absl::Status ZeroStrategy::AfterMicroBatch(bool last_micro_batch,
                                           absl::Status backward) {
  if (stage2() && !last_micro_batch) {
    // An accumulation micro-batch: what backward did not launch is launched
    // now, every reduce-scatter is waited for (its storage released), and
    // the next micro-batch starts counting afresh.
    readiness_->Disarm();
    if (backward.ok()) {
      readiness_->LaunchRemaining([this](size_t bucket) {
        LaunchBucket(bucket, /*from_backward=*/false);
      });
    }
    absl::Status reduced = WaitForBuckets();
    works_.clear();
    bucket_status_.assign(buckets_.size(), absl::OkStatus());
    bucket_finished_.assign(buckets_.size(), false);
    ++step_reductions_;
    STRATA_RETURN_IF_ERROR(backward);
    return reduced;
  }
  STRATA_RETURN_IF_ERROR(backward);
  readiness_->AfterBackward(last_micro_batch);
  // The last micro-batch's gradients are folded bucket by bucket at launch;
  // zero2's hooks fold every gradient into fp32 as it arrives.
  if (!last_micro_batch && !stage2()) FoldGradients(0, flat().padded_numel());
  return absl::OkStatus();
}

void ZeroStrategy::LaunchBucket(size_t bucket, bool from_backward) {
  ++(from_backward ? launched_in_backward_ : launched_at_step_);
  CHECK_EQ(works_.size(), bucket);  // Launched in bucket order.
  if (stage2()) {
    AllocateBucket(bucket);  // A bucket whose parameters got no gradient.
    at::Tensor input = bucket_grads_[bucket].tensor();
    at::Tensor output = reduced_shard_views_[bucket];
    if (step_reductions_ > 0 && !cast_for_reduce_) {
      // Accumulating: reduce-scattered apart, added to the shard by
      // FinishBucket.
      bucket_incoming_[bucket].Allocate();
      NoteHeldBuckets();
      output = bucket_incoming_[bucket].tensor();
    }
    if (cast_for_reduce_) {
      bucket_reduce_[bucket].AllocateZeroed();
      NoteHeldBuckets();
      at::NoGradGuard no_grad;
      bucket_reduce_[bucket].tensor().copy_(input);
      input = bucket_reduce_[bucket].tensor();
    }
    works_.push_back(
        group_->ReduceScatterAsync(input, output, comm::ReduceOp::kAverage));
    // Keep at most kBucketsInFlight reduce-scatters (and their full-size
    // storage) in flight: finishing an older one frees its storage.
    if (bucket >= kBucketsInFlight) FinishBucket(bucket - kBucketsInFlight);
    return;
  }
  const Bucket& b = buckets_[bucket];
  FoldGradients(b.offset, b.numel);
  if (cast_for_reduce_) {
    at::NoGradGuard no_grad;
    grad_views_[bucket].copy_(accumulated_views_[bucket]);
  }
  works_.push_back(
      group_->AllReduceAsync(grad_views_[bucket], comm::ReduceOp::kAverage));
}

void ZeroStrategy::ResetStep() {
  readiness_->ResetStep();
  works_.clear();
  if (stage2()) {
    bucket_status_.assign(buckets_.size(), absl::OkStatus());
    bucket_finished_.assign(buckets_.size(), false);
  }
  step_reductions_ = 0;
}

absl::Status ZeroStrategy::WaitForBuckets() {
  absl::Status status;
  for (size_t k = 0; k < works_.size(); ++k) {
    absl::Status wait;
    if (stage2()) {
      FinishBucket(k);
      wait = bucket_status_[k];
    } else {
      wait = works_[k]->Wait();
    }
    if (!wait.ok() && status.ok()) {
      const Bucket& b = buckets_[k];
      status = Annotate(
          wait,
          absl::StrCat(name(), ": ", stage2() ? "reduce-scatter" : "all-reduce",
                       " of gradient bucket ", k, " of ", buckets_.size(),
                       " (elements [", b.offset, ", ", b.offset + b.numel,
                       ")) on rank ", group_->rank()));
    }
  }
  return status;
}

absl::Status ZeroStrategy::FinishGradients() {
  absl::Status status = readiness_->CompleteStep(
      absl::StrCat(name(), " on rank ", group_->rank()),
      options_.allow_unused_parameters,
      [this](size_t entry) { return flat().entries()[entry].name; },
      [this](size_t bucket) { LaunchBucket(bucket, /*from_backward=*/false); });
  absl::Status waited = WaitForBuckets();
  if (status.ok()) status = waited;
  if (status.ok() && cast_for_reduce_ && !stage2()) {
    at::NoGradGuard no_grad;
    for (size_t k = 0; k < buckets_.size(); ++k) {
      accumulated_views_[k].copy_(grad_views_[k]);
    }
  }
  ResetStep();
  return status;
}

absl::Status ZeroStrategy::GatherParameters() {
  at::NoGradGuard no_grad;
  const int64_t world = group_->size();
  std::vector<at::Tensor> outputs;
  std::vector<std::unique_ptr<comm::Work>> works;
  for (const Bucket& b : buckets_) {
    const int64_t n = b.numel / world;
    at::Tensor staged = staging_.narrow(0, b.buffer_offset, n);
    staged.copy_(mixed() ? master_params().narrow(0, b.buffer_offset, n)
                         : flat().params().narrow(0, b.shard_offset, n));
    outputs.push_back(flat().params().narrow(0, b.offset, b.numel));
    works.push_back(group_->AllGatherAsync(staged, outputs.back()));
  }
  absl::Status status;
  for (size_t k = 0; k < works.size(); ++k) {
    absl::Status wait = works[k]->Wait();
    if (!wait.ok() && status.ok()) {
      status = Annotate(wait, absl::StrCat(name(),
                                           ": all-gather of parameter "
                                           "bucket ",
                                           k, " of ", buckets_.size(),
                                           " on rank ", group_->rank()));
    }
  }
  return status;
}

absl::StatusOr<StepResult> ZeroStrategy::DoStep(int64_t step) {
  STRATA_RETURN_IF_ERROR(FinishGradients());
  StepResult result;
  result.lr = schedule_->LrAt(step);
  // ZeRO-2's shards are disjoint: an inf may be on one rank only. ZeRO-1's
  // all-reduced gradients are equal on every rank; agreeing anyway costs one
  // 4-byte all-reduce.
  STRATA_ASSIGN_OR_RETURN(
      const bool skip,
      UnscaleGradients(stage2() ? grad_shard_ : accumulated_grads(), group_));
  if (skip) return result;
  // ZeRO-2 holds disjoint gradient shards; ZeRO-1's gradients are replicated
  // after the all-reduce, so the local norm is the global one.
  STRATA_ASSIGN_OR_RETURN(
      result.grad_norm,
      stage2() ? ClipGradients(grad_shard_, config_, group_, name())
               : ClipGradients(accumulated_grads(), config_, nullptr, name()));
  for (optim::Optimizer* optimizer : optimizers_) optimizer->Step(result.lr);
  STRATA_RETURN_IF_ERROR(GatherParameters());
  return result;
}

MemoryReport ZeroStrategy::Memory() const {
  MemoryReport report;
  report.parameter_bytes = flat().params().nbytes();
  if (mixed()) report.parameter_bytes += master_params().nbytes();
  report.communication_bytes = staging_.nbytes();
  if (reduce_shard_.defined())
    report.communication_bytes += reduce_shard_.nbytes();
  if (stage2()) {
    // Counted from what is allocated now: between steps only the fp32
    // gradient shard; during a step also the bucket storage held.
    report.gradient_bytes = grad_shard_.nbytes();
    for (const ReleasableBuffer& b : bucket_grads_) {
      report.gradient_bytes += b.held_bytes();
    }
    for (const ReleasableBuffer& b : bucket_reduce_) {
      report.communication_bytes += b.held_bytes();
    }
    for (const ReleasableBuffer& b : bucket_incoming_) {
      report.communication_bytes += b.held_bytes();
    }
    report.transient_gradient_bytes = peak_bucket_bytes_;
  } else {
    report.gradient_bytes = flat().grads().nbytes();
    if (mixed()) report.gradient_bytes += accumulated_grads().nbytes();
    if (reduce_buffer_.defined()) {
      report.communication_bytes += reduce_buffer_.nbytes();
    }
  }
  for (optim::Optimizer* optimizer : optimizers_) {
    for (const auto& [key, tensor] : optimizer->State()) {
      report.optimizer_bytes += tensor.nbytes();
    }
  }
  return report;
}

std::vector<ShardedTensor> ZeroStrategy::ModelState() const {
  if (!mixed()) return SingleStrategy::ModelState();
  // The fp32 masters: this rank's runs of each bucket, as OptimizerState().
  std::vector<ShardedTensor> out;
  const int64_t world = group_->size();
  for (const Bucket& b : buckets_) {
    const int64_t begin = b.shard_offset, end = begin + b.numel / world;
    for (size_t i : b.entries) {
      const optim::FlatParameters::Entry& e = flat().entries()[i];
      const int64_t lo = std::max(begin, e.offset);
      const int64_t hi = std::min(end, e.offset + e.numel);
      if (lo >= hi) continue;
      out.push_back(
          {e.name, e.shape, lo - e.offset,
           master_params().narrow(0, b.buffer_offset + lo - begin, hi - lo)});
    }
  }
  return out;
}

absl::StatusOr<std::vector<std::pair<std::string, at::Tensor>>>
ZeroStrategy::FullModelState() {
  if (!mixed()) return Strategy::FullModelState();
  at::NoGradGuard no_grad;
  const int64_t world = group_->size();
  at::Tensor full = at::empty({flat().padded_numel()},
                              master_params().options().dtype(at::kFloat));
  std::vector<at::Tensor> outputs;
  std::vector<std::unique_ptr<comm::Work>> works;
  for (const Bucket& b : buckets_) {
    outputs.push_back(full.narrow(0, b.offset, b.numel));
    works.push_back(group_->AllGatherAsync(
        master_params().narrow(0, b.buffer_offset, b.numel / world),
        outputs.back()));
  }
  absl::Status status;
  for (size_t k = 0; k < works.size(); ++k) {
    absl::Status wait = works[k]->Wait();
    if (!wait.ok() && status.ok()) {
      status = Annotate(wait, absl::StrCat(name(),
                                           ": all-gather of fp32 master "
                                           "bucket ",
                                           k, " of ", buckets_.size(),
                                           " on rank ", group_->rank()));
    }
  }
  STRATA_RETURN_IF_ERROR(status);
  std::map<std::string, at::Tensor> values;
  for (const optim::FlatParameters::Entry& e : flat().entries()) {
    values[e.name] = full.narrow(0, e.offset, e.numel).view(e.shape).clone();
  }
  std::vector<std::pair<std::string, at::Tensor>> out;
  for (const auto& item : model().named_parameters()) {
    out.emplace_back(item.key(), values.at(item.key()));
  }
  return out;
}

absl::Status ZeroStrategy::AfterStateLoaded() {
  // All bucket optimizers step together; OptimizerState() exports bucket
  // 0's counter, so a load gives it to every bucket (Adam's bias correction
  // and SGD's first momentum step depend on it).
  at::Tensor step;
  for (const auto& [key, tensor] : optimizers_.front()->State()) {
    if (key == "step") step = tensor;
  }
  for (size_t k = 1; k < optimizers_.size(); ++k) {
    for (auto& [key, tensor] : optimizers_[k]->State()) {
      if (key == "step") tensor.copy_(step);
    }
  }
  // fp32: every rank holds (and was given) the full parameters.
  if (!mixed()) return absl::OkStatus();
  return GatherParameters();
}

std::vector<ShardedTensor> ZeroStrategy::OptimizerState() const {
  std::vector<ShardedTensor> out;
  const int64_t world = group_->size();
  for (size_t k = 0; k < buckets_.size(); ++k) {
    const Bucket& b = buckets_[k];
    const int64_t begin = b.shard_offset, end = begin + b.numel / world;
    optim::NamedTensors state = optimizers_[k]->State();
    for (size_t i : b.entries) {
      const optim::FlatParameters::Entry& e = flat().entries()[i];
      const int64_t lo = std::max(begin, e.offset);
      const int64_t hi = std::min(end, e.offset + e.numel);
      if (lo >= hi) continue;
      for (const auto& [key, tensor] : state) {
        if (key == "step") continue;
        out.push_back({absl::StrCat(e.name, ".", key), e.shape, lo - e.offset,
                       tensor.narrow(0, lo - begin, hi - lo)});
      }
    }
  }
  for (const auto& [key, tensor] : optimizers_.front()->State()) {
    if (key == "step") out.push_back({"step", {}, 0, tensor});
  }
  return out;
}

}  // namespace strata::strategies
