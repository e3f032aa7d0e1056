#include "serialization/testing/python_runner.h"

#include <sys/wait.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"

namespace strata::serialization::testing {
namespace {

std::string ShellQuote(const std::string& arg) {
  return absl::StrCat("'", absl::StrReplaceAll(arg, {{"'", "'\\''"}}), "'");
}

std::string ReadAll(const std::string& path) {
  std::ifstream file(path);
  std::stringstream contents;
  contents << file.rdbuf();
  return contents.str();
}

}  // namespace

absl::Status RunPython(const std::vector<std::string>& args,
                       const std::string& log_path) {
  std::string command = "OMP_NUM_THREADS=1 /usr/bin/python3";
  for (const std::string& arg : args) {
    absl::StrAppend(&command, " ", ShellQuote(arg));
  }
  absl::StrAppend(&command, " > ", ShellQuote(log_path), " 2>&1");
  const int status = std::system(command.c_str());
  if (status == 0) return absl::OkStatus();
  return absl::InternalError(
      absl::StrCat("`", command, "` failed (exit status ",
                   WIFEXITED(status) ? WEXITSTATUS(status) : status,
                   "); output:\n", ReadAll(log_path)));
}

std::string WhyTorchBelow(int major, int minor, const std::string& what,
                          const std::string& log_path) {
  const std::string out = log_path + ".version";
  const absl::Status run = RunPython(
      {"-c", absl::StrCat("import torch; open('", out,
                          "', 'w').write(torch.__version__.split('+')[0])")},
      log_path);
  if (!run.ok())
    return absl::StrCat("python3 with torch failed: ", run.message());
  const std::string version = ReadAll(out);
  const std::vector<std::string> parts = absl::StrSplit(version, '.');
  int found_major = 0, found_minor = 0;
  if (parts.size() < 2 || !absl::SimpleAtoi(parts[0], &found_major) ||
      !absl::SimpleAtoi(parts[1], &found_minor)) {
    return absl::StrCat("unreadable torch version '", version, "'");
  }
  if (found_major > major || (found_major == major && found_minor >= minor)) {
    return "";
  }
  return absl::StrCat("needs PyTorch >= ", major, ".", minor, " (", what,
                      "); found ", version);
}

absl::Status WriteTextFile(const std::string& path, const std::string& code) {
  std::ofstream file(path);
  file << code;
  file.close();
  if (!file) return absl::InternalError(absl::StrCat("cannot write ", path));
  return absl::OkStatus();
}

}  // namespace strata::serialization::testing
