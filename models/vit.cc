#include "models/vit.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/grad_mode.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/cross_entropy_loss.h>
#include <ATen/ops/gelu.h>
#include <ATen/ops/matmul.h>
#include <ATen/ops/randint.h>
#include <ATen/ops/randn.h>
#include <ATen/ops/softmax.h>
#include <ATen/ops/zeros.h>
#include <glog/logging.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>

#include <cmath>
#include <stdexcept>
#include <utility>

#include "absl/strings/str_cat.h"
#include "models/init.h"

namespace strata::models {
namespace {

InitScheme VitScheme(const VitConfig& config) {
  InitScheme scheme;
  scheme.family = InitFamily::kLlama;
  scheme.std = 0.02;
  scheme.num_layers = config.layers;
  return scheme;
}

torch::nn::LayerNorm MakeNorm(const VitConfig& config) {
  return torch::nn::LayerNorm(
      torch::nn::LayerNormOptions({config.dim}).eps(config.norm_eps));
}

}  // namespace

absl::Status ValidateVitConfig(const VitConfig& c) {
  auto bad = [](const char* field, int64_t value, const std::string& rule) {
    return absl::InvalidArgumentError(
        absl::StrCat("VitConfig.", field, " must be ", rule, ", got ", value));
  };
  if (c.image_size < 1) return bad("image_size", c.image_size, ">= 1");
  if (c.channels < 1) return bad("channels", c.channels, ">= 1");
  if (c.patch_size < 1 || c.image_size % c.patch_size != 0) {
    return bad("patch_size", c.patch_size,
               absl::StrCat(">= 1 and divide image_size ", c.image_size));
  }
  if (c.dim < 1) return bad("dim", c.dim, ">= 1");
  if (c.heads < 1 || c.dim % c.heads != 0) {
    return bad("heads", c.heads, absl::StrCat(">= 1 and divide dim ", c.dim));
  }
  if (c.layers < 1) return bad("layers", c.layers, ">= 1");
  if (c.mlp_hidden < 1) return bad("mlp_hidden", c.mlp_hidden, ">= 1");
  if (c.num_classes < 2) return bad("num_classes", c.num_classes, ">= 2");
  if (!(c.norm_eps > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("VitConfig.norm_eps must be > 0, got ", c.norm_eps));
  }
  return absl::OkStatus();
}

// The "embed" unit: patches -> tokens, class token, positions.
class VitEmbed : public torch::nn::Module {
 public:
  explicit VitEmbed(const VitConfig& config) : config_(config) {
    const int64_t patches = (config.image_size / config.patch_size) *
                            (config.image_size / config.patch_size);
    const int64_t patch_values =
        config.channels * config.patch_size * config.patch_size;
    proj_ =
        register_module("proj", torch::nn::Linear(patch_values, config.dim));
    cls_token_ = register_parameter("cls_token", at::zeros({1, 1, config.dim}));
    pos_embed_ = register_parameter("pos_embed",
                                    at::zeros({1, 1 + patches, config.dim}));
  }

  at::Tensor Forward(const at::Tensor& images) {
    const int64_t batch = images.size(0);
    const int64_t p = config_.patch_size;
    const int64_t side = config_.image_size / p;
    // [B, C, side, p, side, p] -> [B, side, side, C, p, p]: one row per
    // patch, row-major over the patch grid.
    const at::Tensor patches =
        images.reshape({batch, config_.channels, side, p, side, p})
            .permute({0, 2, 4, 1, 3, 5})
            .reshape({batch, side * side, config_.channels * p * p});
    const at::Tensor tokens = proj_->forward(patches);
    const at::Tensor cls = cls_token_.expand({batch, 1, config_.dim});
    return at::cat({cls, tokens}, 1) + pos_embed_;
  }

 private:
  VitConfig config_;
  torch::nn::Linear proj_{nullptr};
  at::Tensor cls_token_;
  at::Tensor pos_embed_;
};

// A "blocks.{i}" unit.
class VitBlock : public torch::nn::Module {
 public:
  explicit VitBlock(const VitConfig& config) : config_(config) {
    attn_norm_ = register_module("attn_norm", MakeNorm(config));
    auto attn = register_module("attn", std::make_shared<torch::nn::Module>());
    qkv_ = attn->register_module("qkv",
                                 torch::nn::Linear(config.dim, 3 * config.dim));
    proj_ = attn->register_module("proj",
                                  torch::nn::Linear(config.dim, config.dim));
    mlp_norm_ = register_module("mlp_norm", MakeNorm(config));
    auto mlp = register_module("mlp", std::make_shared<torch::nn::Module>());
    fc1_ = mlp->register_module(
        "fc1", torch::nn::Linear(config.dim, config.mlp_hidden));
    fc2_ = mlp->register_module(
        "fc2", torch::nn::Linear(config.mlp_hidden, config.dim));
  }

