#include "strategies/options.h"

#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "optim/clip.h"

namespace strata::strategies {
namespace {

// Each enum's values and flag names, in declaration order: the one table its
// Parse and Name functions read.
template <typename Enum>
struct NamedValue {
  Enum value;
  const char* name;
};

constexpr NamedValue<StrategyKind> kStrategyKinds[] = {
    {StrategyKind::kSingle, "single"}, {StrategyKind::kDdp, "ddp"},
    {StrategyKind::kZero1, "zero1"},   {StrategyKind::kZero2, "zero2"},
    {StrategyKind::kFsdp, "fsdp"},
};

constexpr NamedValue<OptimizerKind> kOptimizerKinds[] = {
    {OptimizerKind::kAdamW, "adamw"},
    {OptimizerKind::kAdam, "adam"},
    {OptimizerKind::kSgd, "sgd"},
};

constexpr NamedValue<ShardingStrategy> kShardingStrategies[] = {
    {ShardingStrategy::kFullShard, "full_shard"},
    {ShardingStrategy::kShardGradOp, "shard_grad_op"},
    {ShardingStrategy::kNoShard, "no_shard"},
    {ShardingStrategy::kHybridShard, "hybrid_shard"},
    {ShardingStrategy::kHybridShardZero2, "hybrid_shard_zero2"},
};

constexpr NamedValue<BackwardPrefetch> kBackwardPrefetches[] = {
    {BackwardPrefetch::kBackwardPre, "pre"},
    {BackwardPrefetch::kBackwardPost, "post"},
    {BackwardPrefetch::kNone, "none"},
    {BackwardPrefetch::kAuto, "auto"},
};

// "a, b or c".
template <typename Enum, size_t N>
std::string Accepted(const NamedValue<Enum> (&table)[N]) {
  std::string out;
  for (size_t i = 0; i < N; ++i) {
    if (i > 0) absl::StrAppend(&out, i + 1 == N ? " or " : ", ");
    absl::StrAppend(&out, table[i].name);
  }
  return out;
}

template <typename Enum, size_t N>
absl::StatusOr<Enum> Parse(const NamedValue<Enum> (&table)[N],
                           const std::string& flag, const std::string& value) {
  for (const NamedValue<Enum>& entry : table) {
    if (value == entry.name) return entry.value;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "--", flag, " must be ", Accepted(table), ", got '", value, "'"));
}

// The name of `value`, or "" for a value outside the enum.
template <typename Enum, size_t N>
std::string Name(const NamedValue<Enum> (&table)[N], Enum value) {
  for (const NamedValue<Enum>& entry : table) {
    if (value == entry.value) return entry.name;
  }
  return "";
}

}  // namespace

absl::StatusOr<StrategyKind> ParseStrategyKind(const std::string& value) {
  // single_test.cc asserts this message verbatim.
  return Parse(kStrategyKinds, "strategy", value);
}

std::string StrategyKindName(StrategyKind kind) {
  const std::string name = Name(kStrategyKinds, kind);
  return name.empty()
             ? absl::StrCat("StrategyKind(", static_cast<int>(kind), ")")
             : name;
}

absl::StatusOr<ShardingStrategy> ParseShardingStrategy(
    const std::string& value) {
  return Parse(kShardingStrategies, "fsdp_sharding", value);
}

std::string ShardingStrategyName(ShardingStrategy sharding) {
  const std::string name = Name(kShardingStrategies, sharding);
  return name.empty() ? "?" : name;
}

bool IsHybrid(ShardingStrategy sharding) {
  return sharding == ShardingStrategy::kHybridShard ||
         sharding == ShardingStrategy::kHybridShardZero2;
}

bool ReshardsAfterForward(ShardingStrategy sharding) {
  return sharding == ShardingStrategy::kFullShard ||
         sharding == ShardingStrategy::kHybridShard;
}

absl::StatusOr<BackwardPrefetch> ParseBackwardPrefetch(
    const std::string& value) {
  return Parse(kBackwardPrefetches, "fsdp_backward_prefetch", value);
}

std::string BackwardPrefetchName(BackwardPrefetch prefetch) {
  const std::string name = Name(kBackwardPrefetches, prefetch);
  return name.empty() ? "?" : name;
}

FsdpSchedule ResolveFsdpSchedule(const FsdpOptions& options, bool cuda) {
  FsdpSchedule schedule;
  schedule.backward_prefetch =
      options.backward_prefetch != BackwardPrefetch::kAuto
          ? options.backward_prefetch
      : cuda ? BackwardPrefetch::kBackwardPre
             : BackwardPrefetch::kBackwardPost;
  schedule.reductions_in_flight =
      options.reductions_in_flight != FsdpOptions::kAutoReductions
          ? options.reductions_in_flight
      : cuda ? 1
             : 0;
  return schedule;
}

absl::StatusOr<OptimizerKind> ParseOptimizerKind(const std::string& value) {
  return Parse(kOptimizerKinds, "optimizer", value);
}

std::string OptimizerKindName(OptimizerKind kind) {
  const std::string name = Name(kOptimizerKinds, kind);
  return name.empty() ? "?" : name;
}

absl::StatusOr<at::ScalarType> ParseMixedPrecisionDtype(
    const std::string& flag, const std::string& value) {
  if (value == "fp32") return at::kFloat;
  if (value == "bf16") return at::kBFloat16;
  if (value == "fp16") return at::kHalf;
  return absl::InvalidArgumentError(absl::StrCat(
      "--", flag, " must be fp32, bf16 or fp16, got '", value, "'"));
}

