#include "launch/process_state.h"

#include <errno.h>
#include <string.h>

#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"

namespace strata::launch {

absl::StatusOr<char> ParseProcStatState(absl::string_view stat) {
  const size_t close = stat.rfind(')');
  if (close == absl::string_view::npos || close + 2 >= stat.size() ||
      stat[close + 1] != ' ') {
    return absl::InvalidArgumentError(
        absl::StrCat("/proc/<pid>/stat: expected '<pid> (<name>) <state> ...', "
                     "got '",
                     stat.substr(0, 80), "'"));
  }
  return stat[close + 2];
}

absl::StatusOr<char> ProcessState(pid_t pid) {
  const std::string path = absl::StrCat("/proc/", pid, "/stat");
  std::ifstream file(path);
  if (!file) {
    return absl::NotFoundError(
        absl::StrCat("cannot read ", path, ": ", strerror(errno)));
  }
  std::stringstream text;
  text << file.rdbuf();
  return ParseProcStatState(text.str());
}

bool IsStoppedState(char state) { return state == 'T' || state == 't'; }

std::string DescribeProcessState(char state) {
  const char* name = "unknown";
  switch (state) {
    case 'R':
      name = "running";
      break;
    case 'S':
      name = "sleeping";
      break;
    case 'D':
      name = "in uninterruptible sleep";
      break;
    case 'T':
      name = "stopped";
      break;
    case 't':
      name = "stopped by a tracer";
      break;
    case 'Z':
      name = "zombie";
      break;
    case 'X':
      name = "dead";
      break;
    case 'I':
      name = "idle";
      break;
  }
  return absl::StrCat(std::string(1, state), " (", name, ")");
}

}  // namespace strata::launch
