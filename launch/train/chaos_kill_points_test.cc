// Chaos at chosen moments: `train --nproc=N --max_restarts=4 --resume=auto`
// whose ranks SIGKILL themselves four times, once in each restart round, at
// moments a seeded schedule picks (--test_kill_at,
// launch/train/test_faults.h): inside a forward, a backward, a collective,
// and a synchronous or an asynchronous checkpoint save, each at a chosen step,
// rank and occurrence. For ddp, zero2 and fsdp at 2 ranks and fsdp at 3, with
// dropout on and off, the run finishes and its model.pt and the metrics of its
// last round are bitwise the uninterrupted run's. (chaos_train_test kills from
// outside, at timing-dependent moments.)
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <iostream>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "base/testing/subprocess.h"
#include "launch/testing/run_output.h"
#include "launch/testing/train_runs.h"

namespace strata::launch {
namespace {

using ::strata::launch::testing::DropoutRunArgs;
using ::strata::launch::testing::ExpectSameEnd;
using ::strata::launch::testing::TempDir;
using ::strata::testing::RunResult;
using ::testing::HasSubstr;

constexpr int kSteps = 16;

struct PointConfig {
  std::string strategy;
  int nproc = 2;
  bool dropout = false;
  bool async_save = false;
  uint32_t seed = 0;
  std::string Name() const {
    return absl::StrCat(strategy, "_", nproc, dropout ? "_dropout" : "",
                        async_save ? "_async" : "_sync");
  }
};

// One kill per restart round: rank `rank` dies at the `nth` time it reaches
// `phase` in step `step`.
struct Kill {
  std::string phase;
  int step = 0;
  int nth = 1;
  int rank = 0;
  std::string At() const { return absl::StrCat(phase, ":", step, ":", nth); }
};

// The seeded schedule: every phase the run has (forward, backward,
// collective, and save or async_save) once, in a shuffled order, the k-th in
// steps [4k, 4k + 4). Each round's kill thus comes after the checkpoint the
// round resumed from (which is at or before the previous kill's step). A
// save kill names an odd step: its save (--save_every=2) follows it. Every
// step runs at least 3 unit forwards and backwards (embedding, blocks, head)
// and 2 collectives, so the chosen `nth` exists.
std::vector<Kill> Schedule(const PointConfig& config) {
  std::mt19937 random(config.seed);
  std::vector<std::string> phases = {"forward", "backward", "collective",
                                     config.async_save ? "async_save" : "save"};
  for (size_t i = phases.size() - 1; i > 0; --i) {
    std::swap(phases[i], phases[random() % (i + 1)]);
  }
  const int span = kSteps / static_cast<int>(phases.size());
  std::vector<Kill> kills;
  for (size_t k = 0; k < phases.size(); ++k) {
    Kill kill;
    kill.phase = phases[k];
    const int first = static_cast<int>(k) * span;
    if (absl::EndsWith(kill.phase, "save")) {
      kill.step = first + 1 + 2 * static_cast<int>(random() % (span / 2));
    } else {
      kill.step = first + static_cast<int>(random() % span);
      kill.nth =
          1 + static_cast<int>(random() % (kill.phase == "collective" ? 2 : 3));
    }
    kill.rank = static_cast<int>(random() % config.nproc);
    kills.push_back(kill);
  }
  return kills;
}

// kSteps steps of 6 sequences (they split over 2 and 3 ranks), a checkpoint
// every 2, one metrics line per step, as `config`'s ranks; then `more`.
std::vector<std::string> PointArgs(const std::string& out,
                                   const PointConfig& config,
                                   const std::vector<std::string>& more) {
  std::vector<std::string> flags = {
      absl::StrCat("--steps=", kSteps),
      "--save_every=2",
      "--global_batch=6",
      config.dropout ? "--dropout=0.1" : "--dropout=0",
      config.async_save ? "--async_save=true" : "--async_save=false",
      absl::StrCat("--nproc=", config.nproc),
      "--strategy=" + config.strategy,
      "--collective_timeout_s=60"};
  flags.insert(flags.end(), more.begin(), more.end());
  return DropoutRunArgs(out, flags);
}

class ChaosKillPointTest : public ::testing::TestWithParam<PointConfig> {};

TEST_P(ChaosKillPointTest, KillsInEveryPhaseStillEndBitwiseExact) {
  const PointConfig& config = GetParam();
  const std::string whole = TempDir("chaos_points_whole_" + config.Name());
  const RunResult uninterrupted = ::strata::testing::Run(
      PointArgs(whole, config, {}), {}, absl::Seconds(120));
  ASSERT_EQ(uninterrupted.exit_code, 0) << uninterrupted.err;

  const std::vector<Kill> kills = Schedule(config);
  std::vector<std::string> at;
  std::vector<std::string> ranks;
  for (const Kill& kill : kills) {
    at.push_back(kill.At());
    ranks.push_back(absl::StrCat(kill.rank));
  }
  std::cerr << config.Name() << ": --test_kill_at=" << absl::StrJoin(at, ",")
            << " --test_kill_rank=" << absl::StrJoin(ranks, ",") << "\n";
  const std::string out = TempDir("chaos_points_" + config.Name());
  const RunResult result = ::strata::testing::Run(
      PointArgs(out, config,
                {"--resume=auto", absl::StrCat("--max_restarts=", kills.size()),
                 "--test_kill_at=" + absl::StrJoin(at, ","),
                 "--test_kill_rank=" + absl::StrJoin(ranks, ",")}),
      {}, absl::Seconds(240));
  ASSERT_EQ(result.exit_code, 0) << result.err;
  // Every kill happened where the schedule put it, and cost one restart.
  for (size_t k = 0; k < kills.size(); ++k) {
    EXPECT_THAT(result.err, HasSubstr(absl::StrCat(
                                "rank ", kills[k].rank,
                                ": test hook --test_kill_at=", kills[k].At(),
                                ": killing this rank")));
    EXPECT_THAT(result.err, HasSubstr(absl::StrCat("restart ", k + 1, "/",
                                                   kills.size(), ": rank ")));
  }
  ExpectSameEnd(whole, out, kSteps);
}

// The combinations; dropout on and off, sync and async saves.
INSTANTIATE_TEST_SUITE_P(
    Strategies, ChaosKillPointTest,
    ::testing::Values(PointConfig{"ddp", 2, false, false, 11},
                      PointConfig{"zero2", 2, true, true, 12},
                      PointConfig{"fsdp", 2, false, true, 13},
                      PointConfig{"fsdp", 3, true, false, 14}),
    [](const ::testing::TestParamInfo<PointConfig>& info) {
      return info.param.Name();
    });

}  // namespace
}  // namespace strata::launch
