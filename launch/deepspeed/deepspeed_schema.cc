#include "launch/deepspeed/deepspeed_schema.h"

#include <cmath>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace strata::launch {
namespace {

using C = DeepSpeedConfig;
using F = DeepSpeedField;
using Kind = DeepSpeedKind;
using Spec = DeepSpeedKeySpec;
using FieldOf = F (*)(C&);

Spec Key(std::string path, Kind kind, DeepSpeedValue fallback, FieldOf field) {
  Spec s;
  s.path = std::move(path);
  s.kind = kind;
  s.fallback = std::move(fallback);
  s.field = field;
  return s;
}

Spec Section(std::string path, FieldOf present = nullptr) {
  return Key(std::move(path), Kind::kSection, {}, present);
}
Spec Bool(std::string path, bool fallback, FieldOf field = nullptr) {
  return Key(std::move(path), Kind::kBool, fallback, field);
}
Spec Int(std::string path, int64_t fallback, FieldOf field = nullptr) {
  return Key(std::move(path), Kind::kInt, fallback, field);
}
// An integer whose default is null (unset).
Spec IntOrNull(std::string path, FieldOf field) {
  return Key(std::move(path), Kind::kInt, {}, field).Nullable();
}
Spec Number(std::string path, double fallback, FieldOf field = nullptr) {
  return Key(std::move(path), Kind::kNumber, fallback, field);
}
Spec String(std::string path, DeepSpeedValue fallback,
            FieldOf field = nullptr) {
  return Key(std::move(path), Kind::kString, std::move(fallback), field);
}
// A key Strata does not implement: giving it is the error `why`.
Spec Unimplemented(std::string path, std::string why) {
  return Section(std::move(path)).Rejected(std::move(why));
}
// A section of a feature Strata does not implement, accepted only disabled.
Spec Disabled(std::string path, const std::string& what) {
  const std::string why =
      absl::StrCat("Strata does not implement ", what,
                   "; remove the section or set ", path, ".enabled to false");
  return Section(std::move(path)).DisabledOnly(why);
}

constexpr int64_t k5e8 = 500'000'000;
constexpr int64_t k1e9 = 1'000'000'000;

std::vector<Spec> TopLevelKeys() {
  std::vector<Spec> t;
  t.push_back(IntOrNull("train_batch_size", [](C& c) -> F {
                return &c.train_batch_size;
              }).AtLeast(1));
  t.push_back(IntOrNull("train_micro_batch_size_per_gpu", [](C& c) -> F {
                return &c.train_micro_batch_size_per_gpu;
              }).AtLeast(1));
  t.push_back(IntOrNull("gradient_accumulation_steps", [](C& c) -> F {
                return &c.gradient_accumulation_steps;
              }).AtLeast(1));
  t.push_back(Number("gradient_clipping", 0.0, [](C& c) -> F {
                return &c.gradient_clipping;
              }).AtLeast(0));
  t.push_back(Int("steps_per_print", 10, [](C& c) -> F {
                return &c.steps_per_print;
              }).AtLeast(1));
  t.push_back(Bool("wall_clock_breakdown", false,
                   [](C& c) -> F { return &c.wall_clock_breakdown; }));
  t.push_back(String("communication_data_type", {},
                     [](C& c) -> F { return &c.communication_data_type; })
                  .Nullable()
                  .Lowercase()
                  .OneOf({"fp32", "bf16", "fp16"}));
  t.push_back(Bool("zero_force_ds_cpu_optimizer", true,
                   [](C& c) -> F { return &c.zero_force_ds_cpu_optimizer; }));
  t.push_back(Bool("prescale_gradients", false)
                  .OnlyDefault("Strata does not implement prescaled "
                               "gradients (it averages after reducing)"));
  t.push_back(Number("gradient_predivide_factor", 1.0)
                  .OnlyDefault("Strata does not implement gradient "
                               "pre-division"));
  t.push_back(Bool("sparse_gradients", false)
                  .OnlyDefault("Strata does not implement sparse gradients"));
  t.push_back(Bool("zero_allow_untested_optimizer", false)
                  .OnlyDefault("Strata runs only its own Adam, AdamW and "
                               "SGD, so there is no client optimizer to "
                               "allow"));
  t.push_back(Bool("dump_state", false)
                  .OnlyDefault("Strata does not implement dump_state"));
  t.push_back(Bool("memory_breakdown", false)
                  .OnlyDefault("Strata does not implement DeepSpeed's "
                               "memory breakdown"));
  t.push_back(Bool("dataloader_drop_last", false)
                  .OnlyDefault("Strata feeds batches from its own sampler, "
                               "not DeepSpeed's data loader"));
  t.push_back(Bool("disable_allgather", false)
                  .OnlyDefault("Strata does not implement disable_allgather"));
  t.push_back(Bool("graph_harvesting", false)
                  .OnlyDefault("Strata does not implement CUDA graph "
                               "harvesting"));
  t.push_back(Bool("use_data_before_expert_parallelism", false)
                  .OnlyDefault("Strata has no expert (MoE) parallelism"));
  t.push_back(
      String("seq_parallel_communication_data_type", std::string("fp32"))
          .OnlyDefault("Strata has no sequence parallelism"));
  t.push_back(Section("data_types"));
  t.push_back(String("data_types.grad_accum_dtype", {},
                     [](C& c) -> F { return &c.grad_accum_dtype; })
                  .Nullable()
                  .Lowercase()
                  .OneOf({"fp32", "bf16", "fp16"})
                  .Reject("bf16",
                          "Strata accumulates gradients across "
                          "micro-batches in fp32 only")
                  .Reject("fp16",
                          "Strata accumulates gradients across "
                          "micro-batches in fp32 only"));
  return t;
}

std::vector<Spec> PrecisionKeys() {
  std::vector<Spec> t;
  t.push_back(Section("bf16"));
  t.push_back(
      Bool("bf16.enabled", false, [](C& c) -> F { return &c.bf16_enabled; }));
  t.push_back(Bool("bf16.immediate_grad_update", false,
                   [](C& c) -> F { return &c.bf16_immediate_grad_update; }));
  t.push_back(Bool("bf16.check_grad_overflow", false)
                  .OnlyDefault("Strata does not check bf16 gradients for "
                               "overflow"));
  t.push_back(Unimplemented("bfloat16",
                            "the old name of the bf16 section: write bf16"));
  t.push_back(Section("fp16"));
  t.push_back(
      Bool("fp16.enabled", false, [](C& c) -> F { return &c.fp16.enabled; }));
  t.push_back(Bool("fp16.auto_cast", false,
                   [](C& c) -> F { return &c.fp16.auto_cast; }));
  t.push_back(Number("fp16.loss_scale", 0, [](C& c) -> F {
                return &c.fp16.loss_scale;
              }).AtLeast(0));
  t.push_back(Int("fp16.initial_scale_power", 16,
                  [](C& c) -> F { return &c.fp16.initial_scale_power; })
                  .AtLeast(0)
                  .AtMost(127));
  t.push_back(Int("fp16.loss_scale_window", 1000, [](C& c) -> F {
                return &c.fp16.loss_scale_window;
              }).AtLeast(1));
  t.push_back(Int("fp16.hysteresis", 2, [](C& c) -> F {
                return &c.fp16.hysteresis;
              }).AtLeast(1));
  t.push_back(Bool("fp16.consecutive_hysteresis", false,
                   [](C& c) -> F { return &c.fp16.consecutive_hysteresis; }));
  t.push_back(Number("fp16.min_loss_scale", 1, [](C& c) -> F {
                return &c.fp16.min_loss_scale;
              }).Above(0));
  t.push_back(Bool("fp16.fp16_master_weights_and_grads", false)
                  .OnlyDefault("Strata keeps master weights and their "
                               "gradients in fp32"));
  return t;
}

std::vector<Spec> OptimizerKeys() {
  std::vector<Spec> t;
  t.push_back(
      Section("optimizer", [](C& c) -> F { return &c.optimizer.present; }));
  t.push_back(String("optimizer.type", {},
                     [](C& c) -> F { return &c.optimizer.type; }));
  t.push_back(Bool("optimizer.legacy_fusion", false)
                  .OnlyDefault("Strata does not implement DeepSpeed's legacy "
                               "fused fp16 optimizer"));
  t.push_back(Section("optimizer.params"));
  t.push_back(Number("optimizer.params.lr", 1e-3, [](C& c) -> F {
                return &c.optimizer.lr;
              }).Above(0));
  t.push_back(Key("optimizer.params.betas", Kind::kPair,
                  std::array<double, 2>{0.9, 0.999},
                  [](C& c) -> F { return &c.optimizer.betas; })
                  .AtLeast(0)
                  .Below(1));
  t.push_back(Number("optimizer.params.eps", 1e-8, [](C& c) -> F {
                return &c.optimizer.eps;
              }).AtLeast(0));
  t.push_back(Number("optimizer.params.weight_decay", 0.0, [](C& c) -> F {
                return &c.optimizer.weight_decay;
              }).AtLeast(0));
  t.push_back(Bool("optimizer.params.bias_correction", true)
                  .OnlyDefault("Strata's Adam and AdamW always correct the "
                               "moments' bias"));
  t.push_back(Bool("optimizer.params.amsgrad", false)
                  .OnlyDefault("Strata does not implement AMSGrad"));
  t.push_back(Bool("optimizer.params.torch_adam", false,
                   [](C& c) -> F { return &c.optimizer.torch_adam; }));
  t.push_back(Bool("optimizer.params.adam_w_mode", true,
                   [](C& c) -> F { return &c.optimizer.adam_w_mode; }));
  t.push_back(Number("optimizer.params.momentum", 0.0, [](C& c) -> F {
                return &c.optimizer.momentum;
              }).AtLeast(0));
  t.push_back(Number("optimizer.params.dampening", 0.0,
                     [](C& c) -> F { return &c.optimizer.dampening; }));
  t.push_back(Bool("optimizer.params.nesterov", false,
                   [](C& c) -> F { return &c.optimizer.nesterov; }));
  t.push_back(Unimplemented("optimizer.params.max_grad_norm",
                            "DeepSpeed rejects it too: clip with the "
                            "top-level gradient_clipping"));
  return t;
}

std::vector<Spec> SchedulerKeys() {
  std::vector<Spec> t;
  t.push_back(
      Section("scheduler", [](C& c) -> F { return &c.scheduler.present; }));
  t.push_back(String("scheduler.type", {},
                     [](C& c) -> F { return &c.scheduler.type; }));
  t.push_back(Section("scheduler.params"));
  t.push_back(Number("scheduler.params.warmup_min_lr", 0.0, [](C& c) -> F {
                return &c.scheduler.warmup_min_lr;
              }).AtLeast(0));
  t.push_back(Number("scheduler.params.warmup_max_lr", 0.001, [](C& c) -> F {
                return &c.scheduler.warmup_max_lr;
              }).Above(0));
  t.push_back(Int("scheduler.params.warmup_num_steps", 1000, [](C& c) -> F {
                return &c.scheduler.warmup_num_steps;
              }).AtLeast(0));
  t.push_back(
      String("scheduler.params.warmup_type", std::string("log"), [](C& c) -> F {
        return &c.scheduler.warmup_type;
      }).OneOf({"log", "linear"}));
  t.push_back(IntOrNull("scheduler.params.total_num_steps", [](C& c) -> F {
                return &c.scheduler.total_num_steps;
              }).AtLeast(0));
  t.push_back(Number("scheduler.params.warmup_min_ratio", 0.0,
                     [](C& c) -> F { return &c.scheduler.warmup_min_ratio; })
                  .AtLeast(0)
                  .AtMost(1));
  t.push_back(Number("scheduler.params.cos_min_ratio", 0.0001,
                     [](C& c) -> F { return &c.scheduler.cos_min_ratio; })
                  .AtLeast(0)
                  .AtMost(1));
  t.push_back(Int("scheduler.params.last_batch_iteration", -1)
                  .OnlyDefault("a schedule always starts at its beginning; "
                               "--resume restores a run's position from its "
                               "checkpoint"));
  return t;
}

// zero_optimization.offload_optimizer or .offload_param (`param`).
std::vector<Spec> OffloadKeys(bool param) {
  const std::string p = param ? "zero_optimization.offload_param"
                              : "zero_optimization.offload_optimizer";
  const std::string nvme = "Strata does not implement NVMe offload";
  std::vector<Spec> t;
  t.push_back(Section(
      p,
      param ? +[](C& c) -> F { return &c.zero.offload_param.present; }
            : +[](C& c) -> F { return &c.zero.offload_optimizer.present; }));
  t.push_back(String(
                  p + ".device", std::string("none"),
                  param
                  ? +[](C& c) -> F { return &c.zero.offload_param.device; }
                  : +[](C& c) -> F { return &c.zero.offload_optimizer.device; })
                  .OneOf({"none", "cpu", "nvme"})
                  .Reject("nvme", nvme + " (ZeRO-Infinity)"));
  t.push_back(String(p + ".nvme_path", {}).Nullable().OnlyDefault(nvme));
  t.push_back(Int(p + ".buffer_count", param ? 5 : 4).OnlyDefault(nvme));
  t.push_back(Bool(
      p + ".pin_memory", false,
      param ? +[](C& c) -> F { return &c.zero.offload_param.pin_memory; }
            : +[](C& c) -> F { return &c.zero.offload_optimizer.pin_memory; }));
  if (param) {
    t.push_back(Int(p + ".buffer_size", 100'000'000).OnlyDefault(nvme));
    t.push_back(Int(p + ".max_in_cpu", k1e9).OnlyDefault(nvme));
  } else {
    t.push_back(Bool(p + ".pipeline_read", false).OnlyDefault(nvme));
    t.push_back(Bool(p + ".pipeline_write", false).OnlyDefault(nvme));
    t.push_back(Bool(p + ".fast_init", false).OnlyDefault(nvme));
    t.push_back(Number(p + ".ratio", 1.0)
                    .OnlyDefault(
                        "Strata does not implement partial optimizer offload"));
  }
  return t;
}

std::vector<Spec> ZeroKeys() {
  const std::string z = "zero_optimization.";
  std::vector<Spec> t;
  t.push_back(Section("zero_optimization"));
  t.push_back(Int(z + "stage", 0, [](C& c) -> F {
                return &c.zero.stage;
              }).OneOf({"0", "1", "2", "3"}));
  t.push_back(Bool(z + "contiguous_gradients", true,
                   [](C& c) -> F { return &c.zero.contiguous_gradients; }));
  t.push_back(Bool(z + "reduce_scatter", true,
                   [](C& c) -> F { return &c.zero.reduce_scatter; }));
  t.push_back(Int(z + "reduce_bucket_size", k5e8, [](C& c) -> F {
                return &c.zero.reduce_bucket_size;
              }).AtLeast(1));
  t.push_back(Int(z + "allgather_bucket_size", k5e8, [](C& c) -> F {
                return &c.zero.allgather_bucket_size;
              }).AtLeast(1));
  t.push_back(Bool(z + "allgather_partitions", true,
                   [](C& c) -> F { return &c.zero.allgather_partitions; }));
  t.push_back(Key(z + "overlap_comm", Kind::kBool, {}, [](C& c) -> F {
                return &c.zero.overlap_comm;
              }).Nullable());
  t.push_back(Bool(z + "use_multi_rank_bucket_allreduce", true)
                  .OnlyDefault("Strata's ZeRO reduces whole buckets with one "
                               "collective; it has no per-rank reduce path "
                               "to combine"));
  t.push_back(Bool(z + "load_from_fp32_weights", true)
                  .OnlyDefault("Strata's checkpoints hold the fp32 master "
                               "weights and always load from them"));
  t.push_back(Bool(z + "elastic_checkpoint", false)
                  .OnlyDefault("DeepSpeed no longer supports it (Strata's "
                               "sharded checkpoints load under any world "
                               "size)"));
  t.push_back(Bool(z + "ignore_unused_parameters", true,
                   [](C& c) -> F { return &c.zero.ignore_unused_parameters; }));
  t.push_back(Bool(z + "legacy_stage1", false)
                  .OnlyDefault("Strata does not implement DeepSpeed's legacy "
                               "ZeRO stage 1"));
  t.push_back(Bool(z + "round_robin_gradients", false)
                  .OnlyDefault("it is a CPU-offload optimisation of ZeRO "
                               "stages 1 and 2, which Strata does not "
                               "offload"));
  t.push_back(Int(z + "sub_group_size", k1e9, [](C& c) -> F {
                return &c.zero.sub_group_size;
              }).AtLeast(0));
  t.push_back(Int(z + "stage3_prefetch_bucket_size", 50'000'000, [](C& c) -> F {
                return &c.zero.stage3_prefetch_bucket_size;
              }).AtLeast(0));
  t.push_back(
      Int(z + "stage3_param_persistence_threshold", 100'000, [](C& c) -> F {
        return &c.zero.stage3_param_persistence_threshold;
      }).AtLeast(0));
  t.push_back(Int(z + "stage3_model_persistence_threshold",
                  std::numeric_limits<int64_t>::max())
                  .OnlyDefault("Strata does not cap the parameters that stay "
                               "gathered (the FSDP root)"));
  t.push_back(Int(z + "stage3_max_live_parameters", k1e9, [](C& c) -> F {
                return &c.zero.stage3_max_live_parameters;
              }).AtLeast(0));
  t.push_back(Int(z + "stage3_max_reuse_distance", k1e9, [](C& c) -> F {
                return &c.zero.stage3_max_reuse_distance;
              }).AtLeast(0));
  t.push_back(Bool(z + "stage3_gather_16bit_weights_on_model_save", false,
                   [](C& c) -> F {
                     return &c.zero.stage3_gather_16bit_weights_on_model_save;
                   }));
  const std::string deprecated = "deprecated by DeepSpeed: use ";
  t.push_back(Unimplemented(
      z + "stage3_gather_fp16_weights_on_model_save",
      deprecated + z + "stage3_gather_16bit_weights_on_model_save"));
  t.push_back(
      Unimplemented(z + "cpu_offload", deprecated + z + "offload_optimizer"));
  t.push_back(Unimplemented(z + "cpu_offload_params",
                            deprecated + z + "offload_param"));
  t.push_back(Unimplemented(z + "cpu_offload_use_pin_memory",
                            deprecated + z + "offload_optimizer.pin_memory"));
  t.push_back(Int(z + "zero_hpz_partition_size", 1)
                  .OnlyDefault("Strata does not implement ZeRO++'s "
                               "hierarchical partitioning (hpZ)"));
  t.push_back(Bool(z + "zero_quantized_weights", false)
                  .OnlyDefault("Strata does not implement ZeRO++'s quantized "
                               "weights (qwZ)"));
  t.push_back(Bool(z + "zero_quantized_nontrainable_weights", false)
                  .OnlyDefault("Strata does not implement quantized frozen "
                               "weights"));
  t.push_back(Bool(z + "zero_quantized_gradients", false)
                  .OnlyDefault("Strata does not implement ZeRO++'s quantized "
                               "gradients (qgZ)"));
  t.push_back(Int(z + "mics_shard_size", -1, [](C& c) -> F {
                return &c.zero.mics_shard_size;
              }).AtLeast(-1));
  t.push_back(Bool(z + "mics_hierarchical_params_gather", false)
                  .OnlyDefault("Strata does not implement MiCS's "
                               "hierarchical all-gather"));
  t.push_back(Bool(z + "memory_efficient_linear", true,
                   [](C& c) -> F { return &c.zero.memory_efficient_linear; }));
  t.push_back(Bool(z + "override_module_apply", true,
                   [](C& c) -> F { return &c.zero.override_module_apply; }));
  t.push_back(Bool(z + "pipeline_loading_checkpoint", false)
                  .OnlyDefault("Strata has no pipeline parallelism"));
  for (bool param : {false, true}) {
    for (Spec& s : OffloadKeys(param)) t.push_back(std::move(s));
  }
  return t;
}

