// FsdpStrategy: fully sharded data parallel (ZeRO-3) over the model's units,
// with PyTorch FSDP's sharding strategies (FULL_SHARD, SHARD_GRAD_OP,
// NO_SHARD, HYBRID_SHARD and its ZeRO-2 variant), forward / backward
// prefetch, a limit on all-gathers in flight, mixed precision, deferred
// initialisation and gathering full parameters on demand.
//
// Layout (planned by fsdp_plan.h, a pure function with its own table test).
// The wrap policy (wrap_policy.h) picks units; each wrapped unit gets
// one flat parameter: its parameters (in the unit's order) concatenated and
// padded to a multiple of the shard group size S, so rank r of the shard
// group owns elements [r * numel / S, (r + 1) * numel / S) — flat sharding,
// a parameter may straddle shard boundaries. Everything else (unwrapped
// units, parameters outside every unit, and parameters shared between units
// such as GPT's tied embedding/head) forms the root flat parameter, sharded
// the same way. With FULL_SHARD and HYBRID_SHARD the root is treated like a
// unit (FSDP2's sharded root): it is gathered around each unit that reads it
// (fsdp_root.h: units owning root parameters, and declared readers of shared
// parameters in the root; code between units reads no parameter) and freed
// when the next unit does not read it, so between steps every byte of model
// state is sharded. GPT's tied wte is gathered for the embed unit's forward,
// again for the head's, again for the head's backward (from the head's
// output hook; freed when the head's input gradient is ready, i.e. its
// backward has run: a unit's input reaches every node of its forward, as in
// GPT's and Llama's units; kept when the unit before reads it too) and for
// the embed's backward (until the end of backward). The root's full gradients
// are allocated by the first backward that reads it and reduce-scattered once,
// after the whole backward. With SHARD_GRAD_OP and NO_SHARD the root stays
// gathered (re-gathered after every optimizer step), and so it does when the
// wrap policy wraps no unit (the whole model is the root, kept whole on every
// rank as DeepSpeed keeps parameters below stage3_param_persistence_threshold,
// rather than gathered around every unit).
//
// State. Every rank keeps, for each flat parameter, its fp32 master shard
// (all shards are views of one buffer, so one fused optimizer updates them)
// with an fp32 gradient shard and optimizer state of the same layout: with
// AdamW or Adam 16 bytes per owned element, 16 * padded / S per rank (SGD:
// 12 with momentum, 8 without). The model's parameters are views of each
// flat parameter's full buffer in the compute dtype (param_dtype); a wrapped
// unit's full buffer has its storage released while the unit is not gathered
// (ReleasableBuffer, mixed_precision.h; docs/ARCHITECTURE.md "Freeing gathered
// parameters"), so tensors and views stay valid objects and the same storage
// is refilled by the next all-gather. A unit's tensors and their release are
// fsdp_unit.h's. Within a step, wrapped units' released memory goes to a
// UnitBufferPool (unit_buffer_pool.h; FsdpOptions::reuse_buffers, off by
// default) and the next buffer of the same size reuses it; the pool holds no
// more than the unit buffers held at once at their peak, is flushed after
// the last unit's forward (the loss follows), closed once the first unit's
// backward has its buffers (no unit is gathered after it; the embedding's
// backward, with its dense gradient, runs beside nothing pooled) and emptied
// at the step's end (before the optimizer), so between steps FSDP holds only
// its shards. The root's buffers are not pooled (released for long
// stretches).
//
// Forward (an interceptor, models/unit.h): before a wrapped unit runs, its
// parameters are all-gathered from the master shards (cast to param_dtype),
// optionally prefetching the next unit's; after it, FULL_SHARD / HYBRID_SHARD
// free them. A hook on the unit's output fires before the unit's backward:
// re-gather (waiting for a prefetch), allocate the unit's full gradient buffer
// (parameters' .grad are views of it), and with kBackwardPre prefetch the unit
// whose backward comes next (kBackwardPost: once this unit's gradients are
// complete and its parameters freed; the default, kAuto, is pre on CUDA and
// post on the CPU: ResolveFsdpSchedule, options.h). When every gradient of the
// unit has been accumulated (gradient-accumulator post-hooks, BucketReadiness),
// its full parameters are freed (all sharded strategies) and its gradients are
// reduce-scattered in reduce_dtype over the shard group, all-reduced across
// replicas (hybrid, NO_SHARD), averaged, accumulated into the fp32 gradient
// shard, and the full gradient buffer is freed. Reductions run asynchronously,
// reductions_in_flight of them while the next unit's backward computes (by
// default 1 on CUDA, 0 on the CPU: ResolveFsdpSchedule). Units are processed in
// the same order on every rank.
//
// Gradient accumulation: by default (reduce_scatter_every_micro_step, as
// PyTorch FSDP and DeepSpeed ZeRO-3) every micro-batch reduce-scatters its
// gradients into the fp32 gradient shard and frees the full gradients. With
// it off (PyTorch's no_sync()), micro-batches before the last keep the full
// gradients (in fp32: with a lower param_dtype each micro-batch's gradients
// are added into an fp32 buffer) and communicate nothing: fewer reductions,
// 4 Psi more memory per rank. fp32 NO_SHARD, whose gradient shard is the
// full gradient, reduces once, in the last micro-batch, either way (PyTorch
// all-reduces it every micro-batch: the same sums, no memory saved).
//
// Step: global gradient-norm clipping over the shards (each rank's part of
// the p-norm all-reduced over the shard group), the optimizer
// (OptimizerConfig: AdamW, Adam or SGD) on the fp32 shards, then a root that
// stays gathered (SHARD_GRAD_OP, NO_SHARD) is re-gathered; wrapped units and
// a sharded root are gathered again by the next forward.
//
// Frozen parameters (requires_grad false) may sit in any flat parameter:
// their optimizer ranges are frozen (never updated, no weight decay). A unit
// holding frozen parameters is freed at the end of backward rather than when
// its gradients are complete (a frozen parameter can still be read by a later
// backward node).
//
// Creation is a collective over `group` (fsdp_init.h): it checks that every
// rank has the same parameters (names, shapes) and the same flat-parameter
// layout (replicas.h's CheckSameOnAllRanks), then
// builds the shards from rank 0's values (sync_module_states), or, for a
// deferred model, materialises only this rank's shard of each parameter
// (peak memory: the shards plus one parameter's full value; the train
// binary defers by default, --fsdp_deferred_init).
//
// CPU offload: master shards, gradient shards and optimizer state live on
// the host and move to the compute device for gathering; with CPU compute,
// device and host are the same and the option changes nothing (it is
// validated and logged). With CUDA compute it is not built yet: the train
// binary refuses --fsdp_cpu_offload there.
//
// Threading: as DdpStrategy: one training thread; hooks run on it (CPU
// autograd runs backward on the calling thread).
#ifndef STRATA_STRATEGIES_FSDP_H_
#define STRATA_STRATEGIES_FSDP_H_

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "comm/group.h"
#include "models/unit.h"
#include "optim/lr_schedule.h"
#include "optim/optimizer.h"
#include "strategies/bucket_readiness.h"
#include "strategies/gradient_arrival_hooks.h"
#include "strategies/strategy.h"
#include "strategies/unit_buffer_pool.h"

