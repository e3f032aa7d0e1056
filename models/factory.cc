#include "models/factory.h"

#include <memory>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "models/gpt.h"
#include "models/llama.h"

namespace strata::models {

absl::StatusOr<std::shared_ptr<UnitModel>> BuildModel(
    const ModelConfig& config, const BuildOptions& options) {
  STRATA_RETURN_IF_ERROR(ValidateConfig(config));
  std::shared_ptr<UnitModel> model;
  absl::Status built = absl::OkStatus();
  // Allocation failures (a model too large for memory) throw.
  STRATA_RETURN_IF_ERROR(
      StatusFromCall(absl::StrCat("building a ", config.family, " model with ",
                                  NumParameters(config), " parameters"),
                     [&] {
                       if (config.family == "gpt") {
                         absl::StatusOr<std::shared_ptr<Gpt>> gpt =
                             Gpt::Create(config, options);
                         if (gpt.ok()) model = *std::move(gpt);
                         built = gpt.status();
                       } else {
                         absl::StatusOr<std::shared_ptr<Llama>> llama =
                             Llama::Create(config, options);
                         if (llama.ok()) model = *std::move(llama);
                         built = llama.status();
                       }
                     }));
  STRATA_RETURN_IF_ERROR(built);
  return model;
}

}  // namespace strata::models
