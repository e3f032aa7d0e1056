// The training loop behind //launch/train:train: builds a model, a data source
// and sampler, the optimizer over flat parameters and an LR schedule from
// TrainOptions, then trains with gradient accumulation, global-norm clipping,
// periodic evaluation, a progress line and a JSONL metrics file.
//
// The model is trained through a strategies::Strategy (--strategy): `single`
// in one process, or a data-parallel strategy over the ranks of a
// comm::Group, each rank taking its slice of every global batch.
#ifndef STRATA_LAUNCH_TRAIN_TRAINER_H_
#define STRATA_LAUNCH_TRAIN_TRAINER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "comm/group.h"
#include "launch/config/train_options.h"
#include "launch/train/evaluation.h"

namespace strata::launch {

struct TrainResult {
  int64_t steps = 0;
  double final_train_loss = 0;  // Mean over the last log interval.
  double final_eval_loss = 0;
  // The data's cross-entropy floor (nats/token); NaN when unknown.
  double entropy_floor_nats = 0;
  double tokens_per_s = 0;
  // --precision=fp16: steps skipped for overflow, and the scale at the end.
  int64_t skipped_steps = 0;
  double final_loss_scale = 1;
  std::string metrics_path;
  // --eval_only: the evaluation of the loaded weights (steps: 0).
  EvalResult eval;
  // Every rank's peak resident set (VmHWM) at the end of training, rank
  // order (rank 0 also logs it); empty with --eval_only.
  std::vector<int64_t> peak_resident_bytes;
  // Every rank's peak of tensor storage during the steps above what was live
  // before the model was built (launch/observe/tensor_memory.h), rank order;
  // empty without the tracking allocator (train --track_tensor_memory) or on
  // CUDA.
  std::vector<int64_t> tensor_peak_bytes;
};

// With --eval_only: loads the weights (LoadWeightsOnly: of --resume only
// the model weights), evaluates them (every rank the same
// batches; the same result at any world size and strategy) and returns
// without training; rank 0 writes <output_dir>/eval.json
// (launch/train/evaluation.h) and no metrics file or model.pt.
// Otherwise trains; rank 0 logs progress (glog INFO) every log_interval steps
// and writes <output_dir>/metrics.jsonl and <output_dir>/model.pt (a state dict
// Python's torch.load reads). Invalid options fail before any work starts.
// `group` (borrowed; null: one process) spans the ranks training together;
// every rank calls Train with the same options.
absl::StatusOr<TrainResult> Train(const TrainOptions& options,
                                  comm::Group* group = nullptr);

}  // namespace strata::launch

#endif  // STRATA_LAUNCH_TRAIN_TRAINER_H_
