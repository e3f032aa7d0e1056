#include "models/config.h"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "glog/logging.h"

namespace strata::models {
namespace {

ModelConfig Gpt(int64_t vocab_size, int64_t seq_len, int64_t num_layers,
                int64_t num_heads, int64_t dim) {
  ModelConfig config;
  config.family = "gpt";
  config.vocab_size = vocab_size;
  config.seq_len = seq_len;
  config.num_layers = num_layers;
  config.num_heads = num_heads;
  config.num_kv_heads = num_heads;
  config.dim = dim;
  config.ffn_dim = 4 * dim;
  config.norm_eps = 1e-5;
  config.tie_embeddings = true;
  return config;
}

ModelConfig Llama(int64_t vocab_size, int64_t seq_len, int64_t num_layers,
                  int64_t num_heads, int64_t num_kv_heads, int64_t dim,
                  int64_t ffn_dim, double rope_theta, bool tie_embeddings) {
  ModelConfig config;
  config.family = "llama";
  config.vocab_size = vocab_size;
  config.seq_len = seq_len;
  config.num_layers = num_layers;
  config.num_heads = num_heads;
  config.num_kv_heads = num_kv_heads;
  config.dim = dim;
  config.ffn_dim = ffn_dim;
  config.norm_eps = 1e-5;
  config.rope_theta = rope_theta;
  config.tie_embeddings = tie_embeddings;
  return config;
}

// `config` with Llama 3.2's rotary scaling (its config.json's rope_scaling).
ModelConfig Llama3(ModelConfig config) {
  config.rope_scaling.type = "llama3";
  config.rope_scaling.factor = 32;
  config.rope_scaling.low_freq_factor = 1;
  config.rope_scaling.high_freq_factor = 4;
  config.rope_scaling.original_max_position_embeddings = 8192;
  return config;
}

const std::vector<std::pair<std::string, ModelConfig>>& NamedConfigs() {
  static const auto* const kConfigs =
      new std::vector<std::pair<std::string, ModelConfig>>{
          {"gpt-tiny", Gpt(256, 128, 2, 4, 64)},
          // 49.7M parameters; head dimension 64.
          {"gpt-small50m", Gpt(8192, 256, 9, 10, 640)},
          // 91.5M parameters: GPT-2 small's body with an 8k vocabulary.
          {"gpt-100m", Gpt(8192, 256, 12, 12, 768)},
          // The published GPT-2 sizes (Radford et al. 2019, HF "gpt2*").
          {"gpt2", Gpt(50257, 1024, 12, 12, 768)},
          {"gpt2-medium", Gpt(50257, 1024, 24, 16, 1024)},
          {"gpt2-large", Gpt(50257, 1024, 36, 20, 1280)},
          {"gpt2-xl", Gpt(50257, 1024, 48, 25, 1600)},
          {"llama-tiny", Llama(256, 128, 2, 4, 2, 64, 172, 10000, false)},
          // Llama 3.2 1B: ties its output head to the token embedding,
          // scales rotary frequencies as Llama 3.1 (factor 32).
          {"llama-1b",
           Llama3(Llama(128256, 2048, 16, 32, 8, 2048, 8192, 500000, true))},
          // Llama 2 7B.
          {"llama-7b",
           Llama(32000, 4096, 32, 32, 32, 4096, 11008, 10000, false)},
      };
  return *kConfigs;
}

absl::Status Positive(const char* field, int64_t value) {
  if (value > 0) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("model config: ", field, " must be positive, got ", value));
}

}  // namespace

std::vector<std::string> ConfigNames() {
  std::vector<std::string> names;
  for (const auto& [name, config] : NamedConfigs()) names.push_back(name);
  return names;
}

absl::StatusOr<ModelConfig> ConfigByName(std::string_view name) {
  for (const auto& [config_name, config] : NamedConfigs()) {
    if (config_name == name) return config;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown model config '", absl::string_view(name.data(), name.size()),
      "'; known configs: ", absl::StrJoin(ConfigNames(), ", ")));
}

absl::Status ValidateRopeScaling(const RopeScaling& scaling) {
  if (scaling.type.empty()) return absl::OkStatus();
  if (scaling.type != "llama3") {
    return absl::InvalidArgumentError(absl::StrCat(
        "model config: rope_scaling type must be empty or \"llama3\", got \"",
        scaling.type, "\""));
  }
  if (!(scaling.factor >= 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("model config: rope_scaling factor must be >= 1, got ",
                     scaling.factor));
  }
  if (!(scaling.low_freq_factor > 0 &&
        scaling.high_freq_factor > scaling.low_freq_factor)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model config: rope_scaling needs 0 < low_freq_factor < "
        "high_freq_factor, got ",
        scaling.low_freq_factor, " and ", scaling.high_freq_factor));
  }
  if (scaling.original_max_position_embeddings < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model config: rope_scaling original_max_position_embeddings must be "
        ">= 1, got ",
        scaling.original_max_position_embeddings));
  }
  return absl::OkStatus();
}

