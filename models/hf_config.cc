#include "models/hf_config.h"

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/file_io.h"
#include "base/json.h"
#include "base/status.h"

namespace strata::models {
namespace {

using Json = nlohmann::json;

constexpr char kConfigFile[] = "config.json";

// JSON field readers for config.json: errors name the file and the key.
class ConfigReader {
 public:
  ConfigReader(const Json& root, std::string source, std::string prefix = "")
      : root_(root), source_(std::move(source)), prefix_(std::move(prefix)) {}

  bool Has(const char* key) const {
    return root_.contains(key) && !root_[key].is_null();
  }
  // A reader of the object under `key` (which Has), its errors naming
  // "key.field".
  absl::StatusOr<ConfigReader> Object(const char* key) const {
    if (!root_[key].is_object()) return Wrong(key, "an object");
    return ConfigReader(root_[key], source_, absl::StrCat(prefix_, key, "."));
  }

  absl::StatusOr<int64_t> Int(const char* key) const {
    if (!Has(key)) return Missing(key);
    if (!root_[key].is_number_integer()) return Wrong(key, "an integer");
    return root_[key].get<int64_t>();
  }
  absl::StatusOr<int64_t> Int(const char* key, int64_t fallback) const {
    return Has(key) ? Int(key) : fallback;
  }
  absl::StatusOr<double> Double(const char* key, double fallback) const {
    if (!Has(key)) return fallback;
    if (!root_[key].is_number()) return Wrong(key, "a number");
    return root_[key].get<double>();
  }
  absl::StatusOr<bool> Bool(const char* key, bool fallback) const {
    if (!Has(key)) return fallback;
    if (!root_[key].is_boolean()) return Wrong(key, "true or false");
    return root_[key].get<bool>();
  }
  absl::StatusOr<std::string> String(const char* key,
                                     const std::string& fallback) const {
    if (!Has(key)) return fallback;
    if (!root_[key].is_string()) return Wrong(key, "a string");
    return root_[key].get<std::string>();
  }
  absl::Status Unsupported(const char* key, const std::string& why) const {
    return absl::InvalidArgumentError(
        absl::StrCat(source_, ": \"", prefix_, key, "\": ", why));
  }

 private:
  absl::Status Missing(const char* key) const {
    return absl::InvalidArgumentError(
        absl::StrCat(source_, ": missing \"", prefix_, key, "\""));
  }
  absl::Status Wrong(const char* key, const char* expected) const {
    return absl::InvalidArgumentError(absl::StrCat(
        source_, ": \"", prefix_, key, "\" must be ", expected, ", got ",
        root_[key].dump(-1, ' ', false, Json::error_handler_t::replace)));
  }