  at::Tensor Forward(const at::Tensor& x) {
    const int64_t batch = x.size(0);
    const int64_t seq = x.size(1);
    const int64_t heads = config_.heads;
    const int64_t head_dim = config_.dim / heads;
    // [B, T, 3 * D] -> [3, B, H, T, D / H].
    const at::Tensor qkv = qkv_->forward(attn_norm_->forward(x))
                               .reshape({batch, seq, 3, heads, head_dim})
                               .permute({2, 0, 3, 1, 4});
    const at::Tensor q = qkv.select(0, 0);
    const at::Tensor k = qkv.select(0, 1);
    const at::Tensor v = qkv.select(0, 2);
    const double scale = 1.0 / std::sqrt(static_cast<double>(head_dim));
    // Every token attends to every token (no mask); softmax in fp32.
    const at::Tensor probs =
        at::softmax(at::matmul(q, k.transpose(-2, -1)).to(at::kFloat) * scale,
                    -1)
            .to(v.scalar_type());
    const at::Tensor attended =
        at::matmul(probs, v).transpose(1, 2).reshape({batch, seq, config_.dim});
    const at::Tensor h = x + proj_->forward(attended);
    return h + fc2_->forward(at::gelu(fc1_->forward(mlp_norm_->forward(h))));
  }

 private:
  VitConfig config_;
  torch::nn::LayerNorm attn_norm_{nullptr};
  torch::nn::Linear qkv_{nullptr};
  torch::nn::Linear proj_{nullptr};
  torch::nn::LayerNorm mlp_norm_{nullptr};
  torch::nn::Linear fc1_{nullptr};
  torch::nn::Linear fc2_{nullptr};
};

// The "head" unit: the class token's features -> class logits.
class VitHead : public torch::nn::Module {
 public:
  explicit VitHead(const VitConfig& config) {
    norm_ = register_module("norm", MakeNorm(config));
    fc_ = register_module("fc",
                          torch::nn::Linear(config.dim, config.num_classes));
  }

  at::Tensor Forward(const at::Tensor& x) {
    return fc_->forward(norm_->forward(x.select(1, 0)));
  }

