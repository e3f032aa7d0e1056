// The flat-unit plan of FsdpStrategy (fsdp.h): which parameters go in which
// flat parameter, how each is padded and sharded, and where each rank's shard
// sits in its fp32 master buffer. Pure logic: no tensors are communicated and
// no ranks are needed, so every rank computes the same plan from the same
// model and options.
//
// Rules (PyTorch FSDP's, flat sharding):
//   - Each wrapped unit (chosen by the wrap policy, wrap_policy.h) becomes one
//     flat parameter holding its parameters in the unit's order, except
//     parameters shared between units (tied weights, e.g. GPT's embedding and
//     head), which go to the root. A wrapped unit left with no parameter gets
//     no flat parameter.
//   - The root flat parameter holds every parameter no wrapped unit holds, in
//     the model's registration order; it exists only when it holds one.
//   - Flat parameters are ordered root first, then the wrapped units in
//     forward order.
//   - Each flat parameter is zero-padded to a multiple of the shard group
//     size S; rank r of the shard group owns elements
//     [r * padded / S, (r + 1) * padded / S). A parameter may straddle shard
//     boundaries.
//   - Every rank's master buffer concatenates its shards of the flat
//     parameters in that order (master_offset).
#ifndef STRATA_STRATEGIES_FSDP_PLAN_H_
#define STRATA_STRATEGIES_FSDP_PLAN_H_

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "optim/optimizer.h"
#include "strategies/options.h"

namespace strata::strategies {

// A parameter of the model as the planner sees it.
struct PlanParameter {
  std::string name;
  std::vector<int64_t> shape;
  bool requires_grad = true;
};

// A unit of the model (models::UnitInfo) as the planner sees it.
struct PlanUnit {
  std::string name;
  // Full parameter names, in the unit's order.
  std::vector<std::string> parameters;
};

// What the planner is given.
struct PlanInput {
  // Every parameter, in the model's registration order.
  std::vector<PlanParameter> parameters;
  // The model's units, in forward order (index = UnitInfo::index).
  std::vector<PlanUnit> units;
  // Indices into `units` of the wrapped units, increasing
  // (SelectWrappedUnits).
  std::vector<int> wrapped;
  // Parameters read by several units (UnitModel::SharedParameters).
  std::set<std::string> shared;
  // Ranks of a shard group (ShardGroupSize), >= 1.
  int shard_size = 1;
};

// One flat parameter.
struct FlatUnitPlan {
  struct Entry {
    std::string name;
    std::vector<int64_t> shape;
    int64_t offset = 0;  // Elements, in the flat parameter.
    int64_t numel = 0;
    bool requires_grad = false;
  };
  std::string name;  // The unit's name, or "root".
  bool root = false;
  int model_unit = -1;  // Index into PlanInput::units; -1 for the root.
  int position = -1;    // Among the wrapped units; -1 for the root.
  std::vector<Entry> entries;
  int64_t numel = 0;         // Sum of the entries' numel.
  int64_t padded_numel = 0;  // numel rounded up to a multiple of shard_size.
  int64_t shard_numel = 0;   // padded_numel / shard_size.
  // Where every rank's shard of this flat parameter starts in its master
  // buffer (the same on every rank).
  int64_t master_offset = 0;
  bool has_frozen = false;         // Some entry has requires_grad false.
  bool any_requires_grad = false;  // Some entry has requires_grad true.

  // The first element of shard `shard_rank`, in the flat parameter.
  int64_t shard_begin(int shard_rank) const { return shard_rank * shard_numel; }
};

struct FsdpPlan {
  int shard_size = 1;
  // The root (when it holds a parameter) first, then the wrapped units in
  // forward order.
  std::vector<FlatUnitPlan> units;
  // Per model unit: its position among the wrapped flat parameters (units
  // after the root), or -1 (its parameters are the root's).
  std::vector<int> flat_of_model_unit;
  // Parameters of wrapped units that went to the root because they are
  // shared, in the order met.
  std::vector<std::string> moved_to_root;
  // Sum of the units' shard_numel: one rank's master buffer.
  int64_t master_numel = 0;

  bool has_root() const { return !units.empty() && units.front().root; }
};

// Ranks per shard group: the world for kFullShard / kShardGradOp, 1 for
// kNoShard, hybrid_shard_group_size for the hybrid strategies (which
// ValidateFsdpOptions checked divides the world).
int ShardGroupSize(const FsdpOptions& options, int world_size);

// The plan of `input`. InvalidArgument when every parameter of the wrapped
// units is shared (nothing would be sharded), or when a unit names a
// parameter `input.parameters` lacks.
absl::StatusOr<FsdpPlan> PlanFlatUnits(const PlanInput& input);

// The optimizer ranges of one flat parameter (optim::DecayRanges: matrices
// decay by `weight_decay`, frozen parameters never move).
std::vector<optim::ParamRange> UnitDecayRanges(const FlatUnitPlan& unit,
                                               double weight_decay);

}  // namespace strata::strategies

#endif  // STRATA_STRATEGIES_FSDP_PLAN_H_
