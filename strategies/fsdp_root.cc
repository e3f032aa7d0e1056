#include "strategies/fsdp_root.h"

#include <set>

namespace strata::strategies {

RootReaders FindRootReaders(const FsdpPlan& plan,
                            const std::vector<PlanUnit>& units,
                            const SharedReaders& shared) {
  RootReaders out;
  out.reads.assign(units.size(), false);
  if (!plan.has_root()) return out;
  std::set<std::string> in_root;
  for (const FlatUnitPlan::Entry& e : plan.units.front().entries) {
    in_root.insert(e.name);
  }
  std::set<std::string> readers;  // Units.
  std::set<std::string> read;     // Root parameters.
  for (const auto& [name, names] : shared) {
    if (in_root.count(name) == 0 || names.empty()) continue;
    readers.insert(names.begin(), names.end());
    read.insert(name);
  }
  for (size_t u = 0; u < units.size(); ++u) {
    bool reads_root = readers.count(units[u].name) > 0;
    for (const std::string& name : units[u].parameters) {
      if (in_root.count(name) == 0) continue;
      reads_root = true;
      read.insert(name);
    }
    out.reads[u] = reads_root;
  }
  for (const FlatUnitPlan::Entry& e : plan.units.front().entries) {
    if (read.count(e.name) == 0) out.outside_units.push_back(e.name);
  }
  return out;
}

}  // namespace strata::strategies
