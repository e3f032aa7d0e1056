// The schema of DeepSpeed's JSON configuration as Strata reads it
// (launch/deepspeed/deepspeed_config.h): one table of every known key, by its
// full path, with its JSON type, its range or accepted values, DeepSpeed's
// default and whether Strata implements it, plus the parameters each
// optimizer and scheduler type takes. Keys, defaults and ranges follow
// DeepSpeed's config classes as its current sources have them
// (runtime/config.py, runtime/zero/config.py and offload_config.py,
// precision_config.py, lr_schedules.py, activation_checkpointing/config.py),
// and the typed DeepSpeedConfig the parser fills. Pure data and lookups; no
// JSON parsing here.
#ifndef STRATA_LAUNCH_DEEPSPEED_DEEPSPEED_SCHEMA_H_
#define STRATA_LAUNCH_DEEPSPEED_DEEPSPEED_SCHEMA_H_

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <variant>
#include <vector>

#include "absl/strings/string_view.h"

namespace strata::launch {

// zero_optimization.offload_optimizer / offload_param.
struct DeepSpeedOffloadConfig {
  bool present = false;         // The section was given.
  std::string device = "none";  // "none" or "cpu" ("nvme" is rejected).
  bool pin_memory = false;
};

// zero_optimization: DeepSpeed's ZeRO. Sizes count elements, as DeepSpeed's.
struct DeepSpeedZeroConfig {
  int64_t stage = 0;
  bool contiguous_gradients = true;
  bool reduce_scatter = true;
  int64_t reduce_bucket_size = 0;
  int64_t allgather_bucket_size = 0;
  bool allgather_partitions = true;
  // DeepSpeed's default depends on the stage: true for 3, false otherwise.
  std::optional<bool> overlap_comm;
  bool ignore_unused_parameters = true;
  int64_t sub_group_size = 0;
  int64_t stage3_prefetch_bucket_size = 0;
  int64_t stage3_param_persistence_threshold = 0;
  int64_t stage3_max_live_parameters = 0;
  int64_t stage3_max_reuse_distance = 0;
  bool stage3_gather_16bit_weights_on_model_save = false;
  // MiCS: > 0 shards within groups of this many ranks.
  int64_t mics_shard_size = -1;
  bool memory_efficient_linear = true;
  bool override_module_apply = true;
  DeepSpeedOffloadConfig offload_optimizer;
  DeepSpeedOffloadConfig offload_param;
};

struct DeepSpeedOptimizerConfig {
  bool present = false;
  // Normalised: "adam", "adamw" (DeepSpeed matches them in any case) or
  // "sgd" (DeepSpeed resolves it as torch.optim.SGD: exactly "SGD").
  std::string type;
  double lr = 0;
  std::array<double, 2> betas = {0, 0};
  double eps = 0;
  double weight_decay = 0;
  bool torch_adam = false;
  bool adam_w_mode = true;
  double momentum = 0;
  double dampening = 0;
  bool nesterov = false;
};

struct DeepSpeedSchedulerConfig {
  bool present = false;
  // "WarmupLR", "WarmupDecayLR" or "WarmupCosineLR" (DeepSpeed's class
  // names, case-sensitive as DeepSpeed resolves them).
  std::string type;
  double warmup_min_lr = 0;
  double warmup_max_lr = 0;
  int64_t warmup_num_steps = 0;
  std::string warmup_type;  // "log" or "linear".
  std::optional<int64_t> total_num_steps;
  double warmup_min_ratio = 0;
  double cos_min_ratio = 0;
};

// fp16: --precision=fp16 and the --loss_scale flags
// (launch/deepspeed/deepspeed_options.h).
struct DeepSpeedFp16Config {
  bool enabled = false;
  bool auto_cast = false;
  double loss_scale = 0;  // 0: dynamic.
  int64_t initial_scale_power = 0;
  int64_t loss_scale_window = 0;
  int64_t hysteresis = 0;
  bool consecutive_hysteresis = false;
  double min_loss_scale = 0;
};

struct DeepSpeedActivationCheckpointingConfig {
  bool present = false;
  std::optional<int64_t> number_checkpoints;
  bool synchronize_checkpoint_boundary = false;
};

// Every known key's value: the file's, or DeepSpeed's default (the schema's)
// where the file leaves it out.
struct DeepSpeedConfig {
  std::string source;  // The file name errors and log lines start with.
  // Full paths of the keys the file set ("zero_optimization.stage").
  std::set<std::string> given;
  bool Given(absl::string_view path) const {
    return given.count(std::string(path)) > 0;
  }

