#include "strategies/replicas.h"

#include <ATen/ATen.h>

#include <limits>
#include <string>
#include <vector>

#include "base/testing/status_matchers.h"
#include "comm/group.h"
#include "comm/testing/multi_rank.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace strata::strategies {
namespace {

using ::strata::testing::IsOk;
using ::strata::testing::StatusIs;
using ::testing::HasSubstr;

// What rank r of a 2-rank group holds in one case of the table.
struct Case {
  std::string name;
  std::vector<NamedShape> rank0;
  std::vector<NamedShape> rank1;
  bool ok;
  // Substrings every rank's error must contain (when !ok).
  std::vector<std::string> message;
};

// Runs CheckSameOnAllRanks on 2 ranks (threads) and returns each rank's
// status.
std::vector<absl::Status> Check(const Case& c) {
  std::vector<absl::Status> statuses(2);
  const absl::Status formed =
      comm::testing::RunOnRanks(2, [&](comm::Group& group) {
        statuses[group.rank()] =
            CheckSameOnAllRanks(group, group.rank() == 0 ? c.rank0 : c.rank1,
                                SameOnAllRanksWording());
      });
  EXPECT_THAT(formed, IsOk());
  return statuses;
}

TEST(CheckSameOnAllRanksTest, Table) {
  const std::vector<NamedShape> model = {{"wte.weight", {8, 4}},
                                         {"ln.bias", {4}}};
  const std::vector<Case> cases = {
      {"same", model, model, true, {}},
      {"empty", {}, {}, true, {}},
      {"another shape",
       model,
       {{"wte.weight", {8, 5}}, {"ln.bias", {4}}},
       false,
       {"parameter 'wte.weight'", "rank 0 has shape [8, 4]",
        "rank 1 has shape [8, 5]", "every rank must build the same model"}},
      {"another name",
       model,
       {{"wte.weight", {8, 4}}, {"ln.weight", {4}}},
       false,
       {"parameter #1", "different names on rank 0 and rank 1"}},
      {"another count",
       model,
       {{"wte.weight", {8, 4}}},
       false,
       {"ranks hold different models", "rank 0 has 2", "rank 1 has 1"}},
      {"same elements, other split",
       {{"a", {2, 6}}},
       {{"a", {3, 4}}},
       false,
       {"rank 0 has shape [2, 6]", "rank 1 has shape [3, 4]"}},
  };
  for (const Case& c : cases) {
    const std::vector<absl::Status> statuses = Check(c);
    for (int rank = 0; rank < 2; ++rank) {
      if (c.ok) {
        EXPECT_THAT(statuses[rank], IsOk()) << c.name << ", rank " << rank;
        continue;
      }
      for (const std::string& part : c.message) {
        EXPECT_THAT(statuses[rank], StatusIs(absl::StatusCode::kInvalidArgument,
                                             HasSubstr(part)))
            << c.name << ", rank " << rank;
      }
    }
  }
}

// The optimizer config clipping at `grad_clip` by the `norm_type`-norm.
OptimizerConfig Clip(double grad_clip, double norm_type = 2.0) {
  OptimizerConfig config;
  config.grad_clip = grad_clip;
  config.grad_clip_norm_type = norm_type;
  return config;
}

TEST(ClipGradientsTest, OneProcessScalesToTheClipNorm) {
  // |(3, 4)| = 5; clipped to 1: (0.6, 0.8).
  at::Tensor grads = at::tensor({3.0f, 4.0f});
  absl::StatusOr<double> norm =
      ClipGradients(grads, Clip(1.0), nullptr, "single");
  ASSERT_THAT(norm, IsOk());
  EXPECT_DOUBLE_EQ(*norm, 5.0);
  EXPECT_TRUE(at::allclose(grads, at::tensor({0.6f, 0.8f})));
}

TEST(ClipGradientsTest, ShardsClipByTheGlobalNorm) {
  // Rank 0 holds (3), rank 1 holds (4): the global norm is 5 on both, and
  // both scale by 1 / 5 (clip 1).
  std::vector<double> norms(2);
  std::vector<float> values(2);
  ASSERT_THAT(comm::testing::RunOnRanks(
                  2,
                  [&](comm::Group& group) {
                    at::Tensor shard =
                        at::tensor({group.rank() == 0 ? 3.0f : 4.0f});
                    absl::StatusOr<double> norm =
                        ClipGradients(shard, Clip(1.0), &group, "zero2");
                    ASSERT_THAT(norm, IsOk());
                    norms[group.rank()] = *norm;
                    values[group.rank()] = shard.item<float>();
                  }),
              IsOk());
  EXPECT_DOUBLE_EQ(norms[0], 5.0);
  EXPECT_DOUBLE_EQ(norms[1], 5.0);
  EXPECT_FLOAT_EQ(values[0], 0.6f);
  EXPECT_FLOAT_EQ(values[1], 0.8f);
}

TEST(ClipGradientsTest, ShardsClipByTheLargestPartForTheInfinityNorm) {
  // Rank 0 holds (3), rank 1 holds (-4): the global infinity norm is 4 on
  // both (an all-reduced max, not a sum), and both scale by 1 / (4 + 1e-6).
  std::vector<double> norms(2);
  std::vector<float> values(2);
  ASSERT_THAT(
      comm::testing::RunOnRanks(
          2,
          [&](comm::Group& group) {
            at::Tensor shard = at::tensor({group.rank() == 0 ? 3.0f : -4.0f});
            absl::StatusOr<double> norm = ClipGradients(
                shard, Clip(1.0, std::numeric_limits<double>::infinity()),
                &group, "fsdp");
            ASSERT_THAT(norm, IsOk());
            norms[group.rank()] = *norm;
            values[group.rank()] = shard.item<float>();
          }),
      IsOk());
  EXPECT_DOUBLE_EQ(norms[0], 4.0);
  EXPECT_DOUBLE_EQ(norms[1], 4.0);
  const float coef = static_cast<float>(1.0 / (4.0 + 1e-6));
  EXPECT_FLOAT_EQ(values[0], 3.0f * coef);
  EXPECT_FLOAT_EQ(values[1], -4.0f * coef);
}

TEST(ClipGradientsTest, ZeroClipOnlyMeasures) {
  at::Tensor grads = at::tensor({3.0f, 4.0f});
  absl::StatusOr<double> norm = ClipGradients(grads, Clip(0.0), nullptr, "ddp");
  ASSERT_THAT(norm, IsOk());
  EXPECT_DOUBLE_EQ(*norm, 5.0);
  EXPECT_TRUE(at::equal(grads, at::tensor({3.0f, 4.0f})));
}

}  // namespace
}  // namespace strata::strategies
