#include "launch/observe/progress_logger.h"

#include <glog/logging.h>

#include <cmath>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"

namespace strata::launch {

std::string FormatEta(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  return absl::FormatDuration(absl::Seconds(std::round(seconds)));
}

std::string FormatProgressLine(const ProgressRecord& r) {
  std::string line =
      absl::StrFormat("step %d/%d | loss %.4f", r.step, r.total_steps, r.loss);
  if (std::isfinite(r.entropy_floor)) {
    absl::StrAppendFormat(&line, " (floor %.4f, +%.4f)", r.entropy_floor,
                          r.loss - r.entropy_floor);
  }
  if (r.eval_loss.has_value()) {
    absl::StrAppendFormat(&line, " | eval %.4f", *r.eval_loss);
  }
  absl::StrAppendFormat(&line, " | lr %.3g | grad norm %.3f", r.lr,
                        r.grad_norm);
  if (r.loss_scale.has_value()) {
    absl::StrAppendFormat(&line, " | loss scale %g (skipped %d)", *r.loss_scale,
                          r.skipped_steps);
  }
  absl::StrAppendFormat(&line, " | %.0f tok/s | MFU %.1f%% | ETA %s",
                        r.tokens_per_s, 100 * r.mfu, FormatEta(r.eta_s));
  if (r.phases.has_value()) {
    const PhaseTimes& p = *r.phases;
    absl::StrAppendFormat(&line,
                          " | per step: fwd+bwd %.1fms, step %.1fms (comm "
                          "wait %.1fms), data %.1fms, ckpt %.1fms",
                          1e3 * p.forward_backward_s, 1e3 * p.step_s,
                          1e3 * p.comm_wait_s, 1e3 * p.data_s,
                          1e3 * p.checkpoint_s);
  }
  return line;
}

std::string FormatMetricsRecord(const ProgressRecord& r) {
  std::vector<std::pair<const char*, double>> fields = {
      {"step", static_cast<double>(r.step)},
      {"loss", r.loss},
      {"eval_loss", r.eval_loss.value_or(NAN)},
      {"entropy_floor", r.entropy_floor},
      {"lr", r.lr},
      {"grad_norm", r.grad_norm},
      {"tokens_per_s", r.tokens_per_s},
      {"mfu", r.mfu},
      {"elapsed_s", r.elapsed_s}};
  if (r.loss_scale.has_value()) {
    fields.insert(fields.end(),
                  {{"loss_scale", *r.loss_scale},
                   {"skipped_steps", static_cast<double>(r.skipped_steps)}});
  }
  if (r.tensor_peak_bytes.has_value()) {
    fields.push_back(
        {"tensor_peak_bytes", static_cast<double>(*r.tensor_peak_bytes)});
  }
  if (r.phases.has_value()) {
    const PhaseTimes& p = *r.phases;
    fields.insert(fields.end(), {{"forward_backward_s", p.forward_backward_s},
                                 {"step_s", p.step_s},
                                 {"comm_wait_s", p.comm_wait_s},
                                 {"data_s", p.data_s},
                                 {"checkpoint_s", p.checkpoint_s}});
  }
  std::vector<std::string> parts;
  for (const auto& [key, value] : fields) {
    parts.push_back(std::isfinite(value)
                        ? absl::StrFormat("\"%s\": %.9g", key, value)
                        : absl::StrFormat("\"%s\": null", key));
  }
  return absl::StrCat("{", absl::StrJoin(parts, ", "), "}");
}

ProgressLogger::ProgressLogger(std::string metrics_path)
    : metrics_path_(std::move(metrics_path)),
      out_(metrics_path_, std::ios::trunc) {}

absl::StatusOr<std::unique_ptr<ProgressLogger>> ProgressLogger::Open(
    const std::string& metrics_path) {
  std::unique_ptr<ProgressLogger> logger(new ProgressLogger(metrics_path));
  if (!logger->out_.good()) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot write ", metrics_path));
  }
  return logger;
}

void ProgressLogger::Log(const ProgressRecord& record) {
  LOG(INFO) << FormatProgressLine(record);
  out_ << FormatMetricsRecord(record) << "\n";
  out_.flush();
}

}  // namespace strata::launch
