// Hugging Face checkpoints of GPT-2 and Llama: their safetensors files
// (single or sharded) and the mapping between their parameter names and
// layouts and Strata's (models/gpt.h, models/llama.h). Their config.json is
// models/hf_config.h's.
//
// GPT-2 (GPT2LMHeadModel): "transformer.wte", "transformer.wpe",
// "transformer.h.{i}.ln_1", "attn.c_attn", "attn.c_proj", "ln_2",
// "mlp.c_fc", "mlp.c_proj", "transformer.ln_f"; the attention and MLP
// weights are Conv1D's, stored [in, out] (transposed from a Linear's);
// "lm_head.weight" is tied to wte (Hugging Face's safetensors leave it out).
// Files saved from GPT2Model (as the published "gpt2" is) have no
// "transformer." prefix; both load. The causal-mask buffers
// "attn.bias" / "attn.masked_bias" of older files are skipped.
//
// Llama (LlamaForCausalLM): "model.embed_tokens", "model.layers.{i}.
// self_attn.{q,k,v,o}_proj", "mlp.{gate,up,down}_proj" (Strata's w1, w3,
// w2), "input_layernorm", "post_attention_layernorm", "model.norm",
// "lm_head" (absent when tied). Hugging Face applies rotary embeddings by
// rotate-half (pairs (j, j + d/2) of each head); Strata, like Meta's
// original, by interleaved pairs (2j, 2j + 1): q_proj and k_proj rows are
// permuted per head (k with the key/value head count), exactly, both ways.
// "rotary_emb.inv_freq" buffers of older files are skipped.
//
// Conversion moves no value: export then import is bitwise.
#ifndef STRATA_MODELS_HF_LAYOUT_H_
#define STRATA_MODELS_HF_LAYOUT_H_

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "models/config.h"

namespace strata::models {

using NamedTensors = std::vector<std::pair<std::string, at::Tensor>>;

// The model family ("gpt" or "llama") of "hf-gpt2" / "hf-llama";
// InvalidArgument naming both otherwise.
absl::StatusOr<std::string> HfFamilyFromName(absl::string_view name);

// The weights of a Hugging Face checkpoint at `path`: a .safetensors file,
// or a directory with model.safetensors or model.safetensors.index.json and
// the shards it names (each tensor in the shard the index says, every
// tensor of every shard in the index). Zero-copy views of the mapped files,
// in file order. Errors name the file and the tensor.
absl::StatusOr<NamedTensors> ReadHfWeights(const std::string& path);

// Whether `path` is a Hugging Face checkpoint: a file ending ".safetensors",
// or a directory with model.safetensors or model.safetensors.index.json.
bool IsHfCheckpoint(const std::string& path);

// Hugging Face tensors (names and layouts) -> Strata's, in the model's
// order. Every tensor the model has must be present with its Hugging Face
// shape; a name the model does not have is an error (InvalidArgument
// naming all such keys), as is a tied lm_head.weight that differs from the
// embedding. Values keep their dtype; untransformed tensors are not copied.
absl::StatusOr<NamedTensors> ImportHf(const NamedTensors& hf,
                                      const models::ModelConfig& config,
                                      const std::string& source);

// Strata tensors -> Hugging Face's, in Hugging Face's order (a tied head is
// left out, as Hugging Face's safetensors do). Every tensor of the model must
// be present with its shape; extra names are an error.
absl::StatusOr<NamedTensors> ExportHf(const NamedTensors& strata,
                                      const models::ModelConfig& config,
                                      const std::string& source);

// Writes `hf` (from ExportHf) and config.json into directory `dir`
// (created if missing): model.safetensors, or, when the tensors pass
// `max_shard_bytes` (> 0), model-0000K-of-0000N.safetensors shards of at
// most that many bytes (a larger tensor gets a shard of its own) and
// model.safetensors.index.json. Every file is written atomically, with
// {"format": "pt"} metadata.
absl::Status WriteHfModel(const std::string& dir, const NamedTensors& hf,
                          const models::ModelConfig& config,
                          int64_t max_shard_bytes);

}  // namespace strata::models

#endif  // STRATA_MODELS_HF_LAYOUT_H_
