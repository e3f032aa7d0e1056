#include "models/gpt.h"

#include <ATen/ATen.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "glog/logging.h"
#include "models/chunked_loss.h"
#include "models/gelu_linear.h"
#include "models/layers.h"

namespace strata::models {

// wte + wpe, then dropout.
class GptEmbed : public torch::nn::Module {
 public:
  GptEmbed(std::shared_ptr<Embedding> wte, std::shared_ptr<Embedding> wpe)
      : wte_(register_module("wte", std::move(wte))),
        wpe_(register_module("wpe", std::move(wpe))) {}

  at::Tensor Forward(const at::Tensor& tokens,
                     const DropoutSpec& dropout) const {
    const at::Tensor positions = at::arange(tokens.size(1), tokens.options());
    return Dropout(wte_->Forward(tokens) + wpe_->Forward(positions), dropout);
  }

 private:
  std::shared_ptr<Embedding> wte_;
  std::shared_ptr<Embedding> wpe_;
};

// x + attn(ln_1(x)), then + mlp(ln_2(x)).
class GptBlock : public torch::nn::Module {
 public:
  GptBlock(const ModelConfig& config, const std::string& name)
      : num_heads_(config.num_heads),
        dropout_(config.dropout),
        attn_site_(DropoutSiteKey(name, "attn")),
        resid_attn_site_(DropoutSiteKey(name, "resid_attn")),
        resid_mlp_site_(DropoutSiteKey(name, "resid_mlp")) {
    const int64_t c = config.dim;
    ln_1_ = register_module("ln_1",
                            std::make_shared<LayerNorm>(c, config.norm_eps));
    auto attn = register_module("attn", std::make_shared<torch::nn::Module>());
    qkv_ =
        attn->register_module("qkv", std::make_shared<Linear>(c, 3 * c, true));
    attn_proj_ =
        attn->register_module("proj", std::make_shared<Linear>(c, c, true));
    ln_2_ = register_module("ln_2",
                            std::make_shared<LayerNorm>(c, config.norm_eps));
    auto mlp = register_module("mlp", std::make_shared<torch::nn::Module>());
    fc_ = mlp->register_module(
        "fc", std::make_shared<Linear>(c, config.ffn_dim, true));
    mlp_proj_ = mlp->register_module(
        "proj", std::make_shared<Linear>(config.ffn_dim, c, true));
  }

  // `context` (borrowed, may be null) as UnitModel::dropout_context().
  at::Tensor Forward(const at::Tensor& x, bool train,
                     const DropoutContext* context) const {
    at::Tensor h =
        x + Dropout(Attention(ln_1_->Forward(x),
                              {dropout_, train, context, attn_site_}),
                    {dropout_, train, context, resid_attn_site_});
    // mlp.proj(gelu(mlp.fc(ln_2(h)))), keeping only fc's output for
    // backward (gelu_linear.h).
    return h + Dropout(GeluLinear(fc_->Forward(ln_2_->Forward(h)),
                                  mlp_proj_->weight(), mlp_proj_->bias()),
                       {dropout_, train, context, resid_mlp_site_});
  }

 private:
  at::Tensor Attention(const at::Tensor& x, const DropoutSpec& dropout) const {
    const int64_t b = x.size(0), t = x.size(1), c = x.size(2);
    const int64_t d = c / num_heads_;
    const std::vector<at::Tensor> qkv = qkv_->Forward(x).split(c, -1);
    auto heads = [&](const at::Tensor& y) {
      return y.view({b, t, num_heads_, d}).transpose(1, 2);
    };
    const at::Tensor y =
        CausalAttention(heads(qkv[0]), heads(qkv[1]), heads(qkv[2]), dropout);
    return attn_proj_->Forward(y.transpose(1, 2).reshape({b, t, c}));
  }

  int64_t num_heads_;
  double dropout_;
  uint64_t attn_site_;
  uint64_t resid_attn_site_;
  uint64_t resid_mlp_site_;
  std::shared_ptr<LayerNorm> ln_1_;
  std::shared_ptr<Linear> qkv_;
  std::shared_ptr<Linear> attn_proj_;
  std::shared_ptr<LayerNorm> ln_2_;
  std::shared_ptr<Linear> fc_;
  std::shared_ptr<Linear> mlp_proj_;
};

// ln_f, then logits against the tied token embedding.
class GptHead : public torch::nn::Module {
 public:
  GptHead(std::shared_ptr<LayerNorm> ln_f, std::shared_ptr<Embedding> wte)
      : ln_f_(register_module("ln_f", std::move(ln_f))), wte_(std::move(wte)) {}

  at::Tensor Forward(const at::Tensor& x) const {
    return at::linear(ln_f_->Forward(x), wte_->weight());
  }

