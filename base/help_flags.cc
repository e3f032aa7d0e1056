#include "base/help_flags.h"

#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"

namespace strata {

void NarrowHelp(absl::string_view source_path, int argc, char** argv) {
  // Leaked on purpose: argv points into it until the process exits.
  static std::string* const narrowed = new std::string();
  *narrowed = absl::StrCat("--helpmatch=", source_path);
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--") == 0) return;  // The flags' end.
    if (std::strcmp(argv[i], "--help") == 0 ||
        std::strcmp(argv[i], "-help") == 0) {
      argv[i] = narrowed->data();
    }
  }
}

}  // namespace strata
