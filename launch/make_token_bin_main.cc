// make_token_bin: tokenises a text file byte by byte into a nanoGPT token
// file (flat little-endian token ids), for training with --data=token_bin.
//
//   make_token_bin --input=shakespeare.txt --output=train.bin --dtype=uint16
//
// Each byte becomes its token id (vocabulary 256). The output is written to a
// temporary file beside it and renamed into place, so an existing file is
// replaced only by a complete one.

#include <gflags/gflags.h>
#include <glog/logging.h>

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "data/file_sources.h"

DEFINE_string(input, "", "Text file to tokenise; each byte is one token.");
DEFINE_string(output, "",
              "Token file to write (nanoGPT .bin layout); replaced atomically "
              "if it exists.");
DEFINE_string(dtype, "uint16",
              "Width of each token id in --output: uint16 or uint32.");

namespace {

constexpr char kUsage[] =
    "Tokenises a text file byte by byte into a nanoGPT token file.\n"
    "Usage: make_token_bin --input=text.txt --output=out.bin "
    "[--dtype=uint16|uint32]";

int Run(int argc, char** argv) {
  if (argc > 1) {
    LOG(ERROR) << "unexpected argument '" << argv[1]
               << "': make_token_bin takes only --input, --output and "
                  "--dtype";
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
  absl::StatusOr<strata::data::TokenBinDtype> dtype =
      strata::data::ParseTokenBinDtype(FLAGS_dtype);
  if (!dtype.ok()) {
    LOG(ERROR) << "--dtype=" << FLAGS_dtype
               << " is invalid: " << dtype.status().message();
    return 2;
  }
  absl::Status written =
      strata::data::TextFileToTokenBin(FLAGS_input, FLAGS_output, *dtype);
  if (!written.ok()) {
    LOG(ERROR) << "make_token_bin failed: " << written;
    return 1;
  }
  // Reopen the result: checks it and gives the token count.
  auto tokens = strata::data::OpenTokenBin(FLAGS_output, *dtype, 256);
  if (!tokens.ok()) {
    LOG(ERROR) << "wrote " << FLAGS_output
               << " but cannot read it back: " << tokens.status();
    return 1;
  }
  LOG(INFO) << "Wrote " << (*tokens)->num_tokens() << " "
            << strata::data::TokenBinDtypeName(*dtype) << " tokens (vocab 256)"
            << " from " << FLAGS_input << " to " << FLAGS_output;
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  FLAGS_logtostderr = true;
  gflags::SetUsageMessage(kUsage);
  gflags::ParseCommandLineFlags(&argc, &argv, /*remove_flags=*/true);
  google::InitGoogleLogging(argv[0]);
  return Run(argc, argv);
}
