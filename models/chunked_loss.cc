#include "models/chunked_loss.h"

#include <ATen/ATen.h>
#include <ATen/core/Reduction.h>
#include <torch/csrc/autograd/custom_function.h>

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "base/torch_compat.h"
#include "glog/logging.h"

namespace strata::models {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// at::cross_entropy_loss's default, which UnitModel::Loss uses.
constexpr int64_t kIgnoreIndex = -100;

// Turns autocast of `device` (CPU or CUDA) off for a scope (the function
// casts explicitly) and restores the previous state.
class NoAutocast {
 public:
  explicit NoAutocast(c10::DeviceType device)
      : device_(device), was_(torch_compat::GetAutocastState(device)) {
    if (was_.enabled) torch_compat::SetAutocastEnabled(device_, false);
  }
  ~NoAutocast() {
    if (was_.enabled) torch_compat::SetAutocastState(device_, was_);
  }
  NoAutocast(const NoAutocast&) = delete;
  NoAutocast& operator=(const NoAutocast&) = delete;

 private:
  const c10::DeviceType device_;
  torch_compat::AutocastState was_;
};

// Rows [start, start + len) of every chunk, in order.
template <typename F>
void ForEachChunk(int64_t n, int64_t chunk_tokens, F&& f) {
  for (int64_t start = 0; start < n; start += chunk_tokens) {
    f(start, std::min(chunk_tokens, n - start));
  }
}

// log_softmax (fp32) of one chunk's logits: the ops and argument shapes of
// the unfused path (at::linear of a 2-D input is this mm; cross_entropy_loss
// takes log_softmax over dim 1 of the fp32 logits).
at::Tensor ChunkLogProbs(const at::Tensor& hidden_chunk,
                         const at::Tensor& weight) {
  return at::log_softmax(at::mm(hidden_chunk, weight.t()).to(at::kFloat), 1);
}

class ChunkedLinearCrossEntropyFunction
    : public torch::autograd::Function<ChunkedLinearCrossEntropyFunction> {
 public:
  // Keeps hidden, weight, targets and the count of counted targets; no
  // logits.
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& hidden,
                            const at::Tensor& weight, const at::Tensor& targets,
                            int64_t chunk_tokens) {
    NoAutocast no_autocast(hidden.is_cuda() ? c10::kCUDA : c10::kCPU);
    const int64_t n = hidden.size(0);
    // log p(target) per token (0 for ignored tokens).
    at::Tensor target_log_probs =
        at::empty({n}, hidden.options().dtype(at::kFloat));
    ForEachChunk(n, chunk_tokens, [&](int64_t start, int64_t len) {
      const at::Tensor per_token =
          at::nll_loss(ChunkLogProbs(hidden.narrow(0, start, len), weight),
                       targets.narrow(0, start, len), /*weight=*/{},
                       at::Reduction::None, kIgnoreIndex);
      target_log_probs.narrow(0, start, len).copy_(per_token.neg());
    });
    // The unfused reduction over all N tokens, on a [N, 1] input whose only
    // column holds log p(target): the same values in the same order, so the
    // same mean (and total weight, the number of counted tokens).
    const at::Tensor column_targets =
        at::where(targets == kIgnoreIndex, targets, at::zeros_like(targets));
    auto [loss, total_weight] =
        at::nll_loss_forward(target_log_probs.unsqueeze(1), column_targets,
                             /*weight=*/{}, at::Reduction::Mean, kIgnoreIndex);
    ctx->save_for_backward({hidden, weight, targets, total_weight});
    ctx->saved_data["chunk_tokens"] = chunk_tokens;
    return loss;
  }

