#include "launch/generate/generate.h"

#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/from_blob.h>
#include <torch/csrc/autograd/grad_mode.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "base/status.h"
#include "checkpoint/model_weights.h"
#include "launch/config/flag_error.h"
#include "launch/config/train_options.h"
#include "models/config.h"
#include "models/factory.h"
#include "text/load_bpe_tokenizer.h"

namespace strata::launch {
namespace {

constexpr int64_t kByteVocab = 256;

absl::Status CheckSamplingOptions(const SamplingOptions& o) {
  if (o.max_new_tokens < 1) {
    return FlagError("max_new_tokens",
                     absl::StrCat("must be >= 1, got ", o.max_new_tokens));
  }
  if (!(std::isfinite(o.temperature) && o.temperature >= 0)) {
    return FlagError("temperature",
                     absl::StrCat("must be a finite number >= 0 (0: greedy), "
                                  "got ",
                                  o.temperature));
  }
  if (o.top_k < 0) {
    return FlagError("top_k",
                     absl::StrCat("must be >= 0 (0: all), got ", o.top_k));
  }
  return absl::OkStatus();
}

// A uniform double in [0, 1) from the top 53 bits of one draw.
double Uniform(std::mt19937_64& rng) {
  return static_cast<double>(rng() >> 11) * 0x1.0p-53;
}

// The next token from the last position's logits (`logits`, one per
// candidate id).
int64_t PickToken(const std::vector<double>& logits, const SamplingOptions& o,
                  std::mt19937_64& rng) {
  const int64_t n = static_cast<int64_t>(logits.size());
  // Ids by logit, largest first; ties by lower id.
  std::vector<int64_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  const auto before = [&](int64_t a, int64_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  };
  const int64_t keep = o.top_k > 0 ? std::min(o.top_k, n) : n;
  if (o.temperature == 0) {
    return *std::min_element(order.begin(), order.end(), before);
  }
  std::partial_sort(order.begin(), order.begin() + keep, order.end(), before);
  std::vector<double> weights(keep);
  const double top = logits[order[0]];
  double total = 0;
  for (int64_t i = 0; i < keep; ++i) {
    weights[i] = std::exp((logits[order[i]] - top) / o.temperature);
    total += weights[i];
  }
  const double u = Uniform(rng) * total;
  double cumulative = 0;
  for (int64_t i = 0; i < keep; ++i) {
    cumulative += weights[i];
    if (u < cumulative) return order[i];
  }
  return order[keep - 1];  // u within rounding of the total.
}

// The flag that gave the prompt.
const char* PromptFlag(const GenerateOptions& o) {
  return o.prompt.empty() ? "prompt_tokens" : "prompt";
}

}  // namespace

absl::StatusOr<std::vector<int64_t>> SampleTokens(
    models::UnitModel& model, int64_t context_tokens,
    const std::vector<int64_t>& prompt, const SamplingOptions& options) {
  STRATA_RETURN_IF_ERROR(CheckSamplingOptions(options));
  CHECK_GE(context_tokens, 1);
  if (prompt.empty()) return FlagError("prompt", "is empty");
  if (static_cast<int64_t>(prompt.size()) > context_tokens) {
    return FlagError("prompt",
                     absl::StrFormat("%d tokens is longer than the model's "
                                     "context of %d tokens; shorten the prompt",
                                     prompt.size(), context_tokens));
  }
  const bool was_training = model.is_training();
  model.eval();
  at::NoGradGuard no_grad;
  std::mt19937_64 rng(options.seed);
  std::vector<int64_t> sequence = prompt;
  std::vector<int64_t> generated;
  while (static_cast<int64_t>(generated.size()) < options.max_new_tokens) {
    const int64_t window = std::min<int64_t>(
        context_tokens, static_cast<int64_t>(sequence.size()));
    const at::Tensor tokens =
        at::from_blob(sequence.data() + sequence.size() - window, {1, window},
                      at::kLong)
            .clone();
    at::Tensor last;
    const absl::Status forward = StatusFromCall("model forward", [&] {
      last = model.Forward(tokens)
                 .select(1, window - 1)
                 .squeeze(0)
                 .to(at::kCPU, at::kDouble)
                 .contiguous();
    });
    if (!forward.ok()) {
      model.train(was_training);
      return forward;
    }
    int64_t candidates = last.size(0);
    if (options.candidate_vocab > 0) {
      candidates = std::min(candidates, options.candidate_vocab);
    }
    const double* data = last.data_ptr<double>();
    const std::vector<double> logits(data, data + candidates);
    const int64_t next = PickToken(logits, options, rng);
    sequence.push_back(next);
    generated.push_back(next);
  }
  model.train(was_training);
  return generated;
}

std::string Generation::Render() const {
  if (decoded.has_value()) return *decoded;
  if (!text) {
    std::vector<int64_t> all = prompt;
    all.insert(all.end(), continuation.begin(), continuation.end());
    return absl::StrJoin(all, ",");
  }
  std::string bytes;
  for (const std::vector<int64_t>* part : {&prompt, &continuation}) {
    for (int64_t t : *part) {
      CHECK(t >= 0 && t < kByteVocab) << "byte-level token " << t;
      bytes.push_back(static_cast<char>(static_cast<unsigned char>(t)));
    }
  }
  return bytes;
}

absl::Status ValidateGenerateOptions(const GenerateOptions& o) {
  if (o.load_weights.empty()) {
    return FlagError("load_weights",
                     "is required: the weights to sample from (a Strata full "
                     "or sharded checkpoint, a local checkpoint directory "
                     "written by one process, a PyTorch state dict such as "
                     "train's model.pt, or Hugging Face safetensors)");
  }
  if (o.prompt.empty() == o.prompt_tokens.empty()) {
    return absl::InvalidArgumentError(
        "--prompt or --prompt_tokens: give exactly one (--prompt: text, one "
        "token per byte; --prompt_tokens: comma-separated ids)");
  }
  if (auto config = ModelConfigOf(o.model); !config.ok()) {
    return config.status();
  }
  if (o.vocab_size < 0) {
    return FlagError("vocab_size", absl::StrCat("must be >= 0 (0: the "
                                                "model's), got ",
                                                o.vocab_size));
  }
  if (o.threads < 0) {
    return FlagError(
        "threads", absl::StrCat("must be >= 0 (0: default), got ", o.threads));
  }
  SamplingOptions sampling;
  sampling.max_new_tokens = o.max_new_tokens;
  sampling.temperature = o.temperature;
  sampling.top_k = o.top_k;
  return CheckSamplingOptions(sampling);
}

absl::StatusOr<std::vector<int64_t>> PromptTokens(const GenerateOptions& o,
                                                  int64_t vocab_size) {
  std::vector<int64_t> ids;
  if (!o.prompt.empty()) {
    if (vocab_size < kByteVocab) {
      return FlagError(
          "prompt",
          absl::StrFormat("byte-level text needs a vocabulary of at least "
                          "256 (one token per byte); model '%s' has %d: use "
                          "--prompt_tokens",
                          o.model, vocab_size));
    }
    for (unsigned char c : o.prompt) ids.push_back(c);
    return ids;
  }
  for (absl::string_view part : absl::StrSplit(o.prompt_tokens, ',')) {
    int64_t id = 0;
    if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(part), &id) || id < 0 ||
        id >= vocab_size) {
      return FlagError(
          "prompt_tokens",
          absl::StrFormat("'%s' (entry %d) is not a token id in [0, %d), the "
                          "vocabulary of model '%s'",
                          part, ids.size(), vocab_size, o.model));
    }
    ids.push_back(id);
  }
  return ids;
}

