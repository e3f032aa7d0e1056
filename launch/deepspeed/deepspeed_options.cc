#include "launch/deepspeed/deepspeed_options.h"

#include <glog/logging.h>

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "launch/config/option_kinds.h"
#include "launch/config/train_flag_table.h"
#include "models/config.h"
#include "optim/lr_schedule.h"
#include "strategies/options.h"

namespace strata::launch {
namespace {

using strategies::BackwardPrefetch;
using strategies::OptimizerKind;
using strategies::ShardingStrategy;
using strategies::StrategyKind;

// A value as its flag would spell it.
std::string Text(double v) { return absl::StrFormat("%g", v); }
std::string Text(int64_t v) { return absl::StrCat(v); }
std::string Text(int v) { return absl::StrCat(v); }
std::string Text(bool v) { return v ? "true" : "false"; }
std::string Text(const std::string& v) { return v; }
std::string Text(const std::vector<std::string>& v) {
  return absl::StrJoin(v, ",");
}
// The enums and dtypes as train's flags spell them.
template <class T>
std::string Text(T v) {
  return FlagSpelling<T>::Format(v);
}

// Applies one config to TrainOptions, recording what it did.
class Mapper {
 public:
  Mapper(const DeepSpeedConfig& config, int world_size,
         const std::set<std::string>& explicit_flags, TrainOptions* options,
         std::vector<std::string>* log)
      : c_(config),
        world_size_(world_size),
        explicit_(explicit_flags),
        o_(*options),
        log_(*log) {}

  absl::Status Apply() {
    for (absl::Status (Mapper::*step)() :
         {&Mapper::MapBatch, &Mapper::MapPrecision, &Mapper::MapZero,
          &Mapper::MapOptimizer, &Mapper::MapScheduler,
          &Mapper::MapActivationCheckpointing, &Mapper::MapRun}) {
      if (absl::Status s = (this->*step)(); !s.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat(c_.source, ": ", s.message()));
      }
    }
    return absl::OkStatus();
  }

 private:
  // "key=value" and where the value comes from.
  std::string Source(const std::string& key, const std::string& value) const {
    return c_.Given(key)
               ? absl::StrCat(key, "=", value, " from ", c_.source)
               : absl::StrCat(key, "=", value, " (DeepSpeed's default; ",
                              c_.source, " leaves it out)");
  }

  // Sets --flag (`*field`) to `value`, which the config's `key` (=
  // `key_value`) gives, unless the flag was given explicitly.
  template <typename T, typename V>
  void Set(const char* flag, T* field, V value, const std::string& key,
           const std::string& key_value) {
    const T wanted = static_cast<T>(value);
    const std::string source = Source(key, key_value);
    if (explicit_.count(flag) > 0) {
      if (Text(*field) != Text(wanted)) {
        log_.push_back(
            absl::StrCat("--", flag, "=", Text(*field), " overrides ", source));
      }
      return;
    }
    if (c_.Given(key) || Text(*field) != Text(wanted)) {
      log_.push_back(
          absl::StrCat("--", flag, "=", Text(wanted), " from ", source));
    }
    *field = wanted;
  }
  template <typename T, typename V>
  void Set(const char* flag, T* field, V value, const std::string& key) {
    Set(flag, field, value, key, Text(static_cast<T>(value)));
  }

  // A given key that has no effect in Strata, and why.
  void NoEffect(const std::string& key, const std::string& value,
                const std::string& why) {
    if (c_.Given(key)) {
      log_.push_back(absl::StrCat(key, "=", value, " from ", c_.source,
                                  " has no effect: ", why));
    }
  }

  static absl::Status Error(const std::string& key, const std::string& what) {
    return absl::InvalidArgumentError(absl::StrCat(key, ": ", what));
  }

  absl::Status MapBatch();
  absl::Status MapPrecision();
  absl::Status MapZero();
  absl::Status MapZeroBuckets();
  absl::Status MapZeroStage3();
  absl::Status MapZeroOffload();
  void MapZeroIgnored();
  absl::Status MapOptimizer();
  absl::Status MapScheduler();
  absl::Status MapActivationCheckpointing();
  absl::Status MapRun();

