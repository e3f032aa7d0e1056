#include "models/llama.h"

#include <ATen/ATen.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "glog/logging.h"
#include "models/chunked_loss.h"
#include "models/layers.h"

namespace strata::models {

// h = x + attention(attention_norm(x)); h + feed_forward(ffn_norm(h)).
class LlamaBlock : public torch::nn::Module {
 public:
  explicit LlamaBlock(const ModelConfig& config)
      : num_heads_(config.num_heads),
        num_kv_heads_(config.num_kv_heads),
        head_dim_(config.dim / config.num_heads) {
    const int64_t c = config.dim;
    const int64_t kv_dim = num_kv_heads_ * head_dim_;
    // Registration order follows Meta's TransformerBlock.
    auto attention =
        register_module("attention", std::make_shared<torch::nn::Module>());
    wq_ = attention->register_module(
        "wq", std::make_shared<Linear>(c, num_heads_ * head_dim_, false));
    wk_ = attention->register_module(
        "wk", std::make_shared<Linear>(c, kv_dim, false));
    wv_ = attention->register_module(
        "wv", std::make_shared<Linear>(c, kv_dim, false));
    wo_ = attention->register_module(
        "wo", std::make_shared<Linear>(num_heads_ * head_dim_, c, false));
    auto feed_forward =
        register_module("feed_forward", std::make_shared<torch::nn::Module>());
    w1_ = feed_forward->register_module(
        "w1", std::make_shared<Linear>(c, config.ffn_dim, false));
    w2_ = feed_forward->register_module(
        "w2", std::make_shared<Linear>(config.ffn_dim, c, false));
    w3_ = feed_forward->register_module(
        "w3", std::make_shared<Linear>(c, config.ffn_dim, false));
    attention_norm_ = register_module(
        "attention_norm", std::make_shared<RmsNorm>(c, config.norm_eps));
    ffn_norm_ = register_module("ffn_norm",
                                std::make_shared<RmsNorm>(c, config.norm_eps));
  }

  at::Tensor Forward(const at::Tensor& x, const at::Tensor& cos,
                     const at::Tensor& sin) const {
    const at::Tensor h = x + Attention(attention_norm_->Forward(x), cos, sin);
    const at::Tensor n = ffn_norm_->Forward(h);
    return h + w2_->Forward(at::silu(w1_->Forward(n)) * w3_->Forward(n));
  }

 private:
  at::Tensor Attention(const at::Tensor& x, const at::Tensor& cos,
                       const at::Tensor& sin) const {
    const int64_t b = x.size(0), t = x.size(1);
    const at::Tensor q = ApplyRotary(
        wq_->Forward(x).view({b, t, num_heads_, head_dim_}), cos, sin);
    at::Tensor k = ApplyRotary(
        wk_->Forward(x).view({b, t, num_kv_heads_, head_dim_}), cos, sin);
    at::Tensor v = wv_->Forward(x).view({b, t, num_kv_heads_, head_dim_});
    if (num_kv_heads_ != num_heads_) {
      // Grouped-query attention: each k/v head serves num_heads /
      // num_kv_heads consecutive query heads.
      const int64_t repeats = num_heads_ / num_kv_heads_;
      auto repeat = [&](const at::Tensor& y) {
        return y.unsqueeze(3)
            .expand({b, t, num_kv_heads_, repeats, head_dim_})
            .reshape({b, t, num_heads_, head_dim_});
      };
      k = repeat(k);
      v = repeat(v);
    }
    const at::Tensor y =
        CausalAttention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                        /*dropout=*/DropoutSpec{});
    return wo_->Forward(y.transpose(1, 2).reshape({b, t, -1}));
  }

  int64_t num_heads_;
  int64_t num_kv_heads_;
  int64_t head_dim_;
  std::shared_ptr<Linear> wq_, wk_, wv_, wo_;
  std::shared_ptr<Linear> w1_, w2_, w3_;
  std::shared_ptr<RmsNorm> attention_norm_;
  std::shared_ptr<RmsNorm> ffn_norm_;
};

// norm, then output (or the tied token embedding).
class LlamaHead : public torch::nn::Module {
 public:
  LlamaHead(std::shared_ptr<RmsNorm> norm, std::shared_ptr<Linear> output,
            std::shared_ptr<Embedding> tied)
      : norm_(register_module("norm", std::move(norm))),
        tied_(std::move(tied)) {
    if (output != nullptr)
      output_ = register_module("output", std::move(output));
  }

  at::Tensor Forward(const at::Tensor& x) const {
    const at::Tensor h = norm_->Forward(x);
    return output_ != nullptr ? output_->Forward(h)
                              : at::linear(h, tied_->weight());
  }

