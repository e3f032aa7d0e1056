// Test helpers for checkpoint tests: strategies over gpt-tiny trained a few
// steps (so that optimizer state is not zero), and global tensors assembled
// from the runs of every rank (ranks are threads of the test), to compare
// the state saved at one world size with the state loaded at another.
#ifndef STRATA_CHECKPOINT_TESTING_STATES_H_
#define STRATA_CHECKPOINT_TESTING_STATES_H_

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include "checkpoint/contents.h"
#include "comm/group.h"
#include "strategies/strategy.h"

namespace strata::checkpoint::testing {

// Strategy options for `kind` ("single", "ddp", "zero1", "zero2", "fsdp",
// "fsdp_hybrid": FSDP sharded over groups of 2 ranks, replicated across
// them); ZeRO gets small buckets (1000 / 600 bytes) so that parameters
// straddle bucket and shard boundaries.
strategies::StrategyOptions Kind(const std::string& kind);

// The parity tests' AdamW (strategies/testing/parity.h).
strategies::OptimizerConfig DefaultOptimizer();

// gpt-tiny with weights from `seed` under `kind` on `group` (null for
// "single") with `optimizer`, trained `steps` steps; a failure is a test
// failure (null).
std::unique_ptr<strategies::Strategy> MakeStrategy(
    const std::string& kind, comm::Group* group, uint64_t seed, int steps,
    const strategies::OptimizerConfig& optimizer = DefaultOptimizer());

// The optimizers checkpoint tests save and load, by name: "adamw"
// (DefaultOptimizer), "adam", "sgd" (no momentum: the step only) and
// "sgd_momentum" (momentum 0.9, dampening 0.1).
strategies::OptimizerConfig OptimizerNamed(const std::string& name);

TensorState StateOf(const strategies::Strategy& strategy);

// "model/<name>" and "optimizer/<name>" -> the flattened global tensor.
using Globals = std::map<std::string, at::Tensor>;

// Copies every run of `state` into `globals` (creating tensors filled with
// NaN, or -1 for integers, on first sight), under `mu` (ranks call it
// concurrently).
void AddRuns(const TensorState& state, Globals& globals, std::mutex& mu);

// Expects the same keys and bitwise-equal tensors.
void ExpectGlobalsEqual(const Globals& actual, const Globals& expected,
                        const std::string& what);

// What each rank of RunRanks sees: its strategy, the strategy's state as
// the checkpoint formats take it (StateOf) and its group (null for
// "single").
struct Rank {
  strategies::Strategy& strategy;
  const TensorState& state;
  comm::Group* group;
};

// Runs `world` ranks (threads of the test), each holding gpt-tiny under
// `kind` built from `seed` with the optimizer OptimizerNamed(`optimizer`)
// and trained `steps` steps, and calls `body` on every rank; where `body`
// returns true, the rank's state after it is added to the returned globals
// (AddRuns). A group that does not form or a strategy that cannot be built
// is a test failure.
Globals RunRanks(const std::string& kind, int world, uint64_t seed, int steps,
                 const std::string& optimizer,
                 const std::function<bool(const Rank&)>& body);

// A copy of every run, keyed by section, name and offset: a rank's view of
// its own state, to check it did not change.
std::map<std::string, at::Tensor> Snapshot(const TensorState& state);
void ExpectSnapshotsEqual(const std::map<std::string, at::Tensor>& actual,
                          const std::map<std::string, at::Tensor>& expected,
                          const std::string& what);

// The strategies and world sizes a format's round trip covers: single at 1,
// ddp, zero1 and zero2 at 2, fsdp at 3.
const std::vector<std::pair<std::string, int>>& RoundTripSetups();

// The strategies that save at `n` ranks and load at `m` in the N -> M grid
// of a format's resharding test (n, m in 1..4): every strategy on both
// sides across the grid, single where one rank allows it.
std::pair<std::string, std::string> GridKinds(int n, int m);

// A fresh directory under TEST_TMPDIR.
std::string TempDir(const std::string& name);

}  // namespace strata::checkpoint::testing

#endif  // STRATA_CHECKPOINT_TESTING_STATES_H_
