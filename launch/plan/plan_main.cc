// strata_plan: per-rank memory and step time of a training configuration,
// before launching it (launch/plan/plan.h). It takes every flag of
// //launch/train:train with the same meaning (launch/config/train_flag_table.h:
// --model, --strategy, --fsdp_*, --global_batch, --micro_batch, --seq_len,
// --param_dtype, --precision, --checkpoint_units, --loss_chunk_tokens, ...,
// or a train --flagfile), and flags of its own: --world_size, the shape of a
// model no config names (--layers, --hidden, ...), and the hardware. Examples:
//
//   bazel run //launch/plan:strata_plan -- --model=gpt-100m --world_size=2
//       --strategy=fsdp --global_batch=8 --micro_batch=4 --seq_len=256
//   bazel run //launch/plan:strata_plan -- --layers=32 --hidden=4096 --heads=32
//       --ffn=11008 --vocab=32000 --seq_len=4096 --world_size=64
//       --strategy=fsdp --global_batch=64 --param_dtype=bf16
//       --reduce_dtype=bf16 --memory_per_rank_gib=80 --tflops=400
//       --bus_bandwidth_gbps=100
// (each example one command line).
//
// --device: cpu plans a run on the CPU; cuda and auto plan one on GPUs (FSDP's
// auto schedule resolves as on CUDA), wherever this binary runs. Prints the
// breakdown of the configuration the flags give; with
// --tflops and --bus_bandwidth_gbps its predicted step time (with
// --memory_bandwidth_gbps, the elementwise work and the optimizer too, each
// kernel class at its --*_per_s rate or derived from the two; --measure
// measures every rate on this machine at the model's shapes, --world_size
// threads at once: run it with OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1;
// --small_message_bus_bandwidth_gbps adds a latency per collective); with
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
#include "base/help_flags.h"
#include "base/process_memory.h"
#include "base/status.h"
#include "base/torch_compat.h"
#include "launch/config/flag_error.h"
#include "launch/config/train_gflags.h"
#include "launch/config/train_options.h"
#include "launch/plan/plan.h"
#include "launch/plan/plan_rates.h"
#include "launch/plan/plan_train.h"
#include "launch/plan/step_work.h"
#include "models/config.h"

// The shape of a model no config names: with any of them set they replace
// --model (which must then stay at its default); --seq_len is its context.
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
DEFINE_bool(fused_attention, false,
            "Attention as a fused kernel (CUDA, LibTorch >= 2): no B H T T "
            "probabilities kept. Off: the CPU build's explicit attention.");
DEFINE_int32(torch_version, strata::torch_compat::TorchVersion(),
             "The run's LibTorch as major * 100 + minor (206 for 2.6): what "
             "autograd keeps differs between versions. Default: the one "
             "strata_plan was built against.");
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
DEFINE_bool(
    measure, false,
    "Measure --tflops (fp32 matmuls at this model's GEMM shapes, "
    "TrainingGemmShapes), --memory_bandwidth_gbps (64 MiB copies) "
    "and every kernel-class rate below at this model's shapes "
    "(launch/plan/plan_rates.h) on this machine, --world_size threads at "
    "once as that many ranks would; they replace those flags.");
DEFINE_int64(malloc_mmap_threshold_bytes, int64_t{4} << 20,
             "The ranks' train --malloc_mmap_threshold_bytes: buffers at "
             "least this large are fresh mappings (page-faulted when first "
             "written), timed at --fresh_buffer_bytes_per_s; --measure "
             "measures under it. -1: none (GPUs' caching allocator; "
             "glibc's dynamic threshold while measuring).");
DEFINE_double(bus_bandwidth_gbps, 0,
              "Collectives' bus bandwidth in GB/s (10^9 bytes/s), as "
              "//benchmarks:collectives reports it, at --large_message_bytes.");
DEFINE_double(small_message_bus_bandwidth_gbps, 0,
              "With it: the bus bandwidth at --small_message_bytes too; the "
              "two points give each collective a latency and an asymptotic "
              "bandwidth (launch/plan/plan.h CollectiveCostFromTwoPoints). 0: "
              "--bus_bandwidth_gbps for every message, no latency.");
DEFINE_int64(small_message_bytes, int64_t{1} << 20,
             "Message size of --small_message_bus_bandwidth_gbps.");
DEFINE_int64(large_message_bytes, int64_t{64} << 20,
             "Message size of --bus_bandwidth_gbps.");
