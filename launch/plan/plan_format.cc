// FormatMemoryPlan (plan.h): the memory plan as the table strata_plan and
// train --plan_only print.
#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "launch/plan/plan.h"

namespace strata::launch {
namespace {

std::string MiB(int64_t bytes) {
  return absl::StrFormat("%.2f", bytes / 1048576.0);
}

// `every_block` (", checkpointed blocks" in the plan, ", checkpointed" in
// the ranking) or ", one block in k checkpointed" when activation
// checkpointing is on (k = in.checkpoint_every), else "".
std::string CheckpointingLabel(const PlanInput& in,
                               absl::string_view every_block) {
  if (!in.activation_checkpointing) return "";
  if (in.checkpoint_every == 1) return std::string(every_block);
  return absl::StrCat(", one block in ", in.checkpoint_every, " checkpointed");
}

}  // namespace

std::string FormatMemoryPlan(const PlanInput& in, const MemoryPlan& plan) {
  std::string out = absl::StrFormat(
      "%s, Psi = %d parameters, %s on %d ranks, micro-batch %d x %d tokens, "
      "%s%s%s\n",
      in.model.family, plan.num_parameters, in.strategy, in.world_size,
      in.micro_batch, in.seq_len > 0 ? in.seq_len : in.model.seq_len,
      absl::StrCat(in.precision, in.autocast ? ", bf16 autocast" : ""),
      CheckpointingLabel(in, ", checkpointed blocks"),
      in.model.loss_chunk_tokens > 0
          ? absl::StrCat(", loss chunks of ", in.model.loss_chunk_tokens)
          : "");
  absl::StrAppend(&out, "per-rank peak at ", plan.peak_moment, ":\n");
  for (const PlanTerm& t : plan.terms) {
    absl::StrAppendFormat(&out, "  %-42s %12s MiB  %s\n", t.name, MiB(t.bytes),
                          t.formula);
  }
  absl::StrAppendFormat(&out, "  %-42s %12s MiB\n", "total",
                        MiB(plan.peak_bytes));
  return out;
}

std::vector<RankedPlan> RankConfigurations(const PlanInput& base,
                                           int64_t memory_per_rank_bytes,
                                           const Hardware& hardware) {
  std::vector<std::pair<std::string, std::string>> strategies = {
      {"ddp", ""},
      {"zero1", ""},
      {"zero2", ""},
      {"fsdp", "full_shard"},
      {"fsdp", "shard_grad_op"}};
  if (base.world_size == 1)
    strategies.insert(strategies.begin(), {"single", ""});
  std::vector<RankedPlan> fits;
  for (const auto& [strategy, sharding] : strategies) {
    for (const bool ac : {false, true}) {
      for (const int64_t chunk : {int64_t{0}, int64_t{1024}}) {
        RankedPlan r;
        r.input = base;
        r.input.strategy = strategy;
        if (!sharding.empty()) r.input.fsdp_sharding = sharding;
        r.input.activation_checkpointing = ac;
        r.input.model.loss_chunk_tokens = chunk;
        if (!ValidatePlanInput(r.input).ok()) continue;
        r.memory = PlanMemory(r.input);
        if (r.memory.peak_bytes > memory_per_rank_bytes) continue;
        r.time = PlanStepTime(r.input, hardware);
        r.label = absl::StrCat(strategy, sharding.empty() ? "" : " ", sharding,
                               CheckpointingLabel(r.input, ", checkpointed"),
                               chunk > 0 ? ", loss chunks 1024" : "");
        fits.push_back(std::move(r));
      }
    }
  }
  // Fastest first; at equal time, least memory first.
  std::stable_sort(fits.begin(), fits.end(),
                   [](const RankedPlan& a, const RankedPlan& b) {
                     if (a.time.step_s != b.time.step_s) {
                       return a.time.step_s < b.time.step_s;
                     }
                     return a.memory.peak_bytes < b.memory.peak_bytes;
                   });
  return fits;
}

}  // namespace strata::launch
