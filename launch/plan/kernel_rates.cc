#include "launch/plan/kernel_rates.h"

#include <ATen/ops/add.h>
#include <ATen/ops/baddbmm.h>
#include <ATen/ops/bmm.h>
#include <ATen/ops/cross_entropy_loss.h>
#include <ATen/ops/embedding.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/full.h>
#include <ATen/ops/gelu.h>
#include <ATen/ops/layer_norm.h>
#include <ATen/ops/mm.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/randint.h>
#include <ATen/ops/randn.h>
#include <ATen/ops/softmax.h>
#include <glog/logging.h>

#include <chrono>
#include <functional>
#include <initializer_list>
#include <limits>
#include <thread>
#include <vector>

namespace strata {
namespace {

using Clock = std::chrono::steady_clock;

// Work units per second of `run_once` (one unit per call) on one thread,
// timed for about `seconds` after one warm-up call.
double UnitsPerSecond(const std::function<void()>& run_once, double seconds) {
  run_once();  // Warm-up: pages, thread pools, kernels.
  int64_t iters = 0;
  const auto start = Clock::now();
  double elapsed_s = 0;
  do {
    run_once();
    ++iters;
    elapsed_s = std::chrono::duration<double>(Clock::now() - start).count();
  } while (elapsed_s < seconds);
  return iters / elapsed_s;
}

// The mean over `threads` threads each running `measure_one` at once.
double MeanOverThreads(int threads,
                       const std::function<double()>& measure_one) {
  CHECK_GE(threads, 1);
  std::vector<double> rates(threads);
  std::vector<std::thread> workers;
  workers.reserve(threads);
  for (int i = 0; i < threads; ++i) {
    workers.emplace_back([&, i] { rates[i] = measure_one(); });
  }
  for (std::thread& w : workers) w.join();
  double sum = 0;
  for (const double r : rates) sum += r;
  return sum / threads;
}

// A leaf tensor of `shape` that requires its gradient.
at::Tensor Leaf(at::IntArrayRef shape) {
  return at::randn(shape).requires_grad_(true);
}

// One forward (`forward`) and backward from an all-ones output gradient;
// the leaves' gradients are dropped after it, so that each call's backward
// writes them afresh (no accumulation across calls).
std::function<void()> ForwardBackward(std::function<at::Tensor()> forward,
                                      std::vector<at::Tensor> leaves) {
  return [forward = std::move(forward), leaves = std::move(leaves)] {
    const at::Tensor out = forward();
    out.backward(at::ones(out.sizes()));
    for (const at::Tensor& leaf : leaves) leaf.mutable_grad().reset();
  };
}

}  // namespace

double MeasureCallsPerSecond(
    const std::function<std::function<void()>()>& make_run, double seconds,
    int threads) {
  return MeanOverThreads(threads, [&] {
    const std::function<void()> run = make_run();
    return UnitsPerSecond(run, seconds);
  });
}

double MeasureLayerNormRate(int64_t rows, int64_t dim, double seconds,
                            int threads) {
  CHECK(rows > 0 && dim > 0) << rows << " x " << dim;
  return rows * dim *
         MeasureCallsPerSecond(
             [&] {
               const at::Tensor x = Leaf({rows, dim});
               const at::Tensor w = Leaf({dim});
               const at::Tensor b = Leaf({dim});
               return ForwardBackward(
                   [=] { return at::layer_norm(x, {dim}, w, b, 1e-5); },
                   {x, w, b});
             },
             seconds, threads);
}

double MeasureGeluRate(int64_t elements, double seconds, int threads) {
  CHECK_GT(elements, 0);
  return elements *
         MeasureCallsPerSecond(
             [&] {
               const at::Tensor x = Leaf({elements});
               return ForwardBackward([=] { return at::gelu(x, "tanh"); }, {x});
             },
             seconds, threads);
}

double MeasureSoftmaxRate(int64_t batch_heads, int64_t seq, double seconds,
                          int threads) {
  CHECK(batch_heads > 0 && seq > 0) << batch_heads << " x " << seq;
  return batch_heads * seq * seq *
         MeasureCallsPerSecond(
             [&] {
               const at::Tensor mask =
                   at::full({seq, seq},
                            -std::numeric_limits<double>::infinity())
                       .triu(1);
               const at::Tensor x =
                   at::add(at::randn({batch_heads, seq, seq}), mask)
                       .requires_grad_(true);
               return ForwardBackward(
                   [=] { return at::softmax(x, -1, at::kFloat); }, {x});
             },
             seconds, threads);
}

double MeasureAttentionProductsFlops(int64_t batch_heads, int64_t seq,
                                     int64_t head_dim, double seconds,
                                     int threads) {
  CHECK(batch_heads > 0 && seq > 0 && head_dim > 0)
      << batch_heads << " x " << seq << " x " << head_dim;
  const double flops = 3.0 * 2 * 2 * batch_heads * seq * seq * head_dim;
  return flops *
         MeasureCallsPerSecond(
             [&] {
               const at::Tensor q = Leaf({batch_heads, seq, head_dim});
               const at::Tensor k = Leaf({batch_heads, seq, head_dim});
               const at::Tensor v = Leaf({batch_heads, seq, head_dim});
               const at::Tensor mask = at::full({seq, seq}, 0.0);
               // The scores feed the second product directly (no
               // softmax between: that is MeasureSoftmaxRate's).
               return ForwardBackward(
                   [=] {
                     return at::bmm(
                         at::baddbmm(mask, q, k.transpose(1, 2), 1.0, 0.125),
                         v);
                   },
                   {q, k, v});
             },
             seconds, threads);
}

double MeasureCrossEntropyRate(int64_t tokens, int64_t vocab, double seconds,
                               int threads) {
  CHECK(tokens > 0 && vocab > 0) << tokens << " x " << vocab;
  return tokens * vocab *
         MeasureCallsPerSecond(
             [&] {
               const at::Tensor logits = Leaf({tokens, vocab});
               const at::Tensor targets = at::randint(vocab, {tokens});
               return ForwardBackward(
                   [=] { return at::cross_entropy_loss(logits, targets); },
                   {logits});
             },
             seconds, threads);
}

double MeasureAddRate(int64_t elements, double seconds, int threads) {
  CHECK_GT(elements, 0);
  return elements *
         MeasureCallsPerSecond(
             [&] {
               const at::Tensor a = Leaf({elements});
               const at::Tensor b = Leaf({elements});
               return ForwardBackward([=] { return at::add(a, b); }, {a, b});
             },
             seconds, threads);
}

double MeasureHeadCopyRate(int64_t batch, int64_t seq, int64_t heads,
                           int64_t head_dim, double seconds, int threads) {
  CHECK(batch > 0 && seq > 0 && heads > 0 && head_dim > 0);
  return batch * seq * heads * head_dim *
         MeasureCallsPerSecond(
             [&] {
               const at::Tensor x = Leaf({batch, seq, heads * head_dim});
               return ForwardBackward(
                   [=] {
                     return x.view({batch, seq, heads, head_dim})
                         .transpose(1, 2)
                         .reshape({batch * heads, seq, head_dim});
                   },
                   {x});
             },
             seconds, threads);
}

double MeasureEmbeddingRate(int64_t vocab, int64_t dim, int64_t tokens,
                            double seconds, int threads) {
  CHECK(vocab > 0 && dim > 0 && tokens > 0);
  return vocab * dim *
         MeasureCallsPerSecond(
             [&] {
               const at::Tensor table = Leaf({vocab, dim});
               const at::Tensor ids = at::randint(vocab, {tokens});
               return ForwardBackward([=] { return at::embedding(table, ids); },
                                      {table});
             },
             seconds, threads);
}

double MeasureFreshBufferRate(int64_t bytes, double seconds, int threads) {
  CHECK_GE(bytes, 4);
  const int64_t floats = bytes / 4;  // Whole floats: 4 * floats bytes.
  return static_cast<double>(4 * floats) *
         MeasureCallsPerSecond(
             [&] {
               return std::function<void()>(
                   [floats] { at::empty({floats}).zero_(); });
             },
             seconds, threads);
}

double MeasureGemmFlops(int64_t m, int64_t k, int64_t n, double seconds,
                        int threads) {
  CHECK(m > 0 && k > 0 && n > 0) << m << " x " << k << " x " << n;
  return MeanOverThreads(threads, [&] {
    const at::Tensor a = at::randn({m, k});
    const at::Tensor b = at::randn({k, n});
    at::Tensor out = at::empty({m, n});
    return 2.0 * m * k * n *
           UnitsPerSecond([&] { at::mm_out(out, a, b); }, seconds);
  });
}

double MeasureMemoryBandwidth(int64_t bytes, double seconds, int threads) {
  CHECK_GE(bytes, 4);
  const int64_t floats = bytes / 4;  // Whole floats: 4 * floats bytes.
  return MeanOverThreads(threads, [&] {
    const at::Tensor src = at::randn({floats});
    at::Tensor dst = at::empty({floats});
    // Each copy reads and writes them.
    return 2.0 * static_cast<double>(4 * floats) *
           UnitsPerSecond([&] { dst.copy_(src); }, seconds);
  });
}

}  // namespace strata
