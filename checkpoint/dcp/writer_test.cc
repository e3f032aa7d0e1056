// SaveDcp read back by this package's reader (reader.h): every tensor and
// value byte-identical, from one process and from 3 ranks holding uneven
// flat shards and replicated tensors; BoxesOfRange's closed forms.
// PyTorch's own dcp.load of what SaveDcp writes: writer_interop_test.
#include "checkpoint/dcp/writer.h"

#include <ATen/ATen.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "base/testing/status_matchers.h"
#include "base/testing/temp_dir.h"
#include "checkpoint/contents.h"
#include "checkpoint/dcp/metadata.h"
#include "checkpoint/dcp/reader.h"
#include "comm/group.h"
#include "comm/testing/multi_rank.h"

namespace strata::checkpoint::dcp {
namespace {

using ::strata::testing::IsOk;
using ::testing::ElementsAre;

std::vector<std::vector<int64_t>> Offsets(const std::vector<Box>& boxes) {
  std::vector<std::vector<int64_t>> out;
  for (const Box& b : boxes) out.push_back(b.offsets);
  return out;
}
std::vector<std::vector<int64_t>> Sizes(const std::vector<Box>& boxes) {
  std::vector<std::vector<int64_t>> out;
  for (const Box& b : boxes) out.push_back(b.sizes);
  return out;
}
using V = std::vector<int64_t>;

TEST(BoxesOfRangeTest, AWholeTensorIsOneBox) {
  const std::vector<Box> boxes = BoxesOfRange({3, 4}, 0, 12);
  EXPECT_THAT(Offsets(boxes), ElementsAre(V{0, 0}));
  EXPECT_THAT(Sizes(boxes), ElementsAre(V{3, 4}));
}

TEST(BoxesOfRangeTest, A2dRangeIsItsPartialRowsAndItsWholeRows) {
  // [2, 11) of a 3x4: row 0 from column 2, row 1 whole, row 2 to column 2.
  const std::vector<Box> boxes = BoxesOfRange({3, 4}, 2, 9);
  EXPECT_THAT(Offsets(boxes), ElementsAre(V{0, 2}, V{1, 0}, V{2, 0}));
  EXPECT_THAT(Sizes(boxes), ElementsAre(V{1, 2}, V{1, 4}, V{1, 3}));
  EXPECT_EQ(boxes[0].begin, 2);
  EXPECT_EQ(boxes[1].begin, 4);
  EXPECT_EQ(boxes[2].begin, 8);
}

TEST(BoxesOfRangeTest, A3dRangeUsesAtMostFiveBoxes) {
  // [7, 53) of 3x4x5 (20 per block, 5 per row): block 0 row 1 from
  // column 2, block 0 rows 2-3, block 1 whole, block 2 rows 0-1, block 2
  // row 2 to column 2.
  const std::vector<Box> boxes = BoxesOfRange({3, 4, 5}, 7, 46);
  EXPECT_THAT(Offsets(boxes), ElementsAre(V{0, 1, 2}, V{0, 2, 0}, V{1, 0, 0},
                                          V{2, 0, 0}, V{2, 2, 0}));
  EXPECT_THAT(Sizes(boxes), ElementsAre(V{1, 1, 3}, V{1, 2, 5}, V{1, 4, 5},
                                        V{1, 2, 5}, V{1, 1, 3}));
  int64_t total = 0;
  for (const Box& b : boxes) total += b.sizes[0] * b.sizes[1] * b.sizes[2];
  EXPECT_EQ(total, 46);
}

TEST(BoxesOfRangeTest, AScalarIsOneBoxOfNoDimensions) {
  const std::vector<Box> boxes = BoxesOfRange({}, 0, 1);
  ASSERT_EQ(boxes.size(), 1u);
  EXPECT_TRUE(boxes[0].offsets.empty());
  EXPECT_TRUE(boxes[0].sizes.empty());
}

bool SameBytes(const at::Tensor& a, const at::Tensor& b) {
  return a.scalar_type() == b.scalar_type() && a.sizes() == b.sizes() &&
         std::memcmp(a.contiguous().data_ptr(), b.contiguous().data_ptr(),
                     a.nbytes()) == 0;
}

// The whole state the tests save: two parameters (one bfloat16), AdamW
// moments of both, and the step.
struct Whole {
  at::Tensor w = at::arange(35, at::kFloat).mul(0.37).sub(5).reshape({5, 7});
  at::Tensor b = at::arange(6, at::kFloat).mul(0.5).to(at::kBFloat16);
  at::Tensor w_avg = at::arange(35, at::kFloat).mul(-0.01).reshape({5, 7});
  at::Tensor w_sq = at::arange(35, at::kFloat).mul(0.002).reshape({5, 7});
  at::Tensor b_avg = at::arange(6, at::kFloat).mul(0.3);
  at::Tensor b_sq = at::arange(6, at::kFloat).mul(0.04);
  at::Tensor step = at::full({}, 17, at::kLong);
};

ShardedTensor Run(const std::string& name, const at::Tensor& whole,
                  int64_t begin, int64_t end) {
  return ShardedTensor{name, whole.sizes().vec(), begin,
                       whole.reshape({-1}).narrow(0, begin, end - begin)};
}

// Rank `rank` of `world`: "w" and its moments in uneven flat shards (cut
// inside rows), "b" and its moments and the step replicated.
TensorState StateOf(const Whole& s, int rank, int world) {
  const int64_t cuts[4][5] = {{0, 35}, {0, 18, 35}, {0, 9, 23, 35}};
  const int64_t begin = cuts[world - 1][rank], end = cuts[world - 1][rank + 1];
  TensorState state;
  state.model.push_back(Run("w", s.w, begin, end));
  state.model.push_back(Run("b", s.b, 0, 6));
  state.optimizer.push_back(Run("w.exp_avg", s.w_avg, begin, end));
  state.optimizer.push_back(Run("w.exp_avg_sq", s.w_sq, begin, end));
  state.optimizer.push_back(Run("b.exp_avg", s.b_avg, 0, 6));
  state.optimizer.push_back(Run("b.exp_avg_sq", s.b_sq, 0, 6));
  state.optimizer.push_back(ShardedTensor{"step", {}, 0, s.step.reshape({1})});
  return state;
}

Contents ContentsOf() {
  Contents contents;
  contents.meta.step = 17;
  contents.meta.seed = 1234;
  contents.meta.strategy = "fsdp";
  contents.meta.optimizer = "adamw";
  contents.param_scheduler = {{"kind", std::string("cosine")},
                              {"last_step", int64_t{17}},
                              {"base_lr", 3e-4}};
  // Bytes of 3 (read with the pickle) and of 1000 (a record of their own).
  contents.extra = {{"sampler", Bytes{std::string("\x00\x01\xff", 3)}},
                    {"generator", Bytes{std::string(1000, '\x7f')}}};
  return contents;
}

void ExpectReadsBack(const std::string& dir, const Whole& s) {
  absl::StatusOr<std::unique_ptr<Reader>> reader = Reader::Open(dir);
  ASSERT_TRUE(reader.ok()) << reader.status();
  const std::pair<std::string, at::Tensor> tensors[] = {
      {"model.w", s.w},
      {"model.b", s.b},
      {"optim.state.w.exp_avg", s.w_avg},
      {"optim.state.w.exp_avg_sq", s.w_sq},
      {"optim.state.b.exp_avg", s.b_avg},
      {"optim.state.b.exp_avg_sq", s.b_sq},
      {"optim.state.w.step", at::full({}, 17.0, at::kFloat)},
      {"optim.state.b.step", at::full({}, 17.0, at::kFloat)}};
  EXPECT_EQ((*reader)->metadata().tensors.size(), std::size(tensors));
  for (const auto& [key, expected] : tensors) {
    absl::StatusOr<at::Tensor> got = (*reader)->ReadTensor(key);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_TRUE(SameBytes(*got, expected)) << key;
  }
  absl::StatusOr<c10::IValue> step = (*reader)->ReadValue("strata.meta.step");
  ASSERT_TRUE(step.ok()) << step.status();
  EXPECT_EQ(step->toInt(), 17);
  absl::StatusOr<c10::IValue> kind =
      (*reader)->ReadValue("strata.param_scheduler.kind");
  ASSERT_TRUE(kind.ok()) << kind.status();
  EXPECT_EQ(kind->toStringRef(), "cosine");
  absl::StatusOr<c10::IValue> sampler =
      (*reader)->ReadValue("strata.extra.sampler");
  ASSERT_TRUE(sampler.ok()) << sampler.status();
  EXPECT_TRUE(
      SameBytes(sampler->toTensor(), at::tensor({0, 1, 255}, at::kByte)));
  absl::StatusOr<c10::IValue> generator =
      (*reader)->ReadValue("strata.extra.generator");
  ASSERT_TRUE(generator.ok()) << generator.status();
  EXPECT_TRUE(
      SameBytes(generator->toTensor(), at::full({1000}, 0x7f, at::kByte)));
  // Strata's groups: the matrix (decay), then the vector.
  absl::StatusOr<c10::IValue> params0 =
      (*reader)->ReadValue("optim.param_groups.0.params");
  ASSERT_TRUE(params0.ok()) << params0.status();
  ASSERT_EQ(params0->toListRef().size(), 1u);
  EXPECT_EQ(params0->toListRef()[0].toStringRef(), "w");
  absl::StatusOr<c10::IValue> decay =
      (*reader)->ReadValue("optim.param_groups.1.weight_decay");
  ASSERT_TRUE(decay.ok()) << decay.status();
  EXPECT_EQ(decay->toDouble(), 0.0);
}

TEST(SaveDcpTest, OneProcessReadsBackByteIdentical) {
  const std::string dir = strata::testing::FreshTempDir("dcp_write1") + "/c";
  const Whole s;
  ASSERT_THAT(SaveDcp(dir, StateOf(s, 0, 1), ContentsOf(), nullptr), IsOk());
  EXPECT_TRUE(std::filesystem::exists(dir + "/__0_0.distcp"));
  EXPECT_FALSE(std::filesystem::exists(dir + ".tmp"));
  ExpectReadsBack(dir, s);
}

TEST(SaveDcpTest, ThreeRanksWriteTheirShardsAndReplicatedTensorsOnce) {
  const std::string dir = strata::testing::FreshTempDir("dcp_write3") + "/c";
  const Whole s;
  ASSERT_THAT(comm::testing::RunOnRanks(
                  3,
                  [&](comm::Group& group) {
                    EXPECT_THAT(SaveDcp(dir, StateOf(s, group.rank(), 3),
                                        ContentsOf(), &group),
                                IsOk());
                  }),
              IsOk());
  for (int r = 0; r < 3; ++r) {
    EXPECT_TRUE(
        std::filesystem::exists(dir + "/__" + std::to_string(r) + "_0.distcp"))
        << r;
  }
  ExpectReadsBack(dir, s);
  absl::StatusOr<Metadata> metadata = ReadMetadata(dir);
  ASSERT_TRUE(metadata.ok()) << metadata.status();
  // "b" (replicated) once, whole; "w" in the boxes of the 3 flat shards:
  // [0, 9) = row 0 and columns 0-1 of row 1; [9, 23) = the rest of row 1,
  // row 2, columns 0-1 of row 3; [23, 35) = the rest of row 3 and row 4.
  EXPECT_EQ(metadata->tensors.at("model.b").chunks.size(), 1u);
  EXPECT_EQ(metadata->tensors.at("model.w").chunks.size(), 7u);
}

TEST(SaveDcpTest, ReplacesAnExistingCheckpointWhole) {
  const std::string dir = strata::testing::FreshTempDir("dcp_replace") + "/c";
  Whole s;
  ASSERT_THAT(SaveDcp(dir, StateOf(s, 0, 1), ContentsOf(), nullptr), IsOk());
  s.w.add_(1);
  ASSERT_THAT(comm::testing::RunOnRanks(
                  2,
                  [&](comm::Group& group) {
                    EXPECT_THAT(SaveDcp(dir, StateOf(s, group.rank(), 2),
                                        ContentsOf(), &group),
                                IsOk());
                  }),
              IsOk());
  ExpectReadsBack(dir, s);
}

}  // namespace
}  // namespace strata::checkpoint::dcp