// Kernel-class rates (launch/plan/step_work.h), forward + backward per rank;
// 0: derived from --tflops and --memory_bandwidth_gbps (DerivedKernelRates).
DEFINE_double(attention_flops_per_s, 0,
              "Attention's batched products (Q K^T, probs V), FLOP/s.");
DEFINE_double(layer_norm_elements_per_s, 0, "LayerNorm, elements/s.");
DEFINE_double(gelu_elements_per_s, 0, "GELU (tanh), elements/s.");
DEFINE_double(softmax_elements_per_s, 0,
              "Softmax over B H T T scores, elements/s.");
DEFINE_double(cross_entropy_elements_per_s, 0,
              "Cross-entropy over B T V logits, elements/s.");
DEFINE_double(add_elements_per_s, 0, "Residual add, elements/s.");
DEFINE_double(head_copy_elements_per_s, 0,
              "Attention head split/merge copies, elements/s.");
DEFINE_double(embedding_elements_per_s, 0,
              "Embedding table (dense gradient), table elements/s.");
DEFINE_double(adamw_elements_per_s, 0, "AdamW step, elements/s.");
DEFINE_double(fresh_buffer_bytes_per_s, 0,
              "Fresh buffers (FSDP's gathered units and gradient buffers): "
              "allocate, write once, free; bytes/s.");

