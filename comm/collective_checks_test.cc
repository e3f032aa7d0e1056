#include "comm/collective_checks.h"

#include <ATen/ATen.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "base/testing/status_matchers.h"

namespace strata::comm::internal {
namespace {

using ::strata::testing::IsOk;
using ::strata::testing::StatusIs;
using ::testing::HasSubstr;

TEST(OpKindNameTest, NamesEveryKind) {
  EXPECT_EQ(OpKindName(OpKind::kAllReduce), "all_reduce");
  EXPECT_EQ(OpKindName(OpKind::kBroadcast), "broadcast");
  EXPECT_EQ(OpKindName(OpKind::kAllGather), "all_gather");
  EXPECT_EQ(OpKindName(OpKind::kReduceScatter), "reduce_scatter");
  EXPECT_EQ(OpKindName(OpKind::kBarrier), "barrier");
  EXPECT_EQ(OpKindName(OpKind::kSplit), "split");
}

TEST(CheckTensorTest, ContiguousCpuTensorIsFine) {
  EXPECT_THAT(CheckTensor(at::zeros({2, 3}), "input"), IsOk());
}

TEST(CheckTensorTest, UndefinedTensorNamesItsRole) {
  EXPECT_THAT(CheckTensor(at::Tensor(), "output"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "output tensor is undefined"));
}

TEST(CheckTensorTest, NonContiguousTensorIsRejected) {
  EXPECT_THAT(CheckTensor(at::zeros({2, 3}).t(), "input"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("input tensor is not contiguous")));
}

// The NCCL path (cuda_device >= 0) wants the communicator's device.
TEST(CheckTensorTest, CpuTensorOnTheNcclPathNamesTheDevice) {
  EXPECT_THAT(CheckTensor(at::zeros({4}), "all_gather output", 0),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("all_gather output tensor is on cpu; this "
                                 "group's NCCL communicator works on cuda:0")));
}

TEST(CheckReducibleTest, AverageOfFloatsIsFine) {
  EXPECT_THAT(CheckReducible(at::zeros({2}, at::kFloat), true), IsOk());
}

TEST(CheckReducibleTest, SumOfIntegersIsFine) {
  EXPECT_THAT(CheckReducible(at::zeros({2}, at::kLong), false), IsOk());
}

TEST(CheckReducibleTest, AverageOfIntegersIsRejected) {
  EXPECT_THAT(CheckReducible(at::zeros({2}, at::kLong), true),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "average needs a floating dtype, got Long"));
}

TEST(CheckReducibleTest, BoolIsRejected) {
  EXPECT_THAT(CheckReducible(at::zeros({2}, at::kBool), false),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "cannot reduce a Bool tensor"));
}

TEST(CheckCountsTest, OneNonNegativeCountPerRankIsFine) {
  EXPECT_THAT(CheckCounts(std::vector<int64_t>{3, 0}, 2), IsOk());
}

TEST(CheckCountsTest, WrongNumberOfCountsIsRejected) {
  EXPECT_THAT(CheckCounts(std::vector<int64_t>{3, 1, 2}, 2),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "counts has 3 entries; expected one per rank (2)"));
}

TEST(CheckCountsTest, NegativeCountIsRejected) {
  EXPECT_THAT(CheckCounts(std::vector<int64_t>{3, -1}, 2),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "counts[1] = -1 is negative"));
}

TEST(CountsHashTest, EqualCountsHashEqualAndNonNegative) {
  const std::vector<int64_t> counts = {4, 5, 6};
  EXPECT_EQ(CountsHash(counts), CountsHash(std::vector<int64_t>{4, 5, 6}));
  EXPECT_GE(CountsHash(counts), 0);
}

TEST(CountsHashTest, DifferentCountsHashDifferently) {
  EXPECT_NE(CountsHash(std::vector<int64_t>{4, 5}),
            CountsHash(std::vector<int64_t>{5, 4}));
}

TEST(CollectiveDescriptorTest, ToStringShowsOnlyWhatIsSet) {
  CollectiveDescriptor d;
  d.kind = OpKind::kAllReduce;
  d.dtype = at::kFloat;
  d.input_numel = 10;
  d.output_numel = 10;
  EXPECT_EQ(d.ToString(), "all_reduce(Float, 10 -> 10 elements)");
}

TEST(CollectiveDescriptorTest, ToStringShowsRootAndCounts) {
  CollectiveDescriptor d;
  d.kind = OpKind::kAllGather;
  d.dtype = at::kBFloat16;
  d.input_numel = 2;
  d.output_numel = 4;
  d.root = 1;
  d.counts_hash = 31;
  EXPECT_EQ(d.ToString(),
            "all_gather(BFloat16, 2 -> 4 elements, root/op 1, counts #1f)");
}

TEST(CollectiveDescriptorTest, RowRoundTripsAndCarriesValidity) {
  CollectiveDescriptor d;
  d.kind = OpKind::kReduceScatter;
  d.dtype = at::kDouble;
  d.input_numel = 8;
  d.output_numel = 4;
  d.root = 0;
  d.counts_hash = 12345;
  const CollectiveDescriptor::Row row = d.ToRow(/*locally_valid=*/false);
  EXPECT_EQ(row[CollectiveDescriptor::kFields - 1], 0);
  EXPECT_EQ(d.ToRow(/*locally_valid=*/true)[CollectiveDescriptor::kFields - 1],
            1);
  EXPECT_EQ(CollectiveDescriptor::FromRow(row.data()).ToString(), d.ToString());
}

}  // namespace
}  // namespace strata::comm::internal
