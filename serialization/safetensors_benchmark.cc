// safetensors load speed against a raw read of the same file, on one
// 256 MiB file of 64 F32 tensors (4 MiB each), warm (page cache) and cold
// (the file's pages dropped with posix_fadvise(POSIX_FADV_DONTNEED) before
// each iteration, outside the timing):
//
//   BM_RawRead        open + pread of the whole file into one buffer,
//                     allocated (and faulted in) once
//   BM_RawReadFresh   the same into a buffer allocated per iteration (its
//                     pages faulted in by the read, as new tensors' are)
//   BM_View           SafetensorsFile::Open + View of every tensor
//                     (zero-copy: no data is read)
//   BM_ViewTouch      the same, then one byte per 4 KiB page read (the data
//                     faulted in, as a first use of the views would)
//   BM_ReadTensors    Open + every View cloned into owned tensors (a full
//                     read into memory)
//
//   bazel run -c opt //serialization:safetensors_benchmark -- [--benchmark_...]
//
// The file is written under $TMPDIR (default /tmp) and removed at exit.
#include <ATen/ATen.h>
#include <benchmark/benchmark.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "base/file_io.h"
#include "glog/logging.h"
#include "serialization/safetensors.h"

namespace strata::serialization {
namespace {

constexpr int kTensors = 64;
constexpr int64_t kTensorFloats = int64_t{1} << 20;  // 4 MiB each.

// The benchmark file, written once.
const std::string& FilePath() {
  static const std::string* const kPath = [] {
    const char* tmp = std::getenv("TMPDIR");
    auto* path = new std::string(std::string(tmp != nullptr ? tmp : "/tmp") +
                                 "/strata_safetensors_bench.safetensors");
    std::vector<std::pair<std::string, at::Tensor>> tensors;
    for (int i = 0; i < kTensors; ++i) {
      tensors.emplace_back("layers." + std::to_string(i) + ".weight",
                           at::randn({kTensorFloats}));
    }
    CHECK(WriteSafetensors(*path, tensors).ok());
    std::atexit([] { std::filesystem::remove(FilePath()); });
    return path;
  }();
  return *kPath;
}

int64_t FileBytes() { return std::filesystem::file_size(FilePath()); }

void DropCache() {
  const int fd = ::open(FilePath().c_str(), O_RDONLY);
  CHECK_GE(fd, 0);
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  ::close(fd);
}

// Arg 0: warm; 1: cold.
void MaybeDropCache(benchmark::State& state) {
  if (state.range(0) == 0) return;
  state.PauseTiming();
  DropCache();
  state.ResumeTiming();
}

void BM_RawRead(benchmark::State& state) {
  const int64_t bytes = FileBytes();
  std::vector<char> buffer(bytes);
  for (auto _ : state) {
    MaybeDropCache(state);
    const int fd = ::open(FilePath().c_str(), O_RDONLY);
    CHECK(PreadAll(fd, FilePath(), buffer.data(), bytes, 0).ok());
    ::close(fd);
    benchmark::DoNotOptimize(buffer.data());
  }
  state.SetBytesProcessed(state.iterations() * bytes);
}

void BM_RawReadFresh(benchmark::State& state) {
  const int64_t bytes = FileBytes();
  for (auto _ : state) {
    MaybeDropCache(state);
    std::unique_ptr<char[]> buffer(new char[bytes]);
    const int fd = ::open(FilePath().c_str(), O_RDONLY);
    CHECK(PreadAll(fd, FilePath(), buffer.get(), bytes, 0).ok());
    ::close(fd);
    benchmark::DoNotOptimize(buffer.get());
  }
  state.SetBytesProcessed(state.iterations() * bytes);
}

void BM_View(benchmark::State& state) {
  for (auto _ : state) {
    MaybeDropCache(state);
    absl::StatusOr<std::shared_ptr<const SafetensorsFile>> file =
        SafetensorsFile::Open(FilePath());
    CHECK(file.ok());
    benchmark::DoNotOptimize((*file)->ViewAll());
  }
  state.SetBytesProcessed(state.iterations() * FileBytes());
}

void BM_ViewTouch(benchmark::State& state) {
  for (auto _ : state) {
    MaybeDropCache(state);
    absl::StatusOr<std::shared_ptr<const SafetensorsFile>> file =
        SafetensorsFile::Open(FilePath());
    CHECK(file.ok());
    int64_t sum = 0;
    for (const auto& [name, tensor] : (*file)->ViewAll()) {
      const char* data = static_cast<const char*>(tensor.data_ptr());
      for (int64_t i = 0; i < tensor.nbytes(); i += 4096) sum += data[i];
    }
    benchmark::DoNotOptimize(sum);
  }
  state.SetBytesProcessed(state.iterations() * FileBytes());
}

void BM_ReadTensors(benchmark::State& state) {
  for (auto _ : state) {
    MaybeDropCache(state);
    absl::StatusOr<std::shared_ptr<const SafetensorsFile>> file =
        SafetensorsFile::Open(FilePath());
    CHECK(file.ok());
    std::vector<at::Tensor> owned;
    for (const auto& [name, tensor] : (*file)->ViewAll()) {
      owned.push_back(tensor.clone());
    }
    benchmark::DoNotOptimize(owned);
  }
  state.SetBytesProcessed(state.iterations() * FileBytes());
}

#define STRATA_SAFETENSORS_BENCHMARK(fn) \
  BENCHMARK(fn)                          \
      ->ArgName("cold")                  \
      ->Arg(0)                           \
      ->Arg(1)                           \
      ->Unit(benchmark::kMillisecond)    \
      ->UseRealTime()

STRATA_SAFETENSORS_BENCHMARK(BM_RawRead);
STRATA_SAFETENSORS_BENCHMARK(BM_RawReadFresh);
STRATA_SAFETENSORS_BENCHMARK(BM_View);
STRATA_SAFETENSORS_BENCHMARK(BM_ViewTouch);
STRATA_SAFETENSORS_BENCHMARK(BM_ReadTensors);

}  // namespace
}  // namespace strata::serialization
