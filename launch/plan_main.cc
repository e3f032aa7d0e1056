// strata_plan: per-rank memory and step time of a training configuration,
// before launching it (launch/plan.h). Examples:
//
//   bazel run //launch:strata_plan -- --model=gpt-100m --world_size=2 \
//       --strategy=fsdp --micro_batch=4 --seq_len=256
//   bazel run //launch:strata_plan -- --layers=32 --hidden=4096 --heads=32 \
//       --ffn=11008 --vocab=32000 --seq_len=4096 --world_size=64 \
//       --precision=bf16 --memory_per_rank_gib=80 --tflops=400 \
//       --bus_bandwidth_gbps=100
//
// Prints the breakdown of the configuration the flags give; with
// --tflops and --bus_bandwidth_gbps its predicted step time (with
// --memory_bandwidth_gbps, the elementwise work and the optimizer too;
// --measure measures both rates on this machine, --world_size threads at
// once: run it with OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1); with
// --memory_per_rank_gib too, every strategy / checkpointing / loss-chunking
// variant that fits, fastest first. Bad flags: exit 1 with a message naming
// the flag.
#include <gflags/gflags.h>
#include <glog/logging.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/kernel_rates.h"
#include "launch/plan.h"
#include "models/config.h"

DEFINE_string(model, "",
              "A named model config (models/config.h); empty: the shape "
              "flags --family, --layers, --hidden, --heads, --kv_heads, "
              "--ffn, --vocab.");
DEFINE_string(family, "llama", "Shape flags: gpt or llama.");
DEFINE_int64(layers, 0, "Shape flags: transformer blocks.");
DEFINE_int64(hidden, 0, "Shape flags: model width.");
DEFINE_int64(heads, 0, "Shape flags: attention heads.");
DEFINE_int64(kv_heads, 0, "Shape flags: key/value heads; 0: --heads.");
DEFINE_int64(ffn, 0, "Shape flags: MLP hidden width; 0: 4 x --hidden (gpt).");
DEFINE_int64(vocab, 0, "Shape flags: vocabulary size.");
DEFINE_bool(tie_embeddings, false,
            "Shape flags, llama: the output head is the token embedding "
            "(gpt always ties).");
DEFINE_int64(world_size, 1, "Ranks.");
DEFINE_string(strategy, "fsdp", "single, ddp, zero1, zero2 or fsdp.");
DEFINE_string(fsdp_sharding, "full_shard",
              "full_shard, shard_grad_op, no_shard, hybrid_shard or "
              "hybrid_shard_zero2.");
DEFINE_int64(fsdp_hybrid_shard_group_size, 0,
             "Hybrid sharding: ranks per shard group.");
DEFINE_string(fsdp_backward_prefetch, "auto",
              "pre, post, none or auto (as train's flag on CUDA: pre; pass "
              "post to plan a CPU run with train's defaults).");
DEFINE_int64(fsdp_reductions_in_flight, -1,
             "FSDP gradient reductions left running during backward; -1 "
             "(auto): as train's flag on CUDA, 1 (pass 0 to plan a CPU run "
             "with train's defaults).");
DEFINE_int64(micro_batch, 1, "Sequences per rank per micro-batch.");
DEFINE_int64(seq_len, 0, "Tokens per sequence; 0: the model's context.");
DEFINE_int64(grad_accumulation, 1, "Micro-batches per optimizer step.");
DEFINE_string(precision, "fp32",
              "Parameter dtype: fp32; bf16 (bf16 parameters, gradients and "
              "reductions, fp32 masters: train --param_dtype=bf16 "
              "--reduce_dtype=bf16); fp16 (train --precision=fp16: fp16 "
              "parameters and gradients, fp32 masters and reductions).");
DEFINE_bool(autocast, false,
            "bf16 autocast inside every unit (train --precision=bf16).");
DEFINE_bool(activation_checkpointing, false,
            "Recompute every transformer block in backward.");
DEFINE_bool(fused_attention, false,
            "Attention as a fused kernel (CUDA, LibTorch >= 2): no B H T T "
            "probabilities kept. Off: the CPU build's explicit attention.");
DEFINE_int64(loss_chunk_tokens, 0,
             "Fused chunked loss, this many tokens of logits at a time; 0: "
             "full logits.");
DEFINE_bool(cpu_offload, false,
            "FSDP: master shards, gradient shards, optimizer state on the "
            "host.");
DEFINE_double(memory_per_rank_gib, 0,
              "With it: list the configurations that fit this many GiB per "
              "rank, fastest first (needs --tflops, --bus_bandwidth_gbps).");
DEFINE_double(tflops, 0, "Sustained matmul TFLOP/s of one rank.");
DEFINE_bool(overlap_communication, true,
            "Communication runs beside compute (GPUs). false: CPU-only "
            "ranks, where collectives take the compute's cores: all of it "
            "exposed.");
