// Checkpoint throughput: save and load of each format for gpt-100m under
// ZeRO-2 at 2 ranks (threads of this process, each with its own group),
// against the disk's raw sequential write and read speed measured in the
// same run on the same directory, plus the training stall of an
// asynchronous save against a plain in-memory copy of the state, and the
// CRC-32C speed.
//
//   bazel run -c opt //checkpoint/strategy:checkpoint_benchmark -- [DIR
//   [SCRIPT]]
//
// DIR (default: /tmp/strata_ckpt_bench) is removed and re-created. With
// SCRIPT (checkpoint/strategy/torch_dcp_bench.py) and a python3 whose torch
// has torch.distributed.checkpoint (>= 2.4; the Debian 13 root's 2.6),
// PyTorch's own dcp.save and dcp.load of the same state at the same ranks
// are measured in the same repetitions, on the same disk: side by side
// with Strata's DCP format. Reads
// are cold: after every write the files' pages are dropped from the page
// cache with posix_fadvise(POSIX_FADV_DONTNEED) (no root needed), so loads
// and the raw read come from the disk. Writes end with fsync (as the
// checkpoint formats do).
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <fcntl.h>
#include <glog/logging.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/crc32c.h"
#include "base/process_memory.h"
#include "checkpoint/strategy/checkpoint.h"
#include "comm/group.h"
#include "comm/testing/multi_rank.h"
#include "models/config.h"
#include "models/factory.h"
#include "strategies/factory.h"