 private:
  torch::nn::LayerNorm norm_{nullptr};
  torch::nn::Linear fc_{nullptr};
};

absl::StatusOr<std::shared_ptr<Vit>> Vit::Create(const VitConfig& config,
                                                 uint64_t seed) {
  if (absl::Status valid = ValidateVitConfig(config); !valid.ok()) {
    return valid;
  }
  std::shared_ptr<Vit> model(new Vit(config));
  // torch::nn's modules drew their own initial values from LibTorch's
  // global generator; replace them with the seed's.
  at::NoGradGuard no_grad;
  for (const auto& item : model->named_parameters()) {
    at::Tensor value = item.value();
    value.copy_(
        InitialValue(item.key(), value.sizes(), seed, VitScheme(config)));
  }
  return model;
}

Vit::Vit(const VitConfig& config) : UnitModel("Vit"), config_(config) {
  embed_ = register_module("embed", std::make_shared<VitEmbed>(config));
  auto blocks =
      register_module("blocks", std::make_shared<torch::nn::Module>());
  for (int64_t i = 0; i < config.layers; ++i) {
    blocks_.push_back(blocks->register_module(
        std::to_string(i), std::make_shared<VitBlock>(config)));
  }
  head_ = register_module("head", std::make_shared<VitHead>(config));
  RegisterUnit("embed", "VitEmbed", embed_.get());
  for (int64_t i = 0; i < config.layers; ++i) {
    RegisterUnit(absl::StrCat("blocks.", i), "VitBlock", blocks_[i].get());
  }
  RegisterUnit("head", "VitHead", head_.get());
}

at::Tensor Vit::Forward(const at::Tensor& images) {
  const int64_t side = config_.image_size;
  if (!images.defined() || images.dim() != 4 || images.size(0) < 1 ||
      images.size(1) != config_.channels || images.size(2) != side ||
      images.size(3) != side || !images.is_floating_point()) {
    throw std::invalid_argument(absl::StrCat(
        "Vit::Forward: expected floating-point images [B, ", config_.channels,
        ", ", side, ", ", side, "] with B >= 1, got ",
        images.defined() ? absl::StrCat(c10::str(images.sizes()), " ",
                                        c10::toString(images.scalar_type()))
                         : "an undefined tensor"));
  }
  CheckMaterialized();
  // Units are called through CallUnit so that strategies see them; each
  // forward captures its module by value (it may run again in backward).
  std::shared_ptr<VitEmbed> embed = embed_;
  at::Tensor x = CallUnit(
      0, images, [embed](const at::Tensor& in) { return embed->Forward(in); });
  for (size_t i = 0; i < blocks_.size(); ++i) {
    std::shared_ptr<VitBlock> block = blocks_[i];
    x = CallUnit(static_cast<int>(i) + 1, x,
                 [block](const at::Tensor& in) { return block->Forward(in); });
  }
  std::shared_ptr<VitHead> head = head_;
  return CallUnit(static_cast<int>(blocks_.size()) + 1, x,
                  [head](const at::Tensor& in) { return head->Forward(in); });
}

at::Tensor Vit::ForwardLoss(const at::Tensor& images,
                            const at::Tensor& labels) {
  if (!labels.defined() || labels.dim() != 1 ||
      labels.scalar_type() != at::kLong ||
      (images.defined() && images.dim() >= 1 &&
       labels.size(0) != images.size(0))) {
    throw std::invalid_argument(absl::StrCat(
        "Vit::ForwardLoss: expected int64 labels [B] for images ",
        images.defined() ? c10::str(images.sizes()) : "(undefined)", ", got ",
        labels.defined() ? absl::StrCat(c10::str(labels.sizes()), " ",
                                        c10::toString(labels.scalar_type()))
                         : "an undefined tensor"));
  }
  if (labels.numel() > 0 &&
      (labels.min().item<int64_t>() < 0 ||
       labels.max().item<int64_t>() >= config_.num_classes)) {
    throw std::invalid_argument(absl::StrCat(
        "Vit::ForwardLoss: labels must be in [0, ", config_.num_classes,
        "), got [", labels.min().item<int64_t>(), ", ",
        labels.max().item<int64_t>(), "]"));
  }
  return at::cross_entropy_loss(Forward(images).to(at::kFloat), labels);
}

absl::StatusOr<at::Tensor> Vit::InitialParameter(const std::string& name,
                                                 uint64_t seed) const {
  for (const auto& item : named_parameters()) {
    if (item.key() == name) {
      return InitialValue(name, item.value().sizes(), seed, VitScheme(config_));
    }
  }
  return absl::NotFoundError(absl::StrCat("Vit has no parameter '", name, "'"));
}

absl::StatusOr<LabelledImages> QuadrantImages(const VitConfig& config,
                                              int64_t count, uint64_t seed) {
  if (config.num_classes != 4 || config.image_size < 4 ||
      config.image_size % 2 != 0 || config.channels < 1 || count < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "QuadrantImages needs num_classes 4, an even image_size >= 4, "
        "channels >= 1 and count >= 0; got num_classes ",
        config.num_classes, ", image_size ", config.image_size, ", channels ",
        config.channels, ", count ", count));
  }
  at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(seed);
  const int64_t side = config.image_size;
  const int64_t half = side / 2;
  LabelledImages out;
  out.images = at::randn({count, config.channels, side, side}, generator,
                         at::TensorOptions(at::kFloat)) *
               0.5;
  out.labels = at::randint(4, {count}, generator, at::TensorOptions(at::kLong));
  // The square's top-left corner inside its quadrant: 0 .. half - 2.
  const at::Tensor corner = at::randint(half - 1, {count, 2}, generator,
                                        at::TensorOptions(at::kLong));
  auto images = out.images.accessor<float, 4>();
  auto labels = out.labels.accessor<int64_t, 1>();
  auto corners = corner.accessor<int64_t, 2>();
  for (int64_t i = 0; i < count; ++i) {
    const int64_t row = (labels[i] / 2) * half + corners[i][0];
    const int64_t col = (labels[i] % 2) * half + corners[i][1];
    for (int64_t c = 0; c < config.channels; ++c) {
      for (int64_t r = row; r < row + 2; ++r) {
        for (int64_t k = col; k < col + 2; ++k) images[i][c][r][k] += 2.0f;
      }
    }
  }
  return out;
}

}  // namespace strata::models
