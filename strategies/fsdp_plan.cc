#include "strategies/fsdp_plan.h"

#include <glog/logging.h>

#include <map>
#include <utility>

#include "absl/strings/str_cat.h"

namespace strata::strategies {
namespace {

// Appends parameter `p` to `unit` (after its last entry).
void AddEntry(FlatUnitPlan& unit, const PlanParameter& p) {
  FlatUnitPlan::Entry e;
  e.name = p.name;
  e.shape = p.shape;
  e.numel = 1;
  for (int64_t d : p.shape) e.numel *= d;
  e.offset = unit.numel;
  e.requires_grad = p.requires_grad;
  unit.numel += e.numel;
  unit.has_frozen = unit.has_frozen || !e.requires_grad;
  unit.any_requires_grad = unit.any_requires_grad || e.requires_grad;
  unit.entries.push_back(std::move(e));
}

}  // namespace

int ShardGroupSize(const FsdpOptions& options, int world_size) {
  switch (options.sharding) {
    case ShardingStrategy::kFullShard:
    case ShardingStrategy::kShardGradOp:
      return world_size;
    case ShardingStrategy::kNoShard:
      return 1;
    case ShardingStrategy::kHybridShard:
    case ShardingStrategy::kHybridShardZero2:
      return options.hybrid_shard_group_size;
  }
  LOG(FATAL) << "unknown ShardingStrategy "
             << static_cast<int>(options.sharding);
  return 1;
}

absl::StatusOr<FsdpPlan> PlanFlatUnits(const PlanInput& input) {
  CHECK_GE(input.shard_size, 1);
  std::map<std::string, const PlanParameter*> by_name;
  for (const PlanParameter& p : input.parameters) by_name[p.name] = &p;
  FsdpPlan plan;
  plan.shard_size = input.shard_size;
  plan.flat_of_model_unit.assign(input.units.size(), -1);
  std::set<std::string> in_wrapped;
  std::vector<FlatUnitPlan> wrapped;
  for (int index : input.wrapped) {
    CHECK(index >= 0 && index < static_cast<int>(input.units.size())) << index;
    const PlanUnit& info = input.units[index];
    FlatUnitPlan unit;
    unit.name = info.name;
    unit.model_unit = index;
    unit.position = static_cast<int>(wrapped.size());
    for (const std::string& name : info.parameters) {
      if (input.shared.count(name) > 0) {
        plan.moved_to_root.push_back(name);
        continue;
      }
      auto it = by_name.find(name);
      if (it == by_name.end()) {
        return absl::InvalidArgumentError(
            absl::StrCat("fsdp: unit '", info.name, "' lists parameter '", name,
                         "', which the model does not have"));
      }
      AddEntry(unit, *it->second);
      in_wrapped.insert(name);
    }
    if (unit.entries.empty()) continue;  // Only shared parameters.
    plan.flat_of_model_unit[index] = static_cast<int>(wrapped.size());
    wrapped.push_back(std::move(unit));
  }
  if (wrapped.empty() && !input.wrapped.empty()) {
    return absl::InvalidArgumentError(
        "fsdp: every parameter of the wrapped units is shared with another "
        "unit (tied weights), so nothing would be sharded; wrap other units "
        "(--fsdp_wrap_unit_types)");
  }
  FlatUnitPlan root;
  root.name = "root";
  root.root = true;
  for (const PlanParameter& p : input.parameters) {
    if (in_wrapped.count(p.name) == 0) AddEntry(root, p);
  }
  if (!root.entries.empty()) plan.units.push_back(std::move(root));
  for (FlatUnitPlan& unit : wrapped) plan.units.push_back(std::move(unit));

  const int64_t s = input.shard_size;
  for (FlatUnitPlan& unit : plan.units) {
    unit.padded_numel = (unit.numel + s - 1) / s * s;
    unit.shard_numel = unit.padded_numel / s;
    unit.master_offset = plan.master_numel;
    plan.master_numel += unit.shard_numel;
  }
  return plan;
}

std::vector<optim::ParamRange> UnitDecayRanges(const FlatUnitPlan& unit,
                                               double weight_decay) {
  std::vector<optim::RangeParameter> params;
  for (const FlatUnitPlan::Entry& e : unit.entries) {
    params.push_back({e.offset, e.numel, static_cast<int64_t>(e.shape.size()),
                      e.requires_grad});
  }
  return optim::DecayRanges(params, weight_decay);
}

}  // namespace strata::strategies
