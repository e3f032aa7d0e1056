#include "launch/plan/plan.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "glog/logging.h"

namespace strata::launch {
namespace {

constexpr int64_t kZeroBucketsInFlight = 2;  // ZeroStrategy::kBucketsInFlight.

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Parameters of one transformer block (models/gpt.cc, models/llama.cc).
int64_t BlockParameters(const models::ModelConfig& m) {
  const int64_t c = m.dim, f = m.ffn_dim;
  if (m.family == "gpt") {
    // ln_1, qkv (+bias), proj (+bias), ln_2, fc (+bias), proj (+bias).
    return 2 * c + (3 * c * c + 3 * c) + (c * c + c) + 2 * c + (c * f + f) +
           (f * c + c);
  }
  const int64_t kv = m.num_kv_heads * (c / m.num_heads);
  // wq, wk, wv, wo, w1, w2, w3, two RMSNorm gains.
  return c * c + 2 * c * kv + c * c + 3 * c * f + 2 * c;
}

// The shape of one micro-batch's activations, in elements.
struct Shape {
  int64_t bt = 0;    // Tokens per rank per micro-batch (B T).
  int64_t btc = 0;   // B T C.
  int64_t btf = 0;   // B T F.
  int64_t bht = 0;   // B H T: fused attention's log-sum-exp.
  int64_t bhtt = 0;  // B H T T: attention probabilities.
  int64_t btv = 0;   // B T V: logits.
};

Shape ShapeOf(const PlanInput& in) {
  const models::ModelConfig& m = in.model;
  const int64_t t = in.seq_len > 0 ? in.seq_len : m.seq_len;
  Shape s;
  s.bt = in.micro_batch * t;
  s.btc = s.bt * m.dim;
  s.btf = s.bt * m.ffn_dim;
  s.bht = in.micro_batch * m.num_heads * t;
  s.bhtt = in.fused_attention ? 0 : s.bht * t;
  s.btv = s.bt * m.vocab_size;
  return s;
}

// Bytes per element of the activations: `r` for the residual stream and
// what the norms keep (the parameters' dtype: fp32 also under autocast),
// `l` for the linear layers' inputs and outputs (2 under autocast or with
// 2-byte parameters). autocast: bf16 autocast inside the units.
struct ActivationBytes {
  int64_t r = 4;
  int64_t l = 4;
  bool autocast = false;
};

ActivationBytes ActivationBytesOf(const PlanInput& in) {
  const int64_t p = in.precision == "fp32" ? 4 : 2;
  return {p, in.autocast ? 2 : p, in.autocast};
}

// Whether autograd's mean over a dimension keeps its input for backward.
// Before LibTorch 2.2 MeanBackward1 keeps `self` (its backward takes the
// element count from it: grad_fn._saved_self on 1.13); PyTorch PR 109935
// (September 2023, after 2.1's branch cut) keeps the count instead (2.6:
// _saved_self_sym_numel, no tensor). Measured on 1.13 and 2.6
// (plan_activations_test.cc); 2.2 is the first release after the PR.
bool MeanKeepsInput(int torch_version) { return torch_version < 202; }

// Bytes autograd keeps for one block's backward (models/gpt.cc GptBlock,
// models/llama.cc LlamaBlock; CausalAttention, RmsNorm, ApplyRotary in
// models/layers.cc), tensor by tensor as autograd saves them (each storage
// once; views and reshapes of a kept tensor add nothing), r and l as in
// ActivationBytes; checked to the byte by plan_activations_test.cc:
//   GPT:   ln_1 keeps the block's input x and ln_2 the residual h (2 BTC,
//          r) with their mean and rstd (4 BT, r); the linears' inputs: ln_1's
//          output, q k v reshaped for the batched products, the attention
//          output reshaped for attn.proj, ln_2's output (6 BTC, l: the
//          norms' outputs are copied to bf16 under autocast and the fp32
//          ones freed); fc's output (BTF, l: GeluLinear keeps only it and
//          recomputes the GELU in backward, models/gelu_linear.h).
//   Llama: per RMSNorm (x.to(fp32), pow, mean, rsqrt, mul, to, gain mul):
//          its fp32 input xf (the block's input itself when fp32, else an
//          fp32 copy: 4 BTC), kept by pow and the normalising mul; xf^2 (4
//          BTC), kept by mean before LibTorch 2.2 (MeanKeepsInput); rsqrt's
//          output (4 BT), kept by rsqrt and the mul; the normalised value
//          in the input's dtype (r BTC), kept by the gain's mul; the gain's
//          output (r BTC), kept by the linears reading it, or under
//          autocast one bf16 copy per linear instead (2 BTC each: 3 for wq
//          wk wv, 2 for w1 w3; autocast caches only the weights' casts).
//          Attention: q, k and v reshaped to [B H, T, D] for the batched
//          products (k and v after the grouped-query repeat: B T C each)
//          and the output reshaped for wo (4 BTC, l); RoPE keeps only the
//          shared cos / sin tables (a mul keeps the operand the other needs
//          for its gradient, and the tables need none). MLP: w1's output
//          (kept by silu), silu's and w3's outputs (by their product), the
//          product (by w2): 4 BTF, l.
//   Both:  softmax's fp32 probabilities (4 BHTT), and with l = 2 their copy
//          for the bmm (2 BHTT more); under autocast the bf16 copies of the
//          block's matmul weights (2 W), which the linears keep (GPT: but
//          mlp.proj's, which GeluLinear casts again in backward).
// A fused attention kernel keeps a B H T fp32 log-sum-exp instead of the
// probabilities. No other saved tensor differs between LibTorch 1.13 and
// 2.6 (SiLU, the SwiGLU product, RoPE, softmax, the batched products,
// LayerNorm, GELU, cross-entropy: the same tensors in both).
int64_t BlockSavedBytes(const models::ModelConfig& m, const Shape& s,
                        const ActivationBytes& b, bool fused_attention,
                        int torch_version) {
  const int64_t probs =
      fused_attention ? 4 * s.bht : s.bhtt * (b.l == 4 ? 4 : 6);
  const int64_t weights =
      b.autocast
          ? 2 * (m.family == "gpt" ? 4 * m.dim * m.dim + m.dim * m.ffn_dim
                                   : BlockParameters(m) - 2 * m.dim)
          : 0;
  if (m.family == "gpt") {
    return (2 * b.r + 6 * b.l) * s.btc + b.l * s.btf + probs + 4 * b.r * s.bt +
           weights;
  }
  const int64_t squares = MeanKeepsInput(torch_version) ? 4 : 0;
  const int64_t per_norm = 4 + squares + b.r;  // xf, xf^2, normalised.
  const int64_t gain_outputs = b.autocast ? 2 * (3 + 2) : 2 * b.r;
  return (2 * per_norm + gain_outputs + 4 * b.l) * s.btc + 4 * b.l * s.btf +
         probs + 2 * 4 * s.bt + weights;
}

// The bytes the head keeps for backward (the same derivation): its norm's
// input (the last block's output; Llama's fp32 xf: 4 BTC, GPT's x: r BTC)
// and statistics (Llama's rsqrt 4 BT, xf^2 4 BTC before 2.2 and the
// normalised value r BTC; GPT's mean and rstd 2 r BT), and the head matmul's
// input: the norm's output (r BTC; with chunked loss the input
// ChunkedLinearCrossEntropy keeps, autocast off inside it), or, unchunked
// under autocast, its bf16 copy and the bf16 copy of the head weight
// (2 BTC + 2 V C).
int64_t HeadSavedBytes(const models::ModelConfig& m, const Shape& s,
                       const ActivationBytes& b, int torch_version) {
  const bool bf16_matmul = b.autocast && m.loss_chunk_tokens == 0;
  const int64_t matmul =
      bf16_matmul ? 2 * s.btc + 2 * m.vocab_size * m.dim : b.r * s.btc;
  if (m.family == "gpt") return b.r * s.btc + 2 * b.r * s.bt + matmul;
  const int64_t squares = MeanKeepsInput(torch_version) ? 4 : 0;
  return (4 + squares + b.r) * s.btc + 4 * s.bt + matmul;
}

// Transient bytes while one block's backward runs (besides what it saved):
// the gradient of the attention probabilities and of the scores (2 BHTT) or
// of the MLP's hidden activations (2 BTF), whichever is larger, and the
// gradients flowing in and out of the block (2 BTC).
int64_t BlockBackwardTransientBytes(const Shape& s, int64_t a) {
  return a * (std::max(2 * s.bhtt, 2 * s.btf) + 2 * s.btc);
}

// The logits at the head's backward: unchunked, the loss's backward
// (log-probabilities, their gradient and the logits' gradient: 3 BTV fp32),
// then the head matmul's (the logits' gradient BTV fp32, the head input's
// gradient BTC and the fresh head-weight gradient VC); chunked
// (models/chunked_loss.h), one chunk's logits, softmax and gradient (3 K V)
// and the head weight's gradient. Where nothing else changes between the
// loss's and the matmul's backward, LogitsTerm is the larger of the two.
PlanTerm LossBackwardTerm(const Shape& s) {
  return {"logits", 3 * s.btv * 4,
          "3 BTV fp32 (log-probs, their gradient, the logits' gradient)"};
}

PlanTerm HeadMatmulBackwardTerm(const models::ModelConfig& m, const Shape& s,
                                int64_t p) {
  return {"logits", s.btv * 4 + p * s.btc + p * m.vocab_size * m.dim,
          "BTV fp32 + BTC + VC (the logits', head input's and head "
          "weight's gradients)"};
}

PlanTerm LogitsTerm(const models::ModelConfig& m, const Shape& s, int64_t p) {
  const int64_t chunk = m.loss_chunk_tokens;
  if (chunk > 0) {
    const int64_t k = std::min(chunk, s.bt);
    return {"logits", 3 * k * m.vocab_size * 4 + p * m.vocab_size * m.dim,
            absl::StrCat("3 K V fp32 + head weight gradient, K = ", k)};
  }
  const int64_t loss = LossBackwardTerm(s).bytes;
  const int64_t matmul = HeadMatmulBackwardTerm(m, s, p).bytes;
  return {"logits", std::max(loss, matmul),
          "max(3 BTV, BTV + BTC + VC) fp32 (log-probs, gradients)"};
}

int64_t ShardGroupSize(const PlanInput& in) {
  if (in.strategy != "fsdp") return in.world_size;
  if (in.fsdp_sharding == "no_shard") return 1;
  if (in.fsdp_sharding == "hybrid_shard" ||
      in.fsdp_sharding == "hybrid_shard_zero2") {
    return in.hybrid_shard_group_size;
  }
  return in.world_size;
}

// FSDP keeps every unit's full fp32 gradients between micro-batches
// (no_sync accumulation: FsdpOptions::reduce_scatter_every_micro_step off).
bool FsdpKeepsFullGradients(const PlanInput& in) {
  return in.strategy == "fsdp" && in.grad_accumulation > 1 &&
         !in.fsdp_reduce_scatter_every_micro_step;
}

// How many times a step FSDP reduces each unit's gradients: every
// micro-batch, or once (no_sync; fp32 NO_SHARD, whose gradient shard is the
// full gradient, either way: strategies/fsdp.h).
double FsdpReductionsPerStep(const PlanInput& in) {
  const bool once = FsdpKeepsFullGradients(in) ||
                    (in.fsdp_sharding == "no_shard" && in.precision == "fp32");
  return once ? 1 : static_cast<double>(in.grad_accumulation);
}

struct Moment {
  std::string name;
  std::vector<PlanTerm> terms;
  int64_t Total() const {
    int64_t total = 0;
    for (const PlanTerm& t : terms) total += t.bytes;
    return total;
  }
};

// Model state (parameters, gradients, optimizer state) and the communication
// buffers held for the whole step.
std::vector<PlanTerm> StateTerms(const PlanInput& in, int64_t psi) {
  const bool bf16 = in.precision != "fp32";  // 2-byte parameters.
  const int64_t p = bf16 ? 2 : 4;            // Parameter / gradient element.
  const int64_t n = in.world_size;
  const int64_t s = ShardGroupSize(in);
  std::vector<PlanTerm> terms;
  const std::string ps = absl::StrCat(psi);
  const std::string masters = bf16 ? " + 4 Psi (fp32 masters) " : " ";
  if (in.strategy == "single" || in.strategy == "ddp") {
    terms.push_back(
        {"parameters", p * psi + (bf16 ? 4 * psi : 0),
         absl::StrCat(p, " Psi", masters, "(replicated), Psi = ", ps)});
    // With 2-byte parameters autograd fills a 2-byte flat buffer and
    // FoldGradients adds it into fp32 accumulated gradients (4 Psi).
    terms.push_back({"gradients", p * psi + (bf16 ? 4 * psi : 0),
                     absl::StrCat(p, " Psi (flat buffer; buckets are views)",
                                  bf16 ? " + 4 Psi (fp32 accumulated)" : "")});
    terms.push_back({"optimizer state", 8 * psi, "8 Psi (AdamW m, v fp32)"});
  } else if (in.strategy == "zero1" || in.strategy == "zero2") {
    const int64_t padded = CeilDiv(psi, n) * n;
    const int64_t shard = padded / n;
    terms.push_back(
        {"parameters", p * padded + (bf16 ? 4 * shard : 0),
         absl::StrCat(p, " Psi replicated", bf16 ? " + 4 Psi/N masters" : "",
                      ", Psi = ", ps, " (padded to ", padded, ")")});
    if (in.strategy == "zero1") {
      terms.push_back(
          {"gradients", p * padded + (bf16 ? 4 * padded : 0),
           absl::StrCat(p, " Psi (full flat buffer)",
                        bf16 ? " + 4 Psi (fp32 accumulated)" : "")});
    } else {
      // With gradients reduced in 2 bytes (bf16; fp16 reduces in fp32) the
      // reduce-scatter lands in a 2-byte shard before it is added into the
      // fp32 one (ZeroStrategy's reduce_shard_).
      const bool cast = in.precision == "bf16";
      terms.push_back(
          {"gradients", 4 * shard + (cast ? 2 * shard : 0),
           cast ? "4 Psi/N (fp32 shard) + 2 Psi/N (bf16 reduce-scatter "
                  "output)"
                : "4 Psi/N (fp32 shard)"});
    }
    terms.push_back({"optimizer state", 8 * shard, "8 Psi/N (AdamW m, v)"});
    terms.push_back({"communication buffers", p * shard,
                     absl::StrCat(p, " Psi/N (parameter all-gather staging)")});
  } else {  // fsdp
    const int64_t shard = CeilDiv(psi, s);
    const int64_t on_device = in.cpu_offload ? 0 : 1;
    terms.push_back({"parameters", on_device * 4 * shard,
                     in.cpu_offload ? "0 (fp32 master shard on the host)"
                                    : "4 Psi/S (fp32 master shard)"});
    terms.push_back({"gradients", on_device * 4 * shard,
                     in.cpu_offload ? "0 (gradient shard on the host)"
                                    : "4 Psi/S (fp32 gradient shard)"});
    terms.push_back(
        {"optimizer state", on_device * 8 * shard,
         in.cpu_offload
             ? "0 (AdamW state on the host)"
             : absl::StrCat("8 Psi/S (AdamW m, v), S = ", s, ", Psi = ", ps)});
    if (FsdpKeepsFullGradients(in)) {
      // Allocated by the first micro-batch's backward, reduced by the
      // last's: with fp32 parameters the units' gradients in flight are
      // these (FsdpTerms leaves them out); with 2-byte ones each
      // micro-batch's are added into them.
      terms.push_back({"accumulated gradients", 4 * psi,
                       "4 Psi (every unit's full fp32 gradients kept "
                       "between micro-batches: no_sync accumulation)"});
    }
  }
  return terms;
}

// FSDP's terms beyond its shards while the head (block < 0) or block
// `block` runs backward. The root (FsdpRootStaysGathered) is its own term:
// full gradients (p R) from the head's backward on, full parameters (p R) at
// the head, and at the blocks too where it stays gathered. Units in flight:
// FULL_SHARD, this block's parameters and gradients, a prefetched block and
// reductions in flight; SHARD_GRAD_OP and NO_SHARD, every block gathered since
// its forward.
std::vector<PlanTerm> FsdpTerms(const PlanInput& in, int64_t p, int64_t root,
                                int64_t unit, int64_t block) {
  const int64_t layers = in.model.num_layers;
  const bool keep = in.fsdp_sharding == "no_shard" ||
                    in.fsdp_sharding == "shard_grad_op" ||
                    in.fsdp_sharding == "hybrid_shard_zero2";
  const bool stays = FsdpRootStaysGathered(in.fsdp_sharding);
  const bool root_gathered = block < 0 || stays;
  // no_sync with fp32 parameters: the gradients in flight are the
  // accumulated ones (StateTerms), not extra.
  const bool grads_accumulated = FsdpKeepsFullGradients(in) && p == 4;
  const int64_t root_grads = grads_accumulated ? 0 : 1;
  std::vector<PlanTerm> terms;
  terms.push_back(
      {"FSDP root (gathered)",
       ((root_gathered ? 1 : 0) + root_grads) * p * root,
       absl::StrCat(root_gathered ? absl::StrCat(p, " R parameters + ") : "",
                    grads_accumulated ? "0 (gradients accumulated)"
                                      : absl::StrCat(p, " R gradients"),
                    ", R = ", root,
                    stays           ? " (kept gathered)"
                    : root_gathered ? " (gathered for the head)"
                                    : " (parameters sharded between the "
                                      "embedding and the head)")});
  if (block < 0) {
    if (keep) {
      terms.push_back(
          {"units in flight", p * layers * unit,
           absl::StrCat("all blocks gathered ", p, " L U, U = ", unit)});
    }
    return terms;
  }
  if (keep) {
    if (grads_accumulated) {
      terms.push_back({"units in flight", p * (block + 1) * unit,
                       absl::StrCat("blocks 0..i gathered, (i + 1) ", p,
                                    " U, U = ", unit)});
      return terms;
    }
    terms.push_back({"units in flight", p * (block + 2) * unit,
                     absl::StrCat("blocks 0..i gathered + this block's "
                                  "gradients, (i + 2) ",
                                  p, " U, U = ", unit)});
    return terms;
  }
  // This block's parameters and gradients (its gradients, and those of the
  // reductions in flight, are the accumulated ones under grads_accumulated).
  int64_t units = grads_accumulated ? 1 : 2;
  if (in.fsdp_backward_prefetch && block > 0) ++units;
  if (!grads_accumulated) {
    units +=
        std::min<int64_t>(in.fsdp_reductions_in_flight, layers - 1 - block);
  }
  terms.push_back(
      {"units in flight", p * units * unit,
       absl::StrCat(units, " x ", p,
                    grads_accumulated ? " U (this block's parameters, "
                                        "prefetched block; gradients "
                                        "accumulated), "
                                      : " U (this block's parameters and "
                                        "gradients, prefetched block, "
                                        "reductions in flight), "
                                        "U = ",
                    unit)});
  return terms;
}

// The elements of fp32 optimizer state (masters, AdamW m and v) one rank
// updates: all of them (single, DDP), a 1/N shard (ZeRO), a 1/S shard (FSDP).
double OptimizerElements(const PlanInput& in, double psi) {
  if (in.strategy == "single" || in.strategy == "ddp") return psi;
  return std::ceil(psi / static_cast<double>(ShardGroupSize(in)));
}

// Bytes one optimizer step moves through memory on one rank, per element E
// of its optimizer share (OptimizerElements):
//   AdamW's fused pass (optim/adamw.h): reads parameter, gradient, m and v
//     and writes parameter, m and v, 7 fp32 values: 28 bytes;
//   the gradient norm of clipping (optim/clip.h): one read of the
//     gradients, 4 bytes;
//   with 2-byte parameters, refreshing the compute copy from the masters:
//     a 4-byte read and a 2-byte write, 6 bytes;
// and ZeroGrad's one write of the gradient buffer backward fills (the full
// buffer, p bytes a parameter, for single, DDP and ZeRO-1; the fp32 shard,
// 4 bytes an element of E, for ZeRO-2 and FSDP).
double OptimizerBytes(const PlanInput& in, double psi) {
  const double e = OptimizerElements(in, psi);
  const double p = in.precision == "fp32" ? 4 : 2;
  double bytes = (28 + 4 + (p == 2 ? 6 : 0)) * e;
  const bool full_gradients =
      in.strategy == "single" || in.strategy == "ddp" || in.strategy == "zero1";
  bytes += full_gradients ? p * psi : 4 * e;
  return bytes;
}

// ZeRO-2's gradient bucket storage held during a block's backward.
PlanTerm ZeroBucketsTerm(const PlanInput& in, int64_t psi) {
  const int64_t buckets = std::min(
      4 * psi, in.first_bucket_bytes + kZeroBucketsInFlight * in.bucket_bytes);
  // Accumulating in fp32, each micro-batch after the first reduce-scatters a
  // bucket into 1/N of its size before adding it to the shard (ZeroStrategy's
  // bucket_incoming_).
  const bool incoming = in.grad_accumulation > 1 && in.precision != "bf16";
  return {"communication buffers (gradient buckets)",
          buckets + (incoming ? buckets / in.world_size : 0),
          incoming
              ? "min(4 Psi, first bucket + 2 buckets) fp32 bucket "
                "storage, + 1/N of it (accumulating reduce-scatter output)"
              : "min(4 Psi, first bucket + 2 buckets) fp32 bucket storage"};
}

}  // namespace

std::vector<GemmShape> TrainingGemmShapes(const PlanInput& in) {
  const models::ModelConfig& m = in.model;
  const int64_t bt = ShapeOf(in).bt, c = m.dim, f = m.ffn_dim;
  const int64_t layers = m.num_layers;
  // (in, out, count) of each linear layer.
  std::vector<std::tuple<int64_t, int64_t, int64_t>> linears;
  if (m.family == "gpt") {
    linears = {
        {c, 3 * c, layers}, {c, c, layers}, {c, f, layers}, {f, c, layers}};
  } else {
    const int64_t kv = m.num_kv_heads * (c / m.num_heads);
    linears = {{c, c, 2 * layers},
               {c, kv, 2 * layers},
               {c, f, 2 * layers},
               {f, c, layers}};
  }
  linears.emplace_back(c, m.vocab_size, 1);  // The head.
  std::vector<GemmShape> shapes;
  for (const auto& [in_dim, out_dim, count] : linears) {
    shapes.push_back({bt, in_dim, out_dim, count});  // Forward.
    shapes.push_back({bt, out_dim, in_dim, count});  // Input gradient.
    shapes.push_back({in_dim, bt, out_dim, count});  // Weight gradient.
  }
  return shapes;
}

bool FsdpRootStaysGathered(const std::string& fsdp_sharding) {
  return fsdp_sharding != "full_shard" && fsdp_sharding != "hybrid_shard";
}

int64_t CheckpointedBlocks(const PlanInput& in) {
  if (!in.activation_checkpointing) return 0;
  return in.model.num_layers / in.checkpoint_every;
}

ActivationPlan PlanActivations(const PlanInput& in) {
  CHECK(ValidatePlanInput(in).ok()) << ValidatePlanInput(in);
  const Shape s = ShapeOf(in);
  const ActivationBytes ab = ActivationBytesOf(in);
  ActivationPlan plan;
  plan.block_bytes =
      BlockSavedBytes(in.model, s, ab, in.fused_attention, in.torch_version);
  plan.head_bytes = HeadSavedBytes(in.model, s, ab, in.torch_version);
  return plan;
}

MemoryPlan PlanMemory(const PlanInput& in) {
  CHECK(ValidatePlanInput(in).ok()) << ValidatePlanInput(in);
  const models::ModelConfig& m = in.model;
  const int64_t psi = models::NumParameters(m);
  const int64_t layers = m.num_layers;
  const int64_t unit = BlockParameters(m);
  const int64_t root = psi - layers * unit;
  const int64_t p = in.precision == "fp32" ? 4 : 2;
  const ActivationBytes ab = ActivationBytesOf(in);
  const int64_t a = ab.l;  // Backward temporaries, in the compute dtype.
  const Shape s = ShapeOf(in);
  const int64_t checkpointed = CheckpointedBlocks(in);
  const bool ac = checkpointed > 0;
  const int64_t block_saved =
      BlockSavedBytes(m, s, ab, in.fused_attention, in.torch_version);
  // A checkpointed block keeps only its input (B T C, the residual dtype).
  const int64_t block_input = ab.r * s.btc;
  const std::string block_formula = absl::StrCat(
      m.family == "gpt"
          ? "(2r + 6l) BTC + l BTF + 4r BT"
          : absl::StrCat("(2 (", MeanKeepsInput(in.torch_version) ? 8 : 4,
                         " + r) + ", ab.autocast ? "10" : "2r",
                         " + 4l) BTC + 4l BTF + 8 BT"),
      in.fused_attention ? " + 4 BHT lse" : " + BHTT probs",
      ab.autocast ? " + 2 W (bf16 weights)" : "",
      absl::StrFormat(", r = %d, l = %d", ab.r, ab.l));
  const int64_t head_kept = HeadSavedBytes(m, s, ab, in.torch_version);

  const std::vector<PlanTerm> state = StateTerms(in, psi);
  // What is gathered or in flight, per strategy.
  // FSDP with one rank per shard group, fp32 and no offload: the full
  // parameters and gradients are views of the master and gradient shards
  // (FsdpStrategy's alias_master): nothing is gathered or in flight.
  const bool fsdp = in.strategy == "fsdp" &&
                    !(ShardGroupSize(in) == 1 && p == 4 && !in.cpu_offload);

  std::vector<Moment> moments;
  const PlanTerm activations = {
      "activations",
      checkpointed * block_input + (layers - checkpointed) * block_saved +
          head_kept,
      absl::StrCat(
          !ac ? absl::StrCat("L x ", block_formula)
          : checkpointed == layers
              ? "L x BTC r (checkpointed input)"
              : absl::StrCat(checkpointed, " checkpointed x BTC r + ",
                             layers - checkpointed, " x ", block_formula),
          " + head (last output, norm)")};
  // A sharded root is gathered for the head's backward by the hook on the
  // head's output (strategies/fsdp.cc RunUnit), which runs once the logits'
  // gradient exists: the unchunked loss's backward runs before, with the
  // root sharded. (Chunked, the head's output is the loss itself: the hook
  // runs first. With one rank per shard group nothing is resharded: the
  // root stays gathered.)
  const bool root_after_loss =
      fsdp && !FsdpRootStaysGathered(in.fsdp_sharding) &&
      ShardGroupSize(in) > 1 && m.loss_chunk_tokens == 0;
  if (root_after_loss) {
    Moment mo;
    mo.name = "loss backward";
    mo.terms = state;
    mo.terms.push_back(activations);
    mo.terms.push_back(LossBackwardTerm(s));
    moments.push_back(mo);
  }
  // The head's backward: every block's activations kept.
  {
    Moment mo;
    mo.name = "head backward";
    mo.terms = state;
    if (fsdp) {
      for (PlanTerm& t : FsdpTerms(in, p, root, unit, -1)) {
        mo.terms.push_back(std::move(t));
      }
    }
    mo.terms.push_back(activations);
    mo.terms.push_back(root_after_loss ? HeadMatmulBackwardTerm(m, s, p)
                                       : LogitsTerm(m, s, p));
    moments.push_back(mo);
  }
  // Each block's backward, last to first.
  for (int64_t i = layers - 1; i >= 0; --i) {
    Moment mo;
    mo.name = absl::StrCat("backward of block ", i);
    mo.terms = state;
    if (in.strategy == "zero2") mo.terms.push_back(ZeroBucketsTerm(in, psi));
    if (fsdp) {
      for (PlanTerm& t : FsdpTerms(in, p, root, unit, i)) {
        mo.terms.push_back(std::move(t));
      }
    }
    // Of the blocks before this one, those checkpointed (the every-th,
    // 2 every-th, ...) keep their input only.
    const int64_t before = ac ? i / in.checkpoint_every : 0;
    mo.terms.push_back(
        {"activations",
         before * block_input + (i - before) * block_saved + block_saved +
             BlockBackwardTransientBytes(s, a),
         absl::StrCat(before, " x BTC r + ", i - before, " x block",
                      " + this block's ", block_formula,
                      " + backward temporaries")});
    moments.push_back(mo);
  }
  const Moment* peak = &moments[0];
  for (const Moment& mo : moments) {
    if (mo.Total() > peak->Total()) peak = &mo;
  }
  MemoryPlan plan;
  plan.num_parameters = psi;
  plan.peak_moment = peak->name;
  plan.terms = peak->terms;
  plan.peak_bytes = peak->Total();
  return plan;
}

CollectiveCost CollectiveCostFromTwoPoints(double s1, double busbw1, double s2,
                                           double busbw2, double f) {
  CHECK(s1 > 0 && s2 > s1 && busbw1 > 0 && busbw2 > 0 && f > 0);
  CHECK_GT(s2 / busbw2, s1 / busbw1) << "the larger message must take longer";
  CollectiveCost c;
  c.bus_bandwidth_bytes_per_s = (s2 - s1) / (s2 / busbw2 - s1 / busbw1);
  c.latency_s = f * (s1 / busbw1 - s1 / c.bus_bandwidth_bytes_per_s);
  if (c.latency_s < 0) {
    c.latency_s = 0;
    c.bus_bandwidth_bytes_per_s = busbw2;
  }
  return c;
}

double BusFactor(const PlanInput& in) {
  const double n = static_cast<double>(in.world_size);
  if (in.world_size < 2) return 0;
  return (in.strategy == "fsdp" ? 1.0 : 2.0) * (n - 1) / n;
}

double CollectivesPerStep(const PlanInput& in) {
  if (in.world_size < 2) return 0;
  const double layers = static_cast<double>(in.model.num_layers);
  if (in.strategy == "fsdp") {
    const bool full = !FsdpRootStaysGathered(in.fsdp_sharding);
    // Per micro-batch: the units' gathers and their reductions (L + 1 of
    // each kind; FsdpReductionsPerStep).
    const double k = static_cast<double>(in.grad_accumulation);
    const double gathers = full ? 2 * layers + 2 : layers + 1;
    return gathers * k + (layers + 1) * FsdpReductionsPerStep(in);
  }
  const double grad_bytes =
      4.0 * static_cast<double>(models::NumParameters(in.model));
  const double rest = std::max(0.0, grad_bytes - in.first_bucket_bytes);
  const double buckets =
      1 + std::ceil(rest / static_cast<double>(in.bucket_bytes));
  // zero2 reduce-scatters every micro-batch (strategies/zero.h); ddp and
  // zero1 all-reduce once a step; zero1 and zero2 then all-gather.
  const double reductions =
      in.strategy == "zero2" ? static_cast<double>(in.grad_accumulation) : 1;
  return buckets * reductions + (in.strategy == "ddp" ? 0 : 1);
}

StepTimePlan PlanStepTime(const PlanInput& in, const Hardware& hw) {
  CHECK(ValidatePlanInput(in).ok()) << ValidatePlanInput(in);
  CHECK_GT(hw.flops_per_s, 0);
  CHECK_GT(hw.bus_bandwidth_bytes_per_s, 0);
  const models::ModelConfig& m = in.model;
  const int64_t t = in.seq_len > 0 ? in.seq_len : m.seq_len;
  const double accumulation = static_cast<double>(in.grad_accumulation);
  const double p = in.precision == "fp32" ? 4 : 2;
  const ActivationBytes ab = ActivationBytesOf(in);
  const KernelRates rates = DerivedKernelRates(
      hw.rates, hw.flops_per_s, hw.memory_bandwidth_bytes_per_s, ab.l);
  const MicroBatchWork work =
      MicroBatchWorkOf(m, in.micro_batch, t, in.fused_attention,
                       static_cast<double>(CheckpointedBlocks(in)) /
                           static_cast<double>(m.num_layers));
  MicroBatchWork fresh_work = work;
  fresh_work.fresh_bytes =
      FreshMatmulBytes(m, in.micro_batch, t, static_cast<int64_t>(p),
                       hw.fresh_buffer_threshold_bytes);
  StepTimePlan plan;
  plan.classes = TimesOf(fresh_work, rates);
  for (double* c : {&plan.classes.attention_s, &plan.classes.layer_norm_s,
                    &plan.classes.gelu_s, &plan.classes.softmax_s,
                    &plan.classes.cross_entropy_s, &plan.classes.add_s,
                    &plan.classes.head_copy_s, &plan.classes.embedding_s,
                    &plan.classes.fresh_s}) {
    *c *= accumulation;
  }
  const double flops = work.linear_flops * accumulation;
  plan.compute_s = flops / hw.flops_per_s + plan.classes.attention_s;
  const double psi = static_cast<double>(models::NumParameters(m));
  const double bw = hw.memory_bandwidth_bytes_per_s;
  if (bw > 0) {
    plan.grad_accumulate_s = 3 * p * psi * accumulation / bw;
  }
  plan.elementwise_s = plan.classes.ElementwiseS() + plan.grad_accumulate_s;
  plan.optimizer_bytes = OptimizerBytes(in, psi);
  const double adamw_elements = OptimizerElements(in, psi);
  if (rates.adamw_elements_per_s > 0) {
    plan.optimizer_s = adamw_elements / rates.adamw_elements_per_s;
  }
  if (bw > 0) {
    plan.optimizer_s += (plan.optimizer_bytes - 28 * adamw_elements) / bw;
  }
  const bool fsdp_gathers =
      in.strategy == "fsdp" &&
      !(ShardGroupSize(in) == 1 && p == 4 && !in.cpu_offload);
  const double unit_bytes =
      p * static_cast<double>(BlockParameters(m));  // The smallest unit.
  if (fsdp_gathers && hw.fresh_buffer_threshold_bytes >= 0 &&
      unit_bytes >= static_cast<double>(hw.fresh_buffer_threshold_bytes)) {
    const double per_unit = FsdpRootStaysGathered(in.fsdp_sharding) ? 2 : 3;
    plan.fsdp_buffer_bytes = per_unit * p * psi * accumulation;
    if (rates.fresh_buffer_bytes_per_s > 0) {
      plan.fsdp_buffers_s =
          plan.fsdp_buffer_bytes / rates.fresh_buffer_bytes_per_s;
    }
  }
  const double n = static_cast<double>(in.world_size);
  const double ring = n > 1 ? (n - 1) / n : 0;
  double payloads = 0;  // In units of P = Psi p, each moved (N-1)/N.
  double exposed_payloads = 0;
  double overlappable_s = 0;
  if (in.strategy == "ddp" || in.strategy == "zero1") {
    payloads = 2;                             // All-reduce.
    overlappable_s = plan.compute_s * 2 / 3;  // Behind the backward.
    if (in.strategy == "zero1") {
      payloads += 1;  // Parameter all-gather after the step, exposed.
      exposed_payloads = 1;
    }
  } else if (in.strategy == "zero2") {
    // A reduce-scatter per micro-batch + the parameter all-gather.
    payloads = accumulation + 1;
    exposed_payloads = 1;
    overlappable_s = plan.compute_s * 2 / 3;
  } else if (in.strategy == "fsdp") {
    const bool grad_op = in.fsdp_sharding == "shard_grad_op" ||
                         in.fsdp_sharding == "hybrid_shard_zero2";
    // Per micro-batch: the parameters' all-gathers (forward, and backward
    // under FULL_SHARD; none without sharding) and the gradients' reduction
    // (a reduce-scatter, an all-reduce without sharding;
    // FsdpReductionsPerStep).
    const bool no_shard = in.fsdp_sharding == "no_shard";
    const double gathers = no_shard ? 0 : grad_op ? 1 : 2;
    const double reductions = no_shard ? 2 : 1;
    payloads = gathers * accumulation + reductions * FsdpReductionsPerStep(in);
    overlappable_s = plan.compute_s;  // Forward and backward.
  }
  const double payload_bytes = psi * p;
  plan.communication_bytes = payloads * payload_bytes * ring;
  plan.collectives = CollectivesPerStep(in);
  plan.communication_s =
      plan.communication_bytes / hw.bus_bandwidth_bytes_per_s +
      plan.collectives * hw.collective_latency_s;
  const double exposed_fixed =
      exposed_payloads * payload_bytes * ring / hw.bus_bandwidth_bytes_per_s;
  const double hideable = plan.communication_s - exposed_fixed;
  // The backward's elementwise work (3 of its 5 passes) overlaps like the
  // backward's matmuls; FSDP's, all of it.
  overlappable_s += plan.elementwise_s * (in.strategy == "fsdp" ? 1 : 0.6);
  if (!hw.overlap_communication) overlappable_s = 0;
  plan.exposed_communication_s =
      exposed_fixed + std::max(0.0, hideable - overlappable_s);
  plan.step_s = plan.compute_s + plan.elementwise_s + plan.optimizer_s +
                plan.fsdp_buffers_s + plan.exposed_communication_s;
  plan.formula = absl::StrFormat(
      "compute = %.3g FLOP / %.3g FLOP/s + attention %.3g FLOP / %.3g "
      "FLOP/s; elementwise = each class's work / its rate + gradient "
      "accumulation 3 p Psi / %.3g B/s; optimizer = %.3g elements / %.3g "
      "elements/s + %.3g B / %.3g B/s; FSDP buffers = %.3g B / %.3g B/s; "
      "communication = %.0f x %.0f Psi bytes x (N-1)/N / %.3g B/s + %.0f "
      "collectives x %.3g s; exposed = %.0f payload(s) not overlapped + "
      "max(0, rest - %.3g s of overlappable compute)",
      flops, hw.flops_per_s, work.attention_flops * accumulation,
      rates.attention_flops_per_s, bw, adamw_elements,
      rates.adamw_elements_per_s, plan.optimizer_bytes - 28 * adamw_elements,
      bw, plan.fsdp_buffer_bytes, rates.fresh_buffer_bytes_per_s, payloads, p,
      hw.bus_bandwidth_bytes_per_s, plan.collectives, hw.collective_latency_s,
      exposed_payloads, overlappable_s);
  return plan;
}

}  // namespace strata::launch
