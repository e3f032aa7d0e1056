#include "strategies/wrap_policy.h"

#include <set>
#include <unordered_map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace strata::strategies {

std::vector<int64_t> UnitsNumParameters(const models::UnitModel& model) {
  std::unordered_map<std::string, int64_t> sizes;
  for (const auto& item : model.named_parameters()) {
    sizes[item.key()] = item.value().numel();
  }
  std::vector<int64_t> counts;
  counts.reserve(model.units().size());
  for (const models::UnitInfo& unit : model.units()) {
    int64_t total = 0;
    for (const std::string& name : unit.parameters) total += sizes.at(name);
    counts.push_back(total);
  }
  return counts;
}

absl::StatusOr<std::vector<int>> SelectWrappedUnits(
    const models::UnitModel& model, const WrapPolicy& policy) {
  if (policy.min_num_params < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--fsdp_wrap_min_params must be >= 0, got ", policy.min_num_params));
  }
  std::set<std::string> model_types;
  for (const models::UnitInfo& unit : model.units()) {
    model_types.insert(unit.type);
  }
  for (const std::string& type : policy.unit_types) {
    if (model_types.count(type) == 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--fsdp_wrap_unit_types: the model has no unit of type '", type,
          "'; its unit types are: ", absl::StrJoin(model_types, ", ")));
    }
  }
  const bool any_criterion = !policy.unit_types.empty() ||
                             policy.min_num_params > 0 ||
                             policy.predicate != nullptr;
  const std::set<std::string> types(policy.unit_types.begin(),
                                    policy.unit_types.end());
  const std::vector<int64_t> counts = UnitsNumParameters(model);
  std::vector<int> wrapped;
  for (size_t i = 0; i < model.units().size(); ++i) {
    const models::UnitInfo& unit = model.units()[i];
    const int64_t numel = counts[i];
    bool wrap = !any_criterion;
    if (types.count(unit.type) > 0) wrap = true;
    if (policy.min_num_params > 0 && numel >= policy.min_num_params) {
      wrap = true;
    }
    if (policy.predicate != nullptr && policy.predicate(unit)) wrap = true;
    if (wrap) wrapped.push_back(static_cast<int>(i));
  }
  return wrapped;
}

}  // namespace strata::strategies
