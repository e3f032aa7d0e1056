// //launch/generate:strata_generate — samples a continuation of a prompt from a
// model's weights and prints the prompt and continuation: as text for --prompt
// (one token per byte, or through --tokenizer), as comma-separated ids for
// --prompt_tokens (decoded text with --tokenizer).
//
//   bazel run //launch/generate:strata_generate -- --model=gpt-tiny
//     --load_weights=out/train/model.pt --prompt="To be" --max_new_tokens=100
//   (one command line)
//
// The same seed gives the same tokens; --temperature=0 is greedy.
#include <gflags/gflags.h>
#include <glog/logging.h>

#include <iostream>
#include <string>

#include "base/help_flags.h"
#include "launch/generate/generate.h"

namespace {
const strata::launch::GenerateOptions kDefaults;
}  // namespace

DEFINE_string(model, kDefaults.model,
              "The model, as train's --model: a named config (gpt-tiny, "
              "llama-tiny, gpt2, llama-1b, ...) or a Hugging Face "
              "config.json or its directory.");
DEFINE_int64(vocab_size, kDefaults.vocab_size,
             "Vocabulary size when the weights were trained with another "
             "than the config's (train's --vocab_size); 0: the config's.");
DEFINE_string(load_weights, kDefaults.load_weights,
              "The weights (required): a Strata full or sharded checkpoint, "
              "a local checkpoint directory written by one process, a "
              "PyTorch state dict (train's model.pt), or Hugging Face "
              "safetensors (a file or directory).");
DEFINE_string(prompt, kDefaults.prompt,
              "Text prompt, one token per byte (models trained on "
              "--data=bytes); the output is text.");
DEFINE_string(prompt_tokens, kDefaults.prompt_tokens,
              "Comma-separated token ids (token-bin vocabularies); the "
              "output is ids.");
DEFINE_string(tokenizer, kDefaults.tokenizer,
              "Tokenizer file (tokenizer.json, encoder.json, *.tiktoken, "
              "*.model, or a directory holding one): --prompt is encoded "
              "with it and the output is decoded text.");
DEFINE_int64(max_new_tokens, kDefaults.max_new_tokens,
             "Tokens to generate after the prompt.");
DEFINE_double(temperature, kDefaults.temperature,
              "Softmax temperature; 0: greedy (argmax).");
DEFINE_int64(top_k, kDefaults.top_k,
             "Sample among the k most likely tokens; 0: all.");
DEFINE_uint64(seed, kDefaults.seed,
              "Seed of the sampling (the same seed, the same tokens).");
DEFINE_int32(threads, kDefaults.threads,
             "LibTorch intra-op threads; 0: LibTorch's default.");

int main(int argc, char** argv) {
  gflags::SetUsageMessage(
      "Samples a continuation of --prompt or --prompt_tokens from a model's "
      "--load_weights.");
  ::strata::NarrowHelp("launch/generate/generate_main", argc,
                       argv);  // --helpfull: every flag.
  gflags::ParseCommandLineFlags(&argc, &argv, /*remove_flags=*/true);
  google::InitGoogleLogging(argv[0]);
  FLAGS_logtostderr = true;
  if (argc > 1) {
    LOG(ERROR) << "unexpected argument '" << argv[1]
               << "': strata_generate takes only flags (see --help)";
    return 1;
  }
  strata::launch::GenerateOptions o;
  o.model = FLAGS_model;
  o.vocab_size = FLAGS_vocab_size;
  o.load_weights = FLAGS_load_weights;
  o.prompt = FLAGS_prompt;
  o.prompt_tokens = FLAGS_prompt_tokens;
  o.tokenizer = FLAGS_tokenizer;
  o.max_new_tokens = FLAGS_max_new_tokens;
  o.temperature = FLAGS_temperature;
  o.top_k = FLAGS_top_k;
  o.seed = FLAGS_seed;
  o.threads = FLAGS_threads;
  auto generation = strata::launch::Generate(o);
  if (!generation.ok()) {
    LOG(ERROR) << generation.status().message();
    return 1;
  }
  // The product, on stdout.
  std::cout << generation->Render() << std::endl;
  return 0;
}
