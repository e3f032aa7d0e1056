// The trainer's chaos hook (hidden flags --test_kill_at, --test_kill_rank): a
// schedule of moments at which one rank SIGKILLs itself, one per restart
// round, so that a single `train --max_restarts` run is killed R times at
// reproducible moments — inside a forward, a backward, a collective, a
// synchronous or an asynchronous checkpoint save (base/fault_point.h).
//
//   --test_kill_at=PHASE:STEP[:NTH][,PHASE:STEP[:NTH]...]
//   --test_kill_rank=R[,R...]   (one rank for every entry, or one per entry)
//
// Entry k applies in restart round k (TORCHELASTIC_RESTART_COUNT = k): rank
// R_k dies at the NTH (default 1) time it reaches PHASE during training step
// STEP (0-based). For save and async_save, STEP is the step whose checkpoint
// is being saved (its save follows that step) and NTH must be 1; the kill
// comes after the rank's data is written, before the commit. Collectives
// count on every group, the background saver's (--async_save) too, so with
// async saves which collective is the NTH may depend on timing; that it
// is inside a collective does not.
#ifndef STRATA_LAUNCH_TRAIN_TEST_FAULTS_H_
#define STRATA_LAUNCH_TRAIN_TEST_FAULTS_H_

#include <atomic>
#include <cstdint>
#include <memory>
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

struct KillScheduleOptions {
  std::string at;     // --test_kill_at.
  std::string ranks;  // --test_kill_rank.
  int restart_round = 0;
  int rank = 0;
  int world_size = 1;
  // The run's checkpointing, to check that a save entry names a save that
  // happens: --save_every, --async_save, --ckpt_format.
  int64_t save_every = 0;
  bool async_save = false;
  checkpoint::Format ckpt_format = checkpoint::Format::kSharded;
};

// A FaultInjector that SIGKILLs this process at `point`; installed
// process-wide while it lives.
class RankKiller final : public FaultInjector {
 public:
  explicit RankKiller(const KillPoint& point);
  ~RankKiller() override;
  RankKiller(const RankKiller&) = delete;
  RankKiller& operator=(const RankKiller&) = delete;

  void Reach(FaultSite site, int64_t step) override;

 private:
  const KillPoint point_;
  std::atomic<int> reached_{0};
};

// Reaches the forward point before each unit's forward and the backward
// point when the gradient of the unit's output is computed.
class FaultPointInterceptor final : public models::UnitInterceptor {
 public:
  at::Tensor Run(const models::UnitInfo& unit, const at::Tensor& input,
                 const models::UnitForward& forward) override;
};

// Checks the schedule against the run (errors name the flags). Returns the
// killer of this rank's entry for this restart round, after adding a
// FaultPointInterceptor to `model` (call after the strategy added its own,
// so that the point is inside them); null when no entry applies here.
absl::StatusOr<std::unique_ptr<RankKiller>> InstallKillSchedule(
    const KillScheduleOptions& options, models::UnitModel& model);

}  // namespace strata::launch

#endif  // STRATA_LAUNCH_TRAIN_TEST_FAULTS_H_
