#include "launch/train/test_faults.h"

#include <glog/logging.h>
#include <signal.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "launch/config/flag_error.h"

namespace strata::launch {
namespace {

absl::StatusOr<KillPoint> ParseEntry(absl::string_view entry) {
  const std::vector<absl::string_view> parts = absl::StrSplit(entry, ':');
  const std::string expected = absl::StrCat(
      "entry '", entry,
      "' must be PHASE:STEP[:NTH] with PHASE one of forward, backward, "
      "collective, save, async_save, step_end, STEP >= 0 and NTH >= 1");
  KillPoint point;
  if (parts.size() < 2 || parts.size() > 3 ||
      !ParseFaultSite(parts[0], &point.site) ||
      !absl::SimpleAtoi(parts[1], &point.step) || point.step < 0 ||
      (parts.size() == 3 &&
       (!absl::SimpleAtoi(parts[2], &point.nth) || point.nth < 1))) {
    return FlagError("test_kill_at", expected);
  }
  return point;
}

bool IsSave(FaultSite site) {
  return site == FaultSite::kSave || site == FaultSite::kAsyncSave;
}

// A save entry must name a save the run makes; a step end comes once a step.
absl::Status CheckPoint(const KillPoint& point,
                        const TestFaultOptions& options) {
  if (point.site == FaultSite::kStepEnd && point.nth != 1) {
    return FlagError(
        "test_kill_at",
        absl::StrCat("step_end:", point.step, ":", point.nth,
                     " names no moment: a step ends once, NTH must be 1"));
  }
  if (!IsSave(point.site)) return absl::OkStatus();
  const bool async = point.site == FaultSite::kAsyncSave;
  if (async != options.async_save) {
    return FlagError("test_kill_at", absl::StrCat(FaultSiteName(point.site),
                                                  " needs --async_save=",
                                                  async ? "true" : "false"));
  }
  if (options.ckpt_format != checkpoint::Format::kSharded &&
      options.ckpt_format != checkpoint::Format::kDcp) {
    return FlagError("test_kill_at",
                     absl::StrCat(FaultSiteName(point.site),
                                  " needs --ckpt_format=sharded or dcp, got ",
                                  checkpoint::FormatName(options.ckpt_format)));
  }
  if (options.save_every <= 0 || (point.step + 1) % options.save_every != 0 ||
      point.nth != 1) {
    return FlagError(
        "test_kill_at",
        absl::StrCat(
            FaultSiteName(point.site), ":", point.step, ":", point.nth,
            " names no save: step ", point.step,
            " is followed by one with --save_every=", options.save_every,
            " only if (STEP + 1) is a multiple of it, and NTH "
            "must be 1"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<KillPoint>> ParseKillSchedule(
    absl::string_view at, absl::string_view ranks) {
  std::vector<KillPoint> points;
  if (at.empty()) return points;
  for (absl::string_view entry : absl::StrSplit(at, ',')) {
    absl::StatusOr<KillPoint> point = ParseEntry(entry);
    if (!point.ok()) return point.status();
    points.push_back(*point);
  }
  std::vector<int> rank_list;
  for (absl::string_view r : absl::StrSplit(ranks, ',')) {
    int rank = 0;
    if (!absl::SimpleAtoi(r, &rank) || rank < 0) {
      return FlagError("test_kill_rank", absl::StrCat("'", r, "' in '", ranks,
                                                      "' is not a rank >= 0"));
    }
    rank_list.push_back(rank);
  }
  if (rank_list.size() != 1 && rank_list.size() != points.size()) {
    return FlagError(
        "test_kill_rank",
        absl::StrCat("names ", rank_list.size(), " ranks; --test_kill_at has ",
                     points.size(), " entries (give one rank, or one each)"));
  }
  for (size_t i = 0; i < points.size(); ++i) {
    points[i].rank = rank_list[rank_list.size() == 1 ? 0 : i];
  }
  return points;
}

TestFaultInjector::TestFaultInjector(std::optional<KillPoint> kill,
                                     int64_t save_pause_ms, int rank)
    : kill_(kill), save_pause_ms_(save_pause_ms), rank_(rank) {
  SetFaultInjector(this);
}

TestFaultInjector::~TestFaultInjector() { SetFaultInjector(nullptr); }

void TestFaultInjector::Reach(FaultSite site, int64_t step) {
  if (save_pause_ms_ > 0 && IsSave(site)) {
    LOG(INFO) << "rank " << rank_
              << ": test hook --ckpt_test_pause_ms=" << save_pause_ms_
              << ": pausing in the " << FaultSiteName(site) << " of step "
              << step << " before its commit";
    absl::SleepFor(absl::Milliseconds(save_pause_ms_));
  }
  if (!kill_.has_value() || site != kill_->site || step != kill_->step) return;
  if (reached_.fetch_add(1) + 1 != kill_->nth) return;
  LOG(ERROR) << "rank " << rank_
             << ": test hook --test_kill_at=" << FaultSiteName(site) << ":"
             << step << ":" << kill_->nth << ": killing this rank with SIGKILL";
  google::FlushLogFiles(google::GLOG_INFO);
  CHECK_EQ(raise(SIGKILL), 0);
}

at::Tensor FaultPointInterceptor::Run(const models::UnitInfo& /*unit*/,
                                      const at::Tensor& input,
                                      const models::UnitForward& forward) {
  ReachFaultPoint(FaultSite::kForward);
  at::Tensor output = forward(input);
  if (output.requires_grad()) {
    output.register_hook(
        [](const at::Tensor&) { ReachFaultPoint(FaultSite::kBackward); });
  }
  return output;
}

absl::StatusOr<std::unique_ptr<TestFaultInjector>> InstallTestFaults(
    const TestFaultOptions& options, models::UnitModel& model) {
  if (options.save_pause_ms < 0) {
    return FlagError("ckpt_test_pause_ms",
                     absl::StrCat("must be >= 0, got ", options.save_pause_ms));
  }
  absl::StatusOr<std::vector<KillPoint>> points =
      ParseKillSchedule(options.at, options.ranks);
  if (!points.ok()) return points.status();
  for (const KillPoint& point : *points) {
    if (point.rank >= options.world_size) {
      return FlagError(
          "test_kill_rank",
          absl::StrCat("rank ", point.rank, " is not below the world size ",
                       options.world_size));
    }
    if (absl::Status s = CheckPoint(point, options); !s.ok()) return s;
  }
  std::optional<KillPoint> kill;
  if (options.restart_round < static_cast<int>(points->size()) &&
      (*points)[options.restart_round].rank == options.rank) {
    kill = (*points)[options.restart_round];
  }
  if (!kill.has_value() && options.save_pause_ms == 0) return nullptr;
  if (kill.has_value()) {
    LOG(WARNING) << "rank " << options.rank << ": test hook --test_kill_at: "
                 << "SIGKILL at " << FaultSiteName(kill->site) << " #"
                 << kill->nth << " of step " << kill->step
                 << " in restart round " << options.restart_round;
    if (kill->site == FaultSite::kForward ||
        kill->site == FaultSite::kBackward) {
      model.AddInterceptor(std::make_shared<FaultPointInterceptor>());
    }
  }
  return std::make_unique<TestFaultInjector>(kill, options.save_pause_ms,
                                             options.rank);
}

}  // namespace strata::launch
