// The unit protocol: how a model exposes the sub-modules ("units") that a
// training strategy may wrap, and how a strategy intercepts their forward.
//
// LibTorch's C++ modules have no forward hooks. A model written to this
// protocol derives from UnitModel, registers its units at construction
// (embeddings, each transformer block, the head, in forward order) and, in
// Forward, calls every unit through CallUnit. Strategies add
// UnitInterceptors, which see every unit call: FSDP gathers a unit's
// parameters before its forward and frees them after, activation
// checkpointing re-runs a unit's forward during backward, mixed precision
// casts around it. See models/README.md for writing your own model.
#ifndef STRATA_MODELS_UNIT_H_
#define STRATA_MODELS_UNIT_H_

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "models/dropout.h"

namespace strata::models {

struct UnitInfo {
  // The unit's name. For a unit that is one registered sub-module this is
  // its parameter-name prefix ("blocks.3", "tok_embeddings"); a unit that
  // groups several sub-modules has a label ("embed", "head") and
  // `parameters` says which parameters it owns.
  std::string name;
  // "GPTBlock", "LlamaBlock", "Embedding", "Head", or a user model's own
  // type; wrap policies select units by type.
  std::string type;
  // Position in forward order (0 = first unit called).
  int index = 0;
  // The module owning the unit's parameters; borrowed from (owned by) the
  // model. Its parameters are those of the model listed in `parameters`.
  torch::nn::Module* module = nullptr;
  // Full names (as in model.named_parameters()) of the parameters the unit
  // owns, in the order module->named_parameters() lists them. Every
  // parameter belongs to at most one unit.
  std::vector<std::string> parameters;
};

// A unit's forward: input activation (or the token ids, for the first unit)
// to output activation.
using UnitForward = std::function<at::Tensor(const at::Tensor&)>;

class UnitInterceptor {
 public:
  virtual ~UnitInterceptor() = default;
  // Runs one unit: must return the output of forward(input). It may call
  // forward more than once (recomputation, also later during backward) or
  // change dtypes around it. `forward` stays callable after the model's
  // Forward has returned, for as long as the model lives.
  virtual at::Tensor Run(const UnitInfo& unit, const at::Tensor& input,
                         const UnitForward& forward) = 0;
};

class UnitModel : public torch::nn::Module {
 public:
  UnitModel() = default;
  explicit UnitModel(std::string name) : torch::nn::Module(std::move(name)) {}

  // The units, in forward order, registered at construction.
  const std::vector<UnitInfo>& units() const { return units_; }

  // Interceptors nest, the first added outermost. Call only while no
  // forward or backward is running (a backward that recomputes a unit keeps
  // using the interceptors that were active during its forward).
  void AddInterceptor(std::shared_ptr<UnitInterceptor> interceptor);
  void ClearInterceptors();
  int num_interceptors() const;

  // tokens [B, T] int64 -> logits [B, T, V] (fp32 unless an interceptor
  // changed dtypes). Bad input (wrong rank or dtype, ids outside the
  // vocabulary, T above the model's context, a parameter still on the meta
  // device) throws std::invalid_argument with a message naming the problem;
  // trainers validate their data up front and never rely on this.
  virtual at::Tensor Forward(const at::Tensor& tokens) = 0;

  // Mean next-token cross-entropy of logits [B, T, V] against targets
  // [B, T] int64 (targets[b][t] is the token that follows tokens[b][t]),
  // computed in fp32. Mismatched shapes throw std::invalid_argument.
  static at::Tensor Loss(const at::Tensor& logits, const at::Tensor& targets);

  // Forward + Loss of tokens and targets [B, T] int64: the mean next-token
  // cross-entropy, an fp32 scalar. What strategies and trainers call. The
  // default is Loss(Forward(tokens), targets); a model may compute the loss
  // inside its last unit instead (Gpt and Llama with
  // ModelConfig::loss_chunk_tokens > 0: the head's output is then this loss,
  // and no [B, T, V] logits exist), equal to the default's within the
  // tolerance its documentation states. Throws as Forward and Loss.
  virtual at::Tensor ForwardLoss(const at::Tensor& tokens,
                                 const at::Tensor& targets);

  // The randomness of dropout in the forwards that follow (train mode):
  // with a context, dropout masks are a function of (seed, step, global
  // sample index, site, element) — the same at any world size and under
  // recomputation (models/dropout.h); the context's sample_ids must name the
  // rows of the tokens passed to Forward. Null (the default): dropout draws
  // from LibTorch's default generator. Call between forwards (a unit
  // recomputed during backward keeps the context of its forward).
  void SetDropoutContext(std::shared_ptr<const DropoutContext> context) {
    dropout_context_ = std::move(context);
  }
  const std::shared_ptr<const DropoutContext>& dropout_context() const {
    return dropout_context_;
  }

  // Parameters shared between units (GPT's tied embedding/head): the full
  // name of a parameter, owned (listed in `parameters`) by one unit, and the
  // names of the other units whose forward also reads it.
  virtual std::vector<std::pair<std::string, std::vector<std::string>>>
  SharedParameters() const {
    return {};
  }

  // The initial value of parameter `name` (full name) for `seed`: a
  // contiguous CPU tensor of the parameter's shape and dtype that depends
  // only on (seed, name, shape), never on rank or sharding, so any rank can
  // materialise any parameter (see Materialize in init.h). Models that do
  // not support deferred initialisation keep this default, which returns
  // Unimplemented.
  virtual absl::StatusOr<at::Tensor> InitialParameter(const std::string& name,
                                                      uint64_t seed) const;

 protected:
  // Registers the next unit (forward order). `module` must already be part
  // of this model (its parameters registered in this model's tree) and must
  // outlive the model's use; it may be a registered child or a holder module
  // that shares registered children. CHECK-fails on a duplicate name, a
  // parameter outside the model, or one already owned by another unit.
  void RegisterUnit(std::string name, std::string type,
                    torch::nn::Module* module);

  // Every unit call in Forward goes through here: the interceptor chain,
  // then `forward`. `forward` must be callable after Forward returns (capture
  // by value; see README.md).
  at::Tensor CallUnit(int unit_index, const at::Tensor& input,
                      const UnitForward& forward);

  // Input checks for Forward implementations; throw std::invalid_argument.
  // Tokens: 2-D int64 [B, T] with B, T >= 1, T <= max_seq_len and ids in
  // [0, vocab_size).
  static void CheckTokens(const at::Tensor& tokens, int64_t vocab_size,
                          int64_t max_seq_len);
  // Targets for tokens: int64 and the shape of `tokens`; throws
  // std::invalid_argument as Loss does.
  static void CheckTargets(const at::Tensor& tokens, const at::Tensor& targets);
  // No parameter on the meta device (a deferred model not materialised).
  void CheckMaterialized() const;

 private:
  using InterceptorList = std::vector<std::shared_ptr<UnitInterceptor>>;

  std::vector<UnitInfo> units_;
  std::shared_ptr<const DropoutContext> dropout_context_;
  // Replaced, never mutated, so that forwards captured for recomputation
  // keep the chain they started with.
  std::shared_ptr<const InterceptorList> interceptors_ =
      std::make_shared<const InterceptorList>();
};

}  // namespace strata::models

#endif  // STRATA_MODELS_UNIT_H_
