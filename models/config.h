// Model configurations: the shape of a GPT-2 or Llama model, named presets,
// validation, and parameter / FLOP counting from the configuration alone
// (nothing is allocated, so counts for 7B models are instant).
#ifndef STRATA_MODELS_CONFIG_H_
#define STRATA_MODELS_CONFIG_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace strata::models {

// Llama 3.1's rotary frequency scaling (Hugging Face's rope_type "llama3"):
// frequencies whose wavelength is longer than
// original_max_position_embeddings / low_freq_factor are divided by
// `factor`, those shorter than original_max_position_embeddings /
// high_freq_factor are kept, and those between are interpolated smoothly.
struct RopeScaling {
  // "" (none) or "llama3".
  std::string type;
  double factor = 1.0;
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  int64_t original_max_position_embeddings = 8192;
};

struct ModelConfig {
  // "gpt" (GPT-2: learned positions, LayerNorm, GELU MLP, biases, tied head)
  // or "llama" (RMSNorm, rotary positions, SwiGLU, grouped-query attention).
  std::string family;
  int64_t vocab_size = 0;
  // Maximum context length (GPT-2's position table has this many rows).
  int64_t seq_len = 0;
  int64_t num_layers = 0;
  int64_t num_heads = 0;
  // Key/value heads (grouped-query attention, Llama); GPT: equal to num_heads.
  int64_t num_kv_heads = 0;
  // Model (residual stream) width; the head dimension is dim / num_heads.
  int64_t dim = 0;
  // Hidden width of the MLP: GPT 4 * dim; Llama the SwiGLU hidden size.
  int64_t ffn_dim = 0;
  // GPT only: dropout on embeddings, attention probabilities and residual
  // branches (Llama has none; a non-zero value is rejected).
  double dropout = 0.0;
  // LayerNorm (GPT) or RMSNorm (Llama) epsilon.
  double norm_eps = 1e-5;
  // Llama only: rotary embedding base and frequency scaling.
  double rope_theta = 10000;
  RopeScaling rope_scaling;
  // Whether the output head reuses the token embedding matrix. GPT: always
  // true. Llama: false for Llama 2, true for Llama 3.2 1B/3B.
  bool tie_embeddings = false;
  // Not a shape: how the head computes the training loss
  // (UnitModel::ForwardLoss). 0: logits [B, T, V] in full, then the loss
  // (UnitModel::Loss). N > 0: linear + cross-entropy fused, N tokens at a
  // time forward and backward (ChunkedLinearCrossEntropy,
  // models/chunked_loss.h): the head's activation memory is one chunk of
  // logits instead of all of them. Named configs leave it 0.
  int64_t loss_chunk_tokens = 0;
};

// The named configurations, in a fixed order: gpt-tiny, gpt-small50m,
// gpt-100m, gpt2, gpt2-medium, gpt2-large, gpt2-xl, llama-tiny, llama-1b,
// llama-7b.
std::vector<std::string> ConfigNames();

// A named configuration; an unknown name is an InvalidArgument error that
// lists the known names.
absl::StatusOr<ModelConfig> ConfigByName(std::string_view name);

// Checks a rotary scaling (the type known, factor >= 1, 0 < low_freq_factor
// < high_freq_factor, original_max_position_embeddings >= 1); the error
// names the field.
absl::Status ValidateRopeScaling(const RopeScaling& scaling);

// Checks sizes are positive and consistent (dim divisible by num_heads,
// num_heads by num_kv_heads, ...); the error names the offending field.
absl::Status ValidateConfig(const ModelConfig& config);

// Number of trainable parameters; tied weights are counted once. The config
// must be valid.
int64_t NumParameters(const ModelConfig& config);

// Number of parameters used as matmul weights: every Linear weight including
// the output head (also when it is tied to the embedding), excluding the
// embedding lookups (token, position), norms and biases. The config must be
// valid.
int64_t NumMatmulParameters(const ModelConfig& config);

// Training FLOPs per token (forward + backward) at context length `seq_len`:
//
//   6 * NumMatmulParameters(config) + 12 * num_layers * dim * seq_len
//
// Each matmul weight costs 2 FLOPs per token (multiply + add) forward and
// 4 backward (gradients of input and weight). Attention adds, per layer and
// token, q.k^T and probs.v over `seq_len` positions: 2 * 2 * dim * seq_len
// forward, twice that backward, so 12 * dim * seq_len. Causal masking is not
// subtracted (the matmuls are computed in full). Element-wise work (norms,
// softmax, activations) is ignored. This is the PaLM / Megatron "model
// FLOPs" convention, the numerator of MFU.
double TrainingFlopsPerToken(const ModelConfig& config, int64_t seq_len);

}  // namespace strata::models

#endif  // STRATA_MODELS_CONFIG_H_