DEFINE_double(memory_bandwidth_gbps, 0,
              "Memory bandwidth of one rank in GB/s, for the elementwise "
              "work and the optimizer; 0: left out of the step time.");
DEFINE_bool(measure, false,
            "Measure --tflops (fp32 matmuls at this model's GEMM shapes, "
            "TrainingGemmShapes) and --memory_bandwidth_gbps (64 MiB copies) "
            "on this machine, --world_size threads at once as that many "
            "ranks would; they replace those flags.");
DEFINE_double(bus_bandwidth_gbps, 0,
              "Collectives' bus bandwidth in GB/s (10^9 bytes/s), as "
              "//benchmarks:collectives reports it.");

namespace strata::launch {
namespace {

absl::StatusOr<models::ModelConfig> ModelFromFlags() {
  if (!FLAGS_model.empty()) return models::ConfigByName(FLAGS_model);
  models::ModelConfig m;
  m.family = FLAGS_family;
  for (const auto& [flag, value] :
       std::vector<std::pair<const char*, int64_t>>{{"--layers", FLAGS_layers},
                                                    {"--hidden", FLAGS_hidden},
                                                    {"--heads", FLAGS_heads},
                                                    {"--vocab", FLAGS_vocab}}) {
    if (value <= 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          flag, " must be positive when --model is empty, got ", value));
    }
  }
  if (FLAGS_family != "gpt" && FLAGS_family != "llama") {
    return absl::InvalidArgumentError(absl::StrCat(
        "--family must be gpt or llama, got '", FLAGS_family, "'"));
  }
  if (FLAGS_family == "llama" && FLAGS_ffn <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--ffn must be positive for --family=llama, got ", FLAGS_ffn));
  }
  if (FLAGS_seq_len <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--seq_len must be positive when --model is empty, got ",
                     FLAGS_seq_len));
  }
  m.num_layers = FLAGS_layers;
  m.dim = FLAGS_hidden;
  m.num_heads = FLAGS_heads;
  m.num_kv_heads = FLAGS_kv_heads > 0 ? FLAGS_kv_heads : FLAGS_heads;
  m.ffn_dim = FLAGS_ffn > 0 ? FLAGS_ffn : 4 * FLAGS_hidden;
  m.vocab_size = FLAGS_vocab;
  m.seq_len = FLAGS_seq_len;
  m.tie_embeddings = FLAGS_family == "gpt" || FLAGS_tie_embeddings;
  return m;
}

absl::StatusOr<PlanInput> InputFromFlags() {
  absl::StatusOr<models::ModelConfig> model = ModelFromFlags();
  if (!model.ok()) return model.status();
  PlanInput in;
  in.model = *model;
  in.model.loss_chunk_tokens = FLAGS_loss_chunk_tokens;
  in.world_size = FLAGS_world_size;
  in.strategy = FLAGS_strategy;
  in.fsdp_sharding = FLAGS_fsdp_sharding;
  in.hybrid_shard_group_size = FLAGS_fsdp_hybrid_shard_group_size;
  if (FLAGS_fsdp_backward_prefetch != "pre" &&
      FLAGS_fsdp_backward_prefetch != "post" &&
      FLAGS_fsdp_backward_prefetch != "none" &&
      FLAGS_fsdp_backward_prefetch != "auto") {
    return absl::InvalidArgumentError(absl::StrCat(
        "--fsdp_backward_prefetch must be pre, post, none or auto, got '",
        FLAGS_fsdp_backward_prefetch, "'"));
  }
  // "auto" as strategies::ResolveFsdpSchedule on CUDA: the planner plans
  // GPU runs unless told otherwise.
  in.fsdp_backward_prefetch = FLAGS_fsdp_backward_prefetch == "pre" ||
                              FLAGS_fsdp_backward_prefetch == "auto";
  in.fsdp_reductions_in_flight = FLAGS_fsdp_reductions_in_flight == -1
                                     ? 1
                                     : FLAGS_fsdp_reductions_in_flight;
  in.micro_batch = FLAGS_micro_batch;
  in.seq_len = FLAGS_seq_len;
  in.grad_accumulation = FLAGS_grad_accumulation;
  in.precision = FLAGS_precision;
  in.autocast = FLAGS_autocast;
  in.activation_checkpointing = FLAGS_activation_checkpointing;
  in.cpu_offload = FLAGS_cpu_offload;
  in.fused_attention = FLAGS_fused_attention;
  if (absl::Status s = ValidatePlanInput(in); !s.ok()) return s;
  return in;
}