  // The mean loss against targets [B, T], chunk_tokens logits rows at a
  // time.
  at::Tensor Loss(const at::Tensor& x, const at::Tensor& targets,
                  int64_t chunk_tokens) const {
    const at::Tensor h = norm_->Forward(x);
    return ChunkedLinearCrossEntropy(
        h.reshape({-1, h.size(-1)}),
        output_ != nullptr ? output_->weight() : tied_->weight(),
        targets.reshape({-1}), chunk_tokens);
  }

 private:
  std::shared_ptr<RmsNorm> norm_;
  std::shared_ptr<Linear> output_;   // null when tied
  std::shared_ptr<Embedding> tied_;  // null unless tied
};

absl::StatusOr<std::shared_ptr<Llama>> Llama::Create(
    const ModelConfig& config, const BuildOptions& options) {
  if (absl::Status status = ValidateConfig(config); !status.ok()) {
    return status;
  }
  if (config.family != "llama") {
    return absl::InvalidArgumentError(
        absl::StrCat("Llama: model config family is \"", config.family,
                     "\", expected \"llama\""));
  }
  return std::make_shared<Llama>(config, options);
}

Llama::Llama(const ModelConfig& config, const BuildOptions& options)
    : UnitModel("Llama"), config_(config), scheme_(InitSchemeFor(config)) {
  const absl::Status valid = ValidateConfig(config);
  CHECK(valid.ok()) << valid;
  CHECK_EQ(config.family, "llama");
  tok_embeddings_ = register_module(
      "tok_embeddings",
      std::make_shared<Embedding>(config.vocab_size, config.dim));
  auto layers =
      register_module("layers", std::make_shared<torch::nn::Module>());
  for (int64_t i = 0; i < config.num_layers; ++i) {
    layers_.push_back(layers->register_module(
        std::to_string(i), std::make_shared<LlamaBlock>(config)));
  }
  auto norm = register_module(
      "norm", std::make_shared<RmsNorm>(config.dim, config.norm_eps));
  std::shared_ptr<Linear> output;
  if (!config.tie_embeddings) {
    output = register_module(
        "output",
        std::make_shared<Linear>(config.dim, config.vocab_size, false));
  }
  head_ = std::make_shared<LlamaHead>(
      norm, output, config.tie_embeddings ? tok_embeddings_ : nullptr);

  RegisterUnit("tok_embeddings", "Embedding", tok_embeddings_.get());
  for (int64_t i = 0; i < config.num_layers; ++i) {
    RegisterUnit(absl::StrCat("layers.", i), "LlamaBlock", layers_[i].get());
  }
  RegisterUnit("head", "Head", head_.get());

  if (!options.deferred) {
    const absl::Status status = Materialize(*this, options);
    CHECK(status.ok()) << status;
  }
}

at::Tensor Llama::Forward(const at::Tensor& tokens) {
  return Run(tokens, at::Tensor());
}

at::Tensor Llama::ForwardLoss(const at::Tensor& tokens,
                              const at::Tensor& targets) {
  if (config_.loss_chunk_tokens == 0) {
    return UnitModel::ForwardLoss(tokens, targets);
  }
  CheckTargets(tokens, targets);
  return Run(tokens, targets);
}

at::Tensor Llama::Run(const at::Tensor& tokens, const at::Tensor& targets) {
  CheckMaterialized();
  CheckTokens(tokens, config_.vocab_size, config_.seq_len);
  // Constants of this forward, captured by value by every layer.
  const auto [cos, sin] =
      RotaryTables(tokens.size(1), config_.dim / config_.num_heads,
                   config_.rope_theta, tokens.device(), config_.rope_scaling);
  int unit = 0;
  at::Tensor x = CallUnit(
      unit++, tokens, [embed = tok_embeddings_.get()](const at::Tensor& ids) {
        return embed->Forward(ids);
      });
  for (const std::shared_ptr<LlamaBlock>& layer : layers_) {
    x = CallUnit(
        unit++, x,
        [layer = layer.get(), cos = cos, sin = sin](const at::Tensor& h) {
          return layer->Forward(h, cos, sin);
        });
  }
  if (targets.defined()) {
    return CallUnit(
        unit++, x,
        [head = head_.get(), targets, chunk = config_.loss_chunk_tokens](
            const at::Tensor& h) { return head->Loss(h, targets, chunk); });
  }
  return CallUnit(unit++, x, [head = head_.get()](const at::Tensor& h) {
    return head->Forward(h);
  });
}

std::vector<std::pair<std::string, std::vector<std::string>>>
Llama::SharedParameters() const {
  if (!config_.tie_embeddings) return {};
  return {{"tok_embeddings.weight", {"head"}}};
}

absl::StatusOr<at::Tensor> Llama::InitialParameter(const std::string& name,
                                                   uint64_t seed) const {
  for (const auto& item : named_parameters(/*recurse=*/true)) {
    if (item.key() == name) {
      return InitialValue(name, item.value().sizes(), seed, scheme_);
    }
  }
  return absl::NotFoundError(
      absl::StrCat("Llama has no parameter named '", name, "'"));
}

}  // namespace strata::models
