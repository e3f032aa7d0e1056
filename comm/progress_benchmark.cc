// What recording progress costs the training thread, next to what a
// synchronous store write per collective would cost instead:
//   BM_ProgressEnter  ProgressTracker::Enter (what each collective does now:
//                     update the in-memory record; a background thread
//                     writes it at most every 20 ms)
//   BM_TcpStoreSet    one c10d TCPStore::set of a record-sized value over
//                     loopback (server in this process)
//
//   bazel run -c opt //comm:progress_benchmark
#include <benchmark/benchmark.h>

#include <string>
#include <torch/csrc/distributed/c10d/HashStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <vector>

#include "absl/time/time.h"
#include "comm/progress.h"

namespace strata::comm {
namespace {

void BM_ProgressEnter(benchmark::State& state) {
  ProgressTracker tracker(c10::make_intrusive<c10d::HashStore>(),
                          ProgressTrackerOptions());
  int64_t seq = 0;
  for (auto _ : state) {
    tracker.Enter("all_gather", "world", ++seq, 24992, 99968);
  }
}
BENCHMARK(BM_ProgressEnter);

void BM_TcpStoreSet(benchmark::State& state) {
  c10d::TCPStoreOptions server_options;
  server_options.port = 0;
  server_options.isServer = true;
  server_options.numWorkers = 1;
  server_options.waitWorkers = false;
  c10d::TCPStore server("127.0.0.1", server_options);
  c10d::TCPStoreOptions client_options;
  client_options.port = server.getPort();
  client_options.waitWorkers = false;
  c10d::TCPStore client("127.0.0.1", client_options);
  ProgressRecord record;
  record.op = "all_gather";
  record.group = "world";
  record.seq = 4122;
  record.group_seqs["world"] = 4122;
  const std::string text = FormatProgressRecord(record);
  const std::vector<uint8_t> value(text.begin(), text.end());
  for (auto _ : state) client.set("strata_progress/world/0", value);
}
BENCHMARK(BM_TcpStoreSet);

}  // namespace
}  // namespace strata::comm
