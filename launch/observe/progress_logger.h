// The training progress of the train binary: one line per log interval
// (glog INFO) and one JSON record per line in <output_dir>/metrics.jsonl.
//
//   step 100/1000 | loss 2.1234 (floor 1.9000, +0.2234) | eval 2.2000 | lr
//   0.003 | grad norm 0.512 | 12345 tok/s | MFU 12.3% | ETA 1m30s
//
//   {"step": 100, "loss": 2.1234, "eval_loss": 2.2, "entropy_floor": 1.9,
//    "lr": 0.003, "grad_norm": 0.512, "tokens_per_s": 12345, "mfu": 0.123,
//    "elapsed_s": 10}
//
// With phase times (--wall_clock_breakdown) the line ends with
//   | per step: fwd+bwd 41.2ms, step 3.1ms (comm wait 0.8ms), data 0.1ms,
//   ckpt 0.0ms
// and the record has "forward_backward_s", "step_s", "comm_wait_s",
// "data_s" and "checkpoint_s". With loss scaling (--precision=fp16) the line
// adds "| loss scale 32768 (skipped 3)" after the grad norm, and the record
// "loss_scale" and "skipped_steps" (steps skipped for overflow so far).
// With the tracking allocator (train --track_tensor_memory) the record has
// "tensor_peak_bytes": rank 0's peak of tensor storage so far in the steps
// (launch/observe/tensor_memory.h), what the planner predicts
// (launch/plan/plan.h).
#ifndef STRATA_LAUNCH_OBSERVE_PROGRESS_LOGGER_H_
#define STRATA_LAUNCH_OBSERVE_PROGRESS_LOGGER_H_

#include <cstdint>
#include <fstream>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace strata::launch {

// Wall-clock seconds of the phases of a training step on rank 0, per step
// (the mean over a log interval), measured with a steady clock
// (--wall_clock_breakdown).
struct PhaseTimes {
  // Strategy::ForwardBackward, every micro-batch: forward, backward, and
  // the communication started or waited for inside them (DDP/ZeRO bucket
  // launches, FSDP's gathers and reductions).
  double forward_backward_s = 0;
  // Strategy::Step: finishing the gradient communication, clipping, the
  // optimizer update and refreshing parameters (ZeRO's all-gather).
  double step_s = 0;
  // Of those two, the time the training thread was blocked waiting for
  // collectives: the communication it did not overlap
  // (comm::ThreadCollectiveWaitSeconds).
  double comm_wait_s = 0;
  // Reading the step's batch from the sampler.
  double data_s = 0;
  // Saving checkpoints (or copying state for an async save) after the step.
  double checkpoint_s = 0;
};

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
  std::optional<PhaseTimes> phases;  // Set with --wall_clock_breakdown.
  // Set with loss scaling: the scale of the last step and the steps
  // skipped for overflow since the start (or the resumed step).
  std::optional<double> loss_scale;
  int64_t skipped_steps = 0;
  // Every rank's peak resident set (VmHWM) so far, rank order; filled with
  // --tensorboard_dir (TensorBoard only, not the progress line or
  // metrics.jsonl).
  std::vector<int64_t> peak_resident_bytes;
  // Rank 0's peak of tensor storage since the first step, above what was
  // live before the model was built (launch/observe/tensor_memory.h); unset
  // without the tracking allocator (metrics.jsonl only).
  std::optional<int64_t> tensor_peak_bytes;
};

// A duration in whole seconds as absl::FormatDuration writes it ("1m30s"),
// or "?" when `seconds` is not finite or negative.
std::string FormatEta(double seconds);

// The progress line (no trailing newline), as in the header comment.
std::string FormatProgressLine(const ProgressRecord& record);

// The metrics.jsonl record (one JSON object, no trailing newline): every
// field with %.9g, non-finite values (and a missing eval_loss) as null; the
// phase times only when set.
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

#endif  // STRATA_LAUNCH_OBSERVE_PROGRESS_LOGGER_H_
