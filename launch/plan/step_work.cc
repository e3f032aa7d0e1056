#include "launch/plan/step_work.h"

#include <cstdint>
#include <utility>
#include <vector>

#include "glog/logging.h"

namespace strata::launch {
namespace {

// `rate` if measured (> 0), else `derived`.
double Or(double rate, double derived) { return rate > 0 ? rate : derived; }

// work / rate, 0 when the rate is 0.
double Time(double work, double rate) { return rate > 0 ? work / rate : 0; }

}  // namespace

KernelRates DerivedKernelRates(const KernelRates& measured, double flops_per_s,
                               double memory_bandwidth_bytes_per_s,
                               int64_t bytes_per_element) {
  CHECK(bytes_per_element == 2 || bytes_per_element == 4) << bytes_per_element;
  const double bw = memory_bandwidth_bytes_per_s;
  const double a = static_cast<double>(bytes_per_element);
  KernelRates r = measured;
  r.attention_flops_per_s = Or(r.attention_flops_per_s, flops_per_s);
  r.layer_norm_elements_per_s = Or(r.layer_norm_elements_per_s, bw / (5 * a));
  r.gelu_elements_per_s = Or(r.gelu_elements_per_s, bw / (5 * a));
  r.softmax_elements_per_s = Or(r.softmax_elements_per_s, bw / (5 * 4));
  r.cross_entropy_elements_per_s =
      Or(r.cross_entropy_elements_per_s, bw / (6 * 4));
  r.add_elements_per_s = Or(r.add_elements_per_s, bw / (3 * a));
  r.head_copy_elements_per_s = Or(r.head_copy_elements_per_s, bw / (4 * a));
  r.embedding_elements_per_s = Or(r.embedding_elements_per_s, bw / a);
  r.adamw_elements_per_s = Or(r.adamw_elements_per_s, bw / 28);
  r.fresh_buffer_bytes_per_s = Or(r.fresh_buffer_bytes_per_s, bw);
  return r;
}

MicroBatchWork MicroBatchWorkOf(const models::ModelConfig& m,
                                int64_t micro_batch, int64_t seq_len,
                                bool fused_attention,
                                double checkpointed_fraction) {
  CHECK(checkpointed_fraction >= 0 && checkpointed_fraction <= 1)
      << checkpointed_fraction;
  const double f_ac = checkpointed_fraction;
  const double t = static_cast<double>(seq_len);
  const double bt = static_cast<double>(micro_batch) * t;
  const double c = static_cast<double>(m.dim);
  const double f = static_cast<double>(m.ffn_dim);
  const double layers = static_cast<double>(m.num_layers);
  const double btc = bt * c, btf = bt * f;
  const double bhtt = fused_attention ? 0 : bt * m.num_heads * t;
  const double kv = static_cast<double>(m.num_kv_heads) *
                    static_cast<double>(m.dim / m.num_heads);
  // Per block (forward once; the class rates include the backward).
  double norms = 2 * btc, gelu = btf, adds = 2 * btc, copies = 4 * btc;
  if (m.family != "gpt") {
    adds += btf + 4 * (btc + bt * kv);  // Gate product, rotary of q and k.
    if (m.num_kv_heads < m.num_heads) copies += 2 * btc;  // GQA repeat.
  }
  // Recompute: the blocks' forward again, 2 of the 5 passes.
  const double ac = 1.0 + f_ac * 2.0 / 5;
  MicroBatchWork w;
  const double block_linear_flops =
      6.0 *
      static_cast<double>(models::NumMatmulParameters(m) -
                          m.vocab_size * m.dim) *
      bt;
  w.linear_flops =
      6.0 * static_cast<double>(models::NumMatmulParameters(m)) * bt +
      f_ac * block_linear_flops / 3;
  w.attention_flops = 12.0 * layers * c * t * bt * (1.0 + f_ac / 3);
  w.layer_norm_elements = layers * norms * ac + btc;
  // GPT's MLP recomputes its GELU in backward (models/gelu_linear.h): one
  // more forward, 2 of the 5 passes.
  const double gelu_forwards = 1 + f_ac + (m.family == "gpt" ? 1 : 0);
  w.gelu_elements = layers * gelu * (2 * gelu_forwards + 3) / 5;
  w.softmax_elements = layers * bhtt * ac;
  w.head_copy_elements = layers * copies * ac;
  w.add_elements = layers * adds * ac + (m.family == "gpt" ? btc : 0);
  w.cross_entropy_elements = bt * static_cast<double>(m.vocab_size);
  w.embedding_elements =
      static_cast<double>(m.vocab_size) * c +
      (m.family == "gpt" ? static_cast<double>(m.seq_len) * c : 0);
  return w;
}

double FreshMatmulBytes(const models::ModelConfig& m, int64_t micro_batch,
                        int64_t seq_len, int64_t param_bytes,
                        int64_t threshold_bytes) {
  if (threshold_bytes < 0) return 0;
  const double c = static_cast<double>(m.dim);
  const double f = static_cast<double>(m.ffn_dim);
  const double layers = static_cast<double>(m.num_layers);
  const double p = static_cast<double>(param_bytes);
  const double kv = static_cast<double>(m.num_kv_heads) *
                    static_cast<double>(m.dim / m.num_heads);
  // (bytes, count) of each weight gradient, as TrainingGemmShapes.
  const std::vector<std::pair<double, double>> weights =
      m.family == "gpt"
          ? std::vector<std::pair<double, double>>{{3 * c * c * p, layers},
                                                   {c * c * p, layers},
                                                   {c * f * p, 2 * layers}}
          : std::vector<std::pair<double, double>>{{c * c * p, 2 * layers},
                                                   {c * kv * p, 2 * layers},
                                                   {c * f * p, 3 * layers}};
  const double threshold = static_cast<double>(threshold_bytes);
  double bytes = 0;
  for (const auto& [size, count] : weights) {
    if (size >= threshold) bytes += size * count;
  }
  const double head = static_cast<double>(m.vocab_size) * c * p;
  if (head >= threshold) bytes += head;
  const double logits = 4.0 * static_cast<double>(micro_batch) *
                        static_cast<double>(seq_len) * m.vocab_size;
  if (logits >= threshold) bytes += logits;
  return bytes;
}

ClassTimes TimesOf(const MicroBatchWork& w, const KernelRates& r) {
  ClassTimes t;
  t.attention_s = Time(w.attention_flops, r.attention_flops_per_s);
  t.layer_norm_s = Time(w.layer_norm_elements, r.layer_norm_elements_per_s);
  t.gelu_s = Time(w.gelu_elements, r.gelu_elements_per_s);
  t.softmax_s = Time(w.softmax_elements, r.softmax_elements_per_s);
  t.cross_entropy_s =
      Time(w.cross_entropy_elements, r.cross_entropy_elements_per_s);
  t.add_s = Time(w.add_elements, r.add_elements_per_s);
  t.head_copy_s = Time(w.head_copy_elements, r.head_copy_elements_per_s);
  t.embedding_s = Time(w.embedding_elements, r.embedding_elements_per_s);
  t.fresh_s = Time(w.fresh_bytes, r.fresh_buffer_bytes_per_s);
  return t;
}

}  // namespace strata::launch
