#include "launch/config/checkpoint_options.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "base/regex.h"

namespace strata::launch {

absl::Status ValidateTrainingCheckpointOptions(
    const TrainingCheckpointOptions& o) {
  if (o.save_every < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--save_every must be >= 0 (0: no checkpoints), got ", o.save_every));
  }
  if (o.keep_last < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--keep_last must be >= 0 (0: keep all), got ", o.keep_last));
  }
  if (!o.resume.empty() && !o.load_weights.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--resume=", o.resume, " and --load_weights=", o.load_weights,
        " are exclusive: --resume continues a run (weights, optimizer, "
        "step), --load_weights starts a fresh one from weights"));
  }
  if (o.load_weights.empty() &&
      (!o.load_weights_strict || !o.load_weights_revise_keys.empty())) {
    return absl::InvalidArgumentError(
        "--load_weights_strict and --load_weights_revise_keys apply to "
        "--load_weights, which is not set (--resume loads strictly: it "
        "continues the same model)");
  }
  if (absl::StatusOr<std::vector<std::pair<std::string, std::string>>> rules =
          ParseReviseKeys(o.load_weights_revise_keys);
      !rules.ok()) {
    return rules.status();
  }
  if ((o.save_every > 0 || o.resume == "auto") && o.dir.empty()) {
    return absl::InvalidArgumentError(
        "checkpoints need a directory (--output_dir)");
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::pair<std::string, std::string>>>
ParseReviseKeys(const std::string& rules) {
  std::vector<std::pair<std::string, std::string>> parsed;
  if (rules.empty()) return parsed;
  for (absl::string_view rule : absl::StrSplit(rules, ';')) {
    const size_t eq = rule.rfind('=');
    if (eq == absl::string_view::npos || eq == 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--load_weights_revise_keys: rule '", rule,
          "' is not REGEX=REPLACEMENT (rules are separated by ';', e.g. "
          "'^module\\.=')"));
    }
    std::string regex(rule.substr(0, eq));
    if (absl::Status valid = CompileRegex(regex).status(); !valid.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--load_weights_revise_keys: ", valid.message()));
    }
    parsed.emplace_back(std::move(regex), std::string(rule.substr(eq + 1)));
  }
  return parsed;
}

}  // namespace strata::launch