  const DeepSpeedConfig& c_;
  const int world_size_;
  const std::set<std::string>& explicit_;
  TrainOptions& o_;
  std::vector<std::string>& log_;
};

// DeepSpeed's rule: any two of the three determine the third (integer
// division, as DeepSpeed's), one alone sets accumulation to 1, and then
// train_batch_size = micro x accumulation x world must hold. Neither batch
// size given: the flags' --global_batch and --micro_batch, as mmengine
// fills them from its data loader.
absl::Status Mapper::MapBatch() {
  std::optional<int64_t> train = c_.train_batch_size;
  std::optional<int64_t> micro = c_.train_micro_batch_size_per_gpu;
  std::optional<int64_t> accumulation = c_.gradient_accumulation_steps;
  const int64_t world = world_size_;
  if (!train && !micro) {
    if (accumulation) {
      return Error("gradient_accumulation_steps",
                   "needs train_batch_size or train_micro_batch_size_per_gpu "
                   "(DeepSpeed needs at least one of them)");
    }
    log_.push_back(absl::StrCat(
        c_.source,
        " sets no batch size: --global_batch and --micro_batch apply"));
    return absl::OkStatus();
  }
  if (train && micro && !accumulation) {
    accumulation = *train / *micro / world;
  } else if (train && accumulation && !micro) {
    micro = *train / world / *accumulation;
  } else if (micro && accumulation && !train) {
    train = *micro * *accumulation * world;
  } else if (train && !micro) {
    accumulation = 1;
    micro = *train / world;
  } else if (micro && !train) {
    accumulation = 1;
    train = *micro * world;
  }
  if (*micro <= 0 || *accumulation <= 0 ||
      *train != *micro * *accumulation * world) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "train_batch_size is not equal to train_micro_batch_size_per_gpu * "
        "gradient_accumulation_steps * world size: %d != %d * %d * %d "
        "(DeepSpeed's rule; give two of the three and DeepSpeed derives the "
        "third)",
        *train, *micro, *accumulation, world));
  }
  const auto value = [&](const char* key, int64_t derived) {
    return c_.Given(key) ? Text(derived)
                         : absl::StrCat(derived,
                                        ", derived by DeepSpeed's "
                                        "rule at world size ",
                                        world);
  };
  Set("global_batch", &o_.global_batch, *train, "train_batch_size",
      value("train_batch_size", *train));
  Set("micro_batch", &o_.micro_batch, *micro, "train_micro_batch_size_per_gpu",
      value("train_micro_batch_size_per_gpu", *micro));
  return absl::OkStatus();
}

