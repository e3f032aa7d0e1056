// Builds a reference model from a config: the entry point trainers use.
#ifndef STRATA_MODELS_FACTORY_H_
#define STRATA_MODELS_FACTORY_H_

#include <memory>

#include "absl/status/statusor.h"
#include "models/config.h"
#include "models/init.h"
#include "models/unit.h"

namespace strata::models {

// Validates `config` and builds a Gpt (family "gpt") or Llama ("llama"),
// initialised from options.seed, or with every parameter on the meta device
// when options.deferred (see Materialize in init.h).
absl::StatusOr<std::shared_ptr<UnitModel>> BuildModel(
    const ModelConfig& config, const BuildOptions& options);

}  // namespace strata::models

#endif  // STRATA_MODELS_FACTORY_H_
