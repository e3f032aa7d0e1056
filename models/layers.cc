#include "models/layers.h"

#include <ATen/ATen.h>

#include <cmath>
#include <limits>
#include <utility>

#include "base/torch_compat.h"
#include "glog/logging.h"
#include "models/init.h"

namespace strata::models {

Linear::Linear(int64_t in_features, int64_t out_features, bool bias) {
  weight_ =
      register_parameter("weight", MetaTensor({out_features, in_features}));
  if (bias) bias_ = register_parameter("bias", MetaTensor({out_features}));
}

at::Tensor Linear::Forward(const at::Tensor& x) const {
  return at::linear(x, weight_, bias_);
}

Embedding::Embedding(int64_t num_embeddings, int64_t dim) {
  weight_ = register_parameter("weight", MetaTensor({num_embeddings, dim}));
}

at::Tensor Embedding::Forward(const at::Tensor& ids) const {
  return at::embedding(weight_, ids);
}

LayerNorm::LayerNorm(int64_t dim, double eps) : dim_(dim), eps_(eps) {
  weight_ = register_parameter("weight", MetaTensor({dim}));
  bias_ = register_parameter("bias", MetaTensor({dim}));
}

at::Tensor LayerNorm::Forward(const at::Tensor& x) const {
  return at::layer_norm(x, {dim_}, weight_, bias_, eps_);
}

RmsNorm::RmsNorm(int64_t dim, double eps) : eps_(eps) {
  weight_ = register_parameter("weight", MetaTensor({dim}));
}

at::Tensor RmsNorm::Forward(const at::Tensor& x) const {
  const at::Tensor xf = x.to(at::kFloat);
  const at::Tensor normed =
      xf * at::rsqrt(xf.pow(2).mean({-1}, /*keepdim=*/true) + eps_);
  return normed.to(x.scalar_type()) * weight_;
}

at::Tensor CausalAttention(const at::Tensor& q, const at::Tensor& k,
                           const at::Tensor& v, const DropoutSpec& dropout) {
  CHECK_EQ(q.dim(), 4);
  const int64_t batch = q.size(0);
  const int64_t heads = q.size(1);
  const int64_t seq = q.size(2);
  const int64_t head_dim = q.size(3);
  const double scale = 1.0 / std::sqrt(static_cast<double>(head_dim));
#if STRATA_TORCH_AT_LEAST(2, 0)
  if (q.is_cuda() && !(dropout.train && dropout.p > 0)) {
    // On CUDA, LibTorch's fused attention (flash / memory-efficient
    // kernels): the [B*H, T, T] scores never exist. Not with Strata's
    // dropout (its masks are drawn per sample, models/dropout.h), and not on
    // the CPU, whose explicit path below keeps the golden loss curves.
    return at::scaled_dot_product_attention(q, k, v, /*attn_mask=*/{},
                                            /*dropout_p=*/0.0,
                                            /*is_causal=*/true);
  }
#endif
  // One fused pass writes the scaled, masked scores: baddbmm adds the
  // additive causal mask (-inf above the diagonal) to scale * q k^T. The
  // [B*H, T, T] score tensor is the largest activation of a small model, so
  // every pass over it saved is time saved (vs matmul, scale, masked_fill).
  const at::Tensor mask =
      at::full({seq, seq}, -std::numeric_limits<double>::infinity(),
               q.options())
          .triu(1);
  at::Tensor scores =
      at::baddbmm(mask, q.reshape({batch * heads, seq, head_dim}),
                  k.reshape({batch * heads, seq, head_dim}).transpose(1, 2),
                  /*beta=*/1.0, /*alpha=*/scale);
  at::Tensor probs = at::softmax(scores, -1, at::kFloat);
  if (probs.scalar_type() != v.scalar_type()) probs = probs.to(v.scalar_type());
  if (dropout.train && dropout.p > 0) {
    // Rows of the batch first, so that each sample's mask is its own.
    probs = Dropout(probs.view({batch, heads * seq, seq}), dropout)
                .view({batch * heads, seq, seq});
  }
  return at::bmm(probs, v.reshape({batch * heads, seq, head_dim}))
      .view({batch, heads, seq, head_dim});
}

std::pair<at::Tensor, at::Tensor> RotaryTables(int64_t seq_len,
                                               int64_t head_dim, double theta,
                                               c10::Device device,
                                               const RopeScaling& scaling) {
  CHECK_EQ(head_dim % 2, 0);
  const auto f64 = at::TensorOptions().dtype(at::kDouble);
  at::Tensor inv_freq = at::pow(
      theta, -at::arange(0, head_dim, 2, f64) / static_cast<double>(head_dim));
  if (scaling.type == "llama3") {
    // Llama 3.1: wavelengths (2 pi / f) longer than old / low_freq_factor
    // are stretched by `factor`, shorter than old / high_freq_factor kept,
    // and in between interpolated with weight
    // s = (old / wavelength - low) / (high - low).
    const double old =
        static_cast<double>(scaling.original_max_position_embeddings);
    const double low = scaling.low_freq_factor;
    const double high = scaling.high_freq_factor;
    const at::Tensor wavelength = (2 * M_PI) / inv_freq;
    const at::Tensor smooth = (old / wavelength - low) / (high - low);
    const at::Tensor interpolated =
        (1 - smooth) * inv_freq / scaling.factor + smooth * inv_freq;
    inv_freq = at::where(wavelength < old / high, inv_freq,
                         at::where(wavelength > old / low,
                                   inv_freq / scaling.factor, interpolated));
  }
  const at::Tensor angles = at::outer(at::arange(seq_len, f64), inv_freq);
  return {angles.cos().to(device, at::kFloat),
          angles.sin().to(device, at::kFloat)};
}

at::Tensor ApplyRotary(const at::Tensor& x, const at::Tensor& cos,
                       const at::Tensor& sin) {
  CHECK_EQ(x.dim(), 4);
  const int64_t b = x.size(0), t = x.size(1), h = x.size(2), d = x.size(3);
  const at::Tensor pairs = x.to(at::kFloat).reshape({b, t, h, d / 2, 2});
  const at::Tensor x0 = pairs.select(-1, 0);
  const at::Tensor x1 = pairs.select(-1, 1);
  const at::Tensor c = cos.narrow(0, 0, t).view({1, t, 1, d / 2});
  const at::Tensor s = sin.narrow(0, 0, t).view({1, t, 1, d / 2});
  const at::Tensor rotated = at::stack({x0 * c - x1 * s, x0 * s + x1 * c}, -1);
  return rotated.reshape({b, t, h, d}).to(x.scalar_type());
}

}  // namespace strata::models