// DeepSpeed's bf16 is bf16 parameters with fp32 master weights and
// optimizer state (its BF16_Optimizer and ZeRO), the whole module cast to
// bf16 (buffers too) and gradients communicated in bf16 unless
// communication_data_type says otherwise; no autocast. Its fp16 is the same
// in fp16 (its FP16_Optimizer and ZeRO's fp16 path) with loss scaling:
// --precision=fp16 and the --loss_scale flags.
absl::Status Mapper::MapPrecision() {
  const DeepSpeedFp16Config& f = c_.fp16;
  if (f.enabled && c_.bf16_enabled) {
    return Error("fp16.enabled",
                 "true together with bf16.enabled: true; enable one of them "
                 "(DeepSpeed refuses both too)");
  }
  if (f.enabled && f.consecutive_hysteresis) {
    return Error("fp16.consecutive_hysteresis",
                 "true: Strata implements DeepSpeed's default (false): the "
                 "hysteresis is restored only when the scale grows");
  }
  const at::ScalarType dtype =
      c_.bf16_enabled ? at::kBFloat16 : (f.enabled ? at::kHalf : at::kFloat);
  const std::string key = f.enabled ? "fp16.enabled" : "bf16.enabled";
  const std::string enabled = Text(f.enabled || c_.bf16_enabled);
  strategies::MixedPrecisionOptions& mp = o_.strategy.mixed_precision;
  Set("param_dtype", &mp.param_dtype, dtype, key, enabled);
  Set("buffer_dtype", &mp.buffer_dtype, dtype, key, enabled);
  if (c_.communication_data_type.has_value()) {
    // The schema admits fp32, bf16 and fp16 only (deepspeed_schema.cc), all
    // of which parse.
    absl::StatusOr<at::ScalarType> reduce =
        strategies::ParseMixedPrecisionDtype("reduce_dtype",
                                             *c_.communication_data_type);
    CHECK(reduce.ok()) << reduce.status();
    Set("reduce_dtype", &mp.reduce_dtype, *reduce, "communication_data_type",
        *c_.communication_data_type);
  } else {
    Set("reduce_dtype", &mp.reduce_dtype, dtype, key, enabled);
  }
  Set("precision", &o_.precision,
      f.enabled ? Precision::kFp16 : Precision::kFp32, key, enabled);
  if (f.enabled) {
    Set("loss_scale", &o_.loss_scale, f.loss_scale, "fp16.loss_scale");
    const bool dynamic = f.loss_scale == 0;
    const std::string why =
        "a static fp16.loss_scale neither grows nor backs off";
    if (dynamic) {
      Set("loss_scale_initial_power", &o_.loss_scale_initial_power,
          f.initial_scale_power, "fp16.initial_scale_power");
      Set("loss_scale_window", &o_.loss_scale_window, f.loss_scale_window,
          "fp16.loss_scale_window");
      Set("loss_scale_hysteresis", &o_.loss_scale_hysteresis, f.hysteresis,
          "fp16.hysteresis");
      Set("loss_scale_min", &o_.loss_scale_min, f.min_loss_scale,
          "fp16.min_loss_scale");
    } else {
      NoEffect("fp16.initial_scale_power", Text(f.initial_scale_power), why);
      NoEffect("fp16.loss_scale_window", Text(f.loss_scale_window), why);
      NoEffect("fp16.hysteresis", Text(f.hysteresis), why);
      NoEffect("fp16.min_loss_scale", Text(f.min_loss_scale), why);
    }
    NoEffect("fp16.auto_cast", Text(f.auto_cast),
             "Strata's models take token ids; with fp16 parameters every "
             "floating-point op computes in fp16 already");
  }
  NoEffect("bf16.immediate_grad_update", Text(c_.bf16_immediate_grad_update),
           "Strata folds each micro-batch's bf16 gradients into the fp32 "
           "accumulation once, after its backward: the same sums either "
           "way");
  NoEffect("data_types.grad_accum_dtype", "\"fp32\"",
           "Strata accumulates gradients in fp32 already");
  return absl::OkStatus();
}

absl::Status Mapper::MapZero() {
  const DeepSpeedZeroConfig& z = c_.zero;
  static constexpr StrategyKind kStages[] = {
      StrategyKind::kDdp, StrategyKind::kZero1, StrategyKind::kZero2,
      StrategyKind::kFsdp};
  // Stage 0 on one process is plain training: `single` is Strata's
  // one-process strategy (no group, no rendezvous), and a DDP group of one
  // would only add a no-op all-reduce.
  const StrategyKind kind = z.stage == 0 && world_size_ == 1
                                ? StrategyKind::kSingle
                                : kStages[z.stage];
  Set("strategy", &o_.strategy.kind, kind, "zero_optimization.stage",
      Text(z.stage));
  if (z.mics_shard_size > 0 && z.stage != 3) {
    return Error("zero_optimization.mics_shard_size",
                 absl::StrCat(z.mics_shard_size,
                              ": MiCS needs stage 3 (DeepSpeed's too), got "
                              "stage ",
                              z.stage));
  }
  if (z.stage <= 2) {
    Set("allow_unused_parameters", &o_.strategy.allow_unused_parameters,
        z.ignore_unused_parameters,
        "zero_optimization.ignore_unused_parameters");
  }
  if (absl::Status s = MapZeroBuckets(); !s.ok()) return s;
  if (absl::Status s = MapZeroOffload(); !s.ok()) return s;
  if (z.stage == 3) {
    if (absl::Status s = MapZeroStage3(); !s.ok()) return s;
  }
  MapZeroIgnored();
  return absl::OkStatus();
}

