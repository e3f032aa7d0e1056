// A small vision transformer: the example of a model that is not a token
// language model going through the unit protocol (unit.h), built from
// LibTorch's own torch::nn modules as a user's model would be. Float
// images in, class logits out, its own loss (cross-entropy over classes).
//
//   images [B, C, H, W] (floating point)
//     -> "embed" (VitEmbed): non-overlapping patch x patch patches, each
//        flattened (channel, row, column) and projected to `dim`
//        (embed.proj), a learned class token prepended (embed.cls_token
//        [1, 1, dim]) and learned positions added (embed.pos_embed
//        [1, 1 + patches, dim])
//     -> "blocks.{i}" (VitBlock): pre-LayerNorm, bidirectional multi-head
//        self-attention (attn_norm, attn.qkv, attn.proj; softmax in fp32),
//        pre-LayerNorm GELU MLP (mlp_norm, mlp.fc1, mlp.fc2), residuals
//     -> "head" (VitHead): LayerNorm of the class token (head.norm) and a
//        linear layer to the classes (head.fc): logits [B, classes].
//
// Parameters start from init.h's name-based scheme (InitFamily::kLlama:
// weights N(0, 0.02), norm weights 1, biases 0), so a model depends only on
// its seed. No dropout; no deferred (meta-device) construction.
#ifndef STRATA_MODELS_VIT_H_
#define STRATA_MODELS_VIT_H_

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "models/unit.h"

namespace strata::models {

struct VitConfig {
  int64_t image_size = 8;  // Square images: H = W = image_size.
  int64_t channels = 1;
  int64_t patch_size = 2;  // Divides image_size.
  int64_t dim = 32;
  int64_t heads = 4;  // Divides dim.
  int64_t layers = 2;
  int64_t mlp_hidden = 64;
  int64_t num_classes = 4;
  double norm_eps = 1e-6;
};

// InvalidArgument naming the first bad field and the rule it breaks.
absl::Status ValidateVitConfig(const VitConfig& config);

class VitEmbed;
class VitBlock;
class VitHead;

class Vit : public UnitModel {
 public:
  // Validates `config` and builds the model with weights from `seed`.
  static absl::StatusOr<std::shared_ptr<Vit>> Create(const VitConfig& config,
                                                     uint64_t seed);

  // images [B, C, H, W] of the config's shape, any floating dtype (the
  // units compute in their parameters' dtype: strategies cast inputs to
  // it) -> logits [B, num_classes]. Throws std::invalid_argument for
  // another rank, shape or an integer dtype.
  at::Tensor Forward(const at::Tensor& images) override;
  // Mean cross-entropy of Forward(images) against labels [B] int64 in
  // [0, num_classes), computed in fp32. Throws std::invalid_argument for
  // labels of another shape or dtype.
  at::Tensor ForwardLoss(const at::Tensor& images,
                         const at::Tensor& labels) override;
  absl::StatusOr<at::Tensor> InitialParameter(const std::string& name,
                                              uint64_t seed) const override;

  const VitConfig& config() const { return config_; }

 private:
  explicit Vit(const VitConfig& config);

  VitConfig config_;
  std::shared_ptr<VitEmbed> embed_;
  std::vector<std::shared_ptr<VitBlock>> blocks_;
  std::shared_ptr<VitHead> head_;
};

// Labelled images for Vit: `count` images of `config`'s shape, fp32 noise
// N(0, 0.5) plus one bright 2 x 2 square (+2 on every channel) placed at a
// random position inside one of the image's four quadrants; the label is
// that quadrant (0 top-left, 1 top-right, 2 bottom-left, 3 bottom-right).
// A function of (config, count, seed) only. Needs num_classes == 4 and an
// even image_size >= 4 (InvalidArgument otherwise).
struct LabelledImages {
  at::Tensor images;  // [count, C, H, W] fp32
  at::Tensor labels;  // [count] int64
};
absl::StatusOr<LabelledImages> QuadrantImages(const VitConfig& config,
                                              int64_t count, uint64_t seed);

}  // namespace strata::models

#endif  // STRATA_MODELS_VIT_H_