  // Recomputes each chunk's logits and runs the unfused backward on it:
  // nll_loss, log_softmax, then the two matmuls of linear.
  static variable_list backward(AutogradContext* ctx,
                                variable_list grad_outputs) {
    const variable_list saved = ctx->get_saved_variables();
    const at::Tensor& hidden = saved[0];
    const at::Tensor& weight = saved[1];
    const at::Tensor& targets = saved[2];
    const at::Tensor& total_weight = saved[3];
    const int64_t chunk_tokens = ctx->saved_data["chunk_tokens"].toInt();
    const at::Tensor& grad_loss = grad_outputs[0];
    const bool want_hidden = ctx->needs_input_grad(0);
    const bool want_weight = ctx->needs_input_grad(1);
    const int64_t n = hidden.size(0);
    const bool one_chunk = chunk_tokens >= n;

    at::Tensor grad_hidden;
    if (want_hidden) grad_hidden = at::empty_like(hidden);
    // Several chunks: the weight's gradient sums in fp32 whatever the compute
    // dtype (one rounding to it at the end, as one unfused matmul does).
    at::Tensor grad_weight;
    if (want_weight && !one_chunk) {
      grad_weight =
          at::zeros(weight.sizes(), weight.options().dtype(at::kFloat));
    }
    ForEachChunk(n, chunk_tokens, [&](int64_t start, int64_t len) {
      const at::Tensor hidden_chunk = hidden.narrow(0, start, len);
      at::Tensor log_probs;
      {
        at::NoGradGuard no_grad;
        log_probs = ChunkLogProbs(hidden_chunk, weight);
      }
      // The unfused backward puts -s (s = grad / total weight) at each
      // counted target (nll_loss) and then takes log_softmax's backward,
      // grad - exp(log_probs) * sum(grad): exp(log_probs) * s off the target,
      // exp(log_probs) * s - s at it, 0 on an ignored row. Computed here in
      // place of log_probs with the same roundings, so that one [len, V]
      // buffer is live instead of three (the exp may differ from the fused
      // kernel's by an ulp; the test's bounds allow for it).
      const at::Tensor chunk_targets = targets.narrow(0, start, len);
      const at::Tensor counted = chunk_targets.ne(kIgnoreIndex);
      const at::Tensor scale =
          at::where(counted, grad_loss.to(at::kFloat) / total_weight,
                    at::zeros({}, total_weight.options()))
              .unsqueeze(1);
      at::Tensor grad_logits = log_probs.exp_().mul_(scale);
      log_probs.reset();
      grad_logits.scatter_add_(
          1,
          at::where(counted, chunk_targets, at::zeros_like(chunk_targets))
              .unsqueeze(1),
          scale.neg());
      if (grad_logits.scalar_type() != hidden.scalar_type()) {
        grad_logits = grad_logits.to(hidden.scalar_type());
      }
      if (want_hidden) {
        grad_hidden.narrow(0, start, len).copy_(at::mm(grad_logits, weight));
      }
      if (want_weight) {
        if (one_chunk) {
          grad_weight = at::mm(grad_logits.t(), hidden_chunk);
        } else if (grad_weight.scalar_type() == hidden.scalar_type()) {
          grad_weight.addmm_(grad_logits.t(), hidden_chunk);
        } else {
          grad_weight.addmm_(grad_logits.t().to(at::kFloat),
                             hidden_chunk.to(at::kFloat));
        }
      }
    });
    if (grad_weight.defined())
      grad_weight = grad_weight.to(weight.scalar_type());
    return {grad_hidden, grad_weight, at::Tensor(), at::Tensor()};
  }
};

}  // namespace

at::Tensor ChunkedLinearCrossEntropy(const at::Tensor& hidden,
                                     const at::Tensor& weight,
                                     const at::Tensor& targets,
                                     int64_t chunk_tokens) {
  if (chunk_tokens < 1) {
    throw std::invalid_argument(absl::StrCat(
        "ChunkedLinearCrossEntropy: chunk_tokens must be >= 1, got ",
        chunk_tokens));
  }
  if (!hidden.defined() || !weight.defined() || !targets.defined() ||
      hidden.dim() != 2 || weight.dim() != 2 || targets.dim() != 1 ||
      hidden.size(1) != weight.size(1) || targets.size(0) != hidden.size(0)) {
    auto shape = [](const at::Tensor& t) {
      return t.defined() ? c10::str(t.sizes()) : std::string("undefined");
    };
    throw std::invalid_argument(absl::StrCat(
        "ChunkedLinearCrossEntropy: expected hidden [N, H], weight [V, H] and "
        "targets [N], got hidden ",
        shape(hidden), ", weight ", shape(weight), " and targets ",
        shape(targets)));
  }
  if (targets.scalar_type() != at::kLong) {
    throw std::invalid_argument(
        absl::StrCat("ChunkedLinearCrossEntropy: targets must be int64, got ",
                     c10::toString(targets.scalar_type())));
  }
  at::Tensor h = hidden;
  at::Tensor w = weight;
  const c10::DeviceType device_type = hidden.is_cuda() ? c10::kCUDA : c10::kCPU;
  const torch_compat::AutocastState autocast =
      torch_compat::GetAutocastState(device_type);
  if (autocast.enabled) {
    // What autocast does to at::linear's arguments (differentiable casts).
    if (h.is_floating_point() && h.scalar_type() != autocast.dtype) {
      h = h.to(autocast.dtype);
    }
    if (w.is_floating_point() && w.scalar_type() != autocast.dtype) {
      w = w.to(autocast.dtype);
    }
  }
  if (h.scalar_type() != w.scalar_type()) {
    throw std::invalid_argument(
        absl::StrCat("ChunkedLinearCrossEntropy: hidden and weight must have "
                     "one dtype, got ",
                     c10::toString(h.scalar_type()), " and ",
                     c10::toString(w.scalar_type())));
  }
  return ChunkedLinearCrossEntropyFunction::apply(h.contiguous(), w, targets,
                                                  chunk_tokens);
}

}  // namespace strata::models