std::vector<Spec> ActivationCheckpointingKeys() {
  const std::string a = "activation_checkpointing.";
  std::vector<Spec> t;
  t.push_back(Section("activation_checkpointing", [](C& c) -> F {
    return &c.activation_checkpointing.present;
  }));
  t.push_back(Bool(a + "partition_activations", false)
                  .OnlyDefault("Strata does not partition checkpointed "
                               "activations across ranks (each rank keeps "
                               "its checkpointed units' inputs whole)"));
  t.push_back(Bool(a + "contiguous_memory_optimization", false)
                  .OnlyDefault("Strata does not copy checkpointed "
                               "activations into one contiguous buffer"));
  t.push_back(Bool(a + "cpu_checkpointing", false)
                  .OnlyDefault("Strata keeps checkpointed activations in the "
                               "memory they were computed in"));
  t.push_back(IntOrNull(a + "number_checkpoints", [](C& c) -> F {
                return &c.activation_checkpointing.number_checkpoints;
              }).AtLeast(1));
  t.push_back(Bool(a + "synchronize_checkpoint_boundary", false, [](C& c) -> F {
    return &c.activation_checkpointing.synchronize_checkpoint_boundary;
  }));
  t.push_back(Bool(a + "profile", false)
                  .OnlyDefault("Strata does not profile checkpointed units"));
  return t;
}

