// Helpers for tests that run the train binary in fresh processes and compare
// runs: the dropout run, checkpoint extras, a rank killed mid-save (scratch
// paths, files and metrics columns: run_output.h). (Ports and rank environments
// for ranks started by hand: base/testing/subprocess.h.)
#ifndef STRATA_LAUNCH_TESTING_TRAIN_RUNS_H_
#define STRATA_LAUNCH_TESTING_TRAIN_RUNS_H_

#include <string>
#include <vector>

#include "absl/time/time.h"
#include "base/testing/subprocess.h"
#include "checkpoint/contents.h"
#include "launch/testing/run_output.h"

namespace strata::launch::testing {

// 8 steps of gpt-tiny with dropout 0.1 (32-token sequences, global batch 4,
// micro-batch 1, lr 1e-4), a checkpoint every 4 steps, one metrics line per
// step, under `out`; then `more`.
std::vector<std::string> DropoutRunArgs(const std::string& out,
                                        const std::vector<std::string>& more);

// Runs DropoutRunArgs(out, more) (2 minutes at most).
::strata::testing::RunResult TrainDropoutRun(
    const std::string& out, const std::vector<std::string>& more);

// The extras of the checkpoint at `path` (sharded or local: its
// metadata.pb; full: the .pth file); a failure is a test failure (empty).
checkpoint::NamedValues CheckpointExtras(const std::string& path);

// Starts `args` (a train command line of a sharded-format run whose saves
// pause before their commit, --ckpt_test_pause_ms) as 2 ranks by hand, waits
// until rank 1 wrote its data file of the step-8 save under `ckpt_dir`
// (step_00000008.tmp/rank1.data, or __1_0.distcp for --ckpt_format=dcp:
// the data is written, the commit is not),
// SIGKILLs rank 1 and waits for both ranks (each within `timeout`). Expects
// rank 1 killed by the signal and rank 0 failed (it cannot save alone);
// returns false, with a test failure, if the save never began.
bool KillRankOneDuringStep8Save(const std::vector<std::string>& args,
                                const std::string& ckpt_dir,
                                absl::Duration timeout);

// For a run under `out` restarted after failures: its metrics lines (those
// of its last round) equal, bitwise (loss, lr, grad_norm), the uninterrupted
// run's under `whole` of the same steps and end at step `num_steps`, and the
// two model.pt files are the same bytes. Mismatches are test failures.
void ExpectSameEnd(const std::string& whole, const std::string& out,
                   int num_steps);

}  // namespace strata::launch::testing

#endif  // STRATA_LAUNCH_TESTING_TRAIN_RUNS_H_
