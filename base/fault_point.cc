#include "base/fault_point.h"

#include <atomic>
#include <cstdint>

namespace strata {
namespace {

struct SiteName {
  FaultSite site;
  absl::string_view name;
};

constexpr SiteName kSiteNames[] = {
    {FaultSite::kForward, "forward"},       {FaultSite::kBackward, "backward"},
    {FaultSite::kCollective, "collective"}, {FaultSite::kSave, "save"},
    {FaultSite::kAsyncSave, "async_save"},  {FaultSite::kStepEnd, "step_end"},
};

std::atomic<FaultInjector*> g_injector{nullptr};
std::atomic<int64_t> g_step{-1};

}  // namespace

absl::string_view FaultSiteName(FaultSite site) {
  for (const SiteName& s : kSiteNames) {
    if (s.site == site) return s.name;
  }
  return "unknown";
}

bool ParseFaultSite(absl::string_view name, FaultSite* site) {
  for (const SiteName& s : kSiteNames) {
    if (s.name == name) {
      *site = s.site;
      return true;
    }
  }
  return false;
}

void SetFaultInjector(FaultInjector* injector) { g_injector.store(injector); }

void SetFaultStep(int64_t step) { g_step.store(step); }

void ReachFaultPoint(FaultSite site) { ReachFaultPoint(site, g_step.load()); }

void ReachFaultPoint(FaultSite site, int64_t step) {
  FaultInjector* injector = g_injector.load();
  if (injector != nullptr) injector->Reach(site, step);
}

}  // namespace strata
