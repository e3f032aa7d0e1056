// The trainer's test faults, all through base/fault_point.h's one installed
// FaultInjector (hidden flags; no user needs them):
//
//   --test_kill_at=PHASE:STEP[:NTH][,PHASE:STEP[:NTH]...]
//   --test_kill_rank=R[,R...]   (one rank for every entry, or one per entry)
//       A schedule of moments at which one rank SIGKILLs itself, one per
//       restart round, so that a single `train --max_restarts` run is killed
//       R times at reproducible moments. Entry k applies in restart round k
//       (TORCHELASTIC_RESTART_COUNT = k): rank R_k dies at the NTH (default 1)
//       time it reaches PHASE during training step STEP (0-based). PHASE is
//       forward, backward, collective (inside a forward, a backward, a
//       collective), save, async_save (a synchronous or background
//       checkpoint save: STEP is the step whose checkpoint is being saved, the
//       kill comes after the rank's data is written, before the commit) or
//       step_end (after step STEP and the return of its checkpoint save; a
//       background save may still be in flight). For save, async_save and
//       step_end NTH must be 1. Collectives count on every group, the
//       background saver's (--async_save) too, so with async saves which
//       collective is the NTH may depend on timing; that it is inside a
//       collective does not.
//   --ckpt_test_pause_ms=MS
//       Every rank sleeps MS at every save and async_save point (its data
//       written, the commit not yet made), so a test can kill a rank, or
//       the whole job, while a checkpoint is half written.
#ifndef STRATA_LAUNCH_TRAIN_TEST_FAULTS_H_
#define STRATA_LAUNCH_TRAIN_TEST_FAULTS_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "base/fault_point.h"
#include "checkpoint/format.h"
#include "models/unit.h"

namespace strata::launch {

struct KillPoint {
  FaultSite site = FaultSite::kForward;
  int64_t step = 0;
  int nth = 1;
  int rank = 0;
};

// Parses the two flags' values; errors name --test_kill_at or
// --test_kill_rank and the entry. Empty `at`: no entries.
absl::StatusOr<std::vector<KillPoint>> ParseKillSchedule(
    absl::string_view at, absl::string_view ranks);

struct TestFaultOptions {
  std::string at;             // --test_kill_at.
  std::string ranks;          // --test_kill_rank.
  int64_t save_pause_ms = 0;  // --ckpt_test_pause_ms; 0: none.
  int restart_round = 0;
  int rank = 0;
  int world_size = 1;
  // The run's checkpointing, to check that a save entry names a save that
  // happens: --save_every, --async_save, --ckpt_format.
  int64_t save_every = 0;
  bool async_save = false;
  checkpoint::Format ckpt_format = checkpoint::Format::kSharded;
};

// The FaultInjector of a rank's test faults, installed process-wide while it
// lives: sleeps `save_pause_ms` at every save and async_save point, then (when
// given) SIGKILLs this process at `kill`. Reach may be called from any thread.
class TestFaultInjector final : public FaultInjector {
 public:
  TestFaultInjector(std::optional<KillPoint> kill, int64_t save_pause_ms,
                    int rank);
  ~TestFaultInjector() override;
  TestFaultInjector(const TestFaultInjector&) = delete;
  TestFaultInjector& operator=(const TestFaultInjector&) = delete;

  void Reach(FaultSite site, int64_t step) override;

 private:
  const std::optional<KillPoint> kill_;
  const int64_t save_pause_ms_;
  const int rank_;
  std::atomic<int> reached_{0};  // Reaches of kill_'s site in its step.
};

// Reaches the forward point before each unit's forward and the backward
// point when the gradient of the unit's output is computed.
class FaultPointInterceptor final : public models::UnitInterceptor {
 public:
  at::Tensor Run(const models::UnitInfo& unit, const at::Tensor& input,
                 const models::UnitForward& forward) override;
};

// Checks the options against the run (errors name the flags). Returns this
// rank's injector: the kill of this rank's entry for this restart round (for
// forward and backward entries after adding a FaultPointInterceptor to
// `model`; call after the strategy added its own, so that the point is inside
// them) and the save pause; null when neither applies here.
absl::StatusOr<std::unique_ptr<TestFaultInjector>> InstallTestFaults(
    const TestFaultOptions& options, models::UnitModel& model);

}  // namespace strata::launch

#endif  // STRATA_LAUNCH_TRAIN_TEST_FAULTS_H_
