#include "launch/observe/trace_session.h"

#include <ATen/ops/empty.h>
#include <ATen/ops/full.h>
#include <glog/logging.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/file_io.h"
#include "base/fnv.h"
#include "base/status.h"
#include "base/trace.h"
#include "strategies/trace_interceptor.h"

namespace strata::launch {
namespace {

int64_t HostHash() {
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0) return 0;
  return static_cast<int64_t>(Fnv1a(kFnv1aOffset, std::string_view(name)));
}

// Every rank's `text`, in rank order (two all-gathers).
absl::StatusOr<std::vector<std::string>> GatherTexts(comm::Group* group,
                                                     const std::string& text) {
  if (group == nullptr || group->size() == 1) return std::vector{text};
  const int n = group->size();
  at::Tensor size = at::full({1}, static_cast<int64_t>(text.size()), at::kLong);
  at::Tensor sizes = at::empty({n}, at::kLong);
  STRATA_RETURN_IF_ERROR(group->AllGather(size, sizes));
  std::vector<int64_t> counts(sizes.data_ptr<int64_t>(),
                              sizes.data_ptr<int64_t>() + n);
  int64_t total = 0;
  for (int64_t c : counts) total += c;
  at::Tensor mine = at::empty({static_cast<int64_t>(text.size())}, at::kByte);
  std::memcpy(mine.data_ptr(), text.data(), text.size());
  at::Tensor all = at::empty({total}, at::kByte);
  STRATA_RETURN_IF_ERROR(group->AllGatherV(mine, all, counts));
  std::vector<std::string> out;
  const char* data = static_cast<const char*>(all.data_ptr());
  for (int64_t c : counts) {
    out.emplace_back(data, c);
    data += c;
  }
  return out;
}

// The elements of the JSON array `array_text` ("[a,b]" -> "a,b").
absl::string_view Elements(absl::string_view array_text) {
  CHECK(array_text.size() >= 2 && array_text.front() == '[' &&
        array_text.back() == ']')
      << "not a JSON array";
  return array_text.substr(1, array_text.size() - 2);
}

}  // namespace

TraceSession::TraceSession(const TraceSessionOptions& options,
                           comm::Group* group)
    : options_(options),
      group_(group),
      path_((std::filesystem::path(options.dir) / "trace.json").string()) {}

absl::StatusOr<std::unique_ptr<TraceSession>> TraceSession::Create(
    const TraceSessionOptions& options, comm::Group* group,
    models::UnitModel& model) {
  const int rank = group == nullptr ? 0 : group->rank();
  if (rank == 0) {
    std::error_code ec;
    std::filesystem::create_directories(options.dir, ec);
    if (ec) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--trace_dir: cannot create '", options.dir, "': ", ec.message()));
    }
  }
  model.AddInterceptor(std::make_shared<strategies::TraceInterceptor>());
  trace::SetThreadName("train");
  return std::unique_ptr<TraceSession>(new TraceSession(options, group));
}

absl::Status TraceSession::BeforeStep(int64_t step) {
  if (!started_ && step >= options_.window.first_step &&
      step <= options_.window.last_step) {
    started_ = true;
    // A common origin: right after a barrier, rank 0's clock for the ranks
    // on its host, each rank's own elsewhere (see the header).
    if (group_ != nullptr && group_->size() > 1) {
      STRATA_RETURN_IF_ERROR(group_->Barrier());
    }
    const int64_t mine[2] = {HostHash(), trace::NowMicros()};
    origin_us_ = mine[1];
    if (group_ != nullptr && group_->size() > 1) {
      at::Tensor local = at::empty({2}, at::kLong);
      std::memcpy(local.data_ptr(), mine, sizeof(mine));
      at::Tensor all = at::empty({2 * group_->size()}, at::kLong);
      STRATA_RETURN_IF_ERROR(group_->AllGather(local, all));
      const int64_t* rank0 = all.data_ptr<int64_t>();
      if (rank0[0] == mine[0]) origin_us_ = rank0[1];
    }
    trace::Start();
  }
  step_start_us_ = trace::Enabled() ? trace::NowMicros() : -1;
  return absl::OkStatus();
}

absl::Status TraceSession::AfterStep(int64_t step) {
  if (step_start_us_ >= 0) {
    trace::Record(absl::StrCat("step ", step), "step", step_start_us_,
                  trace::NowMicros(), {trace::IntArg("step", step)});
    step_start_us_ = -1;
  }
  if (started_ && !written_ && step >= options_.window.last_step) {
    return Write();
  }
  return absl::OkStatus();
}

absl::Status TraceSession::Finish() {
  if (started_ && !written_) return Write();
  return absl::OkStatus();
}

absl::Status TraceSession::Write() {
  written_ = true;
  trace::Stop();
  const int rank = group_ == nullptr ? 0 : group_->rank();
  const trace::Recording recording = trace::Collect();
  const std::string mine = trace::ChromeTraceEvents(
      recording, rank, absl::StrCat("rank ", rank), origin_us_);
  STRATA_ASSIGN_OR_RETURN(const std::vector<std::string> all,
                          GatherTexts(group_, mine));
  if (rank != 0) return absl::OkStatus();
  std::string json = "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[";
  for (size_t r = 0; r < all.size(); ++r) {
    if (r > 0) json += ",";
    absl::StrAppend(&json, Elements(all[r]));
  }
  json += "]}\n";
  absl::Status written = WriteFileAtomic(path_, json);
  if (!written.ok()) {
    return absl::Status(written.code(),
                        absl::StrCat("--trace_dir: ", written.message()));
  }
  LOG(INFO) << absl::StrFormat(
      "timeline trace of steps %d..%d (%d ranks, %d events on rank 0): %s; "
      "open it in ui.perfetto.dev or chrome://tracing",
      options_.window.first_step, options_.window.last_step, all.size(),
      recording.events.size(), path_);
  return absl::OkStatus();
}

}  // namespace strata::launch
