// Sampling tokens from a model: the library behind
// //launch/generate:strata_generate.
//
// SampleTokens continues a prompt one token at a time: each step runs the
// model on the last (at most context) tokens and picks the next token from
// the logits of the last position: the argmax with temperature 0 (the
// lowest id among equal maxima), otherwise a draw from
// softmax(logits / temperature) restricted to the top_k largest logits
// (ties by lower id; 0: all). Draws use std::mt19937_64 seeded with `seed`
// and 53-bit uniforms, so a seed gives the same tokens on every machine
// (for the same logits). No KV cache: each step is a full forward over the
// window, fine for the small models this is meant for.
//
// Generate is the whole binary: options (one field per flag) -> model ->
// weights (--load_weights: what train's --load_weights accepts) -> prompt
// tokens -> sampled continuation.
#ifndef STRATA_LAUNCH_GENERATE_GENERATE_H_
#define STRATA_LAUNCH_GENERATE_GENERATE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "models/unit.h"

namespace strata::launch {

struct SamplingOptions {
  int64_t max_new_tokens = 64;
  double temperature = 1.0;  // 0: greedy.
  int64_t top_k = 0;         // 0: every candidate.
  uint64_t seed = 1;
  // Candidates are ids [0, candidate_vocab) (byte-level text: 256); 0: the
  // whole vocabulary of the logits.
  int64_t candidate_vocab = 0;
};

// The max_new_tokens tokens that follow `prompt` (ids of `model`'s
// vocabulary, 1 to context_tokens of them). The model runs in eval mode
// without gradients (its mode is restored); the window slides once the
// sequence outgrows context_tokens. InvalidArgument naming the flag
// (--max_new_tokens, --temperature, --top_k, --prompt) for bad options or
// a prompt that is empty or longer than context_tokens.
absl::StatusOr<std::vector<int64_t>> SampleTokens(
    models::UnitModel& model, int64_t context_tokens,
    const std::vector<int64_t>& prompt, const SamplingOptions& options);

// The flags of strata_generate (launch/generate/generate_main.cc), with their
// names.
struct GenerateOptions {
  // A named config (models/config.h) or a Hugging Face config.json or its
  // directory, as train's --model (ModelConfigOf).
  std::string model = "gpt-tiny";
  int64_t vocab_size = 0;    // 0: the config's.
  std::string load_weights;  // Required.
  // Exactly one: text (bytes, each byte a token: a vocabulary of at least
  // 256; the continuation is drawn among ids < 256), or comma-separated ids.
  std::string prompt;
  std::string prompt_tokens;
  // A tokenizer file (text/load_tokenizer.h): --prompt is encoded with it
  // (with the model's template tokens, Llama's BOS) and the output is the
  // decoded text of the prompt and continuation; candidates are its ids.
  std::string tokenizer;
  int64_t max_new_tokens = 64;
  double temperature = 1.0;
  int64_t top_k = 0;
  uint64_t seed = 1;
  int threads = 1;  // LibTorch intra-op threads; 0: LibTorch's default.
};

struct Generation {
  bool text = false;  // --prompt: print as bytes.
  std::vector<int64_t> prompt;
  std::vector<int64_t> continuation;
  // With --tokenizer: the prompt and continuation decoded.
  std::optional<std::string> decoded;
  // The prompt and continuation: `decoded` with --tokenizer, bytes with
  // --prompt, else the ids comma-separated.
  std::string Render() const;
};

// Checks the options that need no model; errors name the flag.
absl::Status ValidateGenerateOptions(const GenerateOptions& options);

// The prompt's ids for a model of `vocab_size` tokens; errors name --prompt
// or --prompt_tokens (a bad id: which, and the range).
absl::StatusOr<std::vector<int64_t>> PromptTokens(
    const GenerateOptions& options, int64_t vocab_size);

// Validates, builds the model, checks the prompt against its vocabulary and
// context (before loading anything), loads --load_weights and samples.
absl::StatusOr<Generation> Generate(const GenerateOptions& options);

}  // namespace strata::launch

#endif  // STRATA_LAUNCH_GENERATE_GENERATE_H_