  const Json& root_;
  std::string source_;
  std::string prefix_;  // "rope_scaling." for a nested object.
};

// Hugging Face's rope_scaling object: rope_type (or the older "type")
// "llama3" with factor, low_freq_factor, high_freq_factor and
// original_max_position_embeddings; other types are not modelled.
absl::Status ReadRopeScaling(const ConfigReader& r, models::RopeScaling* s) {
  const char* type_key = r.Has("rope_type") ? "rope_type" : "type";
  STRATA_ASSIGN_OR_RETURN(std::string type, r.String(type_key, ""));
  if (type == "default") return absl::OkStatus();  // No scaling.
  if (type != "llama3") {
    return r.Unsupported(
        type_key, absl::StrCat("'", type,
                               "': Strata's Llama models only Llama 3.1's "
                               "scaling (\"llama3\")"));
  }
  s->type = type;
  STRATA_ASSIGN_OR_RETURN(s->factor, r.Double("factor", 1.0));
  STRATA_ASSIGN_OR_RETURN(s->low_freq_factor, r.Double("low_freq_factor", 1.0));
  STRATA_ASSIGN_OR_RETURN(s->high_freq_factor,
                          r.Double("high_freq_factor", 4.0));
  STRATA_ASSIGN_OR_RETURN(s->original_max_position_embeddings,
                          r.Int("original_max_position_embeddings"));
  if (absl::Status valid = models::ValidateRopeScaling(*s); !valid.ok()) {
    return r.Unsupported("rope_type", std::string(valid.message()));
  }
  return absl::OkStatus();
}

absl::Status ReadGpt2Config(const ConfigReader& r, models::ModelConfig* c) {
  STRATA_ASSIGN_OR_RETURN(c->vocab_size, r.Int("vocab_size"));
  // Older configs give the context as n_ctx.
  STRATA_ASSIGN_OR_RETURN(
      c->seq_len,
      r.Int(r.Has("n_positions") || !r.Has("n_ctx") ? "n_positions" : "n_ctx"));
  STRATA_ASSIGN_OR_RETURN(c->dim, r.Int("n_embd"));
  STRATA_ASSIGN_OR_RETURN(c->num_layers, r.Int("n_layer"));
  STRATA_ASSIGN_OR_RETURN(c->num_heads, r.Int("n_head"));
  c->num_kv_heads = c->num_heads;
  STRATA_ASSIGN_OR_RETURN(c->ffn_dim, r.Int("n_inner", 4 * c->dim));
  STRATA_ASSIGN_OR_RETURN(c->norm_eps, r.Double("layer_norm_epsilon", 1e-5));
  c->tie_embeddings = true;
  STRATA_ASSIGN_OR_RETURN(std::string act,
                          r.String("activation_function", "gelu_new"));
  if (act != "gelu_new" && act != "gelu_pytorch_tanh") {
    return r.Unsupported("activation_function",
                         absl::StrCat("'", act,
                                      "': Strata's GPT-2 uses GELU with the "
                                      "tanh approximation (gelu_new)"));
  }
  STRATA_ASSIGN_OR_RETURN(bool scaled, r.Bool("scale_attn_weights", true));
  if (!scaled) {
    return r.Unsupported("scale_attn_weights",
                         "false: Strata scales attention by 1/sqrt(d)");
  }
  STRATA_ASSIGN_OR_RETURN(bool by_layer,
                          r.Bool("scale_attn_by_inverse_layer_idx", false));
  if (by_layer) {
    return r.Unsupported("scale_attn_by_inverse_layer_idx",
                         "true is not modelled by Strata's GPT-2");
  }
  STRATA_ASSIGN_OR_RETURN(bool tied, r.Bool("tie_word_embeddings", true));
  if (!tied) {
    return r.Unsupported("tie_word_embeddings",
                         "false: Strata's GPT-2 always ties its head to wte");
  }
  return absl::OkStatus();
}

absl::Status ReadLlamaConfig(const ConfigReader& r, models::ModelConfig* c) {
  STRATA_ASSIGN_OR_RETURN(c->vocab_size, r.Int("vocab_size"));
  STRATA_ASSIGN_OR_RETURN(c->seq_len, r.Int("max_position_embeddings"));
  STRATA_ASSIGN_OR_RETURN(c->dim, r.Int("hidden_size"));
  STRATA_ASSIGN_OR_RETURN(c->num_layers, r.Int("num_hidden_layers"));
  STRATA_ASSIGN_OR_RETURN(c->num_heads, r.Int("num_attention_heads"));
  STRATA_ASSIGN_OR_RETURN(c->num_kv_heads,
                          r.Int("num_key_value_heads", c->num_heads));
  STRATA_ASSIGN_OR_RETURN(c->ffn_dim, r.Int("intermediate_size"));
  STRATA_ASSIGN_OR_RETURN(c->norm_eps, r.Double("rms_norm_eps", 1e-6));
  STRATA_ASSIGN_OR_RETURN(c->rope_theta, r.Double("rope_theta", 10000));
  STRATA_ASSIGN_OR_RETURN(c->tie_embeddings,
                          r.Bool("tie_word_embeddings", false));
  STRATA_ASSIGN_OR_RETURN(std::string act, r.String("hidden_act", "silu"));
  if (act != "silu") {
    return r.Unsupported("hidden_act",
                         absl::StrCat("'", act, "': Strata's Llama uses silu"));
  }
  if (r.Has("rope_scaling")) {
    STRATA_ASSIGN_OR_RETURN(ConfigReader scaling, r.Object("rope_scaling"));
    STRATA_RETURN_IF_ERROR(ReadRopeScaling(scaling, &c->rope_scaling));
  }
  for (const char* key : {"attention_bias", "mlp_bias"}) {
    STRATA_ASSIGN_OR_RETURN(bool bias, r.Bool(key, false));
    if (bias) return r.Unsupported(key, "true: Strata's Llama has no biases");
  }
  if (r.Has("head_dim")) {
    STRATA_ASSIGN_OR_RETURN(int64_t head_dim, r.Int("head_dim"));
    if (c->num_heads <= 0 || head_dim * c->num_heads != c->dim) {
      return r.Unsupported(
          "head_dim", absl::StrCat(head_dim,
                                   " is not hidden_size / num_attention_heads; "
                                   "Strata's Llama derives it from them"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

std::string HfConfigPath(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    return path + "/" + kConfigFile;
  }
  return ParentDir(path) + "/" + kConfigFile;
}

absl::Status CheckHfConfig(const std::string& path,
                           const models::ModelConfig& config) {
  const std::string config_path = HfConfigPath(path);
  std::error_code ec;
  if (!std::filesystem::exists(config_path, ec)) return absl::OkStatus();
  STRATA_ASSIGN_OR_RETURN(std::string text, ReadWholeFile(config_path));
  STRATA_ASSIGN_OR_RETURN(
      models::ModelConfig file,
      ModelConfigFromHfJson(text, config_path, config.family));
  auto differs = [&](const char* field, auto theirs, auto ours) {
    return absl::InvalidArgumentError(
        absl::StrCat(config_path, " describes another model: ", field, " is ",
                     theirs, " there and ", ours, " in the model config"));
  };
  if (file.num_heads != config.num_heads) {
    return differs("num_heads", file.num_heads, config.num_heads);
  }
  if (file.num_kv_heads != config.num_kv_heads) {
    return differs("num_kv_heads", file.num_kv_heads, config.num_kv_heads);
  }
  if (file.norm_eps != config.norm_eps) {
    return differs("norm_eps", file.norm_eps, config.norm_eps);
  }
  if (config.family == "llama" && file.rope_theta != config.rope_theta) {
    return differs("rope_theta", file.rope_theta, config.rope_theta);
  }
  if (config.family == "llama") {
    const models::RopeScaling& a = file.rope_scaling;
    const models::RopeScaling& b = config.rope_scaling;
    auto text = [](const models::RopeScaling& s) {
      if (s.type.empty()) return std::string("none");
      return absl::StrCat(s.type, " (factor ", s.factor, ", low_freq_factor ",
                          s.low_freq_factor, ", high_freq_factor ",
                          s.high_freq_factor,
                          ", original_max_position_embeddings ",
                          s.original_max_position_embeddings, ")");
    };
    if (text(a) != text(b)) return differs("rope_scaling", text(a), text(b));
  }
  if (file.tie_embeddings != config.tie_embeddings) {
    return differs("tie_embeddings", file.tie_embeddings,
                   config.tie_embeddings);
  }
  return absl::OkStatus();
}

absl::StatusOr<models::ModelConfig> ModelConfigFromHfJson(
    absl::string_view text, const std::string& source,
    const std::string& family) {
  STRATA_ASSIGN_OR_RETURN(Json root, ParseJson(text, source));
  if (!root.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": expected a JSON object"));
  }
  const ConfigReader reader(root, source);
  const std::string expected_type = family == "gpt" ? "gpt2" : "llama";
  STRATA_ASSIGN_OR_RETURN(std::string model_type,
                          reader.String("model_type", expected_type));
  if (model_type != expected_type) {
    return reader.Unsupported(
        "model_type",
        absl::StrCat("'", model_type, "', expected '", expected_type,
                     "' for hf-", family == "gpt" ? "gpt2" : "llama"));
  }
  models::ModelConfig config;
  config.family = family;
  STRATA_RETURN_IF_ERROR(family == "gpt" ? ReadGpt2Config(reader, &config)
                                         : ReadLlamaConfig(reader, &config));
  STRATA_RETURN_IF_ERROR(Annotate(models::ValidateConfig(config), source));
  return config;
}

absl::StatusOr<models::ModelConfig> ModelConfigFromHfConfigText(
    absl::string_view text, const std::string& source) {
  STRATA_ASSIGN_OR_RETURN(Json root, ParseJson(text, source));
  const std::string model_type = root.is_object() &&
                                         root.contains("model_type") &&
                                         root["model_type"].is_string()
                                     ? root["model_type"].get<std::string>()
                                     : "";
  if (model_type != "gpt2" && model_type != "llama") {
    return absl::InvalidArgumentError(
        absl::StrCat(source,
                     ": \"model_type\" must be \"gpt2\" or \"llama\" (the "
                     "families Strata models), got ",
                     model_type.empty() ? "none" : "'" + model_type + "'"));
  }
  return ModelConfigFromHfJson(text, source,
                               model_type == "gpt2" ? "gpt" : "llama");
}

absl::StatusOr<models::ModelConfig> ModelConfigFromHfConfigFile(
    const std::string& path) {
  std::error_code ec;
  const std::string file =
      std::filesystem::is_directory(path, ec) ? path + "/" + kConfigFile : path;
  STRATA_ASSIGN_OR_RETURN(std::string text, ReadWholeFile(file));
  return ModelConfigFromHfConfigText(text, file);
}

std::string HfConfigJson(const models::ModelConfig& c) {
  nlohmann::ordered_json j;
  if (c.family == "gpt") {
    j["architectures"] = {"GPT2LMHeadModel"};
    j["model_type"] = "gpt2";
    j["vocab_size"] = c.vocab_size;
    j["n_positions"] = c.seq_len;
    j["n_embd"] = c.dim;
    j["n_layer"] = c.num_layers;
    j["n_head"] = c.num_heads;
    j["n_inner"] = c.ffn_dim;
    j["layer_norm_epsilon"] = c.norm_eps;
    j["activation_function"] = "gelu_new";
    j["resid_pdrop"] = c.dropout;
    j["embd_pdrop"] = c.dropout;
    j["attn_pdrop"] = c.dropout;
    j["scale_attn_weights"] = true;
    j["tie_word_embeddings"] = true;
  } else {
    j["architectures"] = {"LlamaForCausalLM"};
    j["model_type"] = "llama";
    j["vocab_size"] = c.vocab_size;
    j["max_position_embeddings"] = c.seq_len;
    j["hidden_size"] = c.dim;
    j["intermediate_size"] = c.ffn_dim;
    j["num_hidden_layers"] = c.num_layers;
    j["num_attention_heads"] = c.num_heads;
    j["num_key_value_heads"] = c.num_kv_heads;
    j["rms_norm_eps"] = c.norm_eps;
    j["rope_theta"] = c.rope_theta;
    if (c.rope_scaling.type.empty()) {
      j["rope_scaling"] = nullptr;
    } else {
      j["rope_scaling"] = {
          {"rope_type", c.rope_scaling.type},
          {"factor", c.rope_scaling.factor},
          {"low_freq_factor", c.rope_scaling.low_freq_factor},
          {"high_freq_factor", c.rope_scaling.high_freq_factor},
          {"original_max_position_embeddings",
           c.rope_scaling.original_max_position_embeddings}};
    }
    j["hidden_act"] = "silu";
    j["attention_bias"] = false;
    j["mlp_bias"] = false;
    j["tie_word_embeddings"] = c.tie_embeddings;
  }
  return j.dump(2) + "\n";
}

std::string ModelConfigRecord(const std::string& model,
                              const models::ModelConfig& config) {
  absl::StatusOr<models::ModelConfig> named = models::ConfigByName(model);
  if (named.ok()) {
    named->dropout = config.dropout;
    if (HfConfigJson(*named) == HfConfigJson(config)) return model;
  }
  return nlohmann::ordered_json::parse(HfConfigJson(config)).dump();
}

absl::StatusOr<models::ModelConfig> ModelConfigFromRecord(
    const std::string& record, const std::string& source) {
  if (absl::StartsWith(record, "{")) {
    return ModelConfigFromHfConfigText(
        record, absl::StrCat(source, " (its recorded model config)"));
  }
  return ModelConfigByNameOrPath(record);
}

absl::StatusOr<models::ModelConfig> ModelConfigByNameOrPath(
    const std::string& model) {
  std::error_code ec;
  if (absl::EndsWith(model, ".json") ||
      std::filesystem::is_directory(model, ec)) {
    return ModelConfigFromHfConfigFile(model);
  }
  absl::StatusOr<models::ModelConfig> config = models::ConfigByName(model);
  if (!config.ok()) {
    return absl::Status(config.status().code(),
                        absl::StrCat(config.status().message(),
                                     " (or a config.json or its directory)"));
  }
  return config;
}

}  // namespace strata::models
