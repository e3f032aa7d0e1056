// GPT-2: learned positions, pre-LayerNorm blocks, GELU (tanh) MLP, causal
// self-attention written with matmuls, dropout, output head tied to the
// token embedding. Parameter names follow PyTorch conventions:
//
//   wte.weight [V, C], wpe.weight [S, C],
//   blocks.{i}.ln_1.{weight,bias}, blocks.{i}.attn.qkv.{weight,bias} [3C, C],
//   blocks.{i}.attn.proj.{weight,bias}, blocks.{i}.ln_2.{weight,bias},
//   blocks.{i}.mlp.fc.{weight,bias} [F, C], blocks.{i}.mlp.proj.{weight,bias},
//   ln_f.{weight,bias}
//
// (no separate head key: the head multiplies by wte.weight). Units, in
// order: "embed" (wte + wpe + dropout; Embedding), "blocks.{i}" (GPTBlock),
// "head" (ln_f + logits; Head; reads wte.weight, see SharedParameters).
#ifndef STRATA_MODELS_GPT_H_
#define STRATA_MODELS_GPT_H_

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "models/config.h"
#include "models/init.h"
#include "models/unit.h"

namespace strata::models {

class Embedding;
class GptBlock;
class GptEmbed;
class GptHead;
class LayerNorm;

class Gpt : public UnitModel {
 public:
  // Validates `config` (family "gpt") and builds the model: parameters on
  // the meta device when options.deferred, else initialised (init.h).
  static absl::StatusOr<std::shared_ptr<Gpt>> Create(
      const ModelConfig& config, const BuildOptions& options);

  // As Create; CHECK-fails on an invalid config.
  Gpt(const ModelConfig& config, const BuildOptions& options);

  at::Tensor Forward(const at::Tensor& tokens) override;
  // With config.loss_chunk_tokens > 0 the "head" unit returns the loss
  // (ChunkedLinearCrossEntropy) instead of logits; else Loss(Forward(..)).
  at::Tensor ForwardLoss(const at::Tensor& tokens,
                         const at::Tensor& targets) override;
  std::vector<std::pair<std::string, std::vector<std::string>>>
  SharedParameters() const override;
  absl::StatusOr<at::Tensor> InitialParameter(const std::string& name,
                                              uint64_t seed) const override;

  const ModelConfig& config() const { return config_; }

 private:
  // The units on `tokens`: logits, or with `targets` defined the head's
  // chunked loss.
  at::Tensor Run(const at::Tensor& tokens, const at::Tensor& targets);

  ModelConfig config_;
  InitScheme scheme_;
  std::shared_ptr<Embedding> wte_;
  std::shared_ptr<Embedding> wpe_;
  std::vector<std::shared_ptr<GptBlock>> blocks_;
  std::shared_ptr<LayerNorm> ln_f_;
  // Holders of the "embed" and "head" units: not registered as children
  // (their parameters are registered once, as wte/wpe/ln_f).
  std::shared_ptr<GptEmbed> embed_;
  std::shared_ptr<GptHead> head_;
};

}  // namespace strata::models

#endif  // STRATA_MODELS_GPT_H_
