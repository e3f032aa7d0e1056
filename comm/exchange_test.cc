#include "comm/exchange.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/testing/status_matchers.h"
#include "comm/testing/multi_rank.h"

namespace strata::comm {
namespace {

using ::strata::testing::IsOk;
using ::strata::testing::StatusIs;
using ::testing::ElementsAre;

TEST(ExchangeTest, WithoutAGroupBytesAreThisProcesssOnly) {
  ASSERT_OK_AND_ASSIGN(std::vector<std::string> all,
                       AllGatherBytes(nullptr, "abc"));
  EXPECT_THAT(all, ElementsAre("abc"));
}

TEST(ExchangeTest, WithoutAGroupNamesAreDeduplicated) {
  ASSERT_OK_AND_ASSIGN(std::set<std::string> names,
                       AllGatherNames(nullptr, {"b", "a", "b"}));
  EXPECT_THAT(names, ElementsAre("a", "b"));
}

TEST(ExchangeTest, WithoutAGroupTheLocalStatusIsTheAgreedOne) {
  EXPECT_THAT(AgreeOnStatus(nullptr, absl::OkStatus()), IsOk());
  EXPECT_THAT(AgreeOnStatus(nullptr, absl::NotFoundError("x")),
              StatusIs(absl::StatusCode::kNotFound, "x"));
}

TEST(ExchangeTest, BytesOfEveryRankIndexedByRank) {
  ASSERT_THAT(testing::RunOnRanks(
                  3,
                  [](Group& group) {
                    // Rank 1 sends nothing.
                    const std::string mine =
                        group.rank() == 1
                            ? ""
                            : std::string(group.rank() + 1, 'a' + group.rank());
                    ASSERT_OK_AND_ASSIGN(std::vector<std::string> all,
                                         AllGatherBytes(&group, mine));
                    EXPECT_THAT(all, ElementsAre("a", "", "ccc"));
                  }),
              IsOk());
}

TEST(ExchangeTest, NamesAreTheUnionOverRanks) {
  ASSERT_THAT(testing::RunOnRanks(
                  2,
                  [](Group& group) {
                    const std::vector<std::string> mine =
                        group.rank() == 0 ? std::vector<std::string>{"w", "b"}
                                          : std::vector<std::string>{"w", "z"};
                    ASSERT_OK_AND_ASSIGN(std::set<std::string> names,
                                         AllGatherNames(&group, mine));
                    EXPECT_THAT(names, ElementsAre("b", "w", "z"));
                  }),
              IsOk());
}

TEST(ExchangeTest, EveryRankGetsTheFirstFailedRanksError) {
  ASSERT_THAT(testing::RunOnRanks(
                  3,
                  [](Group& group) {
                    absl::Status local = absl::OkStatus();
                    if (group.rank() == 1)
                      local = absl::DataLossError("bad chunk");
                    if (group.rank() == 2) local = absl::InternalError("other");
                    EXPECT_THAT(AgreeOnStatus(&group, local),
                                StatusIs(absl::StatusCode::kDataLoss,
                                         "rank 1: bad chunk (and 1 more ranks "
                                         "failed)"));
                  }),
              IsOk());
}

TEST(ExchangeTest, AllOkIsOkEverywhere) {
  ASSERT_THAT(testing::RunOnRanks(2,
                                  [](Group& group) {
                                    EXPECT_THAT(
                                        AgreeOnStatus(&group, absl::OkStatus()),
                                        IsOk());
                                  }),
              IsOk());
}

}  // namespace
}  // namespace strata::comm