absl::StatusOr<Generation> Generate(const GenerateOptions& o) {
  STRATA_RETURN_IF_ERROR(ValidateGenerateOptions(o));
  STRATA_ASSIGN_OR_RETURN(models::ModelConfig config, ModelConfigOf(o.model));
  if (o.vocab_size > 0) config.vocab_size = o.vocab_size;
  STRATA_RETURN_IF_ERROR(models::ValidateConfig(config));
  Generation generation;
  generation.text = !o.prompt.empty();
  std::unique_ptr<text::BpeTokenizer> tokenizer;
  if (!o.tokenizer.empty()) {
    auto loaded = text::LoadBpeTokenizer(o.tokenizer);
    if (!loaded.ok()) return FlagError("tokenizer", loaded.status().message());
    tokenizer = *std::move(loaded);
    if (tokenizer->vocab_size() > config.vocab_size) {
      return FlagError(
          "tokenizer",
          absl::StrFormat("%s has %d ids but model '%s' has a vocabulary of "
                          "%d (--vocab_size)",
                          tokenizer->Describe(), tokenizer->vocab_size(),
                          o.model, config.vocab_size));
    }
  }
  if (tokenizer != nullptr && !o.prompt.empty()) {
    text::EncodeOptions encode;
    encode.add_template_tokens = true;
    for (const int32_t id : tokenizer->Encode(o.prompt, encode)) {
      generation.prompt.push_back(id);
    }
  } else {
    STRATA_ASSIGN_OR_RETURN(generation.prompt,
                            PromptTokens(o, config.vocab_size));
  }
  if (static_cast<int64_t>(generation.prompt.size()) > config.seq_len) {
    return FlagError(
        PromptFlag(o),
        absl::StrFormat("%d tokens is longer than model '%s''s "
                        "context of %d tokens; shorten it",
                        generation.prompt.size(), o.model, config.seq_len));
  }
  const int64_t candidates = tokenizer != nullptr ? tokenizer->vocab_size()
                             : generation.text    ? kByteVocab
                                                  : config.vocab_size;
  if (o.top_k > candidates) {
    return FlagError("top_k", absl::StrFormat("%d is more than the %d "
                                              "candidate tokens",
                                              o.top_k, candidates));
  }
  if (o.threads > 0) at::set_num_threads(o.threads);

  models::BuildOptions build;
  build.seed = o.seed;
  STRATA_ASSIGN_OR_RETURN(std::shared_ptr<models::UnitModel> model,
                          models::BuildModel(config, build));
  // The model's own parameters take the weights, from any format train's
  // --load_weights reads (a checkpoint's model section holds parameters).
  std::vector<std::pair<std::string, at::Tensor>> parameters;
  for (const auto& item : model->named_parameters()) {
    parameters.emplace_back(item.key(), item.value());
  }
  STRATA_RETURN_IF_ERROR(
      Annotate(checkpoint::LoadModelWeights(o.load_weights, config, parameters),
               absl::StrCat("--load_weights=", o.load_weights)));

  SamplingOptions sampling;
  sampling.max_new_tokens = o.max_new_tokens;
  sampling.temperature = o.temperature;
  sampling.top_k = o.top_k;
  sampling.seed = o.seed;
  sampling.candidate_vocab = candidates;
  STRATA_ASSIGN_OR_RETURN(
      generation.continuation,
      SampleTokens(*model, config.seq_len, generation.prompt, sampling));
  if (tokenizer != nullptr) {
    std::vector<int32_t> ids(generation.prompt.begin(),
                             generation.prompt.end());
    ids.insert(ids.end(), generation.continuation.begin(),
               generation.continuation.end());
    auto decoded = tokenizer->Decode(ids);
    if (!decoded.ok())
      return FlagError("tokenizer", decoded.status().message());
    generation.decoded = *std::move(decoded);
  }
  return generation;
}

}  // namespace strata::launch
