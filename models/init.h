// World-size-independent initialisation and deferred (meta-device) models.
//
// A parameter's initial value depends only on (seed, parameter name, shape,
// init scheme): the CPU generator that draws it is seeded with a 64-bit
// FNV-1a hash of (seed, name). It never depends on rank, world size,
// sharding or the order in which parameters are created, so a model built
// whole on one process, or materialised unit by unit (or shard by shard) on
// many, starts from bitwise the same weights.
#ifndef STRATA_MODELS_INIT_H_
#define STRATA_MODELS_INIT_H_

#include <ATen/core/Tensor.h>
#include <c10/util/ArrayRef.h>

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "models/config.h"
#include "models/unit.h"

namespace strata::models {

struct BuildOptions {
  // Seed of every parameter's initial value (see above).
  uint64_t seed = 0;
  // Create every parameter on the meta device (shape and dtype, no memory);
  // Materialize gives them their values later.
  bool deferred = false;
};

enum class InitFamily {
  // Linear/Embedding weights N(0, std); residual output projections
  // (names ending "attn.proj.weight", "mlp.proj.weight") N(0, std /
  // sqrt(2 * num_layers)); biases 0; LayerNorm ("ln_*") weights 1.
  kGpt2,
  // Weights N(0, std); norm weights ("*norm.weight") 1; biases 0.
  kLlama,
};

struct InitScheme {
  InitFamily family = InitFamily::kGpt2;
  double std = 0.02;
  // Scales GPT-2's residual projections.
  int64_t num_layers = 1;
};

// The scheme of a config's family.
InitScheme InitSchemeFor(const ModelConfig& config);

enum class InitRule { kZeros, kOnes, kNormal };

struct ParameterInit {
  InitRule rule = InitRule::kNormal;
  double std = 0.0;  // kNormal only
};

// How `scheme` initialises the parameter called `name` (decided by name).
ParameterInit InitFor(const std::string& name, const InitScheme& scheme);

// 64-bit FNV-1a of the seed's 8 little-endian bytes followed by `name`.
uint64_t ParameterSeed(uint64_t seed, std::string_view name);

// The initial value of parameter `name`: a contiguous fp32 CPU tensor of
// `shape`. Normal draws come from a CPU generator seeded with
// ParameterSeed(seed, name).
at::Tensor InitialValue(const std::string& name, at::IntArrayRef shape,
                        uint64_t seed, const InitScheme& scheme);

// An fp32 tensor of `shape` on the meta device: what deferred models
// register as parameters.
at::Tensor MetaTensor(at::IntArrayRef shape);

// Makes `parameter` (same TensorImpl, so module members, optimizers and
// unit lists that hold it stay valid) take `value`'s data, like
// Tensor::set_data, which LibTorch 1.13 refuses from the meta device to a
// real one. Autograd settings (requires_grad) are kept. `value` must have
// the parameter's shape; it is used as is (not copied). Only for leaves not
// yet used in any autograd graph when the parameter is on the meta device.
void ReplaceParameterData(const at::Tensor& parameter, const at::Tensor& value);

// Replaces the model's meta parameters that `filter` accepts (all when
// `filter` is null) with model.InitialParameter(name, options.seed), in
// place. Parameters already materialised are left alone, so a strategy can
// materialise one unit at a time. Errors: the model cannot produce an
// initial value, or produces one of the wrong shape (naming the parameter).
absl::Status Materialize(
    UnitModel& model, const BuildOptions& options,
    const std::function<bool(const std::string& name)>& filter = nullptr);

}  // namespace strata::models

#endif  // STRATA_MODELS_INIT_H_