// Stages 1 and 2: DeepSpeed's reduce buckets hold reduce_bucket_size
// elements, all alike; Strata's --bucket_bytes counts bytes in the reduce
// dtype and --first_bucket_bytes sizes the first one. Strata's ZeRO gathers
// the updated parameters in those same buckets, reduces them with one
// collective each during backward (overlapped), and keeps gradients in one
// contiguous buffer.
absl::Status Mapper::MapZeroBuckets() {
  const DeepSpeedZeroConfig& z = c_.zero;
  const std::string p = "zero_optimization.";
  if (z.stage != 1 && z.stage != 2) return absl::OkStatus();
  const at::ScalarType reduce = o_.strategy.mixed_precision.reduce_dtype;
  const int64_t element = reduce == at::kFloat ? 4 : 2;
  const std::string elements =
      absl::StrCat(z.reduce_bucket_size, " elements x ", element, " bytes (",
                   Text(reduce), ")");
  Set("bucket_bytes", &o_.strategy.bucket_bytes, z.reduce_bucket_size * element,
      p + "reduce_bucket_size", elements);
  Set("first_bucket_bytes", &o_.strategy.first_bucket_bytes,
      z.reduce_bucket_size * element, p + "reduce_bucket_size", elements);
  if (c_.Given(p + "allgather_bucket_size") &&
      z.allgather_bucket_size != z.reduce_bucket_size) {
    return Error(
        p + "allgather_bucket_size",
        absl::StrCat(z.allgather_bucket_size,
                     " differs from reduce_bucket_size ", z.reduce_bucket_size,
                     ": Strata's ZeRO all-gathers the updated "
                     "parameters in its gradient buckets; set both "
                     "to the same size or leave "
                     "allgather_bucket_size out"));
  }
  const std::string rule = " (the only value matching what Strata does)";
  if (!z.allgather_partitions) {
    return Error(p + "allgather_partitions",
                 "false is not supported: Strata's ZeRO all-gathers the "
                 "updated partitions (true" +
                     rule + ")");
  }
  if (z.stage == 2) {
    if (c_.Given(p + "overlap_comm") && !*z.overlap_comm) {
      return Error(p + "overlap_comm",
                   "false is not supported: Strata's ZeRO-2 always reduces "
                   "each gradient bucket from backward hooks, overlapped "
                   "with the rest of backward (true" +
                       rule + ")");
    }
    if (!z.contiguous_gradients || !z.reduce_scatter) {
      return Error(p + (z.contiguous_gradients ? "reduce_scatter"
                                               : "contiguous_gradients"),
                   "false is not supported: Strata's ZeRO-2 reduce-scatters "
                   "gradients kept in one contiguous buffer (true" +
                       rule + ")");
    }
  }
  return absl::OkStatus();
}

