// The training progress of the train binary: one line per log interval
// (glog INFO) and one JSON record per line in <output_dir>/metrics.jsonl.
//
//   step 100/1000 | loss 2.1234 (floor 1.9000, +0.2234) | eval 2.2000 | lr
//   0.003 | grad norm 0.512 | 12345 tok/s | MFU 12.3% | ETA 1m30s
//
//   {"step": 100, "loss": 2.1234, "eval_loss": 2.2, "entropy_floor": 1.9,
//    "lr": 0.003, "grad_norm": 0.512, "tokens_per_s": 12345, "mfu": 0.123,
//    "elapsed_s": 10}
#ifndef STRATA_LAUNCH_PROGRESS_LOGGER_H_
#define STRATA_LAUNCH_PROGRESS_LOGGER_H_

#include <cstdint>
#include <fstream>
#include <limits>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"

namespace strata::launch {

// What one progress line reports.
struct ProgressRecord {
  int64_t step = 0;         // Steps done, 1-based.
  int64_t total_steps = 0;  // --steps.
  double loss = 0;          // Mean training loss over the interval and ranks.
  // The data's cross-entropy floor (nats/token); NaN: unknown, not shown.
  double entropy_floor = std::numeric_limits<double>::quiet_NaN();
  std::optional<double> eval_loss;  // Set when evaluated at this step.
  double lr = 0;
  double grad_norm = 0;
  double tokens_per_s = 0;  // Training throughput (evaluation time excluded).
  double mfu = 0;           // Fraction of the measured matmul peak.
  double elapsed_s = 0;     // Since the first step.
  double eta_s = 0;         // Estimated time left; non-finite or < 0: "?".
};

// A duration in whole seconds as absl::FormatDuration writes it ("1m30s"),
// or "?" when `seconds` is not finite or negative.
std::string FormatEta(double seconds);

// The progress line (no trailing newline), as in the header comment.
std::string FormatProgressLine(const ProgressRecord& record);

// The metrics.jsonl record (one JSON object, no trailing newline): every
// field with %.9g, non-finite values (and a missing eval_loss) as null.
std::string FormatMetricsRecord(const ProgressRecord& record);

// Writes progress lines to glog and records to a metrics file. Used by rank 0
// only, from one thread.
class ProgressLogger {
 public:
  // Creates (truncates) the metrics file at `metrics_path`, whose directory
  // must exist. Error: "cannot write <metrics_path>".
  static absl::StatusOr<std::unique_ptr<ProgressLogger>> Open(
      const std::string& metrics_path);

  // Logs the progress line (glog INFO) and appends the record to the
  // metrics file, flushed so that the file is readable during training.
  void Log(const ProgressRecord& record);

  const std::string& metrics_path() const { return metrics_path_; }

 private:
  explicit ProgressLogger(std::string metrics_path);

  std::string metrics_path_;
  std::ofstream out_;
};

}  // namespace strata::launch

#endif  // STRATA_LAUNCH_PROGRESS_LOGGER_H_
