// strategies::Strategy: how a model is trained across ranks, in the spirit of
// mmengine's strategy `prepare`: a strategy takes a model (and the process
// group), owns its flat parameters, optimizer and gradient communication, and
// runs micro-batches and optimizer steps. "single" runs in one process with no
// communication; "ddp" replicates the model and all-reduces gradients in
// buckets, overlapped with backward (see ddp.h). Create one with
// CreateStrategy (factory.h).
#ifndef STRATA_STRATEGIES_STRATEGY_H_
#define STRATA_STRATEGIES_STRATEGY_H_

#include <ATen/core/Tensor.h>

#include <c10/core/ScalarType.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "base/sharded_tensor.h"
#include "models/unit.h"
#include "optim/adamw.h"

namespace strata::strategies {

struct OptimizerConfig {
  // Decoupled weight decay of matrices and embeddings (biases and norm gains
  // get none; FlatParameters::MatrixDecayRanges).
  double weight_decay = 0.1;
  optim::AdamWOptions adamw;
  // Clip gradients to this global L2 norm; 0: off.
  double grad_clip = 1.0;
};

// Mixed precision (PyTorch FSDP's MixedPrecision): the dtypes the model
// computes with, gradients are communicated in, and buffers are kept in.
// With param_dtype below fp32 the optimizer keeps fp32 master parameters
// (and fp32 state) and gradients are accumulated in fp32 across
// micro-batches; the model's parameters are low-precision copies refreshed
// after every step. All kFloat: plain fp32 training.
struct MixedPrecisionOptions {
  at::ScalarType param_dtype = at::kFloat;   // kFloat or kBFloat16.
  at::ScalarType reduce_dtype = at::kFloat;  // kFloat or kBFloat16.
  at::ScalarType buffer_dtype = at::kFloat;  // kFloat or kBFloat16.
};

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

// When a unit's backward prefetches (all-gathers) the parameters of the unit
// whose backward runs next (PyTorch's BackwardPrefetch).
enum class BackwardPrefetch {
  kBackwardPre,   // Before the current unit's gradient computation.
  kBackwardPost,  // After the current unit's gradient computation.
  kNone,
};

// Which units become FSDP units (each with its own flat parameter); the
// parameters of the other units and those outside every unit go to the root
// flat parameter. A unit is wrapped when ANY of the set criteria accepts it;
// with none set, every unit is wrapped.
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
  BackwardPrefetch backward_prefetch = BackwardPrefetch::kBackwardPre;
  // At most this many unit all-gathers in flight (the rate limiter); 0: no
  // limit.
  int limit_all_gathers = 2;
  // Unit gradient reductions left running while backward goes on, each
  // holding that unit's full gradients until it completes; 0: wait for each
  // one at once (least memory, communication exposed).
  int reductions_in_flight = 1;
  // Keep parameter shards, gradient shards and optimizer state in host
  // memory (GPU builds); on CPU builds this is the identity.
  bool cpu_offload = false;
  // Hybrid sharding: ranks per shard group (e.g. ranks of a node); the world
  // size must be a multiple of it.
  int hybrid_shard_group_size = 0;
  // With gradient accumulation: reduce-scatter every micro-batch's gradients
  // (and free the full gradients) instead of keeping them until the last
  // micro-batch, trading communication for memory.
  bool reduce_scatter_every_micro_step = false;
  // Deferred initialisation: the seed a deferred model (BuildOptions::
  // deferred, parameters on the meta device) was built with. Each rank then
  // materialises only its shards, with the values a full build would have.
  uint64_t init_seed = 0;
};

struct StrategyOptions {
  // "single", "ddp", "zero1", "zero2" or "fsdp".
  std::string kind = "single";
  // DDP: gradient buckets hold at most this many bytes (a parameter larger
  // than that gets a bucket of its own) ...
  int64_t bucket_bytes = int64_t{25} << 20;
  // ... except the first one (the last layers, whose gradients are ready
  // first), which holds at most this many, so communication starts early.
  int64_t first_bucket_bytes = int64_t{1} << 20;
  // DDP: parameters that get no gradient in a step's last backward are an
  // error unless this is set; their buckets are then reduced at Step().
  bool allow_unused_parameters = false;
  MixedPrecisionOptions mixed_precision;
  // Activation checkpointing: units whose type (UnitInfo::type) or name is
  // listed are recomputed during backward instead of keeping their
  // activations; empty: none.
  std::vector<std::string> checkpoint_units;
  FsdpOptions fsdp;  // kind "fsdp" only.
};