// Stage 3 is Strata's FSDP (full shard; MiCS: hybrid sharding).
absl::Status Mapper::MapZeroStage3() {
  const DeepSpeedZeroConfig& z = c_.zero;
  const std::string p = "zero_optimization.";
  strategies::FsdpOptions& fsdp = o_.strategy.fsdp;
  if (z.mics_shard_size > 0) {
    if (world_size_ % z.mics_shard_size != 0) {
      return Error(
          p + "mics_shard_size",
          absl::StrCat(z.mics_shard_size, " does not divide the world size ",
                       world_size_));
    }
    Set("fsdp_sharding", &fsdp.sharding, ShardingStrategy::kHybridShard,
        p + "mics_shard_size", Text(z.mics_shard_size));
    Set("fsdp_hybrid_shard_group_size", &fsdp.hybrid_shard_group_size,
        static_cast<int>(z.mics_shard_size), p + "mics_shard_size");
  } else {
    Set("fsdp_sharding", &fsdp.sharding, ShardingStrategy::kFullShard,
        p + "stage", "3");
  }
  // Parameters below the threshold stay whole on every rank: Strata keeps
  // units below --fsdp_wrap_min_params in the gathered root (per unit, not
  // per tensor).
  Set("fsdp_wrap_min_params", &fsdp.wrap_policy.min_num_params,
      z.stage3_param_persistence_threshold,
      p + "stage3_param_persistence_threshold");
  Set("fsdp_wrap_unit_types", &fsdp.wrap_policy.unit_types,
      std::vector<std::string>(), p + "stage3_param_persistence_threshold",
      Text(z.stage3_param_persistence_threshold));
  // Prefetching on or off; Strata prefetches one unit ahead.
  const bool prefetch = z.stage3_prefetch_bucket_size > 0;
  const std::string size = Text(z.stage3_prefetch_bucket_size);
  Set("fsdp_forward_prefetch", &fsdp.forward_prefetch, prefetch,
      p + "stage3_prefetch_bucket_size", size);
  Set("fsdp_backward_prefetch", &fsdp.backward_prefetch,
      prefetch ? BackwardPrefetch::kBackwardPre : BackwardPrefetch::kNone,
      p + "stage3_prefetch_bucket_size", size);
  const bool overlap = z.overlap_comm.value_or(true);
  Set("fsdp_reductions_in_flight", &fsdp.reductions_in_flight, overlap ? 1 : 0,
      p + "overlap_comm", Text(overlap));
  if (!z.contiguous_gradients || !z.reduce_scatter) {
    return Error(p + (z.contiguous_gradients ? "reduce_scatter"
                                             : "contiguous_gradients"),
                 "false is not supported: Strata's FSDP reduce-scatters each "
                 "unit's gradients from one contiguous buffer (true, the "
                 "only value matching what Strata does)");
  }
  const std::string granularity =
      "DeepSpeed sizes its stage-3 scheduling in elements; Strata gathers, "
      "prefetches and reduces whole FSDP units (--fsdp_limit_all_gathers, "
      "--fsdp_reductions_in_flight) and steps each rank's whole shard; the "
      "arithmetic is the same";
  NoEffect(p + "reduce_bucket_size", Text(z.reduce_bucket_size), granularity);
  NoEffect(p + "stage3_max_live_parameters", Text(z.stage3_max_live_parameters),
           granularity);
  NoEffect(p + "stage3_max_reuse_distance", Text(z.stage3_max_reuse_distance),
           granularity);
  NoEffect(p + "sub_group_size", Text(z.sub_group_size), granularity);
  if (c_.Given(p + "stage3_prefetch_bucket_size") && prefetch) {
    log_.push_back(absl::StrCat(
        p, "stage3_prefetch_bucket_size=", size,
        ": Strata prefetches one FSDP unit ahead, whatever its size"));
  }
  NoEffect(p + "stage3_gather_16bit_weights_on_model_save",
           Text(z.stage3_gather_16bit_weights_on_model_save),
           "Strata gathers the full fp32 model into <output_dir>/model.pt at "
           "the end of every run");
  NoEffect(p + "memory_efficient_linear", Text(z.memory_efficient_linear),
           "a DeepSpeed implementation detail of stage 3's linear layers");
  NoEffect(p + "override_module_apply", Text(z.override_module_apply),
           "a DeepSpeed implementation detail of stage 3's module init");
  NoEffect(p + "ignore_unused_parameters", Text(z.ignore_unused_parameters),
           "DeepSpeed reads it at stage 2 only");
  return absl::OkStatus();
}