absl::Status ValidateConfig(const ModelConfig& config) {
  if (config.family != "gpt" && config.family != "llama") {
    return absl::InvalidArgumentError(absl::StrCat(
        "model config: family must be \"gpt\" or \"llama\", got \"",
        config.family, "\""));
  }
  for (const auto& [field, value] :
       std::vector<std::pair<const char*, int64_t>>{
           {"vocab_size", config.vocab_size},
           {"seq_len", config.seq_len},
           {"num_layers", config.num_layers},
           {"num_heads", config.num_heads},
           {"num_kv_heads", config.num_kv_heads},
           {"dim", config.dim},
           {"ffn_dim", config.ffn_dim}}) {
    if (absl::Status status = Positive(field, value); !status.ok()) {
      return status;
    }
  }
  if (config.loss_chunk_tokens < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model config: loss_chunk_tokens must be >= 0 (0: unfused loss), got ",
        config.loss_chunk_tokens));
  }
  if (config.dim % config.num_heads != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model config: dim (", config.dim, ") must be divisible by num_heads (",
        config.num_heads, ")"));
  }
  if (config.num_heads % config.num_kv_heads != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model config: num_heads (", config.num_heads,
        ") must be divisible by num_kv_heads (", config.num_kv_heads, ")"));
  }
  if (!(config.norm_eps > 0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model config: norm_eps must be positive, got ", config.norm_eps));
  }
  if (!(config.dropout >= 0 && config.dropout < 1)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model config: dropout must be in [0, 1), got ", config.dropout));
  }
  if (config.family == "gpt") {
    if (config.num_kv_heads != config.num_heads) {
      return absl::InvalidArgumentError(
          absl::StrCat("model config: num_kv_heads (", config.num_kv_heads,
                       ") must equal num_heads (", config.num_heads,
                       ") for family gpt (no grouped-query attention)"));
    }
    if (!config.tie_embeddings) {
      return absl::InvalidArgumentError(
          "model config: tie_embeddings must be true for family gpt (GPT-2's "
          "output head is the token embedding wte.weight)");
    }
  } else {
    if (config.dropout != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "model config: dropout must be 0 for family llama (Llama has no "
          "dropout), got ",
          config.dropout));
    }
    if ((config.dim / config.num_heads) % 2 != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "model config: the head dimension dim / num_heads (",
          config.dim / config.num_heads,
          ") must be even for family llama (rotary embeddings rotate pairs)"));
    }
    if (!(config.rope_theta > 0)) {
      return absl::InvalidArgumentError(
          absl::StrCat("model config: rope_theta must be positive, got ",
                       config.rope_theta));
    }
    if (absl::Status s = ValidateRopeScaling(config.rope_scaling); !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

int64_t NumParameters(const ModelConfig& config) {
  const absl::Status valid = ValidateConfig(config);
  CHECK(valid.ok()) << valid;
  const int64_t d = config.dim;
  const int64_t v = config.vocab_size;
  const int64_t f = config.ffn_dim;
  const int64_t l = config.num_layers;
  if (config.family == "gpt") {
    const int64_t per_layer = 2 * (2 * d)            // ln_1, ln_2
                              + (3 * d * d + 3 * d)  // attn.qkv
                              + (d * d + d)          // attn.proj
                              + (f * d + f)          // mlp.fc
                              + (d * f + d);         // mlp.proj
    return v * d + config.seq_len * d + l * per_layer + 2 * d;
  }
  const int64_t kv_dim = config.num_kv_heads * (d / config.num_heads);
  const int64_t per_layer = 2 * d             // attention_norm, ffn_norm
                            + 2 * d * d       // wq, wo
                            + 2 * d * kv_dim  // wk, wv
                            + 3 * d * f;      // w1, w2, w3
  return v * d + l * per_layer + d + (config.tie_embeddings ? 0 : v * d);
}

int64_t NumMatmulParameters(const ModelConfig& config) {
  const absl::Status valid = ValidateConfig(config);
  CHECK(valid.ok()) << valid;
  const int64_t d = config.dim;
  const int64_t f = config.ffn_dim;
  int64_t per_layer = 0;
  if (config.family == "gpt") {
    per_layer = 3 * d * d + d * d + 2 * d * f;
  } else {
    const int64_t kv_dim = config.num_kv_heads * (d / config.num_heads);
    per_layer = 2 * d * d + 2 * d * kv_dim + 3 * d * f;
  }
  return config.num_layers * per_layer + config.vocab_size * d;
}

double TrainingFlopsPerToken(const ModelConfig& config, int64_t seq_len) {
  return 6.0 * static_cast<double>(NumMatmulParameters(config)) +
         12.0 * static_cast<double>(config.num_layers) *
             static_cast<double>(config.dim) * static_cast<double>(seq_len);
}

}  // namespace strata::models
