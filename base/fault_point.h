// Process-wide fault-injection points for tests: chaos and restart tests make
// a rank die at a chosen moment (inside a forward, a backward, a collective, a
// checkpoint save, the end of a step) or stall there (a save held open before
// its commit). Libraries mark the moments with ReachFaultPoint; a binary
// (launch's trainer, from its hidden test flags, launch/train/test_faults.h)
// installs the one FaultInjector that decides what happens there. With no
// injector installed a point costs one atomic load.
#ifndef STRATA_BASE_FAULT_POINT_H_
#define STRATA_BASE_FAULT_POINT_H_

#include <cstdint>

#include "absl/strings/string_view.h"

namespace strata {

enum class FaultSite {
  kForward,     // A model unit's forward (launch's interceptor).
  kBackward,    // The backward through a unit's output (a gradient hook).
  kCollective,  // Entering a collective of a comm::Group.
  kSave,        // A synchronous checkpoint save, before its commit.
  kAsyncSave,   // A background checkpoint save, before its commit.
  kStepEnd,     // The end of a training step, after its checkpoint save
                // returned (a background save may still be in flight).
};

// "forward", "backward", "collective", "save", "async_save", "step_end".
absl::string_view FaultSiteName(FaultSite site);
// The site named `name` (as FaultSiteName); false if none is.
bool ParseFaultSite(absl::string_view name, FaultSite* site);

class FaultInjector {
 public:
  virtual ~FaultInjector() = default;
  // Called at every point reached while installed, from any thread;
  // `step` is the training step the point belongs to (-1: unknown).
  virtual void Reach(FaultSite site, int64_t step) = 0;
};

// Installs `injector` (borrowed; it must stay alive until replaced or
// uninstalled with null) for the whole process.
void SetFaultInjector(FaultInjector* injector);

// The training step now (the trainer sets it at the start of each step);
// points reached without an explicit step belong to it. Starts at -1.
void SetFaultStep(int64_t step);

// A fault point of the current step (SetFaultStep).
void ReachFaultPoint(FaultSite site);
// A fault point belonging to `step` (a save of that step finishing later, in
// the background).
void ReachFaultPoint(FaultSite site, int64_t step);

}  // namespace strata

#endif  // STRATA_BASE_FAULT_POINT_H_