// CPU offload: Strata's FSDP offloads parameter shards and optimizer state
// together (--fsdp_cpu_offload); Strata's ZeRO-1/2 does not offload.
absl::Status Mapper::MapZeroOffload() {
  const DeepSpeedZeroConfig& z = c_.zero;
  const std::string p = "zero_optimization.";
  const bool optimizer = z.offload_optimizer.device == "cpu";
  const bool param = z.offload_param.device == "cpu";
  if (z.stage < 3) {
    if (optimizer) {
      return Error(
          p + "offload_optimizer.device",
          absl::StrCat("cpu with stage ", z.stage,
                       z.stage == 0 ? ": DeepSpeed offloads only with ZeRO"
                                    : ": Strata's ZeRO-1/2 keeps optimizer "
                                      "state on the device",
                       "; use stage 3 (Strata's FSDP with "
                       "--fsdp_cpu_offload) or remove "
                       "offload_optimizer"));
    }
    if (param) {
      return Error(p + "offload_param.device",
                   absl::StrCat("cpu with stage ", z.stage,
                                ": parameter offload needs stage 3 "
                                "(DeepSpeed's too)"));
    }
    return absl::OkStatus();
  }
  if (optimizer != param) {
    return Error(
        p + (optimizer ? "offload_param.device" : "offload_optimizer.device"),
        "Strata's FSDP offloads parameter shards and optimizer state "
        "together (--fsdp_cpu_offload): set offload_optimizer.device and "
        "offload_param.device both to cpu, or neither");
  }
  Set("fsdp_cpu_offload", &o_.strategy.fsdp.cpu_offload, optimizer,
      p + "offload_optimizer.device", optimizer ? "\"cpu\"" : "\"none\"");
  for (const char* section : {"offload_optimizer", "offload_param"}) {
    const DeepSpeedOffloadConfig& off = std::string(section) == "offload_param"
                                            ? z.offload_param
                                            : z.offload_optimizer;
    NoEffect(p + section + ".pin_memory", Text(off.pin_memory),
             "Strata has no pinned-memory option (its CPU offload is the "
             "identity on CPU builds)");
  }
  return absl::OkStatus();
}

// Keys DeepSpeed reads only at other stages than the configured one.
void Mapper::MapZeroIgnored() {
  const DeepSpeedZeroConfig& z = c_.zero;
  const std::string p = "zero_optimization.";
  const std::string at =
      absl::StrCat("DeepSpeed ignores it at stage ", z.stage);
  if (z.stage == 0 || z.stage == 3) {
    if (z.stage == 0) {
      NoEffect(p + "reduce_bucket_size", Text(z.reduce_bucket_size),
               at + " (it all-reduces after backward in fixed buckets); "
                    "--bucket_bytes sizes Strata's DDP buckets");
    }
    NoEffect(p + "allgather_bucket_size", Text(z.allgather_bucket_size), at);
    NoEffect(p + "allgather_partitions", Text(z.allgather_partitions), at);
  }
  if (z.stage <= 1) {
    if (z.overlap_comm.has_value()) {
      NoEffect(p + "overlap_comm", Text(*z.overlap_comm), at);
    }
    NoEffect(p + "contiguous_gradients", Text(z.contiguous_gradients), at);
    NoEffect(p + "reduce_scatter", Text(z.reduce_scatter), at);
  }
  if (z.stage != 3) {
    for (const auto& [key, value] :
         std::vector<std::pair<std::string, std::string>>{
             {"sub_group_size", Text(z.sub_group_size)},
             {"stage3_prefetch_bucket_size",
              Text(z.stage3_prefetch_bucket_size)},
             {"stage3_param_persistence_threshold",
              Text(z.stage3_param_persistence_threshold)},
             {"stage3_max_live_parameters", Text(z.stage3_max_live_parameters)},
             {"stage3_max_reuse_distance", Text(z.stage3_max_reuse_distance)},
             {"stage3_gather_16bit_weights_on_model_save",
              Text(z.stage3_gather_16bit_weights_on_model_save)},
             {"memory_efficient_linear", Text(z.memory_efficient_linear)},
             {"override_module_apply", Text(z.override_module_apply)}}) {
      NoEffect(p + key, value, at);
    }
  }
  NoEffect("zero_force_ds_cpu_optimizer", Text(c_.zero_force_ds_cpu_optimizer),
           "Strata runs its own fused optimizers wherever the state lives");
}