// Known DeepSpeed sections and keys of features Strata does not implement.
std::vector<Spec> UnimplementedKeys() {
  std::vector<Spec> t;
  auto no = [](const std::string& what) {
    return absl::StrCat("Strata does not implement ", what,
                        "; remove the section");
  };
  t.push_back(Unimplemented(
      "aio", no("DeepSpeed's asynchronous I/O for NVMe offload (aio)")));
  t.push_back(Unimplemented("pipeline", no("pipeline parallelism")));
  t.push_back(Unimplemented("sparse_attention", no("sparse attention")));
  t.push_back(Unimplemented("compression_training",
                            no("DeepSpeed's compression training")));
  t.push_back(Unimplemented(
      "checkpoint",
      "Strata does not implement DeepSpeed's checkpoint options; Strata's "
      "checkpoints are set by --save_every, --ckpt_format and --ckpt_dir"));
  t.push_back(Unimplemented("tensor_parallel", no("tensor parallelism")));
  t.push_back(Unimplemented("weight_quantization", no("weight quantization")));
  t.push_back(Unimplemented("compile", no("DeepSpeed's compile options")));
  t.push_back(Unimplemented("timers", no("DeepSpeed's timers; "
                                         "wall_clock_breakdown reports "
                                         "Strata's phase times")));
  t.push_back(Unimplemented("zenflow", no("ZenFlow")));
  t.push_back(Disabled("amp", "NVIDIA Apex AMP"));
  t.push_back(Disabled("torch_autocast",
                       "DeepSpeed's torch_autocast (bf16 autocast is "
                       "--precision=bf16)"));
  t.push_back(Disabled("flops_profiler", "DeepSpeed's flops profiler"));
  t.push_back(Disabled("comms_logger", "DeepSpeed's communication logger"));
  t.push_back(Disabled("tensorboard",
                       "the TensorBoard monitor (pass --tensorboard_dir for "
                       "Strata's TensorBoard scalars)"));
  t.push_back(Disabled("wandb",
                       "the Weights & Biases monitor (metrics go "
                       "to <output_dir>/metrics.jsonl)"));
  t.push_back(Disabled("csv_monitor",
                       "the CSV monitor (metrics go to "
                       "<output_dir>/metrics.jsonl)"));
  t.push_back(Disabled("comet",
                       "the Comet monitor (metrics go to "
                       "<output_dir>/metrics.jsonl)"));
  t.push_back(Disabled("eigenvalue", "eigenvalue computation"));
  t.push_back(Disabled("progressive_layer_drop", "progressive layer drop"));
  t.push_back(Disabled("curriculum_learning", "curriculum learning"));
  t.push_back(Disabled("data_efficiency", "DeepSpeed's data efficiency"));
  t.push_back(Disabled("elasticity", "DeepSpeed's elastic training"));
  t.push_back(Disabled("autotuning", "DeepSpeed's autotuning"));
  t.push_back(Disabled("nebula", "Nebula checkpointing"));
  t.push_back(Disabled("quantize_training", "quantized training (MoQ)"));
  t.push_back(Disabled("hybrid_engine", "DeepSpeed's hybrid engine"));
  return t;
}

