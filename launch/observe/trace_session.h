// The timeline trace of a window of training steps (train --trace_steps=A:B
// --trace_dir=DIR): turns the recorder of base/trace.h on before step A and
// off after step B (or when training ends first), then merges every rank's
// events into DIR/trace.json on rank 0.
//
// The file is Chrome's trace JSON object format, {"traceEvents": [...]}: a
// process per rank (pid = rank, named "rank r"), a track per thread (the
// training thread "train", each group's worker "comm <group>", the
// asynchronous checkpoint writer "checkpoint writer") and per lane of each
// group's collectives ("<group> collectives": issue to completion, with
// bytes). Perfetto (ui.perfetto.dev) and chrome://tracing open it.
//
// Merging: after the window every rank serialises its own events and the
// group all-gathers them (two collectives all ranks join at the same step);
// rank 0 writes the file. No shared file system is needed.
//
// Clocks: timestamps are steady_clock microseconds shifted to a common
// origin taken right after a barrier at the window's start. Ranks on rank
// 0's host (compared by hostname) use rank 0's origin: they share
// CLOCK_MONOTONIC, so their spans line up exactly. A rank on another host
// uses its own origin, which aligns it to rank 0 to within the barrier's
// exit skew (a network latency: tens of microseconds on a LAN).
#ifndef STRATA_LAUNCH_OBSERVE_TRACE_SESSION_H_
#define STRATA_LAUNCH_OBSERVE_TRACE_SESSION_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "comm/group.h"
#include "launch/observe/trace_window.h"
#include "models/unit.h"

namespace strata::launch {

struct TraceSessionOptions {
  TraceWindow window;
  std::string dir;  // Where rank 0 writes trace.json.
};

class TraceSession {
 public:
  // Adds the unit tracing interceptor to `model` (call after the strategy
  // added its own, so the unit spans exclude FSDP's gathers) and names the
  // calling thread "train". `group` (null: one process) and `model` are
  // borrowed. Rank 0 creates the directory; an error names --trace_dir.
  static absl::StatusOr<std::unique_ptr<TraceSession>> Create(
      const TraceSessionOptions& options, comm::Group* group,
      models::UnitModel& model);

  // Step `step` (from 1) is about to run: starts the window at its first
  // step (or at the first step inside it, after a resume). A collective when
  // it starts the window.
  absl::Status BeforeStep(int64_t step);
  // Step `step` finished (checkpointing included): its span is recorded; at
  // the window's last step the trace is written. A collective then.
  absl::Status AfterStep(int64_t step);
  // Training ended: writes the trace if the window started and is not
  // written yet (--steps below the window's end). A collective then.
  absl::Status Finish();

  // Rank 0: DIR/trace.json.
  const std::string& path() const { return path_; }

 private:
  TraceSession(const TraceSessionOptions& options, comm::Group* group);
  absl::Status Write();

  TraceSessionOptions options_;
  comm::Group* group_;
  std::string path_;
  bool started_ = false;
  bool written_ = false;
  int64_t origin_us_ = 0;
  int64_t step_start_us_ = -1;
};

}  // namespace strata::launch

#endif  // STRATA_LAUNCH_OBSERVE_TRACE_SESSION_H_