// DeepSpeed's optimizer section (DeepSpeed builds it itself; absent, the
// client's optimizer, here the flags). Type Adam is AdamW unless
// adam_w_mode is false (DeepSpeed's "Adam forces AdamW logic unless
// adam_w_mode is explicitly set"); AdamW is always AdamW. Defaults are the
// optimizer class's: FusedAdam's (weight decay 0) unless torch_adam builds
// torch.optim.AdamW (weight decay 0.01).
absl::Status Mapper::MapOptimizer() {
  const DeepSpeedOptimizerConfig& opt = c_.optimizer;
  if (!opt.present) return absl::OkStatus();
  const std::string p = "optimizer.params.";
  const bool adam_family = opt.type != "sgd";
  const bool adamw =
      opt.type == "adamw" || (opt.type == "adam" && opt.adam_w_mode);
  const OptimizerKind kind = !adam_family ? OptimizerKind::kSgd
                             : adamw      ? OptimizerKind::kAdamW
                                          : OptimizerKind::kAdam;
  Set("optimizer", &o_.optimizer.kind, kind, "optimizer.type",
      absl::StrCat("\"", opt.type, "\"",
                   opt.type == "adam" ? absl::StrCat(" with adam_w_mode=",
                                                     Text(opt.adam_w_mode))
                                      : ""));
  if (opt.type == "adamw" && c_.Given(p + "adam_w_mode") && !opt.adam_w_mode) {
    log_.push_back(absl::StrCat(
        p, "adam_w_mode=false from ", c_.source,
        " has no effect: DeepSpeed runs type AdamW as AdamW regardless"));
  }
  const bool scheduled =
      c_.scheduler.present &&
      (c_.scheduler.type == "WarmupLR" || c_.scheduler.type == "WarmupDecayLR");
  if (!scheduled) {
    Set("lr", &o_.schedule.base_lr, opt.lr, p + "lr");
  } else {
    NoEffect(p + "lr", Text(opt.lr),
             absl::StrCat("scheduler ", c_.scheduler.type,
                          " sets every step's lr (its warmup_max_lr is "
                          "--lr)"));
  }
  double weight_decay = opt.weight_decay;
  std::string decay_text = Text(weight_decay);
  if (!c_.Given(p + "weight_decay") && opt.torch_adam && adamw) {
    weight_decay = 0.01;
    decay_text = "0.01, torch.optim.AdamW's default with torch_adam";
  }
  Set("weight_decay", &o_.optimizer.weight_decay, weight_decay,
      p + "weight_decay", decay_text);
  if (o_.optimizer.weight_decay > 0) {
    log_.push_back(absl::StrCat(
        "weight decay ", Text(o_.optimizer.weight_decay),
        ": Strata decays matrices and embeddings only (biases and norm gains "
        "get none), where DeepSpeed decays every parameter of the param "
        "groups it is given"));
  }
  if (adam_family) {
    Set("beta1", &o_.optimizer.adamw.beta1, opt.betas[0], p + "betas",
        absl::StrFormat("[%g, %g]", opt.betas[0], opt.betas[1]));
    Set("beta2", &o_.optimizer.adamw.beta2, opt.betas[1], p + "betas",
        absl::StrFormat("[%g, %g]", opt.betas[0], opt.betas[1]));
    Set("eps", &o_.optimizer.adamw.eps, opt.eps, p + "eps");
    NoEffect(p + "torch_adam", Text(opt.torch_adam),
             "it picks DeepSpeed's implementation (torch.optim or FusedAdam) "
             "of the same update; Strata runs its own fused one");
  } else {
    Set("momentum", &o_.optimizer.sgd.momentum, opt.momentum, p + "momentum");
    Set("dampening", &o_.optimizer.sgd.dampening, opt.dampening,
        p + "dampening");
    Set("nesterov", &o_.optimizer.sgd.nesterov, opt.nesterov, p + "nesterov");
  }
  return absl::OkStatus();
}

