// The options of a strategy (strategy.h), each enum with one home and one
// Parse / Name pair: StrategyKind (--strategy), MixedPrecisionOptions
// (--param_dtype, --reduce_dtype, --buffer_dtype), the FSDP options
// (ShardingStrategy --fsdp_sharding, BackwardPrefetch
// --fsdp_backward_prefetch, WrapPolicy, FsdpOptions), OptimizerConfig, and
// their validation. Parse errors (InvalidArgument) name the flag and list the
// accepted values. Pure functions: no ranks, and no tensors but what a
// user's FsdpOptions::param_init_fn returns.
#ifndef STRATA_STRATEGIES_OPTIONS_H_
#define STRATA_STRATEGIES_OPTIONS_H_

#include <ATen/core/Tensor.h>
#include <c10/core/ScalarType.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "optim/adamw.h"
#include "optim/loss_scaler.h"
#include "optim/sgd.h"

namespace strata::models {
// models/unit.h; only named here (a wrap policy's predicate takes one), so
// that the options' readers do not parse torch/nn/module.h.
struct UnitInfo;
}  // namespace strata::models

namespace strata::strategies {

// Which strategy CreateStrategy (factory.h) builds.
enum class StrategyKind {
  kSingle,  // "single": one process (single.h).
  kDdp,     // "ddp": replicated, bucketed all-reduce (ddp.h).
  kZero1,   // "zero1": optimizer state sharded (zero.h).
  kZero2,   // "zero2": optimizer state and gradients sharded (zero.h).
  kFsdp,    // "fsdp": everything sharded, per unit (fsdp.h).
};

// "single", "ddp", "zero1", "zero2", "fsdp" and back; errors name --strategy.
absl::StatusOr<StrategyKind> ParseStrategyKind(const std::string& value);
std::string StrategyKindName(StrategyKind kind);

// Which optimizer the strategies run over their flat fp32 buffers
// (--optimizer).
enum class OptimizerKind {
  kAdamW,  // "adamw": torch.optim.AdamW (decoupled weight decay).
  kAdam,   // "adam": torch.optim.Adam (L2 weight decay, added to gradients).
  kSgd,    // "sgd": torch.optim.SGD (momentum, dampening, nesterov; L2 decay).
};

// "adamw", "adam", "sgd" and back; errors name --optimizer.
absl::StatusOr<OptimizerKind> ParseOptimizerKind(const std::string& value);
std::string OptimizerKindName(OptimizerKind kind);

// The optimizer every strategy builds (CreateOptimizer,
// strategies/optimizer_factory.h) over its flat fp32 buffers or shards.
struct OptimizerConfig {
  OptimizerKind kind = OptimizerKind::kAdamW;
  // Weight decay of matrices and embeddings (biases and norm gains get none;
  // FlatParameters::MatrixDecayRanges): decoupled for AdamW, L2 for Adam and
  // SGD.
  double weight_decay = 0.1;
  optim::AdamWOptions adamw;  // AdamW and Adam: betas and eps.
  optim::SgdOptions sgd;      // SGD.
  // Clip gradients to this global norm; 0: off.
  double grad_clip = 1.0;
  // The p of that norm (torch.nn.utils.clip_grad_norm_'s norm_type): 2 (L2),
  // +infinity (the largest |g|), or any p > 0. StepResult::grad_norm is
  // this norm.
  double grad_clip_norm_type = 2.0;
  // Loss scaling (fp16 training; optim/loss_scaler.h): unset, none. The
  // strategy multiplies every micro-batch's loss by the scale, divides the
  // reduced gradients by it before clipping, skips the optimizer step on
  // every rank when any rank found an inf/NaN, and updates the scale.
  std::optional<optim::LossScalerOptions> loss_scaling;
};

// Checks `config`: a kind of the enum, weight_decay finite and >= 0,
// grad_clip finite and >= 0, grad_clip_norm_type > 0 (infinity allowed),
// loss_scaling (when set) valid as
// optim::ValidateLossScalerOptions, and the options of the chosen optimizer
// (adamw for AdamW and Adam, as optim::ValidateAdamWOptions; sgd for SGD, as
// optim::ValidateSgdOptions). Errors name the flags: "--beta1 must be in
// [0, 1), got 1", "--nesterov needs --momentum > 0 and --dampening == 0,
// got --momentum 0 and --dampening 0".
absl::Status ValidateOptimizerConfig(const OptimizerConfig& config);

// The optimizer as a checkpoint records it (checkpoint::Meta::optimizer),
// which decides what its state tensors are and mean: the kind's name, with
// SGD split by whether it keeps a momentum buffer: "adamw", "adam", "sgd"
// (the step only) or "sgd_momentum".
std::string OptimizerStateName(const OptimizerConfig& config);

// Mixed precision (PyTorch FSDP's MixedPrecision): the dtypes the model
// computes with, gradients are communicated in, and buffers are kept in.
// With param_dtype below fp32 the optimizer keeps fp32 master parameters
// (and fp32 state) and gradients are accumulated in fp32 across
// micro-batches; the model's parameters are low-precision copies refreshed
// after every step. All kFloat: plain fp32 training.
struct MixedPrecisionOptions {
  // Each kFloat, kBFloat16 or kHalf. fp16 parameters need loss scaling
  // (OptimizerConfig::loss_scaling) to keep small gradients from flushing
  // to zero; the strategies do not impose it.
  at::ScalarType param_dtype = at::kFloat;
  at::ScalarType reduce_dtype = at::kFloat;
  at::ScalarType buffer_dtype = at::kFloat;
};

// The value of a --param_dtype / --reduce_dtype / --buffer_dtype flag:
// "fp32", "bf16" or "fp16"; anything else is an error naming `flag`.
absl::StatusOr<at::ScalarType> ParseMixedPrecisionDtype(
    const std::string& flag, const std::string& value);
// The spelling ParseMixedPrecisionDtype reads ("fp32", "bf16", "fp16"), or
// c10's name for any other dtype.
std::string MixedPrecisionDtypeName(at::ScalarType dtype);

// FSDP's sharding strategies (PyTorch's ShardingStrategy).
enum class ShardingStrategy {
  kFullShard,        // Parameters, gradients and optimizer state sharded;
                     // parameters freed after each unit's forward.
  kShardGradOp,      // As kFullShard, but parameters stay gathered from a
                     // unit's forward until after its backward (ZeRO-2-like).
  kNoShard,          // Nothing sharded: DDP over FSDP units.
  kHybridShard,      // kFullShard inside a shard group of
                     // hybrid_shard_group_size ranks, replicated across groups.
  kHybridShardZero2  // kShardGradOp inside the shard group, replicated across.
};

// "full_shard", "shard_grad_op", "no_shard", "hybrid_shard",
// "hybrid_shard_zero2" and back; errors name --fsdp_sharding.
absl::StatusOr<ShardingStrategy> ParseShardingStrategy(
    const std::string& value);
std::string ShardingStrategyName(ShardingStrategy sharding);
// kHybridShard or kHybridShardZero2.
bool IsHybrid(ShardingStrategy sharding);
// Whether a unit's full parameters are freed after its forward (kFullShard,
// kHybridShard) rather than kept until after its backward.
bool ReshardsAfterForward(ShardingStrategy sharding);

// When a unit's backward prefetches (all-gathers) the parameters of the unit
// whose backward runs next (PyTorch's BackwardPrefetch).
enum class BackwardPrefetch {
  kBackwardPre,   // Before the current unit's gradient computation.
  kBackwardPost,  // After the current unit's gradient computation.
  kNone,
  kAuto,  // By the compute device: ResolveFsdpSchedule.
};

// "pre", "post", "none", "auto" and back; errors name
// --fsdp_backward_prefetch.
absl::StatusOr<BackwardPrefetch> ParseBackwardPrefetch(
    const std::string& value);
std::string BackwardPrefetchName(BackwardPrefetch prefetch);

// Which units become FSDP units (each with its own flat parameter); the
// parameters of the other units and those outside every unit go to the root
// flat parameter. A unit is wrapped when ANY of the set criteria accepts it;
// with none set, every unit is wrapped (wrap_policy.h).
struct WrapPolicy {
  // Unit types (UnitInfo::type), e.g. {"GPTBlock"}.
  std::vector<std::string> unit_types;
  // Units with at least this many parameters; 0: off.
  int64_t min_num_params = 0;
  // A user predicate; null: off.
  std::function<bool(const models::UnitInfo&)> predicate;
};

struct FsdpOptions {
  ShardingStrategy sharding = ShardingStrategy::kFullShard;
  WrapPolicy wrap_policy;
  // All-gather the next unit's parameters while the current unit's forward
  // runs.
  bool forward_prefetch = false;
  BackwardPrefetch backward_prefetch = BackwardPrefetch::kAuto;
  // At most this many unit all-gathers in flight (the rate limiter); 0: no
  // limit.
  int limit_all_gathers = 2;
  // Unit gradient reductions left running while backward goes on, each
  // holding that unit's full gradients until it completes; 0: wait for each
  // one at once (least memory, communication exposed); kAutoReductions: by
  // the compute device (ResolveFsdpSchedule).
  static constexpr int kAutoReductions = -1;
  int reductions_in_flight = kAutoReductions;
  // Keep parameter shards, gradient shards and optimizer state in host
  // memory; with CPU compute this is the identity (with CUDA compute it is
  // not built yet: train refuses it, fsdp.h).
  bool cpu_offload = false;
  // Hybrid sharding: ranks per shard group (e.g. ranks of a node); the world
  // size must be a multiple of it.
  int hybrid_shard_group_size = 0;
  // With gradient accumulation: reduce-scatter every micro-batch's gradients
  // into the gradient shard and free the full gradients (PyTorch FSDP's and
  // DeepSpeed ZeRO-3's behaviour; the default: the memory FSDP saves holds
  // when users accumulate). false: micro-batches before the last keep every
  // unit's full gradients and communicate nothing (PyTorch's no_sync();
  // (k - 1) of every k reductions saved, full fp32 gradients held: 4 Psi
  // more per rank).
  bool reduce_scatter_every_micro_step = true;
  // Deferred initialisation: the seed a deferred model (BuildOptions::
  // deferred, parameters on the meta device) was built with. Each rank then
  // materialises only its shards, with the values a full build would have.
  uint64_t init_seed = 0;
  // PyTorch FSDP's param_init_fn, per parameter: with a deferred model, the
  // initial value of the meta parameter `name` of `shape` (full size; cast
  // to fp32), instead of the model's InitialParameter(name, init_seed).
  // Called on every rank, unit by unit, while this rank's shard is filled
  // (one full value alive at a time); it is not told the rank and must give
  // every rank the same values. An error names the parameter. Null: the
  // model's own initialisation. Set with a model that has no meta parameter,
  // creation fails (PyTorch ignores it there).
  std::function<absl::StatusOr<at::Tensor>(const std::string& name,
                                           const std::vector<int64_t>& shape)>
      param_init_fn;
  // Keep released unit buffers (gathered parameters, full gradients) within
  // a step and reuse them for the next buffer of the same size, instead of
  // freeing and allocating them per gather (UnitBufferPool,
  // unit_buffer_pool.h); emptied at the step's end. Results are bitwise the
  // same either way. Off by default: on an idle machine it gained 2-5 % of
  // FSDP's tokens/s (within the run-to-run spread) and cost 11-17 MiB of
  // peak resident set per rank on gpt-100m (BENCHMARKS.md, "Reusing unit
  // buffers within a step").
  bool reuse_buffers = false;
};

// FSDP's backward schedule with kAuto / kAutoReductions resolved for the
// device the units compute on. On CUDA: prefetch before each unit's
// backward and one reduction in flight (PyTorch FSDP's defaults): NCCL runs
// beside the kernels, so both hide communication. On the CPU: prefetch after
// each unit's backward and no reduction in flight: Gloo's copies and
// reductions run on the cores that compute, so starting them earlier hides
// little, while each holds one more unit's full parameters or gradients
// (gpt-100m, 2 ranks: 1029 -> 985 MB, tokens/s within the spread;
// BENCHMARKS.md, "FSDP's defaults at the memory target"). Explicit values
// are kept.
struct FsdpSchedule {
  BackwardPrefetch backward_prefetch = BackwardPrefetch::kBackwardPre;
  int reductions_in_flight = 1;
};
FsdpSchedule ResolveFsdpSchedule(const FsdpOptions& options, bool cuda);

struct StrategyOptions {
  StrategyKind kind = StrategyKind::kSingle;
  // DDP and ZeRO: gradient buckets hold at most this many bytes (a parameter
  // larger than that gets a bucket of its own) ...
  int64_t bucket_bytes = int64_t{25} << 20;
  // ... except the first one (the last layers, whose gradients are ready
  // first), which holds at most this many, so communication starts early.
  int64_t first_bucket_bytes = int64_t{1} << 20;
  // DDP and ZeRO: parameters that get no gradient in a step's last backward
  // are an error unless this is set; their buckets are then reduced at
  // Step().
  bool allow_unused_parameters = false;
  MixedPrecisionOptions mixed_precision;
  // Activation checkpointing: units whose type (UnitInfo::type) or name is
  // listed are recomputed during backward instead of keeping their
  // activations; empty: none.
  std::vector<std::string> checkpoint_units;
  // Of the units checkpoint_units selects, in forward order, only every
  // checkpoint_every-th is checkpointed (selective activation
  // checkpointing, torchtitan's selective_ac_option = "k"); 1: all.
  int checkpoint_every = 1;
  FsdpOptions fsdp;  // kind kFsdp only.
};

// Checks option values; errors name the flag: "--strategy must be single,
// ddp, zero1, zero2 or fsdp, got StrategyKind(7)", "--bucket_bytes must be
// > 0, got 0", "--param_dtype must be fp32, bf16 or fp16, got Double".
absl::Status ValidateStrategyOptions(const StrategyOptions& options);

// Checks options.fsdp against a world of `world_size` ranks; errors name the
// flag (--fsdp_hybrid_shard_group_size with a world size it does not divide,
// a group size set without hybrid sharding, negative limits other than
// kAutoReductions). Dtypes are
// ValidateStrategyOptions's.
absl::Status ValidateFsdpOptions(const StrategyOptions& options,
                                 int world_size);

}  // namespace strata::strategies

#endif  // STRATA_STRATEGIES_OPTIONS_H_