std::vector<Spec> BuildSchema() {
  std::vector<Spec> schema;
  for (auto part : {TopLevelKeys, PrecisionKeys, OptimizerKeys, SchedulerKeys,
                    ZeroKeys, ActivationCheckpointingKeys, UnimplementedKeys}) {
    for (Spec& s : part()) schema.push_back(std::move(s));
  }
  return schema;
}

}  // namespace

Spec&& Spec::AtLeast(double value) && {
  min = value;
  return std::move(*this);
}
Spec&& Spec::Above(double value) && {
  min = value;
  min_exclusive = true;
  return std::move(*this);
}
Spec&& Spec::AtMost(double value) && {
  max = value;
  return std::move(*this);
}
Spec&& Spec::Below(double value) && {
  max = value;
  max_exclusive = true;
  return std::move(*this);
}
Spec&& Spec::Nullable() && {
  nullable = true;
  return std::move(*this);
}
Spec&& Spec::Lowercase() && {
  lowercase = true;
  return std::move(*this);
}
Spec&& Spec::OneOf(std::vector<std::string> values) && {
  one_of = std::move(values);
  return std::move(*this);
}
Spec&& Spec::Reject(std::string value, std::string reason) && {
  rejected.emplace(std::move(value), std::move(reason));
  return std::move(*this);
}
Spec&& Spec::OnlyDefault(std::string reason) && {
  support = DeepSpeedSupport::kOnlyDefault;
  why = std::move(reason);
  return std::move(*this);
}
Spec&& Spec::Rejected(std::string reason) && {
  support = DeepSpeedSupport::kRejected;
  why = std::move(reason);
  return std::move(*this);
}
Spec&& Spec::DisabledOnly(std::string reason) && {
  support = DeepSpeedSupport::kDisabledOnly;
  why = std::move(reason);
  return std::move(*this);
}