// DeepSpeed's schedules are Strata's warmup_lr, warmup_decay_lr and
// warmup_cosine_lr, exactly (optim/lr_schedule.h). Absent: the flags'.
absl::Status Mapper::MapScheduler() {
  const DeepSpeedSchedulerConfig& s = c_.scheduler;
  if (!s.present) return absl::OkStatus();
  const std::string p = "scheduler.params.";
  const optim::LrScheduleKind kind =
      s.type == "WarmupLR"        ? optim::LrScheduleKind::kWarmupLr
      : s.type == "WarmupDecayLR" ? optim::LrScheduleKind::kWarmupDecayLr
                                  : optim::LrScheduleKind::kWarmupCosineLr;
  Set("lr_schedule", &o_.schedule.kind, kind, "scheduler.type",
      absl::StrCat("\"", s.type, "\""));
  Set("warmup_steps", &o_.schedule.warmup_steps, s.warmup_num_steps,
      p + "warmup_num_steps");
  Set("lr_warmup_type", &o_.schedule.warmup_type, s.warmup_type,
      p + "warmup_type", absl::StrCat("\"", s.warmup_type, "\""));
  if (kind != optim::LrScheduleKind::kWarmupCosineLr) {
    Set("lr", &o_.schedule.base_lr, s.warmup_max_lr, p + "warmup_max_lr");
    Set("min_lr", &o_.schedule.min_lr, s.warmup_min_lr, p + "warmup_min_lr");
  } else {
    Set("lr_warmup_min_ratio", &o_.schedule.warmup_min_ratio,
        s.warmup_min_ratio, p + "warmup_min_ratio");
    Set("lr_cos_min_ratio", &o_.schedule.min_ratio, s.cos_min_ratio,
        p + "cos_min_ratio");
  }
  if (kind != optim::LrScheduleKind::kWarmupLr) {
    Set("lr_total_steps", &o_.schedule.total_steps, *s.total_num_steps,
        p + "total_num_steps");
  }
  return absl::OkStatus();
}

// DeepSpeed's section configures deepspeed.checkpointing, which the model
// calls on each transformer layer (Megatron-style); Strata recomputes the
// model's blocks, the same units.
absl::Status Mapper::MapActivationCheckpointing() {
  const DeepSpeedActivationCheckpointingConfig& a = c_.activation_checkpointing;
  if (!a.present) return absl::OkStatus();
  absl::StatusOr<models::ModelConfig> model = models::ConfigByName(o_.model);
  if (!model.ok()) {
    return Error("activation_checkpointing",
                 absl::StrCat("needs the model's block type, but --model=",
                              o_.model, ": ", model.status().message()));
  }
  const std::string block =
      model->family == "llama" ? "LlamaBlock" : "GPTBlock";
  Set("checkpoint_units", &o_.strategy.checkpoint_units,
      std::vector<std::string>{block}, "activation_checkpointing", "{...}");
  if (a.number_checkpoints.has_value()) {
    NoEffect("activation_checkpointing.number_checkpoints",
             Text(*a.number_checkpoints),
             "it sizes DeepSpeed's contiguous activation buffer, which "
             "Strata does not use");
  }
  NoEffect("activation_checkpointing.synchronize_checkpoint_boundary",
           Text(a.synchronize_checkpoint_boundary),
           "a CUDA synchronisation; Strata's CPU recomputation is "
           "synchronous");
  return absl::OkStatus();
}

absl::Status Mapper::MapRun() {
  Set("grad_clip", &o_.optimizer.grad_clip, c_.gradient_clipping,
      "gradient_clipping");
  Set("log_interval", &o_.log_interval, c_.steps_per_print, "steps_per_print");
  Set("wall_clock_breakdown", &o_.wall_clock_breakdown, c_.wall_clock_breakdown,
      "wall_clock_breakdown");
  for (const char* key :
       {"tensorboard", "wandb", "csv_monitor", "comet", "flops_profiler",
        "comms_logger", "amp", "torch_autocast", "eigenvalue",
        "progressive_layer_drop", "curriculum_learning", "data_efficiency",
        "elasticity", "autotuning", "nebula", "quantize_training",
        "hybrid_engine"}) {
    NoEffect(key, "{\"enabled\": false, ...}", "it is disabled");
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ApplyDeepSpeedConfig(const DeepSpeedConfig& config, int world_size,
                                  const std::set<std::string>& explicit_flags,
                                  TrainOptions* options,
                                  std::vector<std::string>* log_lines) {
  if (world_size < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("world size must be >= 1, got ", world_size));
  }
  return Mapper(config, world_size, explicit_flags, options, log_lines).Apply();
}

}  // namespace strata::launch
