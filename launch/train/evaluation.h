// Held-out evaluation of a model: the mean next-token cross-entropy (nats
// per token) and perplexity over windows of a token source, as the trainer's
// periodic evaluation and `train --eval_only` compute it, and the eval.json
// record --eval_only writes.
//
// The windows are those of data::DistributedSampler without shuffling: window
// w is tokens [w * seq_len, w * seq_len + seq_len + 1), in order, batch_size
// windows per forward. With num_batches > 0 the first num_batches batches
// (wrapping around the source when it has fewer windows, as the sampler
// does); with num_batches == 0 every window once, the last batch holding the
// remainder.
#ifndef STRATA_LAUNCH_TRAIN_EVALUATION_H_
#define STRATA_LAUNCH_TRAIN_EVALUATION_H_

#include <c10/core/Device.h>

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "data/token_source.h"
#include "models/unit.h"

namespace strata::launch {

struct EvalOptions {
  int64_t seq_len = 128;    // Tokens per window (inputs).
  int64_t batch_size = 1;   // Windows per forward.
  int64_t num_batches = 8;  // 0: every window of the source once.
  at::Device device = at::Device(at::kCPU);  // Where the model is.
};

struct EvalResult {
  // Mean cross-entropy per target token (nats): each batch's mean loss
  // weighted by its tokens.
  double loss_nats = 0;
  double perplexity = 0;  // exp(loss_nats).
  int64_t tokens = 0;     // Target tokens scored.
  int64_t batches = 0;    // Forwards.
};

// Evaluates `model` (in eval mode and without gradients; its train/eval mode
// is restored) over `source`. Under a sharded strategy (FSDP) every rank of
// the strategy's group must call it with the same arguments: each batch's
// forward is a collective. InvalidArgument naming the option for seq_len or
// batch_size < 1 or num_batches < 0, and for a source shorter than one
// window. A non-finite batch loss (fp16 overflow, diverged weights) makes a
// non-finite result, which the caller reports.
absl::StatusOr<EvalResult> EvaluateLoss(models::UnitModel& model,
                                        const data::TokenSource& source,
                                        const EvalOptions& options);

// "eval: loss 2.3456, perplexity 10.44 over 65536 tokens (8 batches)".
std::string EvalLine(const EvalResult& result);

// What an eval.json record says besides the result.
struct EvalRecordInfo {
  std::string model;
  std::string weights;  // The --load_weights or --resume path.
  std::string data;     // The eval split (TokenSource::Describe()).
  std::string strategy;
  int world_size = 1;
};

// One JSON object (one line): {"loss": ..., "perplexity": ..., "tokens":
// ..., "batches": ..., "model": ..., "weights": ..., "data": ...,
// "strategy": ..., "world_size": ...}; numbers read back exactly.
std::string EvalRecordJson(const EvalResult& result,
                           const EvalRecordInfo& info);

// Writes EvalRecordJson and a newline to `path` atomically; errors name the
// file.
absl::Status WriteEvalRecord(const std::string& path, const EvalResult& result,
                             const EvalRecordInfo& info);

}  // namespace strata::launch

#endif  // STRATA_LAUNCH_TRAIN_EVALUATION_H_
