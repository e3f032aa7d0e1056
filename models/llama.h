// Llama (Meta's reference architecture): RMSNorm, rotary positions (cos/sin
// computed per forward, not parameters), SwiGLU MLP, grouped-query attention
// (k/v heads repeated), no biases, no dropout. Parameter names are Meta's:
//
//   tok_embeddings.weight [V, C],
//   layers.{i}.attention.{wq,wk,wv,wo}.weight,
//   layers.{i}.feed_forward.{w1,w2,w3}.weight,
//   layers.{i}.attention_norm.weight, layers.{i}.ffn_norm.weight,
//   norm.weight, output.weight [V, C] (absent when tie_embeddings: the head
//   then multiplies by tok_embeddings.weight)
//
// Rotary embeddings rotate consecutive pairs (Meta's convention; Hugging
// Face checkpoints permute wq/wk for their rotate-half convention). Units:
// "tok_embeddings" (Embedding), "layers.{i}" (LlamaBlock), "head" (norm +
// output; Head).
#ifndef STRATA_MODELS_LLAMA_H_
#define STRATA_MODELS_LLAMA_H_

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
class LlamaBlock;
class LlamaHead;

class Llama : public UnitModel {
 public:
  // Validates `config` (family "llama") and builds the model: parameters on
  // the meta device when options.deferred, else initialised (init.h).
  static absl::StatusOr<std::shared_ptr<Llama>> Create(
      const ModelConfig& config, const BuildOptions& options);

  // As Create; CHECK-fails on an invalid config.
  Llama(const ModelConfig& config, const BuildOptions& options);

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
  std::shared_ptr<Embedding> tok_embeddings_;
  std::vector<std::shared_ptr<LlamaBlock>> layers_;
  // Holder of the "head" unit (norm + output): not a registered child.
  std::shared_ptr<LlamaHead> head_;
};

}  // namespace strata::models

#endif  // STRATA_MODELS_LLAMA_H_