  // The mean loss against targets [B, T], chunk_tokens logits rows at a
  // time.
  at::Tensor Loss(const at::Tensor& x, const at::Tensor& targets,
                  int64_t chunk_tokens) const {
    const at::Tensor h = ln_f_->Forward(x);
    return ChunkedLinearCrossEntropy(h.reshape({-1, h.size(-1)}),
                                     wte_->weight(), targets.reshape({-1}),
                                     chunk_tokens);
  }

 private:
  std::shared_ptr<LayerNorm> ln_f_;
  std::shared_ptr<Embedding> wte_;  // shared, owned by the "embed" unit
};

absl::StatusOr<std::shared_ptr<Gpt>> Gpt::Create(const ModelConfig& config,
                                                 const BuildOptions& options) {
  if (absl::Status status = ValidateConfig(config); !status.ok()) {
    return status;
  }
  if (config.family != "gpt") {
    return absl::InvalidArgumentError(
        absl::StrCat("Gpt: model config family is \"", config.family,
                     "\", expected \"gpt\""));
  }
  return std::make_shared<Gpt>(config, options);
}

Gpt::Gpt(const ModelConfig& config, const BuildOptions& options)
    : UnitModel("Gpt"), config_(config), scheme_(InitSchemeFor(config)) {
  const absl::Status valid = ValidateConfig(config);
  CHECK(valid.ok()) << valid;
  CHECK_EQ(config.family, "gpt");
  wte_ = register_module(
      "wte", std::make_shared<Embedding>(config.vocab_size, config.dim));
  wpe_ = register_module(
      "wpe", std::make_shared<Embedding>(config.seq_len, config.dim));
  auto blocks =
      register_module("blocks", std::make_shared<torch::nn::Module>());
  for (int64_t i = 0; i < config.num_layers; ++i) {
    blocks_.push_back(blocks->register_module(
        std::to_string(i),
        std::make_shared<GptBlock>(config, absl::StrCat("blocks.", i))));
  }
  ln_f_ = register_module(
      "ln_f", std::make_shared<LayerNorm>(config.dim, config.norm_eps));
  embed_ = std::make_shared<GptEmbed>(wte_, wpe_);
  head_ = std::make_shared<GptHead>(ln_f_, wte_);

  RegisterUnit("embed", "Embedding", embed_.get());
  for (int64_t i = 0; i < config.num_layers; ++i) {
    RegisterUnit(absl::StrCat("blocks.", i), "GPTBlock", blocks_[i].get());
  }
  RegisterUnit("head", "Head", head_.get());

  if (!options.deferred) {
    const absl::Status status = Materialize(*this, options);
    CHECK(status.ok()) << status;
  }
}

at::Tensor Gpt::Forward(const at::Tensor& tokens) {
  return Run(tokens, at::Tensor());
}

at::Tensor Gpt::ForwardLoss(const at::Tensor& tokens,
                            const at::Tensor& targets) {
  if (config_.loss_chunk_tokens == 0) {
    return UnitModel::ForwardLoss(tokens, targets);
  }
  CheckTargets(tokens, targets);
  return Run(tokens, targets);
}

at::Tensor Gpt::Run(const at::Tensor& tokens, const at::Tensor& targets) {
  CheckMaterialized();
  CheckTokens(tokens, config_.vocab_size, config_.seq_len);
  // Captured by value: a recomputed unit sees the same mode as its forward.
  const bool train = is_training();
  // The dropout context too, kept alive by the captures.
  const std::shared_ptr<const DropoutContext> context = dropout_context();
  const DropoutSpec embed_dropout{config_.dropout, train, context.get(),
                                  DropoutSiteKey("embed", "embed")};
  int unit = 0;
  at::Tensor x = CallUnit(
      unit++, tokens,
      [embed = embed_.get(), embed_dropout, context](const at::Tensor& ids) {
        return embed->Forward(ids, embed_dropout);
      });
  for (const std::shared_ptr<GptBlock>& block : blocks_) {
    x = CallUnit(unit++, x,
                 [block = block.get(), train, context](const at::Tensor& h) {
                   return block->Forward(h, train, context.get());
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
Gpt::SharedParameters() const {
  return {{"wte.weight", {"head"}}};
}

absl::StatusOr<at::Tensor> Gpt::InitialParameter(const std::string& name,
                                                 uint64_t seed) const {
  for (const auto& item : named_parameters(/*recurse=*/true)) {
    if (item.key() == name) {
      return InitialValue(name, item.value().sizes(), seed, scheme_);
    }
  }
  return absl::NotFoundError(
      absl::StrCat("Gpt has no parameter named '", name, "'"));
}

}  // namespace strata::models