// Checks option values; errors name the flag: "--strategy must be single or
// ddp, got 'x'", "--bucket_bytes must be > 0, got 0", "--param_dtype must
// be fp32 or bf16, got Half".
absl::Status ValidateStrategyOptions(const StrategyOptions& options);

// The value of a --param_dtype / --reduce_dtype / --buffer_dtype flag:
// "fp32" or "bf16"; anything else is an error naming `flag`.
absl::StatusOr<at::ScalarType> ParseMixedPrecisionDtype(
    const std::string& flag, const std::string& value);

// Checks `config`: weight_decay finite and >= 0, grad_clip finite and >= 0,
// AdamW options as ValidateAdamWOptions.
absl::Status ValidateOptimizerConfig(const OptimizerConfig& config);

struct StepResult {
  // Global L2 norm of the gradients before clipping.
  double grad_norm = 0;
  // The learning rate the step used.
  double lr = 0;
};

// Per-rank bytes of model state a strategy keeps, counted from the tensors it
// holds.
// With mixed precision, parameter_bytes counts the low-precision compute
// copy and the fp32 master parameters, gradient_bytes the low-precision
// gradients autograd writes and the fp32 accumulation buffer.
struct MemoryReport {
  int64_t parameter_bytes = 0;
  int64_t gradient_bytes = 0;
  int64_t optimizer_bytes = 0;
  int64_t communication_bytes = 0;
  // Gradient storage allocated only during a step and released when its
  // gradients are reduced (ZeRO-2's per-bucket gradients): the most held at
  // once so far (a high-water mark). gradient_bytes counts what is held when
  // Memory() is called.
  int64_t transient_gradient_bytes = 0;
};


class Strategy {
 public:
  virtual ~Strategy() = default;
  Strategy(const Strategy&) = delete;
  Strategy& operator=(const Strategy&) = delete;

  // "single", "ddp", "zero1", "zero2".
  virtual std::string name() const = 0;
  models::UnitModel& model() { return *model_; }
  const std::shared_ptr<models::UnitModel>& shared_model() const {
    return model_;
  }

  // Before the first micro-batch of a step.
  virtual void ZeroGrad() = 0;

  // Forward + loss + backward of one micro-batch (inputs and targets
  // [B, T] int64). The loss is multiplied by `loss_weight` before backward:
  // the micro-batch's share of the batch this rank processes in the step
  // (micro-batch size / per-rank batch size; for "single" the per-rank batch
  // is the global batch; DDP averages gradients across ranks, so equal
  // per-rank batches give the gradient of the global mean loss). Gradients
  // are complete after the backward of the micro-batch with
  // last_micro_batch = true. Returns the unweighted loss.
  virtual absl::StatusOr<double> ForwardBackward(const at::Tensor& inputs,
                                                 const at::Tensor& targets,
                                                 double loss_weight,
                                                 bool last_micro_batch) = 0;

  // Completes gradient communication, clips to grad_clip by global norm and
  // steps the optimizer with the schedule's lr at `step` (>= 0).
  virtual absl::StatusOr<StepResult> Step(int64_t step) = 0;

  virtual MemoryReport Memory() const = 0;
  // Parameter names as in the model; with mixed precision, the fp32 master
  // values (the model's own parameters are low-precision copies of them).
  virtual std::vector<ShardedTensor> ModelState() const = 0;
  // "<param>.exp_avg", "<param>.exp_avg_sq" per parameter, and "step".
  virtual std::vector<ShardedTensor> OptimizerState() const = 0;

  // Every parameter's full fp32 value, in the model's named_parameters()
  // order, on every rank (e.g. to save a state dict). A collective for
  // strategies whose state is sharded; call between steps. The default
  // copies ModelState(), which must then hold whole tensors (Unimplemented
  // otherwise).
  virtual absl::StatusOr<std::vector<std::pair<std::string, at::Tensor>>>
  FullModelState();

  // Call after writing new values into the tensors of ModelState() and
  // OptimizerState() (a checkpoint load), on every rank, before the next
  // ForwardBackward: re-derives what depends on them (low-precision compute
  // copies, gathered or replicated parameters). A collective for strategies
  // that communicate. The default does nothing.
  virtual absl::Status AfterStateLoaded() { return absl::OkStatus(); }

 protected:
  explicit Strategy(std::shared_ptr<models::UnitModel> model);

 private:
  std::shared_ptr<models::UnitModel> model_;
};

}  // namespace strata::strategies

#endif  // STRATA_STRATEGIES_STRATEGY_H_