std::string MixedPrecisionDtypeName(at::ScalarType dtype) {
  switch (dtype) {
    case at::kFloat:
      return "fp32";
    case at::kBFloat16:
      return "bf16";
    case at::kHalf:
      return "fp16";
    default:
      return c10::toString(dtype);
  }
}

absl::Status ValidateOptimizerConfig(const OptimizerConfig& config) {
  if (!std::isfinite(config.weight_decay) || config.weight_decay < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--weight_decay must be finite and >= 0, got ", config.weight_decay));
  }
  if (!std::isfinite(config.grad_clip) || config.grad_clip < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--grad_clip must be finite and >= 0 (0 = off), got ",
                     config.grad_clip));
  }
  if (!optim::IsValidNormType(config.grad_clip_norm_type)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--grad_clip_norm_type must be > 0 (2: L2, inf: the largest "
        "|gradient|), got ",
        config.grad_clip_norm_type));
  }
  if (config.loss_scaling.has_value()) {
    STRATA_RETURN_IF_ERROR(
        optim::ValidateLossScalerOptions(*config.loss_scaling));
  }
  switch (config.kind) {
    case OptimizerKind::kAdamW:
    case OptimizerKind::kAdam:
      return optim::ValidateAdamWOptions(config.adamw, "--");
    case OptimizerKind::kSgd:
      return optim::ValidateSgdOptions(config.sgd, "--");
  }
  return absl::InvalidArgumentError(
      absl::StrCat("--optimizer must be ", Accepted(kOptimizerKinds),
                   ", got OptimizerKind(", static_cast<int>(config.kind), ")"));
}

std::string OptimizerStateName(const OptimizerConfig& config) {
  if (config.kind == OptimizerKind::kSgd && config.sgd.momentum != 0) {
    return "sgd_momentum";
  }
  return OptimizerKindName(config.kind);
}

absl::Status ValidateStrategyOptions(const StrategyOptions& options) {
  if (Name(kStrategyKinds, options.kind).empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--strategy must be ", Accepted(kStrategyKinds), ", got ",
                     StrategyKindName(options.kind)));
  }
  if (options.bucket_bytes <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--bucket_bytes must be > 0, got ", options.bucket_bytes));
  }
  if (options.first_bucket_bytes <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--first_bucket_bytes must be > 0, got ", options.first_bucket_bytes));
  }
  const std::pair<const char*, at::ScalarType> dtypes[] = {
      {"param_dtype", options.mixed_precision.param_dtype},
      {"reduce_dtype", options.mixed_precision.reduce_dtype},
      {"buffer_dtype", options.mixed_precision.buffer_dtype}};
  for (const auto& [flag, dtype] : dtypes) {
    if (dtype != at::kFloat && dtype != at::kBFloat16 && dtype != at::kHalf) {
      return absl::InvalidArgumentError(
          absl::StrCat("--", flag, " must be fp32, bf16 or fp16, got ",
                       c10::toString(dtype)));
    }
  }
  for (const std::string& type : options.fsdp.wrap_policy.unit_types) {
    if (type.empty()) {
      return absl::InvalidArgumentError(
          "--fsdp_wrap_unit_types has an empty entry: list unit types "
          "separated by single commas (e.g. GPTBlock,Embedding)");
    }
  }
  if (options.checkpoint_every < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--checkpoint_every must be >= 1, got ", options.checkpoint_every));
  }
  if (options.checkpoint_every != 1 && options.checkpoint_units.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--checkpoint_every=", options.checkpoint_every,
        " picks among the units --checkpoint_units selects, and it is empty; "
        "set --checkpoint_units (e.g. GPTBlock) or drop --checkpoint_every"));
  }
  return absl::OkStatus();
}

absl::Status ValidateFsdpOptions(const StrategyOptions& options,
                                 int world_size) {
  const FsdpOptions& f = options.fsdp;
  const int group = f.hybrid_shard_group_size;
  if (IsHybrid(f.sharding)) {
    if (group <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("--fsdp_hybrid_shard_group_size must be set (> 0) with "
                       "--fsdp_sharding=",
                       ShardingStrategyName(f.sharding),
                       ": the ranks of one shard group, "
                       "e.g. the ranks of a node"));
    }
    if (world_size % group != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--fsdp_hybrid_shard_group_size=", group,
          " does not divide the world size ", world_size,
          ": hybrid sharding needs whole shard groups (use a divisor of ",
          world_size, ")"));
    }
  } else if (group != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--fsdp_hybrid_shard_group_size=", group,
                     " is only used with "
                     "--fsdp_sharding=hybrid_shard or hybrid_shard_zero2, got "
                     "--fsdp_sharding=",
                     ShardingStrategyName(f.sharding)));
  }
  if (f.reductions_in_flight < 0 &&
      f.reductions_in_flight != FsdpOptions::kAutoReductions) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--fsdp_reductions_in_flight must be >= 0, or -1 (auto: by the "
        "device), got ",
        f.reductions_in_flight));
  }
  if (f.limit_all_gathers < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--fsdp_limit_all_gathers must be >= 0 (0: no limit), got ",
        f.limit_all_gathers));
  }
  return absl::OkStatus();
}

}  // namespace strata::strategies
