// What a checkpoint holds, independent of its format: the model and
// optimizer tensors as this rank holds them (ShardedTensor runs,
// aliasing the live state), metadata, the LR schedule's state and extra
// named values; and the checks every loader makes before touching the live
// state (keys, shapes).
#ifndef STRATA_CHECKPOINT_CONTENTS_H_
#define STRATA_CHECKPOINT_CONTENTS_H_

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "base/named_state.h"
#include "base/shape.h"
#include "base/sharded_tensor.h"

namespace c10 {
struct IValue;
}  // namespace c10

namespace strata::checkpoint {

// The values a checkpoint stores besides tensors (base/named_state.h): what
// LR schedules, samplers and generators save.
using ::strata::Bytes;
using ::strata::NamedValues;
using Value = ::strata::StateValue;

// The Strata version written into every checkpoint's meta.
inline constexpr char kStrataVersion[] = "0.1.0";

struct Meta {
  int64_t step = 0;
  uint64_t seed = 0;
  std::string time;            // UTC, RFC 3339.
  std::string strata_version;  // kStrataVersion.
  std::string git_hash;        // base/build_info.h's GitCommit().
  int world_size = 1;
  std::string strategy;
  std::string model_config;  // Text form of the model's config.
  // The optimizer whose state the checkpoint holds, which decides what its
  // optimizer tensors are and mean (strategies::OptimizerStateName):
  // "adamw", "adam", "sgd" (the step only) or "sgd_momentum". Empty: not
  // recorded (checkpoints written before it was, all AdamW).
  std::string optimizer;
};

// The optimizer of a PyTorch file whose param groups cannot tell Adam from
// AdamW (their states and hyperparameters have the same keys).
inline constexpr char kAdamOrAdamW[] = "adam or adamw";

// Checks that a checkpoint whose meta records optimizer `saved` (empty:
// "adamw"; kAdamOrAdamW: either) holds state for the live optimizer `live`
// (Meta::optimizer's values). InvalidArgument naming `where` (the
// checkpoint and key) and both optimizers otherwise, with the fix.
absl::Status CheckOptimizer(const std::string& where, const std::string& saved,
                            const std::string& live);

// Meta with time, version and git hash filled in.
Meta NewMeta();

// The non-tensor contents.
struct Contents {
  Meta meta;
  // The LR schedule's state as named fields (empty when not saved), e.g.
  // {"kind": "cosine", "base_lr": 3e-4, "warmup_steps": 100, ...,
  // "last_step": 41}: strings for names, integers for counts, doubles for
  // rates (launch/train/training_checkpoint.h writes and reads it).
  NamedValues param_scheduler;
  // Anything else, e.g. the sampler position and generator states.
  NamedValues extra;
};

// The tensors as this rank holds them. Saving reads them; loading writes
// into them (they alias the live state).
struct TensorState {
  std::vector<ShardedTensor> model;
  std::vector<ShardedTensor> optimizer;
};

// How a model section's keys matched (PyTorch's load_state_dict result):
// the model's tensors the checkpoint lacks (a non-strict load keeps their
// values) and the checkpoint's (revised) keys the model lacks (ignored), in
// name order, across every rank; `loaded` counts the model's tensors found.
struct KeyReport {
  int64_t loaded = 0;
  std::vector<std::string> missing;
  std::vector<std::string> unexpected;
};

struct ReadOptions {
  // Every live tensor must be in the checkpoint and every checkpoint tensor
  // live (per section loaded); otherwise an error lists the missing and
  // unexpected keys. Without it, missing tensors keep their values and
  // unexpected ones are ignored.
  bool strict = true;
  // (regex, replacement) applied in order to the checkpoint's model tensor
  // names before matching (mmengine's revise_keys), e.g. {"^module\\.", ""}.
  std::vector<std::pair<std::string, std::string>> revise_keys;
  // Load the optimizer section (an error if the checkpoint has none and
  // `strict`).
  bool load_optimizer = true;
  // Parameter names whose tensors strict loading tolerates being absent
  // (they keep their values): the parameter and its optimizer state
  // ("<name>.<state>"). The frozen parameters a checkpoint saved with
  // exclude_frozen_parameters leaves out; still listed in KeyReport::missing.
  std::set<std::string> may_be_missing;
  // Borrowed, may be null: receives the model section's KeyReport once the
  // keys have matched (set on every rank, the same on all, by the full,
  // sharded and DCP loaders; the local format matches layouts exactly).
  KeyReport* model_keys = nullptr;
};

// A checkpoint tensor's description, for matching.
struct TensorInfo {
  std::string name;
  std::vector<int64_t> shape;
  at::ScalarType dtype = at::kFloat;
};

// For each run of `live`, the index into `saved` of the checkpoint tensor it
// loads from, or -1 (not strict, absent: keep the value). Applies
// `revise_keys` to the saved names when `revise` is set. `all_live_names`
// are the names the runs of EVERY rank carry (a sharded strategy's rank may
// hold no run of some tensors): a saved key is unexpected only if no rank
// holds it. Errors name `where` (the checkpoint path and section): strict
// missing / unexpected keys (all listed), a key whose shapes differ (the key
// and both shapes), a revise_keys regex that does not compile. `report`
// (may be null) receives how the keys matched.
absl::StatusOr<std::vector<int>> MatchRuns(
    const std::string& where, const std::vector<ShardedTensor>& live,
    const std::set<std::string>& all_live_names,
    const std::vector<TensorInfo>& saved, const ReadOptions& options,
    bool revise, KeyReport* report = nullptr);

// A Value as a PyTorch file holds it (the full format's extras, DCP's
// strata.* items): an int, a float, a str, and Bytes as a 1-D uint8
// tensor. ValueFromIValue is the reverse: nullopt for any other value.
c10::IValue ValueToIValue(const Value& value);
std::optional<Value> ValueFromIValue(const c10::IValue& value);

// c10::toString(dtype) and back ("Float" -> kFloat); InvalidArgument for a
// name that is not a dtype.
std::string DtypeName(at::ScalarType dtype);
absl::StatusOr<at::ScalarType> DtypeFromName(const std::string& name);

// Checks that every run is a contiguous CPU tensor inside its global shape;
// Internal error naming the run otherwise.
absl::Status CheckRuns(const std::vector<ShardedTensor>& runs);

// Copies each staged tensor (same element count, any dtype) into the live
// run it belongs to: runs[i].local <- staged[i] (skipped when undefined).
// Call only after everything was validated: this is the commit.
void CopyStaged(const std::vector<ShardedTensor>& runs,
                const std::vector<at::Tensor>& staged);

}  // namespace strata::checkpoint

#endif  // STRATA_CHECKPOINT_CONTENTS_H_
