// Encode throughput on one thread: Strata's byte-level BPE against the npm
// tiktoken package (Rust's tiktoken compiled to WebAssembly, run by
// Node.js; benchmarks/node/tiktoken_peer.js), on the same text, side by
// side in one run: alternating Strata / tiktoken for --repetitions rounds,
// medians reported. Both encode without special tokens (encode_ordinary)
// and must give the same number of tokens.
//
//   (cd /tmp/npm && npm install tiktoken)
//   bazel run //benchmarks:tokenizer_throughput --
//   --modules=/tmp/npm/node_modules
//
// The corpus (--corpus, default: the files of /usr/share/common-licenses,
// concatenated) is encoded repeatedly for at least --min_seconds a sample.
#include <dirent.h>
#include <gflags/gflags.h>
#include <glog/logging.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "base/file_io.h"
#include "text/load_tokenizer.h"

DEFINE_string(modules, "",
              "node_modules directory holding the npm tiktoken package "
              "(required).");
DEFINE_string(node, "/usr/bin/node", "Node.js.");
DEFINE_string(peer, "benchmarks/node/tiktoken_peer.js",
              "The tiktoken peer (path relative to the runfiles root).");
DEFINE_string(cases,
              "text/testdata/gpt2/tokenizer.json=gpt2,"
              "text/testdata/cl100k_base.tiktoken=cl100k_base",
              "Comma-separated <Strata tokenizer file>=<tiktoken encoding> "
              "pairs (files relative to the runfiles root).");
DEFINE_string(corpus, "",
              "Text file to encode; empty: /usr/share/common-licenses/* "
              "concatenated.");
DEFINE_double(min_seconds, 2.0, "Encoding time of each sample.");
DEFINE_int32(repetitions, 5, "Alternating Strata / tiktoken samples.");

namespace {

using Clock = std::chrono::steady_clock;

std::string Runfile(const std::string& path) {
  const char* dir = getenv("RUNFILES_DIR");
  return dir != nullptr ? absl::StrCat(dir, "/strata/", path) : path;
}

std::string CommonLicenses() {
  const std::string dir = "/usr/share/common-licenses";
  std::vector<std::string> names;
  DIR* d = opendir(dir.c_str());
  CHECK(d != nullptr) << "cannot open " << dir << "; give --corpus";
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] != '.') names.emplace_back(e->d_name);
  }
  closedir(d);
  std::sort(names.begin(), names.end());
  std::string text;
  for (const std::string& n : names) {
    absl::StatusOr<std::string> f =
        strata::ReadWholeFile(absl::StrCat(dir, "/", n));
    if (f.ok()) text += *f;
  }
  return text;
}

struct Sample {
  double mb_per_s;
  int64_t tokens;
};

Sample RunStrata(const strata::text::Tokenizer& t, const std::string& text) {
  strata::text::EncodeOptions options;
  options.special_tokens_in_text = false;
  std::vector<int32_t> ids;
  t.Encode(text, options, &ids);  // Warm-up.
  int rounds = 0;
  const Clock::time_point start = Clock::now();
  double seconds = 0;
  while (seconds < FLAGS_min_seconds) {
    ids.clear();
    t.Encode(text, options, &ids);
    ++rounds;
    seconds = std::chrono::duration<double>(Clock::now() - start).count();
  }
  return {text.size() * rounds / seconds / 1e6,
          static_cast<int64_t>(ids.size())};
}

Sample RunPeer(const std::string& encoding, const std::string& corpus_path) {
  const std::string command =
      absl::StrCat(FLAGS_node, " ", Runfile(FLAGS_peer), " ", FLAGS_modules,
                   " ", encoding, " ", corpus_path, " ", FLAGS_min_seconds);
  FILE* pipe = popen(command.c_str(), "r");
  CHECK(pipe != nullptr) << command;
  std::string out;
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof(buf), pipe)) out.append(buf, n);
  CHECK_EQ(pclose(pipe), 0) << "the peer failed: " << command << "\n" << out;
  // {"mb_per_s":12.3,"tokens":456,"seconds":2.0}
  Sample s{};
  for (absl::string_view field : absl::StrSplit(out, ',')) {
    const std::vector<absl::string_view> kv = absl::StrSplit(field, ':');
    if (kv.size() != 2) continue;
    absl::string_view value = kv[1];
    value = absl::StripSuffix(absl::StripSuffix(value, "\n"), "}");
    if (absl::StrContains(kv[0], "mb_per_s")) {
      CHECK(absl::SimpleAtod(value, &s.mb_per_s)) << out;
    } else if (absl::StrContains(kv[0], "tokens")) {
      CHECK(absl::SimpleAtoi(value, &s.tokens)) << out;
    }
  }
  return s;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  FLAGS_logtostderr = true;
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  google::InitGoogleLogging(argv[0]);
  if (FLAGS_modules.empty()) {
    LOG(ERROR) << "--modules is empty; expected the node_modules directory of "
                  "`npm install tiktoken`";
    return 2;
  }
  std::string corpus_path = FLAGS_corpus;
  std::string text;
  if (corpus_path.empty()) {
    text = CommonLicenses();
    corpus_path = absl::StrCat(getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp",
                               "/tokenizer_throughput_corpus.txt");
    CHECK(strata::WriteFileAtomic(corpus_path, text).ok());
  } else {
    absl::StatusOr<std::string> f = strata::ReadWholeFile(corpus_path);
    CHECK(f.ok()) << f.status();
    text = *std::move(f);
  }
  std::printf(
      "corpus: %s, %zu bytes; one thread each, %d alternating "
      "samples of >= %.1f s, medians\n",
      FLAGS_corpus.empty() ? "/usr/share/common-licenses/*"
                           : FLAGS_corpus.c_str(),
      text.size(), FLAGS_repetitions, FLAGS_min_seconds);
  std::printf("%-34s %-12s %10s %10s %8s\n", "Strata tokenizer", "tiktoken",
              "Strata MB/s", "tiktoken MB/s", "ratio");
  for (absl::string_view c : absl::StrSplit(FLAGS_cases, ',')) {
    const std::vector<std::string> pair = absl::StrSplit(c, '=');
    CHECK_EQ(pair.size(), 2u) << "--cases: '" << c << "'";
    auto tokenizer = strata::text::LoadTokenizer(Runfile(pair[0]));
    CHECK(tokenizer.ok()) << tokenizer.status();
    std::vector<double> ours, theirs;
    for (int r = 0; r < FLAGS_repetitions; ++r) {
      const Sample a = RunStrata(**tokenizer, text);
      const Sample b = RunPeer(pair[1], corpus_path);
      CHECK_EQ(a.tokens, b.tokens)
          << "Strata and tiktoken disagree on the token count";
      ours.push_back(a.mb_per_s);
      theirs.push_back(b.mb_per_s);
    }
    std::printf("%-34s %-12s %10.2f %10.2f %7.2fx\n",
                pair[0].substr(pair[0].rfind('/') + 1).c_str(), pair[1].c_str(),
                Median(ours), Median(theirs), Median(ours) / Median(theirs));
  }
  return 0;
}