namespace strata::strategies {

// ParseShardingStrategy, ParseBackwardPrefetch, ValidateFsdpOptions and the
// FSDP options live in options.h; the flat-unit planner in fsdp_plan.h.

struct FlatUnit;  // fsdp_unit.h

class FsdpStrategy : public Strategy {
 public:
  // A flat parameter as tests and tools see it.
  struct FlatUnitInfo {
    std::string name;  // The unit's name, or "root".
    bool root = false;
    std::vector<std::string> parameters;
    int64_t numel = 0;         // Without padding.
    int64_t padded_numel = 0;  // A multiple of the shard group size.
  };

  // Counters since creation.
  struct Counters {
    int64_t all_gathers = 0;       // Of wrapped units (not the root).
    int64_t root_all_gathers = 0;  // Of the root (at creation too).
    int64_t prefetches = 0;        // All-gathers started ahead of need.
    int64_t prefetches_skipped_by_limit = 0;
    int64_t max_all_gathers_in_flight = 0;
    int64_t reductions = 0;          // Gradient reductions of flat parameters.
    int64_t max_units_gathered = 0;  // Wrapped units gathered at once.
    // Time the training thread spent blocked waiting for all-gathers and
    // gradient reductions: the communication not hidden behind compute.
    double exposed_communication_ms = 0;
  };

