// One flat parameter of FsdpStrategy (fsdp.h) at run time: its plan
// (fsdp_plan.h), the model's parameters, which become views of its full
// buffer, and the memory of its full parameters and full gradients, released
// and re-allocated in place (ReleasableBuffer, mixed_precision.h) as the unit
// is gathered and freed. Gathering, reducing and their scheduling are
// FsdpStrategy's; this holds the unit's tensors and what it does alone.
//
// Threading: none; the training thread (and autograd hooks on it).
#ifndef STRATA_STRATEGIES_FSDP_UNIT_H_
#define STRATA_STRATEGIES_FSDP_UNIT_H_

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/sharded_tensor.h"
#include "comm/group.h"
#include "strategies/fsdp_plan.h"
#include "strategies/mixed_precision.h"
#include "strategies/unit_buffer_pool.h"

namespace strata::strategies {

struct FlatUnit : FlatUnitPlan {
  // params[i]: the model's parameter of plan.entries[i] (shared).
  FlatUnit(FlatUnitPlan plan, std::vector<at::Tensor> params);

  // Makes the model's parameters views of `full` and their .grad views of
  // `full_grad`, then releases full_grad's memory until AllocateGrads.
  // `master` / `grad_shard`: this unit's fp32 master and gradient shards.
  // With `alias_master` (no sharding, fp32, one device) `full` is `master`;
  // with `alias_grad_shard` too, `full_grad` is `grad_shard` (neither is ever
  // released). Otherwise `full` is a new [padded_numel] buffer of `dtype` on
  // `device` (its memory allocated, not filled) and `full_grad` its like,
  // their memory released into and taken from `pool` (borrowed, outlives
  // this unit; null: freed and allocated each time), except the root's: it
  // is released for long stretches (every block's forward or backward), and
  // pooled it would sit beside their peak. Call once, at creation.
  void CreateViews(const at::Tensor& master, const at::Tensor& grad_shard,
                   bool alias_master, bool alias_grad_shard,
                   at::ScalarType dtype, at::Device device,
                   UnitBufferPool* pool = nullptr);

  // Whether the full parameters' memory is allocated (always false when
  // `full` aliases the master).
  bool full_allocated() const { return full_storage.allocated(); }
  // Frees the full parameters' memory (no-op when aliasing the master);
  // the unit is no longer gathered.
  void ReleaseFull();
  // Gives the full gradients zeroed memory, if released.
  void AllocateGrads();
  // Frees the full gradients' memory (not when aliasing the gradient shard)
  // and drops the fp32 accumulator.
  void ReleaseGrads();
  // Adds the full gradients into the fp32 accumulator (created at the first
  // call) and zeroes them: gradient accumulation in fp32 across
  // micro-batches when the model computes below fp32.
  void AccumulateGradsInFp32();
  // Bytes of the full parameters / full gradients and the accumulator held
  // now (0 for what aliases the shards).
  int64_t held_parameter_bytes() const { return full_storage.held_bytes(); }
  int64_t held_gradient_bytes() const;
  // Bytes of the all-gather's input cast below fp32 (a copy of the master
  // shard) while the gather runs.
  int64_t held_staging_bytes() const;

  // Calls fn(entry, offset in the parameter, run) for each run of this unit's
  // parameters inside shard `shard_rank`, `run` being the matching narrow of
  // `flat` (a tensor laid out as the master buffer).
  template <typename Fn>
  void ForEachRun(int shard_rank, const at::Tensor& flat, const Fn& fn) const {
    const int64_t begin_of_shard = shard_begin(shard_rank);
    const int64_t end_of_shard = begin_of_shard + shard_numel;
    for (const Entry& e : entries) {
      const int64_t begin = std::max(e.offset, begin_of_shard);
      const int64_t end = std::min(e.offset + e.numel, end_of_shard);
      if (begin >= end) continue;
      fn(e, begin - e.offset,
         flat.narrow(0, master_offset + begin - begin_of_shard, end - begin));
    }
  }

  std::vector<at::Tensor> params;  // Per entry: the model's parameter.
  at::Tensor full;                 // [padded_numel], param dtype.
  at::Tensor full_grad;            // [padded_numel], param dtype.
  at::Tensor grad_accum;           // fp32 [padded_numel] (mixed precision).
  bool full_aliases_master = false;
  bool grad_aliases_shard = false;
  // The memory of `full` / `full_grad`; undefined when they alias the shards.
  ReleasableBuffer full_storage;
  ReleasableBuffer grad_storage;

  bool gathered = false;
  std::unique_ptr<comm::Work> gather_work;
  at::Tensor gather_input;  // Kept alive while gather_work runs.
  bool grads_allocated = false;
  // This step's gradient shard already holds a reduced gradient (later
  // reductions of the step add to it).
  bool shard_written = false;
};

// Appends to `out`, for each run of `unit`'s parameters inside shard
// `shard_rank` (FlatUnit::ForEachRun), the run of `flat` (laid out as the
// master buffer) named after its parameter, plus "." + `suffix` when
// `suffix` is not empty ("exp_avg": optimizer state).
void AppendShardRuns(const FlatUnit& unit, int shard_rank,
                     const at::Tensor& flat, const std::string& suffix,
                     std::vector<ShardedTensor>* out);

}  // namespace strata::strategies

#endif  // STRATA_STRATEGIES_FSDP_UNIT_H_