  std::optional<int64_t> train_batch_size;
  std::optional<int64_t> train_micro_batch_size_per_gpu;
  std::optional<int64_t> gradient_accumulation_steps;
  double gradient_clipping = 0;
  int64_t steps_per_print = 0;
  bool wall_clock_breakdown = false;
  // "fp32", "bf16" or "fp16" (lower-cased); unset: the training dtype.
  std::optional<std::string> communication_data_type;
  // data_types.grad_accum_dtype: "fp32", "bf16" or "fp16"; unset: DeepSpeed
  // picks.
  std::optional<std::string> grad_accum_dtype;
  bool zero_force_ds_cpu_optimizer = true;
  bool bf16_enabled = false;
  bool bf16_immediate_grad_update = false;
  DeepSpeedFp16Config fp16;
  DeepSpeedZeroConfig zero;
  DeepSpeedOptimizerConfig optimizer;
  DeepSpeedSchedulerConfig scheduler;
  DeepSpeedActivationCheckpointingConfig activation_checkpointing;
};

// A JSON value of a known key: null, a bool, an integer, a number, a string
// or a pair of numbers (betas).
using DeepSpeedValue = std::variant<std::monostate, bool, int64_t, double,
                                    std::string, std::array<double, 2>>;

// Where a key's value goes in DeepSpeedConfig (a section: its `present`
// flag, or nothing).
using DeepSpeedField =
    std::variant<std::nullptr_t, bool*, int64_t*, double*, std::string*,
                 std::optional<bool>*, std::optional<int64_t>*,
                 std::optional<std::string>*, std::array<double, 2>*>;

enum class DeepSpeedKind { kSection, kBool, kInt, kNumber, kString, kPair };

enum class DeepSpeedSupport {
  kRead,          // Read into DeepSpeedConfig; the mapping gives it meaning.
  kOnlyDefault,   // Only DeepSpeed's default is accepted (the value that
                  // matches what Strata does); another value is an error.
  kRejected,      // Giving the key at all is an error: Strata does not
                  // implement it.
  kDisabledOnly,  // A section accepted only as {"enabled": false, ...}.
};

struct DeepSpeedKeySpec {
  std::string path;  // "zero_optimization.offload_optimizer.device".
  DeepSpeedKind kind = DeepSpeedKind::kSection;
  DeepSpeedValue fallback;  // DeepSpeed's default; monostate: none (null).
  bool nullable = false;    // null is accepted (and is the default).
  std::optional<double> min, max;  // Numbers and integers, and each of a
  bool min_exclusive = false;      // pair's elements.
  bool max_exclusive = false;
  bool lowercase = false;           // Strings compare lower-cased.
  std::vector<std::string> one_of;  // Accepted values, as JSON text.
  std::map<std::string, std::string> rejected;  // DeepSpeed accepts these
                                                // values, Strata does not:
                                                // value -> why.
  DeepSpeedSupport support = DeepSpeedSupport::kRead;
  // kOnlyDefault: the clause after "<value> is not supported: "; kRejected
  // and kDisabledOnly: the message after "<path>: ".
  std::string why;
  DeepSpeedField (*field)(DeepSpeedConfig&) = nullptr;

  // Modifiers, for building the table.
  DeepSpeedKeySpec&& AtLeast(double value) &&;
  DeepSpeedKeySpec&& Above(double value) &&;
  DeepSpeedKeySpec&& AtMost(double value) &&;
  DeepSpeedKeySpec&& Below(double value) &&;
  DeepSpeedKeySpec&& Nullable() &&;
  DeepSpeedKeySpec&& Lowercase() &&;
  DeepSpeedKeySpec&& OneOf(std::vector<std::string> values) &&;
  DeepSpeedKeySpec&& Reject(std::string value, std::string why) &&;
  DeepSpeedKeySpec&& OnlyDefault(std::string why) &&;
  DeepSpeedKeySpec&& Rejected(std::string why) &&;
  DeepSpeedKeySpec&& DisabledOnly(std::string why) &&;
};

// Every known key, sections before their keys.
const std::vector<DeepSpeedKeySpec>& DeepSpeedKeySchema();

// The spec of the key at `path`; null if it is not a known key.
const DeepSpeedKeySpec* FindDeepSpeedKey(absl::string_view path);

// The keys of optimizer.params that the (normalised) optimizer type takes
// ("adam", "adamw", "sgd"), and of scheduler.params that the scheduler type
// takes ("WarmupLR", ...); empty for an unknown type.
const std::vector<std::string>& OptimizerParamKeys(absl::string_view type);
const std::vector<std::string>& SchedulerParamKeys(absl::string_view type);

// The JSON text of a value: true, 5e+08 as 500000000, "log", [0.9, 0.999].
std::string DeepSpeedValueText(const DeepSpeedValue& value);

}  // namespace strata::launch

#endif  // STRATA_LAUNCH_DEEPSPEED_DEEPSPEED_SCHEMA_H_