  // options.kind must be kFsdp. `group` (borrowed, must outlive the
  // strategy; null means a world of one) spans every rank. A collective.
  static absl::StatusOr<std::unique_ptr<FsdpStrategy>> Create(
      const StrategyOptions& options, std::shared_ptr<models::UnitModel> model,
      comm::Group* group, const OptimizerConfig& config,
      const optim::LrScheduleOptions& schedule);

  // Detaches the interceptor: afterwards the model's wrapped units can no
  // longer run (their parameters' storage is released), and calling them
  // throws. Gather what you need first (FullModelState).
  ~FsdpStrategy() override;

  std::string name() const override { return "fsdp"; }
  void ZeroGrad() override;
  // Bytes held now (counted from the tensors): master shards, gathered
  // full buffers and unit buffers pooled for reuse within a step
  // (parameters), gradient shards, allocated full gradients
  // and fp32 accumulators (gradients), optimizer state, staging of
  // collectives in flight (communication).
  MemoryReport Memory() const override;
  const OptimizerConfig& optimizer_config() const override { return config_; }
  // Per flat parameter, per parameter overlapping this rank's shard: the
  // fp32 master run (1-D) at its offset in the flattened parameter. With
  // hybrid sharding, ranks of different replica groups hold the same runs.
  std::vector<ShardedTensor> ModelState() const override;
  // "<param>.exp_avg", "<param>.exp_avg_sq" runs as ModelState, then "step".
  std::vector<ShardedTensor> OptimizerState() const override;
  // Re-gathers a root that stays gathered and frees gathered units and a
  // sharded root (they gather the new values at their next forward). A
  // collective.
  absl::Status AfterStateLoaded() override;

  // Gathered flat parameter by flat parameter (extra memory: one flat
  // parameter besides the result). Not during a step's micro-batches.
  absl::StatusOr<std::vector<std::pair<std::string, at::Tensor>>>
  FullModelState() override;

  // Gathers every wrapped unit's parameters into the model and keeps them
  // gathered (PyTorch's summon_full_params), e.g. to evaluate or inspect the
  // model; then ReleaseFullParams frees them, first copying each rank's
  // shard back into the fp32 master when `writeback` (only with fp32
  // param_dtype, where the model holds the exact values). Collectives; not
  // during a step's micro-batches. ForwardBackward fails while summoned.
  absl::Status SummonFullParams();
  absl::Status ReleaseFullParams(bool writeback);

  std::vector<FlatUnitInfo> flat_units() const;
  int shard_group_size() const { return shard_size_; }
  int replicate_group_size() const { return replicate_size_; }
  const Counters& counters() const { return counters_; }
  void ResetCounters() { counters_ = Counters(); }
  // Wrapped units whose full parameters are allocated now.
  int num_units_gathered() const;
  // Unit buffers released and reused within a step (FsdpOptions::
  // reuse_buffers); its counters count with the option off too.
  const UnitBufferPool& unit_buffers() const { return unit_buffers_; }

 private:
  struct Reduction;
  class Interceptor;
  friend class Interceptor;

  FsdpStrategy(std::shared_ptr<models::UnitModel> model,
               const StrategyOptions& options, const OptimizerConfig& config,
               comm::Group* world);

  // Strategy's hooks: arm gradient readiness and allocate the root's
  // gradients / finish the backward's reductions and free units / complete
  // reductions, clip over the shard group, step, re-gather.
  absl::Status BeforeMicroBatch(bool last_micro_batch) override;
  absl::Status AfterMicroBatch(bool last_micro_batch,
                               absl::Status backward) override;
  absl::StatusOr<StepResult> DoStep(int64_t step) override;

  // Creation, in this order (Create calls Build).
  absl::Status Build(const optim::LrScheduleOptions& schedule);
  // Shard and replicate groups; checks the model is the same on every rank.
  absl::Status SetUpGroups();
  // Plans the flat units (fsdp_plan.h), checks the plan is the same on
  // every rank and creates flat_units_; returns the master buffer's size.
  absl::StatusOr<int64_t> PlanUnits();
  absl::Status BuildOptimizer(const optim::LrScheduleOptions& schedule);
  // Gradient-readiness hooks and the forward interceptor.
  void AddHooks();

  bool sharded() const { return shard_size_ > 1; }
  bool reshard_after_forward() const;
  at::ScalarType param_dtype() const {
    return options_.mixed_precision.param_dtype;
  }

