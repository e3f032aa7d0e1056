#include "launch/train/evaluation.h"

#include <ATen/core/Tensor.h>
#include <ATen/ops/from_blob.h>
#include <torch/csrc/autograd/grad_mode.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/file_io.h"

namespace strata::launch {
namespace {

absl::Status CheckEvalOptions(const EvalOptions& o) {
  if (o.seq_len < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("eval seq_len must be >= 1, got ", o.seq_len));
  }
  if (o.batch_size < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("eval batch_size must be >= 1, got ", o.batch_size));
  }
  if (o.num_batches < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--eval_batches must be >= 0 (0: all of the eval data), got ",
        o.num_batches));
  }
  return absl::OkStatus();
}

// Windows [first, first + count) (modulo num_windows) as int64 [count,
// seq_len + 1].
at::Tensor ReadWindows(const data::TokenSource& source, int64_t seq_len,
                       int64_t num_windows, int64_t first, int64_t count) {
  std::vector<int64_t> tokens(count * (seq_len + 1));
  for (int64_t i = 0; i < count; ++i) {
    const int64_t w = (first + i) % num_windows;
    source.Read(w * seq_len, seq_len + 1, tokens.data() + i * (seq_len + 1));
  }
  return at::from_blob(tokens.data(), {count, seq_len + 1}, at::kLong).clone();
}

}  // namespace

absl::StatusOr<EvalResult> EvaluateLoss(models::UnitModel& model,
                                        const data::TokenSource& source,
                                        const EvalOptions& options) {
  if (absl::Status s = CheckEvalOptions(options); !s.ok()) return s;
  const int64_t seq_len = options.seq_len;
  // As data::DistributedSampler cuts its source.
  const int64_t num_windows = (source.num_tokens() - 1) / seq_len;
  if (num_windows < 1) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "eval data %s has %d tokens: too few for one window of --seq_len + 1 "
        "= %d tokens",
        source.Describe(), source.num_tokens(), seq_len + 1));
  }
  const int64_t total_windows = options.num_batches > 0
                                    ? options.num_batches * options.batch_size
                                    : num_windows;
  const bool was_training = model.is_training();
  model.eval();
  at::NoGradGuard no_grad;
  EvalResult result;
  double weighted_loss = 0;
  for (int64_t first = 0; first < total_windows; first += options.batch_size) {
    const int64_t count = std::min(options.batch_size, total_windows - first);
    const at::Tensor batch =
        ReadWindows(source, seq_len, num_windows, first, count)
            .to(options.device);
    const double loss = model
                            .ForwardLoss(batch.narrow(1, 0, seq_len),
                                         batch.narrow(1, 1, seq_len))
                            .item<double>();
    // Exact in double: a float times an integer below 2^29.
    weighted_loss += loss * static_cast<double>(count * seq_len);
    result.tokens += count * seq_len;
    ++result.batches;
  }
  model.train(was_training);
  result.loss_nats = weighted_loss / static_cast<double>(result.tokens);
  result.perplexity = std::exp(result.loss_nats);
  return result;
}

std::string EvalLine(const EvalResult& r) {
  return absl::StrFormat(
      "eval: loss %.4f, perplexity %.2f over %d tokens (%d %s)", r.loss_nats,
      r.perplexity, r.tokens, r.batches, r.batches == 1 ? "batch" : "batches");
}

std::string EvalRecordJson(const EvalResult& r, const EvalRecordInfo& info) {
  // nlohmann writes doubles with enough digits to read back the same value.
  nlohmann::ordered_json record;
  record["loss"] = r.loss_nats;
  record["perplexity"] = r.perplexity;
  record["tokens"] = r.tokens;
  record["batches"] = r.batches;
  record["model"] = info.model;
  record["weights"] = info.weights;
  record["data"] = info.data;
  record["strategy"] = info.strategy;
  record["world_size"] = info.world_size;
  return record.dump();
}

absl::Status WriteEvalRecord(const std::string& path, const EvalResult& result,
                             const EvalRecordInfo& info) {
  return WriteFileAtomic(path, EvalRecordJson(result, info) + "\n");
}

}  // namespace strata::launch