// --measure: the FLOP rate over the model's matmul shapes (their FLOPs over
// their measured times) and the memory bandwidth, per rank with
// --world_size threads measuring at once; written into --tflops and
// --memory_bandwidth_gbps.
void MeasureRates(const PlanInput& in) {
  const int threads = static_cast<int>(in.world_size);
  double flops = 0, seconds = 0;
  for (const GemmShape& g : TrainingGemmShapes(in)) {
    const double f = 2.0 * g.m * g.k * g.n * g.count;
    flops += f;
    seconds += f / MeasureGemmFlops(g.m, g.k, g.n, 0.2, threads);
  }
  FLAGS_tflops = flops / seconds / 1e12;
  FLAGS_memory_bandwidth_gbps =
      MeasureMemoryBandwidth(int64_t{64} << 20, 0.3, threads) / 1e9;
  std::printf(
      "measured on %d thread(s) at once: %.2f GFLOP/s per rank at the "
      "model's GEMM shapes, %.2f GB/s memory bandwidth per rank\n",
      threads, FLAGS_tflops * 1e3, FLAGS_memory_bandwidth_gbps);
}

int Main() {
  absl::StatusOr<PlanInput> in = InputFromFlags();
  if (!in.ok()) {
    LOG(ERROR) << "strata_plan: " << in.status().message();
    return 1;
  }
  if (FLAGS_measure) MeasureRates(*in);
  const bool timed = FLAGS_tflops > 0 || FLAGS_bus_bandwidth_gbps > 0 ||
                     FLAGS_memory_per_rank_gib > 0;
  if (timed && !(FLAGS_tflops > 0)) {
    LOG(ERROR) << "strata_plan: --tflops must be positive for a step time or "
                  "--memory_per_rank_gib, got "
               << FLAGS_tflops;
    return 1;
  }
  if (timed && !(FLAGS_bus_bandwidth_gbps > 0)) {
    LOG(ERROR) << "strata_plan: --bus_bandwidth_gbps must be positive for a "
                  "step time or --memory_per_rank_gib, got "
               << FLAGS_bus_bandwidth_gbps;
    return 1;
  }
  if (FLAGS_memory_per_rank_gib < 0) {
    LOG(ERROR) << "strata_plan: --memory_per_rank_gib must be >= 0, got "
               << FLAGS_memory_per_rank_gib;
    return 1;
  }
  const MemoryPlan plan = PlanMemory(*in);
  std::printf("%s", FormatMemoryPlan(*in, plan).c_str());
  if (!timed) return 0;
  Hardware hw{FLAGS_tflops * 1e12, FLAGS_bus_bandwidth_gbps * 1e9,
              FLAGS_overlap_communication};
  hw.memory_bandwidth_bytes_per_s = FLAGS_memory_bandwidth_gbps * 1e9;
  const StepTimePlan time = PlanStepTime(*in, hw);
  std::printf(
      "step time: %.3f s = compute %.3f s + elementwise %.3f s + optimizer "
      "%.3f s + exposed communication %.3f s (communication %.3f s, %.3g "
      "bytes per rank)\n  %s\n",
      time.step_s, time.compute_s, time.elementwise_s, time.optimizer_s,
      time.exposed_communication_s, time.communication_s,
      time.communication_bytes, time.formula.c_str());
  if (FLAGS_memory_per_rank_gib <= 0) return 0;
  const int64_t budget =
      static_cast<int64_t>(FLAGS_memory_per_rank_gib * 1073741824.0);
  const std::vector<RankedPlan> ranked = RankConfigurations(*in, budget, hw);
  std::printf("\nconfigurations that fit %.1f GiB per rank, fastest first:\n",
              FLAGS_memory_per_rank_gib);
  std::printf(
      "| # | configuration | peak GiB | step s | compute s | exposed "
      "comm s | tokens/s per rank |\n| --: | --- | --: | --: | --: | "
      "--: | --: |\n");
  const int64_t t = in->seq_len > 0 ? in->seq_len : in->model.seq_len;
  for (size_t i = 0; i < ranked.size(); ++i) {
    const RankedPlan& r = ranked[i];
    std::printf("| %zu | %s | %.2f | %.3f | %.3f | %.3f | %.0f |\n", i + 1,
                r.label.c_str(), r.memory.peak_bytes / 1073741824.0,
                r.time.step_s, r.time.compute_s, r.time.exposed_communication_s,
                in->micro_batch * t * in->grad_accumulation / r.time.step_s);
  }
  if (ranked.empty()) std::printf("(none)\n");
  return 0;
}

}  // namespace
}  // namespace strata::launch

int main(int argc, char** argv) {
  gflags::SetUsageMessage(
      "Predicts per-rank memory and step time of a training configuration "
      "(launch/plan.h).");
  gflags::ParseCommandLineFlags(&argc, &argv, /*remove_flags=*/true);
  google::InitGoogleLogging(argv[0]);
  FLAGS_logtostderr = true;
  if (argc > 1) {
    LOG(ERROR) << "unexpected argument '" << argv[1]
               << "': strata_plan takes only flags (see --help)";
    return 1;
  }
  return strata::launch::Main();
}