  // Runs a wrapped unit or one reading the sharded root (the interceptor's
  // work).
  at::Tensor RunUnit(int model_unit, const at::Tensor& input,
                     const models::UnitForward& forward);
  void PreBackward(FlatUnit& unit);
  void PostBackward(size_t bucket);
  // `unit`'s gradients of this micro-batch are complete: reduce them, or
  // (accumulation without communication) keep them, in fp32.
  void CompleteGradients(FlatUnit& unit);
  absl::Status FinishBackward();

  // Gathering and freeing full parameters.
  void StartGather(FlatUnit& unit, bool prefetch);
  void WaitGather(FlatUnit& unit);
  // work.Wait(), timed into counters_.exposed_communication_ms.
  absl::Status WaitExposed(comm::Work& work);
  void Gather(FlatUnit& unit);
  void Prefetch(FlatUnit* unit);
  void Reshard(FlatUnit& unit);
  // After the masters changed (a step, a load): re-gathers what stays
  // gathered (root, unsharded units, summoned units), frees the rest.
  absl::Status RefreshFullParameters();

  // Gradient reduction of `unit` (its full gradients are complete).
  void LaunchReduction(FlatUnit& unit);
  // Advances the oldest reductions until at most `keep` are in flight.
  void DrainReductions(size_t keep);

  FlatUnit* WrappedAt(int position);

  const StrategyOptions options_;
  const OptimizerConfig config_;
  comm::Group* const world_;  // Borrowed; may be null.
  std::unique_ptr<comm::Group> owned_shard_group_;
  std::unique_ptr<comm::Group> owned_replicate_group_;
  comm::Group* shard_group_ = nullptr;                // Null: shard size 1.
  comm::Group* replicate_group_ = nullptr;            // Null: replicate size 1.
  at::Device compute_device_ = at::Device(at::kCPU);  // The model's.
  // options_.fsdp's backward schedule resolved for compute_device_.
  FsdpSchedule fsdp_schedule_;
  at::Device state_device_ = at::Device(at::kCPU);  // Shards, optimizer.
  int shard_size_ = 1;
  int shard_rank_ = 0;
  int replicate_size_ = 1;

  // Keeps released unit buffers within a step (declared before the units
  // whose buffers use it).
  UnitBufferPool unit_buffers_{options_.fsdp.reuse_buffers};
  // The root's flat parameter (if any parameter is left to it) first, then
  // the wrapped units' in forward order. Owns them.
  std::vector<std::unique_ptr<FlatUnit>> flat_units_;
  FlatUnit* root_ = nullptr;  // In flat_units_; null: no root.
  // The root is gathered only around the units that read it (FULL_SHARD,
  // HYBRID_SHARD); otherwise it stays gathered.
  bool root_sharded_ = false;
  // Per model unit: whether it reads the root; all false unless
  // root_sharded_ (fsdp_root.h).
  std::vector<bool> unit_reads_root_;
  std::vector<FlatUnit*> wrapped_;  // In flat_units_, in forward order.
  // Per model unit: its index in wrapped_, or -1 (covered by the root).
  std::vector<int> flat_of_model_unit_;
  at::Tensor master_;       // fp32: every flat parameter's shard.
  at::Tensor grad_shards_;  // fp32, aligned with master_.
  std::unique_ptr<optim::Optimizer> optimizer_;
  std::unique_ptr<optim::LrSchedule> schedule_;
  // Buckets are the wrapped units in reverse forward order.
  std::unique_ptr<BucketReadiness> readiness_;
  // A sharded root's gradients are allocated when its first gradient arrives
  // (a tied parameter's waits in autograd until its last use in backward).
  std::unique_ptr<GradientArrivalHooks> root_grad_hooks_;
  std::shared_ptr<Interceptor> interceptor_;

  // Per micro-batch / step state.
  bool in_micro_batch_ = false;
  bool communicate_ = false;  // This micro-batch reduces gradients.
  bool last_micro_batch_ = false;
  bool summoned_ = false;
  std::deque<FlatUnit*> gathers_in_flight_;
  std::deque<std::unique_ptr<Reduction>> reductions_;
  Counters counters_;
};

}  // namespace strata::strategies

#endif  // STRATA_STRATEGIES_FSDP_H_
