// Chaos: `train --nproc=N --max_restarts=3 --resume=auto` while the test
// SIGKILLs a random rank three times at random moments — in the middle of a
// checkpoint save (saves pause before their commit, --ckpt_test_pause_ms) or
// while training after one — for ddp at 2 ranks and fsdp at 3. The job
// survives every kill (one restart each) and its model.pt and the metrics of
// its last round are bitwise the uninterrupted run's. The choices are seeded;
// the moments depend on timing, which exactness must not.
// chaos_kill_points_test kills inside chosen phases (forward, backward,
// collective, sync and async saves) for the strategy combinations.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "base/testing/subprocess.h"
#include "launch/testing/run_output.h"
#include "launch/testing/train_runs.h"

namespace strata::launch {
namespace {

using ::strata::launch::testing::DropoutRunArgs;
using ::strata::launch::testing::ReadFile;
using ::strata::launch::testing::TempDir;
using ::strata::testing::RunResult;
using ::strata::testing::Subprocess;
using ::testing::HasSubstr;

constexpr int kSteps = 16;
constexpr int kKills = 3;
// Each wait of the test (a new round, a save, a commit).
constexpr absl::Duration kWait = absl::Seconds(60);

struct Config {
  std::string strategy;
  int nproc = 2;
  uint32_t seed = 0;
  std::string Name() const { return absl::StrCat(strategy, "_", nproc); }
};

// 16 steps of 6 sequences, a checkpoint every 2, dropout off, one metrics line
// per step, as `config`'s ranks; then `more`.
std::vector<std::string> Args(const std::string& out, const Config& config,
                              const std::vector<std::string>& more) {
  std::vector<std::string> flags = {
      absl::StrCat("--steps=", kSteps), "--save_every=2",
      // Splits over 2 and 3 ranks.
      "--global_batch=6", "--dropout=0", absl::StrCat("--nproc=", config.nproc),
      "--strategy=" + config.strategy, "--collective_timeout_s=60"};
  flags.insert(flags.end(), more.begin(), more.end());
  return DropoutRunArgs(out, flags);
}

// The live (not zombie) children of `parent`, from /proc.
std::vector<pid_t> LiveChildren(pid_t parent) {
  std::vector<pid_t> children;
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    int pid = 0;
    if (!absl::SimpleAtoi(entry.path().filename().string(), &pid)) continue;
    std::ifstream stat(entry.path() / "stat");
    std::string line;
    if (!std::getline(stat, line)) continue;
    // "<pid> (<comm>) <state> <ppid> ...": comm may hold spaces.
    const size_t close = line.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream rest(line.substr(close + 1));
    std::string state;
    pid_t ppid = 0;
    if (rest >> state >> ppid && ppid == parent && state != "Z") {
      children.push_back(pid);
    }
  }
  return children;
}

// Polls `done` every 10 ms until it holds or `kWait` passes.
bool WaitFor(const std::function<bool()>& done) {
  const absl::Time deadline = absl::Now() + kWait;
  while (!done()) {
    if (absl::Now() > deadline) return false;
    absl::SleepFor(absl::Milliseconds(10));
  }
  return true;
}

// The step `latest` under `ckpt` names, 0 without one.
int64_t LatestStep(const std::string& ckpt) {
  const std::string text = ReadFile(ckpt + "/latest");
  absl::string_view name = absl::StripAsciiWhitespace(text);
  int64_t step = 0;
  if (!absl::ConsumePrefix(&name, "step_") || !absl::SimpleAtoi(name, &step)) {
    return 0;
  }
  return step;
}

// Whether a save is in flight under `ckpt`: a step_*.tmp staging directory
// exists (its data is being written, or it pauses before its commit).
bool SaveInFlight(const std::string& ckpt) {
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(ckpt, ec)) {
    if (absl::EndsWith(entry.path().filename().string(), ".tmp")) return true;
  }
  return false;
}

// Removes the staging directories a killed save left under `ckpt` (the next
// save of that step would), so that SaveInFlight sees only new saves. Called
// when a round's ranks have just started, long before their first save.
void RemoveStaging(const std::string& ckpt) {
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(ckpt, ec)) {
    if (absl::EndsWith(entry.path().filename().string(), ".tmp")) {
      std::filesystem::remove_all(entry.path(), ec);
    }
  }
}

class ChaosTrainTest : public ::testing::TestWithParam<Config> {};

TEST_P(ChaosTrainTest, ThreeRandomKillsStillEndBitwiseExact) {
  const Config& config = GetParam();
  const std::string whole = TempDir("chaos_whole_" + config.Name());
  const RunResult uninterrupted =
      ::strata::testing::Run(Args(whole, config, {}), {}, absl::Seconds(120));
  ASSERT_EQ(uninterrupted.exit_code, 0) << uninterrupted.err;

  const std::string out = TempDir("chaos_" + config.Name());
  const std::string ckpt = out + "/checkpoints";
  Subprocess job(Args(out, config,
                      {"--resume=auto", absl::StrCat("--max_restarts=", kKills),
                       "--ckpt_test_pause_ms=300"}),
                 {}, absl::Seconds(240));
  std::mt19937 random(config.seed);
  std::set<pid_t> earlier;
  for (int kill = 0; kill < kKills; ++kill) {
    // A new round: every rank started, none of an earlier round.
    std::vector<pid_t> ranks;
    ASSERT_TRUE(WaitFor([&] {
      ranks = LiveChildren(job.pid());
      if (static_cast<int>(ranks.size()) != config.nproc) return false;
      for (pid_t pid : ranks) {
        if (earlier.count(pid) > 0) return false;
      }
      return true;
    })) << "kill "
        << kill << ": round " << kill << " never started";
    earlier.insert(ranks.begin(), ranks.end());
    RemoveStaging(ckpt);
    const int64_t resumed = LatestStep(ckpt);
    const bool mid_save = random() % 2 == 0;
    const pid_t victim = ranks[random() % ranks.size()];
    if (mid_save) {
      ASSERT_TRUE(WaitFor([&] { return SaveInFlight(ckpt); }))
          << "kill " << kill << ": no save began";
    } else {
      ASSERT_TRUE(WaitFor([&] { return LatestStep(ckpt) > resumed; }))
          << "kill " << kill << ": no checkpoint after step " << resumed;
    }
    ASSERT_LT(LatestStep(ckpt), kSteps) << "the run ended before kill " << kill;
    std::cerr << "kill " << kill << ": SIGKILL to pid " << victim << " "
              << (mid_save ? "during a save" : "after a commit")
              << ", latest step " << LatestStep(ckpt) << "\n";
    ASSERT_EQ(::kill(victim, SIGKILL), 0);
  }
  const RunResult result = job.Finish();
  ASSERT_EQ(result.exit_code, 0) << result.err;
  for (int restart = 1; restart <= kKills; ++restart) {
    EXPECT_THAT(result.err, HasSubstr(absl::StrCat("restart ", restart, "/",
                                                   kKills, ": rank ")));
  }
  testing::ExpectSameEnd(whole, out, kSteps);
}

INSTANTIATE_TEST_SUITE_P(Strategies, ChaosTrainTest,
                         ::testing::Values(Config{"ddp", 2, 1},
                                           Config{"fsdp", 3, 3}),
                         [](const ::testing::TestParamInfo<Config>& info) {
                           return info.param.Name();
                         });

}  // namespace
}  // namespace strata::launch
