// CreateOptimizer: the one place that builds the optimizer an
// OptimizerConfig names (AdamW, Adam or SGD, optim/adamw.h and optim/sgd.h)
// over flat fp32 buffers. Every strategy calls it: single and DDP over their
// whole flat buffer (or fp32 masters), ZeRO once per bucket over views of
// this rank's shard, FSDP once over its concatenated master shards.
#ifndef STRATA_STRATEGIES_OPTIMIZER_FACTORY_H_
#define STRATA_STRATEGIES_OPTIMIZER_FACTORY_H_

#include <ATen/core/Tensor.h>

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "optim/optimizer.h"
#include "strategies/options.h"

namespace strata::strategies {

// The optimizer of config.kind with config's options, updating `params` from
// `grads` (borrowed; 1-D fp32 contiguous CPU tensors with the same numel)
// over `ranges` (optim::NormalizeParamRanges; their weight decays come from
// config.weight_decay, e.g. FlatParameters::MatrixDecayRanges). Errors:
// ValidateOptimizerConfig's (naming the flags), then the buffers' and
// ranges'.
absl::StatusOr<std::unique_ptr<optim::Optimizer>> CreateOptimizer(
    const OptimizerConfig& config, at::Tensor params, at::Tensor grads,
    std::vector<optim::ParamRange> ranges);

}  // namespace strata::strategies

#endif  // STRATA_STRATEGIES_OPTIMIZER_FACTORY_H_
