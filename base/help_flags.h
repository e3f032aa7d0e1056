// --help for a binary's own flags. gflags' --help lists every flag linked in,
// and LibTorch (caffe2) and glog bring pages of their own before a binary's;
// NarrowHelp turns --help into gflags' --helpmatch=<the binary's source
// folder>, so it lists the flags defined there (gflags' --helpfull still
// lists them all). Touches only argv: call it in main() before
// gflags::ParseCommandLineFlags.
#ifndef STRATA_BASE_HELP_FLAGS_H_
#define STRATA_BASE_HELP_FLAGS_H_

#include "absl/strings/string_view.h"

namespace strata {

// Replaces each "--help" or "-help" in argv[1..argc), up to a "--" (where
// gflags stops reading flags), by
// "--helpmatch=<source_path>": source_path is a part of the path of the files
// that define the binary's flags (e.g. "launch/train/"), as gflags records it
// (__FILE__). The replacement strings live until the process exits. Not
// thread-safe; call once, from main().
void NarrowHelp(absl::string_view source_path, int argc, char** argv);

}  // namespace strata

#endif  // STRATA_BASE_HELP_FLAGS_H_