namespace strata::launch {
namespace {

// Train's flags, registered as defined in this file so that --help lists them
// with the planner's own.
const bool kTrainFlagsRegistered = [] {
  RegisterTrainFlags(__FILE__);
  return true;
}();

// Whether a shape flag is set: the model is then the shape flags'.
bool ShapeFlagsGiven() {
  return FLAGS_layers != 0 || FLAGS_hidden != 0 || FLAGS_heads != 0 ||
         FLAGS_kv_heads != 0 || FLAGS_ffn != 0 || FLAGS_vocab != 0;
}

// The model: --model (as train reads it: a config name or a Hugging Face
// config.json), or the shape flags with --seq_len as its context
// (PlanInputOf applies --vocab_size and --loss_chunk_tokens, as for train).
absl::StatusOr<models::ModelConfig> ModelFromFlags(const TrainOptions& o) {
  models::ModelConfig m;
  if (!ShapeFlagsGiven()) {
    STRATA_ASSIGN_OR_RETURN(m, ModelConfigOf(o.model));
  } else {
    gflags::CommandLineFlagInfo model_flag;
    if (gflags::GetCommandLineFlagInfo("model", &model_flag) &&
        !model_flag.is_default) {
      return FlagError("model",
                       absl::StrCat("'", o.model,
                                    "' and the shape flags (--layers, "
                                    "--hidden, ...) both give the model: "
                                    "pass one or the other"));
    }
    for (const auto& [flag, value] :
         std::vector<std::pair<const char*, int64_t>>{{"layers", FLAGS_layers},
                                                      {"hidden", FLAGS_hidden},
                                                      {"heads", FLAGS_heads},
                                                      {"vocab", FLAGS_vocab}}) {
      if (value <= 0) {
        return FlagError(flag, absl::StrCat("must be positive with the shape "
                                            "flags, got ",
                                            value));
      }
    }
    if (FLAGS_family != "gpt" && FLAGS_family != "llama") {
      return FlagError("family", absl::StrCat("must be gpt or llama, got '",
                                              FLAGS_family, "'"));
    }
    if (FLAGS_family == "llama" && FLAGS_ffn <= 0) {
      return FlagError("ffn", absl::StrCat("must be positive for "
                                           "--family=llama, got ",
                                           FLAGS_ffn));
    }
    if (o.seq_len <= 0) {
      return FlagError("seq_len",
                       absl::StrCat("must be positive, got ", o.seq_len));
    }
    m.family = FLAGS_family;
    m.num_layers = FLAGS_layers;
    m.dim = FLAGS_hidden;
    m.num_heads = FLAGS_heads;
    m.num_kv_heads = FLAGS_kv_heads > 0 ? FLAGS_kv_heads : FLAGS_heads;
    m.ffn_dim = FLAGS_ffn > 0 ? FLAGS_ffn : 4 * FLAGS_hidden;
    m.vocab_size = FLAGS_vocab;
    m.seq_len = o.seq_len;
    m.tie_embeddings = FLAGS_family == "gpt" || FLAGS_tie_embeddings;
  }
  return m;
}

// The plan input of train's flags on --world_size ranks (PlanInputOf, as
// `train --plan_only` builds it), for --device's kind of device, with the
// planner's --fused_attention and --torch_version.
absl::StatusOr<PlanInput> InputFromFlags() {
  STRATA_ASSIGN_OR_RETURN(const TrainOptions o,
                          TrainOptionsFromRegisteredFlags());
  STRATA_ASSIGN_OR_RETURN(const models::ModelConfig model, ModelFromFlags(o));
  if (FLAGS_world_size < 1) {
    return FlagError("world_size",
                     absl::StrCat("must be >= 1, got ", FLAGS_world_size));
  }
  if (o.device != "cpu" && o.device != "cuda" && o.device != "auto") {
    return FlagError("device", absl::StrCat("must be auto, cpu or cuda, got '",
                                            o.device, "'"));
  }
  STRATA_ASSIGN_OR_RETURN(
      PlanInput in, PlanInputOf(o, model, static_cast<int>(FLAGS_world_size),
                                /*cuda=*/o.device != "cpu"));
  in.fused_attention = FLAGS_fused_attention;
  in.torch_version = FLAGS_torch_version;
  STRATA_RETURN_IF_ERROR(ValidatePlanInput(in));
  return in;
}

// --measure: every rate of launch/plan/plan_rates.h, written into its flag.
void MeasureIntoFlags(const PlanInput& in) {
  if (FLAGS_malloc_mmap_threshold_bytes >= 0) {
    const absl::Status s =
        SetMallocMmapThreshold(FLAGS_malloc_mmap_threshold_bytes);
    if (!s.ok()) LOG(WARNING) << "--malloc_mmap_threshold_bytes: " << s;
  }
  const int threads = static_cast<int>(in.world_size);
  const MeasuredRates r = MeasureRates(in, threads);
  FLAGS_tflops = r.gemm_flops_per_s / 1e12;
  FLAGS_memory_bandwidth_gbps = r.memory_bandwidth_bytes_per_s / 1e9;
  const KernelRates& k = r.kernels;
  FLAGS_attention_flops_per_s = k.attention_flops_per_s;
  FLAGS_layer_norm_elements_per_s = k.layer_norm_elements_per_s;
  FLAGS_gelu_elements_per_s = k.gelu_elements_per_s;
  FLAGS_softmax_elements_per_s = k.softmax_elements_per_s;
  FLAGS_cross_entropy_elements_per_s = k.cross_entropy_elements_per_s;
  FLAGS_add_elements_per_s = k.add_elements_per_s;
  FLAGS_head_copy_elements_per_s = k.head_copy_elements_per_s;
  FLAGS_embedding_elements_per_s = k.embedding_elements_per_s;
  FLAGS_adamw_elements_per_s = k.adamw_elements_per_s;
  FLAGS_fresh_buffer_bytes_per_s = k.fresh_buffer_bytes_per_s;
  std::printf("%s", FormatRates(r, threads).c_str());
  std::printf(
      "  as flags: --tflops=%.6g --memory_bandwidth_gbps=%.6g "
      "--attention_flops_per_s=%.6g --layer_norm_elements_per_s=%.6g "
      "--gelu_elements_per_s=%.6g --softmax_elements_per_s=%.6g "
      "--cross_entropy_elements_per_s=%.6g --add_elements_per_s=%.6g "
      "--head_copy_elements_per_s=%.6g --embedding_elements_per_s=%.6g "
      "--adamw_elements_per_s=%.6g --fresh_buffer_bytes_per_s=%.6g\n",
      FLAGS_tflops, FLAGS_memory_bandwidth_gbps, FLAGS_attention_flops_per_s,
      FLAGS_layer_norm_elements_per_s, FLAGS_gelu_elements_per_s,
      FLAGS_softmax_elements_per_s, FLAGS_cross_entropy_elements_per_s,
      FLAGS_add_elements_per_s, FLAGS_head_copy_elements_per_s,
      FLAGS_embedding_elements_per_s, FLAGS_adamw_elements_per_s,
      FLAGS_fresh_buffer_bytes_per_s);
}

// The hardware the flags give; the collective latency from the two
// bandwidth points when --small_message_bus_bandwidth_gbps is set.
absl::StatusOr<Hardware> HardwareFromFlags(const PlanInput& in) {
  Hardware hw;
  hw.flops_per_s = FLAGS_tflops * 1e12;
  hw.bus_bandwidth_bytes_per_s = FLAGS_bus_bandwidth_gbps * 1e9;
  hw.overlap_communication = FLAGS_overlap_communication;
  hw.memory_bandwidth_bytes_per_s = FLAGS_memory_bandwidth_gbps * 1e9;
  hw.fresh_buffer_threshold_bytes = FLAGS_malloc_mmap_threshold_bytes;
  KernelRates& k = hw.rates;
  k.attention_flops_per_s = FLAGS_attention_flops_per_s;
  k.layer_norm_elements_per_s = FLAGS_layer_norm_elements_per_s;
  k.gelu_elements_per_s = FLAGS_gelu_elements_per_s;
  k.softmax_elements_per_s = FLAGS_softmax_elements_per_s;
  k.cross_entropy_elements_per_s = FLAGS_cross_entropy_elements_per_s;
  k.add_elements_per_s = FLAGS_add_elements_per_s;
  k.head_copy_elements_per_s = FLAGS_head_copy_elements_per_s;
  k.embedding_elements_per_s = FLAGS_embedding_elements_per_s;
  k.adamw_elements_per_s = FLAGS_adamw_elements_per_s;
  k.fresh_buffer_bytes_per_s = FLAGS_fresh_buffer_bytes_per_s;
  const double f = BusFactor(in);
  if (FLAGS_small_message_bus_bandwidth_gbps > 0 && f > 0) {
    const double s1 = static_cast<double>(FLAGS_small_message_bytes);
    const double s2 = static_cast<double>(FLAGS_large_message_bytes);
    const double b1 = FLAGS_small_message_bus_bandwidth_gbps * 1e9;
    const double b2 = FLAGS_bus_bandwidth_gbps * 1e9;
    if (!(s1 > 0 && s2 > s1 && s2 / b2 > s1 / b1)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--small_message_bytes (", s1,
          ") must be below --large_message_bytes (", s2,
          ") and take less time at --small_message_bus_bandwidth_gbps than "
          "the large message at --bus_bandwidth_gbps"));
    }
    const CollectiveCost c = CollectiveCostFromTwoPoints(s1, b1, s2, b2, f);
    hw.bus_bandwidth_bytes_per_s = c.bus_bandwidth_bytes_per_s;
    hw.collective_latency_s = c.latency_s;
  }
  return hw;
}

int Main() {
  absl::StatusOr<PlanInput> in = InputFromFlags();
  if (!in.ok()) {
    LOG(ERROR) << "strata_plan: " << in.status().message();
    return 1;
  }
  if (FLAGS_measure) MeasureIntoFlags(*in);
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
  absl::StatusOr<Hardware> hw_or = HardwareFromFlags(*in);
  if (!hw_or.ok()) {
    LOG(ERROR) << "strata_plan: " << hw_or.status().message();
    return 1;
  }
  const Hardware& hw = *hw_or;
  const StepTimePlan time = PlanStepTime(*in, hw);
  const ClassTimes& c = time.classes;
  std::printf(
      "step time: %.3f s = compute %.3f s + elementwise %.3f s + optimizer "
      "%.3f s + FSDP buffers %.3f s + exposed communication %.3f s "
      "(communication %.3f s, %.3g bytes per rank, %.0f collectives x %.3g "
      "ms)\n  compute: linear layers %.3f s, attention products %.3f s; "
      "elementwise: LayerNorm %.3f, GELU %.3f, softmax %.3f, cross-entropy "
      "%.3f, adds %.3f, head copies %.3f, embedding %.3f, fresh matmul "
      "outputs %.3f, gradient accumulation %.3f s\n  %s\n",
      time.step_s, time.compute_s, time.elementwise_s, time.optimizer_s,
      time.fsdp_buffers_s, time.exposed_communication_s, time.communication_s,
      time.communication_bytes, time.collectives, hw.collective_latency_s * 1e3,
      time.compute_s - c.attention_s, c.attention_s, c.layer_norm_s, c.gelu_s,
      c.softmax_s, c.cross_entropy_s, c.add_s, c.head_copy_s, c.embedding_s,
      c.fresh_s, time.grad_accumulate_s, time.formula.c_str());
  if (!(hw.memory_bandwidth_bytes_per_s > 0)) {
    std::printf(
        "  left out: no memory bandwidth (--memory_bandwidth_gbps or "
        "--measure), so the terms it prices count as 0 s: every elementwise "
        "class without its own --*_per_s rate, gradient accumulation and the "
        "optimizer's traffic beyond its AdamW rate\n");
  }
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
      "(launch/plan/plan.h).");
  ::strata::NarrowHelp("launch/plan/plan_main", argc,
                       argv);  // --helpfull: every flag.
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
