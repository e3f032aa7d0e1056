// LoadFull's memory bound: each rank reads the tensors its runs need one at
// a time, so its extra peak while loading is the largest tensor plus its
// own runs (plus small bookkeeping), not the file.
#include <ATen/TensorOperators.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/equal.h>
#include <ATen/ops/zeros.h>
#include <glog/logging.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/shape.h"
#include "base/testing/status_matchers.h"
#include "base/testing/temp_dir.h"
#include "base/tracking_allocator.h"
#include "checkpoint/contents.h"
#include "checkpoint/full.h"
#include "comm/group.h"
#include "comm/testing/multi_rank.h"
#include "serialization/torch_file.h"

namespace strata::checkpoint {
namespace {

using ::strata::testing::IsOk;

constexpr int kWorld = 2;
constexpr int kSmall = 16;                  // Tensors of 128 x 256 floats,
constexpr int64_t kSmallNumel = 128 * 256;  // 128 KiB each,
constexpr int64_t kLargeNumel = 256 * 256;  // and one of 256 KiB.

struct Spec {
  std::string name;
  std::vector<int64_t> shape;
};

std::vector<Spec> Specs() {
  std::vector<Spec> specs;
  specs.reserve(kSmall + 1);
  for (int i = 0; i < kSmall; ++i) {
    specs.push_back({absl::StrCat("layer", i, ".weight"), {128, 256}});
  }
  specs.push_back({"big.weight", {256, 256}});
  return specs;
}

// Rank `rank`'s half of every tensor (FSDP-like runs); the global tensor of
// spec j holds j * 1e6 + element index, so every element is distinct.
TensorState HalfState(int rank, bool zero) {
  TensorState state;
  int j = 0;
  for (const Spec& spec : Specs()) {
    const int64_t numel = NumElements(spec.shape);
    const int64_t half = numel / kWorld;
    at::Tensor local =
        zero ? at::zeros({half}, at::kFloat)
             : at::arange(rank * half, (rank + 1) * half, at::kFloat) +
                   static_cast<float>(j) * 1e6f;
    state.model.push_back({spec.name, spec.shape, rank * half, local});
    ++j;
  }
  return state;
}

TEST(FullMemoryTest, LoadPeakIsTheLargestTensorPlusTheRanksRuns) {
  ASSERT_THAT(TrackingAllocator::Install(), IsOk());
  const std::string path = testing::FreshTempDir("full_memory") + "/ckpt.pth";
  ASSERT_THAT(comm::testing::RunOnRanks(
                  kWorld,
                  [&](comm::Group& group) {
                    ASSERT_THAT(SaveFull(path, HalfState(group.rank(), false),
                                         Contents(), &group),
                                IsOk());
                  }),
              IsOk());
  absl::StatusOr<std::unique_ptr<serialization::TorchFileReader>> file =
      serialization::TorchFileReader::Open(path);
  ASSERT_THAT(file.status(), IsOk());
  const int64_t pickle_bytes = (*file)->pickle_bytes();

  constexpr int64_t kFloat = sizeof(float);
  const int64_t total_bytes = (kSmall * kSmallNumel + kLargeNumel) * kFloat;
  const int64_t largest_bytes = kLargeNumel * kFloat;
  const int64_t runs_bytes = total_bytes / kWorld;
  // The bound: the largest tensor read whole, the rank's staged runs, and
  // bookkeeping tensors (all-gathered names, agreement flags) that are
  // smaller than the pickle, which holds every name.
  const int64_t bound = largest_bytes + runs_bytes + pickle_bytes;
  // Reading the whole file on a rank would exceed it: the test can fail.
  ASSERT_GT(total_bytes, bound);

  ASSERT_THAT(
      comm::testing::RunOnRanks(
          kWorld,
          [&](comm::Group& group) {
            const std::string tag = absl::StrCat("full_memory", group.rank());
            MemoryTagScope scope(tag);
            const TensorState live = HalfState(group.rank(), true);
            const int64_t before = TrackingAllocator::Stats(tag).live_bytes;
            TrackingAllocator::ResetPeak(tag);
            ReadOptions options;
            options.load_optimizer = false;
            ASSERT_THAT(LoadFull(path, live, options, &group).status(), IsOk());
            const int64_t extra =
                TrackingAllocator::Stats(tag).peak_bytes - before;
            EXPECT_LE(extra, bound) << "rank " << group.rank();
            // And it loaded: every run equals the saved one.
            const TensorState expected = HalfState(group.rank(), false);
            for (size_t i = 0; i < live.model.size(); ++i) {
              EXPECT_TRUE(
                  at::equal(live.model[i].local, expected.model[i].local))
                  << live.model[i].name;
            }
            LOG(INFO) << "rank " << group.rank() << ": extra peak " << extra
                      << " bytes, bound " << bound << ", file tensors "
                      << total_bytes;
          }),
      IsOk());
}

}  // namespace
}  // namespace strata::checkpoint
