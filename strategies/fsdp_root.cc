#include "strategies/fsdp_root.h"

#include <set>

namespace strata::strategies {

std::vector<bool> UnitsReadingRoot(const FsdpPlan& plan,
                                   const std::vector<PlanUnit>& units,
                                   const SharedReaders& shared) {
  std::vector<bool> reads(units.size(), false);
  if (!plan.has_root()) return reads;
  std::set<std::string> in_root;
  for (const FlatUnitPlan::Entry& e : plan.units.front().entries) {
    in_root.insert(e.name);
  }
  std::set<std::string> readers;
  for (const auto& [name, names] : shared) {
    if (in_root.count(name) == 0) continue;
    readers.insert(names.begin(), names.end());
  }
  for (size_t u = 0; u < units.size(); ++u) {
    bool reads_root = readers.count(units[u].name) > 0;
    for (const std::string& name : units[u].parameters) {
      reads_root = reads_root || in_root.count(name) > 0;
    }
    reads[u] = reads_root;
  }
  return reads;
}

}  // namespace strata::strategies