const std::vector<Spec>& DeepSpeedKeySchema() {
  static const auto* schema = new std::vector<Spec>(BuildSchema());
  return *schema;
}

const Spec* FindDeepSpeedKey(absl::string_view path) {
  static const auto* index = [] {
    auto* m = new std::map<std::string, const Spec*, std::less<>>();
    for (const Spec& s : DeepSpeedKeySchema()) m->emplace(s.path, &s);
    return m;
  }();
  auto it = index->find(path);
  return it == index->end() ? nullptr : it->second;
}

const std::vector<std::string>& OptimizerParamKeys(absl::string_view type) {
  static const auto* adam = new std::vector<std::string>{
      "lr",      "betas",      "eps",         "weight_decay", "bias_correction",
      "amsgrad", "torch_adam", "adam_w_mode", "max_grad_norm"};
  static const auto* sgd =
      new std::vector<std::string>{"lr",           "momentum", "dampening",
                                   "weight_decay", "nesterov", "max_grad_norm"};
  static const auto* none = new std::vector<std::string>();
  if (type == "adam" || type == "adamw") return *adam;
  if (type == "sgd") return *sgd;
  return *none;
}

const std::vector<std::string>& SchedulerParamKeys(absl::string_view type) {
  static const auto* warmup = new std::vector<std::string>{
      "warmup_min_lr", "warmup_max_lr", "warmup_num_steps", "warmup_type",
      "last_batch_iteration"};
  static const auto* decay = new std::vector<std::string>{
      "warmup_min_lr", "warmup_max_lr",        "warmup_num_steps",
      "warmup_type",   "last_batch_iteration", "total_num_steps"};
  static const auto* cosine = new std::vector<std::string>{
      "total_num_steps", "warmup_min_ratio", "warmup_num_steps",
      "cos_min_ratio",   "warmup_type",      "last_batch_iteration"};
  static const auto* none = new std::vector<std::string>();
  if (type == "WarmupLR") return *warmup;
  if (type == "WarmupDecayLR") return *decay;
  if (type == "WarmupCosineLR") return *cosine;
  return *none;
}

std::string DeepSpeedValueText(const DeepSpeedValue& value) {
  struct Text {
    std::string operator()(std::monostate) const { return "null"; }
    std::string operator()(bool b) const { return b ? "true" : "false"; }
    std::string operator()(int64_t i) const { return absl::StrCat(i); }
    std::string operator()(double d) const { return absl::StrFormat("%g", d); }
    std::string operator()(const std::string& s) const {
      return absl::StrCat("\"", s, "\"");
    }
    std::string operator()(const std::array<double, 2>& p) const {
      return absl::StrFormat("[%g, %g]", p[0], p[1]);
    }
  };
  return std::visit(Text{}, value);
}

}  // namespace strata::launch
