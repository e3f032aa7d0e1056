// Every rank's LibTorch default CPU generator state in a checkpoint's extras,
// so that whatever draws from it (at::dropout without a DropoutContext,
// randperm, user code) continues after a resume as in the uninterrupted run.
//
// Layout: extra "generator.cpu.rank<r>" (Bytes: the state tensor's bytes) for
// every rank r of the saving job, gathered onto every rank (the formats write
// rank 0's extras). Checkpoints saved before per-rank states hold one
// "generator.cpu" (the saving rank 0's state); it is restored on every rank.
//
// There is no CUDA generator state: checkpoints of CUDA runs are not written
// yet (train refuses them); when they are, "generator.cuda<d>.rank<r>" would
// go beside these.
#ifndef STRATA_LAUNCH_TRAIN_GENERATOR_STATE_H_
#define STRATA_LAUNCH_TRAIN_GENERATOR_STATE_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "checkpoint/contents.h"
#include "comm/group.h"

namespace strata::launch {

// The extras key of rank `rank`'s CPU generator state.
std::string GeneratorKeyForRank(int rank);
// The single key of checkpoints saved before per-rank states.
inline constexpr char kLegacyGeneratorKey[] = "generator.cpu";

// Whether `key` is a generator-state key (per-rank or legacy).
bool IsGeneratorKey(const std::string& key);

// The default CPU generator's state bytes (under its mutex).
std::string DefaultGeneratorState();

// A collective over `group` (null: one process): every rank's
// DefaultGeneratorState() as extras, one key per rank in rank order (the same
// on every rank).
absl::StatusOr<checkpoint::NamedValues> GatherGeneratorStates(
    comm::Group* group);

// Which state rank `rank` of a `world_size`-rank job restores from the
// generator keys of `extra`, and what did not fit.
struct GeneratorStateChoice {
  bool found = false;  // Whether `state` holds a state to restore.
  std::string state;
  std::string key;                // The key it came from.
  int saved_ranks = 0;            // Per-rank states in the checkpoint.
  std::vector<int> unused_ranks;  // Saved ranks >= world_size.
};

// Picks rank `rank`'s state: "generator.cpu.rank<rank>" if present, else the
// legacy "generator.cpu", else none. Errors (InvalidArgument naming `where`
// and the key): a generator key whose value is not bytes, a per-rank key
// whose suffix is not a rank number, or a repeated key.
absl::StatusOr<GeneratorStateChoice> ChooseGeneratorState(
    const checkpoint::NamedValues& extra, int rank, int world_size,
    const std::string& where);

// Whether LibTorch accepts `state` as a CPU generator state (tried on a
// fresh generator); InvalidArgument naming `where` otherwise.
absl::Status CheckGeneratorState(const std::string& state,
                                 const std::string& where);
// Sets the default CPU generator to `state` (DefaultGeneratorState()'s
// bytes). InvalidArgument naming `where` if LibTorch rejects the bytes (the
// generator is then unchanged).
absl::Status SetDefaultGeneratorState(const std::string& state,
                                      const std::string& where);

}  // namespace strata::launch

#endif  // STRATA_LAUNCH_TRAIN_GENERATOR_STATE_H_
