// A rank program for process-level tests of comm/: joins the world from the
// environment (torchrun, Slurm or Open MPI variables) and runs all-reduces,
// checking each result. Arguments (key=value):
//   iterations=N     collectives to run (default 20)
//   die_rank=R       rank that kills itself with SIGKILL ...
//   die_at=I         ... just before iteration I
//   stall_rank=R     rank that stops calling collectives (stays alive) ...
//   stall_at=I       ... at iteration I, for 120 s
//   stop_rank=R      rank that stops itself with SIGSTOP ...
//   stop_at=I        ... just before iteration I, logging the moment as
//                    "stopping itself at monotonic_ms=<CLOCK_MONOTONIC ms>"
//   stop_inside_rank=R  rank that stops itself with SIGSTOP inside a
//   stop_inside_at=I    collective: it issues iteration I's all-reduce, lets
//                    its progress record reach the store (200 ms), logs
//                    "stopping itself at monotonic_ms=..." and stops; the
//                    other ranks enter that all-reduce 1 s late, so every
//                    rank has entered it when it times out
//   timeout_s=S      collective timeout (default 30)
//   interval_ms=M    sleep between iterations (default 0)
// Under `launch --heartbeat_timeout_s` it beats on the launcher's pipe.
// Exits 0 when every result was correct; on an error, logs it and exits 1.
#include <ATen/ATen.h>
#include <glog/logging.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "base/heartbeat.h"
#include "comm/environment.h"
#include "comm/rendezvous.h"

namespace {

int IntArg(const std::map<std::string, std::string>& args,
           const std::string& key, int fallback) {
  auto it = args.find(key);
  if (it == args.end()) return fallback;
  int value = 0;
  CHECK(absl::SimpleAtoi(it->second, &value))
      << "argument " << key << "=" << it->second << " is not an integer";
  return value;
}

// Stops this process with SIGSTOP, logging the moment first.
void StopItself(int rank) {
  timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  LOG(INFO) << "rank " << rank << " stopping itself at monotonic_ms="
            << now.tv_sec * 1000 + now.tv_nsec / 1000000;
  raise(SIGSTOP);
}

}  // namespace

int main(int argc, char** argv) {
  google::InitGoogleLogging(argv[0]);
  FLAGS_logtostderr = true;
  std::map<std::string, std::string> args;
  for (int i = 1; i < argc; ++i) {
    std::pair<std::string, std::string> kv = absl::StrSplit(argv[i], '=');
    args[kv.first] = kv.second;
  }
  const int iterations = IntArg(args, "iterations", 20);
  const int die_rank = IntArg(args, "die_rank", -1);
  const int die_at = IntArg(args, "die_at", 0);
  const int interval_ms = IntArg(args, "interval_ms", 0);
  const int stall_rank = IntArg(args, "stall_rank", -1);
  const int stall_at = IntArg(args, "stall_at", 0);
  const int stop_rank = IntArg(args, "stop_rank", -1);
  const int stop_at = IntArg(args, "stop_at", 0);
  const int stop_inside_rank = IntArg(args, "stop_inside_rank", -1);
  const int stop_inside_at = IntArg(args, "stop_inside_at", 0);

  auto info = strata::comm::RendezvousInfoFromEnv(strata::comm::ProcessEnv());
  if (!info.ok()) {
    LOG(ERROR) << "bad rendezvous environment: " << info.status().message();
    return 1;
  }
  std::unique_ptr<strata::Heartbeat> heartbeat;
  if (info->heartbeat_fd >= 0) {
    auto started = strata::Heartbeat::Start(
        info->heartbeat_fd, absl::Milliseconds(info->heartbeat_interval_ms));
    if (!started.ok()) {
      LOG(ERROR) << started.status().message();
      return 1;
    }
    heartbeat = *std::move(started);
  }
  strata::comm::GroupOptions options;
  options.timeout = absl::Seconds(IntArg(args, "timeout_s", 30));
  auto group = strata::comm::ConnectWorld(*info, options);
  if (!group.ok()) {
    LOG(ERROR) << group.status().message();
    return 1;
  }
  const int n = (*group)->size();
  const int rank = (*group)->rank();
  for (int it = 0; it < iterations; ++it) {
    if (rank == die_rank && it == die_at) {
      LOG(INFO) << "rank " << rank << " killing itself at iteration " << it;
      kill(getpid(), SIGKILL);
    }
    if (rank == stop_rank && it == stop_at) StopItself(rank);
    if (rank == stall_rank && it == stall_at) {
      LOG(INFO) << "rank " << rank << " stalling at iteration " << it;
      std::this_thread::sleep_for(std::chrono::seconds(120));
      return 0;
    }
    (*group)->SetTrainingStep(it);
    at::Tensor t = at::full({1 << 16}, static_cast<float>(rank + it));
    absl::Status status;
    if (rank == stop_inside_rank && it == stop_inside_at) {
      std::unique_ptr<strata::comm::Work> work = (*group)->AllReduceAsync(t);
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      StopItself(rank);
      status = work->Wait();
    } else {
      if (stop_inside_rank >= 0 && it == stop_inside_at) {
        std::this_thread::sleep_for(std::chrono::seconds(1));
      }
      status = (*group)->AllReduce(t);
    }
    if (!status.ok()) {
      LOG(ERROR) << "iteration " << it << ": " << status.message();
      return 1;
    }
    const float expected = n * it + n * (n - 1) / 2.0f;
    if (!at::equal(t, at::full({1 << 16}, expected))) {
      LOG(ERROR) << "iteration " << it << ": wrong all-reduce result "
                 << t[0].item<float>() << ", expected " << expected;
      return 1;
    }
    if (interval_ms > 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(interval_ms));
    }
  }
  LOG(INFO) << "rank " << rank << " of " << n << " (" << info->source
            << "): all " << iterations << " collectives correct";
  return 0;
}
