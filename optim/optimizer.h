// strata::optim::Optimizer: optimizers over flat fp32 buffers.
//
// An optimizer updates one 1-D fp32 parameter buffer from a gradient buffer of
// the same size. The buffers are either a whole model's FlatParameters or one
// rank's shard of them (ZeRO / FSDP), so the same code serves both; optimizer
// state (exp_avg, ...) is a flat tensor aligned element-for-element with the
// parameter buffer, which is what makes it shardable and checkpointable.
//
// The buffer is divided into ParamRanges, each with its own weight decay (the
// usual "no decay for biases and norms"). Elements past the last range (the
// padding of a flat buffer) are never read or written.
//
// Threading: Step runs one fused pass over the buffers, split across the
// intra-op threads of LibTorch (at::parallel_for). An optimizer's methods may
// be called from one thread at a time.
#ifndef STRATA_OPTIM_OPTIMIZER_H_
#define STRATA_OPTIM_OPTIMIZER_H_

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace strata::optim {

// A run of the flat buffer with its own weight decay (e.g. no decay for
// biases and norms).
struct ParamRange {
  int64_t offset = 0;
  int64_t numel = 0;
  double weight_decay = 0.0;
  // Frozen parameters (requires_grad false): the optimizer neither reads nor
  // writes these elements (no weight decay either), and keeps no meaningful
  // state for them (their state stays zero).
  bool frozen = false;
};

// "{offset, numel, weight_decay[, frozen]}", for logs and test failures.
std::ostream& operator<<(std::ostream& os, const ParamRange& range);

// Named tensors, in a fixed order (optimizer state, state dicts).
using NamedTensors = std::vector<std::pair<std::string, at::Tensor>>;

// How an options validator names a field in its errors: the optimizer and
// the field ("SGD momentum"), or with a non-empty `flag_prefix` the flag that
// sets it ("--momentum" for "--"), for callers whose options come from flags.
std::string OptionName(absl::string_view optimizer, absl::string_view field,
                       absl::string_view flag_prefix);

// Checks the buffers an optimizer updates: both defined, on the CPU, 1-D,
// contiguous, fp32, the same non-zero numel, and not overlapping in memory.
absl::Status ValidateFlatBuffers(const at::Tensor& params,
                                 const at::Tensor& grads);

// Checks `ranges` against a buffer of `numel` elements and returns them
// without empty ranges. Ranges must be sorted, start at 0, follow each other
// without gap or overlap and end at or before `numel` (the padding at the end
// may be left out); weight decays must be finite and >= 0. An empty list
// means one range over the whole buffer with weight decay 0; a list of empty
// ranges (a shard that holds only padding) means no element is updated.
absl::StatusOr<std::vector<ParamRange>> NormalizeParamRanges(
    std::vector<ParamRange> ranges, int64_t numel);

// The ranges of a shard: `ranges` (over a whole flat buffer) cut to the
// elements [offset, offset + numel), with offsets relative to `offset`. Never
// empty: a shard that meets no range (padding only) gets one empty range, so
// that its optimizer updates nothing.
std::vector<ParamRange> SliceParamRanges(const std::vector<ParamRange>& ranges,
                                         int64_t offset, int64_t numel);

// A parameter of a flat buffer, as DecayRanges sees it.
struct RangeParameter {
  int64_t offset = 0;  // Elements, in the flat buffer.
  int64_t numel = 0;
  int64_t ndim = 0;
  bool requires_grad = true;
};

// Optimizer ranges over `params` (sorted by offset) giving `weight_decay` to
// matrices and embeddings (ndim >= 2) and none to biases and norm gains — the
// GPT-2 / nanoGPT convention — with frozen ranges for requires_grad false,
// merging neighbours with the same decay and frozenness. Gaps between
// parameters are left as gaps (not covered).
std::vector<ParamRange> DecayRanges(const std::vector<RangeParameter>& params,
                                    double weight_decay);

// One rank's shard of a flat buffer, placed in a buffer that concatenates
// shards of several flat buffers (FSDP's master buffer).
struct ShardPlacement {
  std::vector<ParamRange> ranges;  // Over the whole flat buffer.
  int64_t shard_offset = 0;        // The shard, in the flat buffer.
  int64_t shard_numel = 0;
  int64_t buffer_offset = 0;  // The shard, in the concatenated buffer.
};

// The ranges of a concatenated buffer of `buffer_numel` elements: each
// placement's ranges cut to its shard (SliceParamRanges) and moved to its
// buffer_offset; placements in increasing buffer_offset, not overlapping.
// Elements no range covers (padding, gaps, the tail) get frozen ranges, so the
// result covers the buffer from 0 to buffer_numel without gap.
std::vector<ParamRange> ConcatenateShardRanges(
    const std::vector<ShardPlacement>& placements, int64_t buffer_numel);

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  // One update of params from grads (both borrowed at construction). `lr`
  // comes from the schedule each step; it must be finite and >= 0 (CHECKed).
  virtual void Step(double lr) = 0;

  // Steps taken so far (the "step" entry of State()).
  int64_t num_steps() const;

  // Optimizer state as named flat tensors aligned element-for-element with
  // params (AdamW and Adam: "exp_avg", "exp_avg_sq"; SGD with momentum:
  // "momentum_buffer"), plus "step" (0-dim int64). The returned tensors alias
  // the live state: a checkpoint reads or writes them in place.
  virtual NamedTensors State() = 0;

  // Loads state saved by State() (in any order): the same names, shapes and
  // dtypes, "step" >= 0. Errors name the key and both shapes; nothing changes
  // unless everything matches.
  virtual absl::Status LoadState(const NamedTensors& state);

  // "adamw", "adam", "sgd".
  virtual std::string name() const = 0;

  const at::Tensor& params() const { return params_; }
  const at::Tensor& grads() const { return grads_; }
  const std::vector<ParamRange>& ranges() const { return ranges_; }

 protected:
  // `params`, `grads` and `ranges` must have passed ValidateFlatBuffers and
  // NormalizeParamRanges.
  Optimizer(at::Tensor params, at::Tensor grads,
            std::vector<ParamRange> ranges);

  // Adds one to the step counter and returns the new count.
  int64_t IncrementStep();
  const at::Tensor& step_tensor() const { return step_; }

  // Calls fn(range_index, begin, end) over every element covered by the
  // ranges, in chunks run in parallel across LibTorch's intra-op threads;
  // each [begin, end) lies within ranges()[range_index].
  void ParallelForEachRange(
      const std::function<void(size_t, int64_t, int64_t)>& fn) const;

 private:
  at::Tensor params_;
  at::Tensor grads_;
  std::vector<ParamRange> ranges_;
  at::Tensor step_;  // 0-dim int64.
};

}  // namespace strata::optim

#endif  // STRATA_OPTIM_OPTIMIZER_H_
