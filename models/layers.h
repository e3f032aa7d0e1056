// Building blocks of the reference models: modules whose parameters are
// created on the meta device (values come from Materialize, so they follow
// the name-based, world-size-independent init of init.h), and the
// functional pieces of attention. Internal to models/: users' own models may
// use torch::nn modules instead.
#ifndef STRATA_MODELS_LAYERS_H_
#define STRATA_MODELS_LAYERS_H_

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <torch/nn/module.h>

#include <cstdint>
#include <utility>

#include "models/config.h"
#include "models/dropout.h"

namespace strata::models {

// y = x W^T (+ b); "weight" [out, in], "bias" [out] (when `bias`).
class Linear : public torch::nn::Module {
 public:
  Linear(int64_t in_features, int64_t out_features, bool bias);
  at::Tensor Forward(const at::Tensor& x) const;
  const at::Tensor& weight() const { return weight_; }
  const at::Tensor& bias() const { return bias_; }  // Undefined: no bias.

 private:
  at::Tensor weight_;
  at::Tensor bias_;  // undefined without bias
};

// Lookup table "weight" [num_embeddings, dim].
class Embedding : public torch::nn::Module {
 public:
  Embedding(int64_t num_embeddings, int64_t dim);
  at::Tensor Forward(const at::Tensor& ids) const;
  const at::Tensor& weight() const { return weight_; }

 private:
  at::Tensor weight_;
};

// LayerNorm over the last dimension with "weight" and "bias" [dim].
class LayerNorm : public torch::nn::Module {
 public:
  LayerNorm(int64_t dim, double eps);
  at::Tensor Forward(const at::Tensor& x) const;

 private:
  int64_t dim_;
  double eps_;
  at::Tensor weight_;
  at::Tensor bias_;
};

// RMSNorm (Llama): normalises in fp32, casts back to x's dtype, then scales
// by "weight" [dim]: (x * rsqrt(mean(x^2) + eps)).type_as(x) * weight.
class RmsNorm : public torch::nn::Module {
 public:
  RmsNorm(int64_t dim, double eps);
  at::Tensor Forward(const at::Tensor& x) const;

 private:
  double eps_;
  at::Tensor weight_;
};

// Causal scaled dot-product attention over q, k, v [B, H, T, D] (equal
// heads): softmax(q k^T / sqrt(D) + causal mask) v, the softmax computed in
// fp32 and cast back to v's dtype; dropout (models/dropout.h) on the
// probabilities as `dropout` says. Returns [B, H, T, D].
at::Tensor CausalAttention(const at::Tensor& q, const at::Tensor& k,
                           const at::Tensor& v, const DropoutSpec& dropout);

// Rotary tables for positions 0..seq_len-1: cos and sin of
// position * f_i, f_i = theta^(-2i / head_dim) for i in [0, head_dim / 2)
// (adjusted by `scaling`, see RopeScaling); fp32 [seq_len, head_dim / 2] on
// `device`. Computed in double.
std::pair<at::Tensor, at::Tensor> RotaryTables(
    int64_t seq_len, int64_t head_dim, double theta, c10::Device device,
    const RopeScaling& scaling = RopeScaling());

// Rotates consecutive pairs (x[2i], x[2i+1]) of x [B, T, H, D] by the angles
// of the tables (Meta's Llama convention, complex multiplication), in fp32;
// returns x's dtype.
at::Tensor ApplyRotary(const at::Tensor& x, const at::Tensor& cos,
                       const at::Tensor& sin);

}  // namespace strata::models

#endif  // STRATA_MODELS_LAYERS_H_
