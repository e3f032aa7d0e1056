// Hugging Face config.json files of GPT-2 and Llama: read into a Strata
// model config and written from one; and the text a checkpoint records as
// its model's config (a registered name, or config.json text).
#ifndef STRATA_MODELS_HF_CONFIG_H_
#define STRATA_MODELS_HF_CONFIG_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "models/config.h"

namespace strata::models {

// config.json of `path`: in the directory, or beside the file.
std::string HfConfigPath(const std::string& path);

// The Strata config (family "gpt" or "llama") of a Hugging Face config.json
// (`text`, named `source` in errors). InvalidArgument naming the key when
// one is missing or of the wrong type, or when the config asks for what
// Strata's model does not compute (GPT-2: an activation other than
// gelu_new, unscaled or layer-scaled attention; Llama: a rope_scaling
// other than Llama 3.1's "llama3", attention or MLP biases, an activation other
// than silu, a head_dim other than hidden_size / num_attention_heads).
absl::StatusOr<models::ModelConfig> ModelConfigFromHfJson(
    absl::string_view text, const std::string& source,
    const std::string& family);

// The Strata config of Hugging Face config.json text (named `source` in
// errors), its family from "model_type" ("gpt2" or "llama").
absl::StatusOr<models::ModelConfig> ModelConfigFromHfConfigText(
    absl::string_view text, const std::string& source);

// The Strata config of a Hugging Face config.json at `path` (the file, or a
// directory holding it), its family from "model_type" ("gpt2" or "llama");
// errors name the file and the key.
absl::StatusOr<models::ModelConfig> ModelConfigFromHfConfigFile(
    const std::string& path);

// config.json text for `config` (Hugging Face's keys for its family).
std::string HfConfigJson(const models::ModelConfig& config);

// What a checkpoint records as its model's config (meta.model_config):
// `model` itself when it is a registered config name (ConfigNames) with
// `config`'s shape (dropout aside), else `config` as one line of config.json
// text, which stays true when a --model path moves or a flag such as
// --vocab_size changed the shape.
std::string ModelConfigRecord(const std::string& model,
                              const models::ModelConfig& config);

// The config `record` (a checkpoint's meta.model_config, named `source` in
// errors) names: config.json text (ModelConfigRecord's), a registered
// name, or the path of a config.json or its directory (older checkpoints).
absl::StatusOr<models::ModelConfig> ModelConfigFromRecord(
    const std::string& record, const std::string& source);

// The config `model` names: a registered name (ConfigNames), or the path of
// a Hugging Face config.json (ending ".json") or of its directory. Errors
// name the file and key, or list the registered names.
absl::StatusOr<models::ModelConfig> ModelConfigByNameOrPath(
    const std::string& model);

// Checks that the config.json beside Hugging Face weights (HfConfigPath;
// none is fine) describes `config`'s architecture: heads, key/value heads,
// norm epsilon, rope theta and scaling (Llama), tied head; InvalidArgument
// naming the file, the field and both values otherwise. (Sizes are checked by
// ImportHf's shapes; Llama's context length may differ.)
absl::Status CheckHfConfig(const std::string& path,
                           const models::ModelConfig& config);

}  // namespace strata::models

#endif  // STRATA_MODELS_HF_CONFIG_H_
