// make_token_bin: tokenises text files into a nanoGPT token file (flat
// little-endian token ids), for training with --data=uint16|uint32.
//
//   make_token_bin --input=shakespeare.txt --output=train.bin --dtype=uint16
//   make_token_bin --tokenizer=gpt2/tokenizer.json --input=a.txt,b.txt
//     --output=train.bin   (one command line)
//
// Without --tokenizer each byte becomes its token id (vocabulary 256). With
// --tokenizer (tokenizer.json, encoder.json, *.tiktoken, *.model or a
// directory: text/load_tokenizer.h) each --input file is a document, encoded
// on --threads threads (text/chunked_encode.h: the same ids for any count)
// and followed by the tokenizer's end-of-text token (--end_of_text). The
// output is written to a temporary file beside it and renamed into place, so
// an existing file is replaced only by a complete one.

#include <gflags/gflags.h>
#include <glog/logging.h>

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_split.h"
#include "base/help_flags.h"
#include "data/file_sources.h"
#include "data/tokenized_text.h"
#include "text/load_tokenizer.h"

DEFINE_string(input, "",
              "Text file(s) to tokenise, comma-separated (several only with "
              "--tokenizer).");
DEFINE_string(output, "",
              "Token file to write (nanoGPT .bin layout); replaced atomically "
              "if it exists.");
DEFINE_string(dtype, "uint16",
              "Width of each token id in --output: uint16 or uint32.");
DEFINE_string(tokenizer, "",
              "Tokenizer file (tokenizer.json, encoder.json, *.tiktoken, "
              "*.model, or a directory holding one); empty: one token per "
              "byte.");
DEFINE_int32(threads, 0, "Encoding threads with --tokenizer; 0: every core.");
DEFINE_bool(end_of_text, true,
            "With --tokenizer: the end-of-text token after each input file.");

namespace {

constexpr char kUsage[] =
    "Tokenises text files into a nanoGPT token file.\n"
    "Usage: make_token_bin --input=text.txt[,more.txt] --output=out.bin "
    "[--tokenizer=tokenizer.json] [--dtype=uint16|uint32] [--threads=N]";

int Run(int argc, char** argv) {
  if (argc > 1) {
    LOG(ERROR) << "unexpected argument '" << argv[1]
               << "': make_token_bin takes only flags (see --help)";
    return 2;
  }
  if (FLAGS_input.empty()) {
    LOG(ERROR) << "--input is empty, expected the path of a text file";
    return 2;
  }
  if (FLAGS_output.empty()) {
    LOG(ERROR) << "--output is empty, expected the path of the token file "
                  "to write";
    return 2;
  }
  if (FLAGS_threads < 0) {
    LOG(ERROR) << "--threads=" << FLAGS_threads << " is invalid: expected "
               << ">= 0 (0: every core)";
    return 2;
  }
  absl::StatusOr<strata::data::TokenBinDtype> dtype =
      strata::data::ParseTokenBinDtype(FLAGS_dtype);
  if (!dtype.ok()) {
    LOG(ERROR) << "--dtype=" << FLAGS_dtype
               << " is invalid: " << dtype.status().message();
    return 2;
  }
  const std::vector<std::string> inputs = absl::StrSplit(FLAGS_input, ',');
  int64_t vocab = 256;
  absl::Status written;
  if (FLAGS_tokenizer.empty()) {
    if (inputs.size() != 1) {
      LOG(ERROR) << "--input names " << inputs.size()
                 << " files; byte-level tokenisation takes one (several "
                    "need --tokenizer)";
      return 2;
    }
    written = strata::data::TextFileToTokenBin(inputs[0], FLAGS_output, *dtype);
  } else {
    auto tokenizer = strata::text::LoadTokenizer(FLAGS_tokenizer);
    if (!tokenizer.ok()) {
      LOG(ERROR) << "--tokenizer: " << tokenizer.status().message();
      return 2;
    }
    LOG(INFO) << "Tokenizer: " << (*tokenizer)->Describe();
    vocab = (*tokenizer)->vocab_size();
    strata::data::TokenizeOptions options;
    options.num_threads =
        FLAGS_threads > 0
            ? FLAGS_threads
            : std::max(1,
                       static_cast<int>(std::thread::hardware_concurrency()));
    options.end_of_text_after_documents = FLAGS_end_of_text;
    written = strata::data::TextFilesToTokenBin(inputs, FLAGS_output, *dtype,
                                                **tokenizer, options);
  }
  if (!written.ok()) {
    LOG(ERROR) << "make_token_bin failed: " << written;
    return 1;
  }
  // Reopen the result: checks it and gives the token count.
  auto tokens = strata::data::OpenTokenBin(FLAGS_output, *dtype, vocab);
  if (!tokens.ok()) {
    LOG(ERROR) << "wrote " << FLAGS_output
               << " but cannot read it back: " << tokens.status();
    return 1;
  }
  LOG(INFO) << "Wrote " << (*tokens)->num_tokens() << " "
            << strata::data::TokenBinDtypeName(*dtype) << " tokens (vocab "
            << vocab << ") from " << FLAGS_input << " to " << FLAGS_output;
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  FLAGS_logtostderr = true;
  gflags::SetUsageMessage(kUsage);
  ::strata::NarrowHelp("data/make_token_bin_main", argc,
                       argv);  // --helpfull: every flag.
  gflags::ParseCommandLineFlags(&argc, &argv, /*remove_flags=*/true);
  google::InitGoogleLogging(argv[0]);
  return Run(argc, argv);
}
