// What FsdpStrategy (fsdp.h) does once, at creation, besides planning
// (fsdp_plan.h): describing the model to the planner, checking that every
// rank planned the same flat parameters, filling each rank's fp32 master
// shards with the initial values (rank 0's, or materialised for a deferred
// model), and giving every rank rank 0's buffers.
//
// Collectives are marked; call them on every rank of the group, in the same
// order, from the training thread.
#ifndef STRATA_STRATEGIES_FSDP_INIT_H_
#define STRATA_STRATEGIES_FSDP_INIT_H_

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "comm/group.h"
#include "models/unit.h"
#include "strategies/fsdp_plan.h"

namespace strata::strategies {

// The planner's view of `model` (parameters in registration order, units,
// shared parameters) with the `wrapped` units (SelectWrappedUnits) over shard
// groups of `shard_size` ranks.
PlanInput PlanInputOf(const models::UnitModel& model, std::vector<int> wrapped,
                      int shard_size);

// Checks that every rank of `group` planned the same flat parameters (names,
// padded sizes, entries and their offsets), with replicas.h's
// CheckSameOnAllRanks: a mismatch is an error on every rank, never a Gloo
// abort. A collective.
absl::Status CheckSamePlanOnAllRanks(comm::Group& group, const FsdpPlan& plan);

// Where the initial values of a flat parameter come from.
struct ShardSource {
  // The model (borrowed): its InitialParameter for parameters on the meta
  // device (deferred initialisation).
  const models::UnitModel* model = nullptr;
  uint64_t init_seed = 0;
  // FsdpOptions::param_init_fn (borrowed; may be null or empty): used
  // instead of the model's InitialParameter when set.
  const std::function<absl::StatusOr<at::Tensor>(
      const std::string&, const std::vector<int64_t>&)>* param_init_fn =
      nullptr;
  // Materialise every meta parameter from InitialParameter, this rank's part
  // only; otherwise take rank 0's values (a broadcast over `world`).
  bool deferred = false;
  comm::Group* world = nullptr;  // Borrowed; null: a world of one.
  // Where rank 0's values are staged (the compute device).
  at::Device staging_device = at::Device(at::kCPU);
};

// Fills `master` (this rank's fp32 shard of `unit`: shard_numel elements,
// shard `shard_rank`) with its initial values. `params[i]` is the model's
// parameter of unit.entries[i]. Deferred: peak memory is the shard plus one
// parameter's full value. Otherwise a collective over source.world (a
// broadcast of the padded flat parameter from rank 0).
absl::Status FillMasterShard(const FlatUnitPlan& unit,
                             const std::vector<at::Tensor>& params,
                             int shard_rank, const ShardSource& source,
                             const at::Tensor& master);

// Converts `model`'s floating-point buffers to `dtype` and gives every rank
// rank 0's values (a collective over `world` when it has several ranks;
// null: none).
absl::Status CastAndBroadcastBuffers(models::UnitModel& model,
                                     at::ScalarType dtype, comm::Group* world);

}  // namespace strata::strategies

#endif  // STRATA_STRATEGIES_FSDP_INIT_H_