namespace strata::checkpoint {
namespace {

constexpr int kRanks = 2;
constexpr int kRepetitions = 3;

double Median(std::vector<double> v) {
  CHECK(!v.empty());
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

double Seconds(const std::function<void()>& fn) {
  const auto start = std::chrono::steady_clock::now();
  fn();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
      .count();
}

// A field of /proc/self/status in bytes ("VmRSS", "VmHWM"); 0 if unreadable.
int64_t StatusBytes(const std::string& field) {
  return ProcStatusBytes(field).value_or(0);
}

// Resets the peak resident set (VmHWM) to the current one; returns the
// current resident bytes.
int64_t ResetPeakRss() {
  std::ofstream("/proc/self/clear_refs") << "5";
  return StatusBytes("VmRSS");
}

// Drops the page cache of every file under `path`.
void DropCache(const std::string& path) {
  auto drop = [](const std::string& file) {
    const int fd = ::open(file.c_str(), O_RDONLY);
    if (fd < 0) return;
    ::fdatasync(fd);
    ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    ::close(fd);
  };
  if (std::filesystem::is_directory(path)) {
    for (const auto& e : std::filesystem::recursive_directory_iterator(path)) {
      if (e.is_regular_file()) drop(e.path().string());
    }
  } else {
    drop(path);
  }
}

int64_t BytesUnder(const std::string& path) {
  if (!std::filesystem::is_directory(path))
    return std::filesystem::file_size(path);
  int64_t bytes = 0;
  for (const auto& e : std::filesystem::recursive_directory_iterator(path)) {
    if (e.is_regular_file()) bytes += e.file_size();
  }
  return bytes;
}

// One sequential stream: write `bytes` in 64 MiB blocks and fsync; then
// (cache dropped) read it back.
void RawDisk(const std::string& path, int64_t bytes, double* write_s,
             double* read_s) {
  const int64_t block = int64_t{64} << 20;
  std::vector<char> buffer(block);
  for (size_t i = 0; i < buffer.size(); ++i)
    buffer[i] = static_cast<char>(i * 131);
  *write_s = Seconds([&] {
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    CHECK_GE(fd, 0);
    for (int64_t done = 0; done < bytes; done += block) {
      const int64_t n = std::min(block, bytes - done);
      CHECK_EQ(::write(fd, buffer.data(), n), n);
    }
    CHECK_EQ(::fsync(fd), 0);
    ::close(fd);
  });
  DropCache(path);
  *read_s = Seconds([&] {
    const int fd = ::open(path.c_str(), O_RDONLY);
    CHECK_GE(fd, 0);
    while (::read(fd, buffer.data(), block) > 0) {
    }
    ::close(fd);
  });
  std::filesystem::remove(path);
}

std::unique_ptr<strategies::Strategy> Build(comm::Group* group, uint64_t seed) {
  auto config = models::ConfigByName("gpt-100m");
  CHECK(config.ok());
  auto model = models::BuildModel(*config, models::BuildOptions{seed});
  CHECK(model.ok()) << model.status();
  strategies::StrategyOptions options;
  options.kind = strategies::StrategyKind::kZero2;
  optim::LrScheduleOptions schedule;
  schedule.kind = optim::LrScheduleKind::kConstant;
  auto strategy = strategies::CreateStrategy(
      options, *model, group, strategies::OptimizerConfig(), schedule);
  CHECK(strategy.ok()) << strategy.status();
  // Non-zero optimizer state (its values do not matter to the I/O).
  for (auto& run : (*strategy)->OptimizerState()) {
    if (at::isFloatingType(run.local.scalar_type())) run.local.uniform_();
  }
  return *std::move(strategy);
}

// CRC-32C speed on 256 MiB.
void MeasureCrc32c() {
  std::vector<char> data(int64_t{256} << 20, 7);
  uint32_t crc = 0;
  const double s = Seconds([&] { crc = Crc32c(data.data(), data.size()); });
  std::printf("crc32c (%s): %.2f GB/s (checksum %08x)\n",
              Crc32cIsHardware() ? "sse4.2, 3 streams" : "table",
              data.size() / s / 1e9, crc);
}

// The state's size: parameters once plus the optimizer's two fp32 moments
// (the step counter's 8 bytes aside).
int64_t StateBytes() {
  auto config = models::ConfigByName("gpt-100m");
  CHECK(config.ok());
  return models::NumParameters(*config) * 4 * 3;
}

const std::vector<Format>& Formats() {
  static const auto* const kFormats = new std::vector<Format>{
      Format::kSharded, Format::kFull, Format::kLocal, Format::kDcp};
  return *kFormats;
}

// What the ranks measured (written by rank 0).
struct Results {
  // PyTorch's dcp: load of Strata's DCP directory, save, load of its own.
  std::vector<double> torch_load_strata_s, torch_save_s, torch_load_s;
  int64_t torch_disk_bytes = 0;
  std::string torch_version;
  std::vector<double> raw_write_s, raw_read_s;
  std::map<std::string, std::vector<double>> save_s, load_s;
  std::map<std::string, int64_t> disk_bytes;
  std::map<std::string, int64_t> peak_extra_bytes;
  int64_t largest_tensor_bytes = 0;
  std::vector<double> stall_s, stage_s, copy_s;
};

// The script that measures PyTorch's dcp (empty: not measured).
std::string& TorchScript() {
  static auto* const kScript = new std::string;
  return *kScript;
}

// PyTorch's dcp.load of the DCP directory `path`, dcp.save of that state
// and dcp.load of its own save, at kRanks Gloo ranks (processes).
void MeasureTorchDcp(const std::string& path, const std::string& dir,
                     Results& r) {
  const std::string out = dir + "/torch_dcp";
  const std::string command =
      absl::StrCat("OMP_NUM_THREADS=1 python3 ", TorchScript(), " ", path, " ",
                   out, " ", kRanks, " 2>", dir, "/torch_dcp.log");
  FILE* pipe = ::popen(command.c_str(), "r");
  CHECK(pipe != nullptr) << command;
  double load_strata = 0, save = 0, load = 0;
  long long bytes = 0;  // NOLINT(runtime/int): fscanf's %lld
  char version[64] = {0};
  const int n = std::fscanf(pipe, "%lf %lf %lf %lld %63s", &load_strata, &save,
                            &load, &bytes, version);
  CHECK_EQ(::pclose(pipe), 0)
      << command << " failed; see " << dir << "/torch_dcp.log";
  CHECK_EQ(n, 5) << command << " printed no timings";
  r.torch_version = version;
  r.torch_load_strata_s.push_back(load_strata);
  r.torch_save_s.push_back(save);
  r.torch_load_s.push_back(load);
  r.torch_disk_bytes = bytes;
  std::filesystem::remove_all(out);
}

// One repetition of each format's save (with rank 0's peak extra memory)
// and cold load, after a raw write and read of the same size.
void MeasureFormats(comm::Group& group, strategies::Strategy& saver,
                    strategies::Strategy& loader, const std::string& dir,
                    int64_t state_bytes, Results& r) {
  CHECK(group.Barrier().ok());
  if (group.rank() == 0) {
    double w = 0, rd = 0;
    RawDisk(dir + "/raw.bin", state_bytes, &w, &rd);
    r.raw_write_s.push_back(w);
    r.raw_read_s.push_back(rd);
  }
  for (Format format : Formats()) {
    const std::string name(FormatName(format));
    const std::string path =
        absl::StrCat(dir, "/", name, format == Format::kFull ? ".pth" : "");
    SaveOptions options;
    options.format = format;
    CHECK(group.Barrier().ok());
    // Peak resident memory of the process during the save (both ranks are
    // threads of it): reset the high-water mark first.
    const int64_t rss_before = group.rank() == 0 ? ResetPeakRss() : 0;
    CHECK(group.Barrier().ok());
    const double save = Seconds([&] {
      CHECK(SaveCheckpoint(path, saver, &group, Contents(), options).ok());
    });
    CHECK(group.Barrier().ok());
    if (group.rank() == 0) {
      r.peak_extra_bytes[name] =
          std::max(r.peak_extra_bytes[name], StatusBytes("VmHWM") - rss_before);
    }
    CHECK(group.Barrier().ok());
    if (group.rank() == 0) DropCache(path);
    CHECK(group.Barrier().ok());
    const double load = Seconds([&] {
      auto c = LoadCheckpoint(path, loader, &group);
      CHECK(c.ok()) << c.status();
    });
    CHECK(group.Barrier().ok());
    if (format == Format::kDcp && group.rank() == 0 && !TorchScript().empty()) {
      MeasureTorchDcp(path, dir, r);
    }
    CHECK(group.Barrier().ok());
    if (group.rank() == 0) {
      r.save_s[name].push_back(save);
      r.load_s[name].push_back(load);
      r.disk_bytes[name] = BytesUnder(path);
      std::filesystem::remove_all(path);
    }
  }
}

// Asynchronous saves: the stall is SaveToRoot's time (the staging copy and
// bookkeeping); the first save allocates the staging buffers, later ones
// reuse them. The baseline: the same runs copied in memory into
// preallocated (warm) buffers, on both ranks at once as the staging copies
// are.
void MeasureAsync(comm::Group& group, strategies::Strategy& saver,
                  const std::string& dir, Results& r) {
  auto ckpt_group = group.Split(0, "ckpt");
  CHECK(ckpt_group.ok());
  TensorState state = CollectState(saver, SaveOptions());
  std::vector<at::Tensor> copies;
  for (auto* runs : {&state.model, &state.optimizer}) {
    for (auto& run : *runs) copies.push_back(at::empty_like(run.local));
  }
  AsyncCheckpointer async(ckpt_group->get());
  for (int i = 0; i <= kRepetitions; ++i) {
    CHECK(group.Barrier().ok());
    const double copy = Seconds([&] {
      size_t k = 0;
      for (auto* runs : {&state.model, &state.optimizer}) {
        for (auto& run : *runs) copies[k++].copy_(run.local);
      }
    });
    CHECK(group.Barrier().ok());
    const double stall = Seconds([&] {
      CHECK(async.SaveToRoot(dir + "/async", i + 1, 1, saver, Contents()).ok());
    });
    const double stage = async.last_stage_s();
    CHECK(async.Wait().ok());
    if (group.rank() == 0 && i > 0) {
      r.copy_s.push_back(copy);
      r.stall_s.push_back(stall);
      r.stage_s.push_back(stage);
    }
  }
}

void Report(const Results& r, int64_t state_bytes) {
  const double raw_write = state_bytes / Median(r.raw_write_s) / 1e6;
  const double raw_read = state_bytes / Median(r.raw_read_s) / 1e6;
  std::printf(
      "gpt-100m under zero2 at %d ranks: state %.1f MB (parameters "
      "once + AdamW moments); medians of %d interleaved repetitions\n",
      kRanks, state_bytes / 1e6, kRepetitions);
  std::printf(
      "raw disk, one stream, same size: write+fsync %.0f MB/s, cold "
      "read %.0f MB/s (per repetition: write",
      raw_write, raw_read);
  for (double t : r.raw_write_s) std::printf(" %.0f", state_bytes / t / 1e6);
  std::printf("; read");
  for (double t : r.raw_read_s) std::printf(" %.0f", state_bytes / t / 1e6);
  std::printf(")\n");
  std::printf("%-8s %10s %12s %9s %12s %9s\n", "format", "MB on disk",
              "save MB/s", "vs raw", "load MB/s", "vs raw");
  for (Format format : Formats()) {
    const std::string name(FormatName(format));
    // Throughput of the state (its unique bytes), not of what each format
    // writes (local writes replicated parameters once per rank).
    const double save = state_bytes / Median(r.save_s.at(name)) / 1e6;
    const double load = state_bytes / Median(r.load_s.at(name)) / 1e6;
    std::printf("%-8s %10.1f %12.0f %8.0f%% %12.0f %8.0f%%\n", name.c_str(),
                r.disk_bytes.at(name) / 1e6, save, 100 * save / raw_write, load,
                100 * load / raw_read);
  }
  if (!r.torch_save_s.empty()) {
    const double save = state_bytes / Median(r.torch_save_s) / 1e6;
    const double load = state_bytes / Median(r.torch_load_s) / 1e6;
    std::printf("%-8s %10.1f %12.0f %8.0f%% %12.0f %8.0f%%   (PyTorch %s)\n",
                "torch-dcp", r.torch_disk_bytes / 1e6, save,
                100 * save / raw_write, load, 100 * load / raw_read,
                r.torch_version.c_str());
    std::printf(
        "PyTorch's dcp.load of Strata's dcp directory: %.0f MB/s; Strata's "
        "dcp vs PyTorch's: save %.2fx, load %.2fx\n",
        state_bytes / Median(r.torch_load_strata_s) / 1e6,
        Median(r.torch_save_s) / Median(r.save_s.at("dcp")),
        Median(r.torch_load_s) / Median(r.load_s.at("dcp")));
  } else {
    std::printf(
        "torch-dcp: not measured (give the script torch_dcp_bench.py as the "
        "second argument, with a python3 whose torch is >= 2.4)\n");
  }
  std::printf(
      "peak extra resident memory of the process during a save: "
      "sharded %.1f MB, full %.1f MB, local %.1f MB (largest tensor "
      "%.1f MB)\n",
      r.peak_extra_bytes.at("sharded") / 1e6,
      r.peak_extra_bytes.at("full") / 1e6, r.peak_extra_bytes.at("local") / 1e6,
      r.largest_tensor_bytes / 1e6);
  std::printf(
      "async save (rank 0): training stalled %.3f s (of which the "
      "staging copy %.3f s) vs %.3f s for a plain in-memory copy of "
      "the rank's state: ratio %.2f\n",
      Median(r.stall_s), Median(r.stage_s), Median(r.copy_s),
      Median(r.stall_s) / Median(r.copy_s));
}

int Main(int argc, char** argv) {
  const std::string dir = argc > 1 ? argv[1] : "/tmp/strata_ckpt_bench";
  if (argc > 2) TorchScript() = argv[2];
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  at::set_num_threads(1);
  MeasureCrc32c();
  const int64_t state_bytes = StateBytes();
  // Per repetition: raw write, raw read, then each format's save and load.
  // Interleaved, so that every ratio compares measurements taken close in
  // time (the disk is shared and its speed drifts); medians over the
  // repetitions.
  Results results;
  // Rank 1 waits at a barrier while rank 0 runs PyTorch's side for a minute
  // or more: longer than a test group's timeout.
  comm::GroupOptions options = comm::testing::TestGroupOptions();
  options.timeout = absl::Minutes(20);
  absl::Status formed = comm::testing::RunOnRanks(
      kRanks,
      [&](comm::Group& group) {
        auto saver = Build(&group, 1);
        auto loader = Build(&group, 2);
        if (group.rank() == 0) {
          for (const auto& run : saver->ModelState()) {
            results.largest_tensor_bytes =
                std::max(results.largest_tensor_bytes, run.local.numel() * 4);
          }
        }
        for (int rep = 0; rep < kRepetitions; ++rep) {
          MeasureFormats(group, *saver, *loader, dir, state_bytes, results);
        }
        MeasureAsync(group, *saver, dir, results);
      },
      options);
  CHECK(formed.ok()) << formed;
  Report(results, state_bytes);
  std::filesystem::remove_all(dir);
  return 0;
}

}  // namespace
}  // namespace strata::checkpoint

int main(int argc, char** argv) {
  google::InitGoogleLogging(argv[0]);
  FLAGS_logtostderr = true;
  if (const char* v = std::getenv("STRATA_VLOG")) FLAGS_v = std::atoi(v);
  return strata::checkpoint::Main(argc, argv);
}
