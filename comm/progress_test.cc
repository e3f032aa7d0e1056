#include "comm/progress.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <torch/csrc/distributed/c10d/HashStore.hpp>
#include <utility>
#include <vector>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "base/testing/status_matchers.h"

namespace strata::comm {
namespace {

using ::strata::testing::IsOk;
using ::strata::testing::StatusIs;
using ::testing::HasSubstr;

ProgressTrackerOptions TrackerOptions(
    int rank, absl::Duration publish_interval = absl::Milliseconds(20),
    absl::Duration refresh_interval = absl::Seconds(1), int node = -1,
    std::string host = "") {
  ProgressTrackerOptions options;
  options.global_rank = rank;
  options.publish_interval = publish_interval;
  options.refresh_interval = refresh_interval;
  options.node = node;
  options.host = std::move(host);
  return options;
}

ProgressRecord SampleRecord() {
  ProgressRecord r;
  r.step = 18;
  r.op = "all_gather";
  r.group = "world";
  r.seq = 4122;
  r.numel = 1000;
  r.bytes = 4000;
  r.op_step = 17;
  r.entered = absl::FromUnixMicros(1764090000123456);
  r.group_seqs = {{"world", 4122}, {"world/shard0", 12}};
  r.node = 1;
  r.host = "n1";
  r.published = absl::FromUnixMicros(1764090000523456);
  return r;
}

TEST(ProgressRecordTest, FormatsAsOneLine) {
  EXPECT_EQ(FormatProgressRecord(SampleRecord()),
            "v1 step=18 op=all_gather group=world seq=4122 numel=1000 "
            "bytes=4000 op_step=17 entered_us=1764090000123456 "
            "groups=world:4122,world/shard0:12 node=1 host=n1 "
            "published_us=1764090000523456");
}

TEST(ProgressRecordTest, ParsesWhereAndWhenItWasPublished) {
  absl::StatusOr<ProgressRecord> parsed =
      ParseProgressRecord(FormatProgressRecord(SampleRecord()));
  ASSERT_THAT(parsed.status(), IsOk());
  EXPECT_EQ(parsed->node, 1);
  EXPECT_EQ(parsed->host, "n1");
  EXPECT_EQ(parsed->published, SampleRecord().published);
}

TEST(ProgressRecordTest, ReadsARecordOfAnOlderWriterAsUnlocated) {
  // What a writer before node/host/published_us wrote.
  absl::StatusOr<ProgressRecord> parsed = ParseProgressRecord(
      "v1 step=18 op=all_gather group=world seq=4122 numel=1000 bytes=4000 "
      "op_step=17 entered_us=1764090000123456 groups=world:4122");
  ASSERT_THAT(parsed.status(), IsOk());
  EXPECT_EQ(parsed->node, -1);
  EXPECT_EQ(parsed->host, "");
  EXPECT_EQ(parsed->published, absl::UnixEpoch());
}

TEST(ProgressRecordTest, DescribesTheLocation) {
  ProgressRecord r;
  EXPECT_EQ(DescribeLocation(r), "");
  r.host = "n1";
  EXPECT_EQ(DescribeLocation(r), "host n1");
  r.node = 1;
  EXPECT_EQ(DescribeLocation(r), "node 1, host n1");
  r.host = "";
  EXPECT_EQ(DescribeLocation(r), "node 1");
}

TEST(ProgressRecordTest, ParsesWhatItFormats) {
  absl::StatusOr<ProgressRecord> parsed =
      ParseProgressRecord(FormatProgressRecord(SampleRecord()));
  ASSERT_THAT(parsed.status(), IsOk());
  EXPECT_TRUE(*parsed == SampleRecord());
}

TEST(ProgressRecordTest, ParsesAnEmptyRecord) {
  absl::StatusOr<ProgressRecord> parsed =
      ParseProgressRecord(FormatProgressRecord(ProgressRecord()));
  ASSERT_THAT(parsed.status(), IsOk());
  EXPECT_TRUE(*parsed == ProgressRecord());
}

TEST(ProgressRecordTest, IgnoresUnknownFields) {
  absl::StatusOr<ProgressRecord> parsed = ParseProgressRecord(
      FormatProgressRecord(SampleRecord()) + " future_field=7");
  ASSERT_THAT(parsed.status(), IsOk());
  EXPECT_TRUE(*parsed == SampleRecord());
}

TEST(ProgressRecordTest, RejectsAnotherVersion) {
  EXPECT_THAT(ParseProgressRecord("v2 step=1"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("expected it to start with 'v1'")));
}

TEST(ProgressRecordTest, RejectsANonIntegerField) {
  std::string text = FormatProgressRecord(SampleRecord());
  text.replace(text.find("seq=4122"), 8, "seq=x");
  EXPECT_THAT(ParseProgressRecord(text),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("field 'seq' must be an integer, got 'x'")));
}

TEST(ProgressRecordTest, RejectsAMissingField) {
  EXPECT_THAT(ParseProgressRecord("v1 step=1 op=- group=- seq=0"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("field 'numel' is missing")));
}

TEST(ProgressRecordTest, RejectsABadGroupList) {
  std::string text = FormatProgressRecord(SampleRecord());
  text.replace(text.find("groups="), std::string::npos, "groups=world");
  EXPECT_THAT(ParseProgressRecord(text),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("list of <group>:<seq>, got 'world'")));
}

TEST(ProgressRecordTest, DescribesTheLastOp) {
  const ProgressRecord r = SampleRecord();
  EXPECT_EQ(DescribeLastOp(r, r.entered + absl::Seconds(12)),
            "last entered all_gather #4122 on group 'world' at step 17, "
            "12.0 s ago");
}

TEST(ProgressRecordTest, DescribesARankWithoutCollectives) {
  ProgressRecord r;
  r.step = 3;
  EXPECT_EQ(DescribeLastOp(r, absl::Now()),
            "has entered no collective yet (at step 3)");
}

TEST(ProgressRecordTest, NamesOnlyTheRanksThatNeverArrived) {
  ProgressRecord behind = SampleRecord();  // world #4122.
  ProgressRecord arrived = SampleRecord();
  arrived.group_seqs["world"] = 4123;
  const absl::Time now = behind.entered + absl::Seconds(12);
  EXPECT_EQ(
      DescribeMissingRanks(
          "world", 4123, {{1, behind}, {2, arrived}, {3, absl::nullopt}}, now),
      "rank 1 never arrived (last entered all_gather #4122 on group "
      "'world' at step 17, 12.0 s ago); rank 3 never arrived (it "
      "recorded no progress yet)");
}

// Ranks 2 and 3 on node 1 entered world #4123 and then stopped refreshing
// their records (the link to node 1 was cut); rank 1 on node 0 refreshes.
std::vector<std::pair<int, absl::optional<ProgressRecord>>> CutOffNode(
    absl::Time now) {
  ProgressRecord fresh = SampleRecord();
  fresh.group_seqs["world"] = 4123;
  fresh.node = 0;
  fresh.host = "n0";
  fresh.published = now - absl::Milliseconds(400);
  ProgressRecord cut = fresh;
  cut.node = 1;
  cut.host = "n1";
  cut.published = now - absl::Seconds(9.8);
  ProgressRecord cut_earlier = cut;
  cut_earlier.published = now - absl::Seconds(10.1);
  return {{1, fresh}, {2, cut}, {3, cut_earlier}};
}

TEST(ProgressRecordTest, NamesTheNodeWhoseRecordsStoppedRefreshing) {
  const absl::Time now = absl::FromUnixSeconds(1764090100);
  EXPECT_EQ(DescribeMissingRanks("world", 4123, CutOffNode(now), now,
                                 absl::Seconds(3)),
            "every rank entered it; ranks 2, 3 (node 1, host n1) have not "
            "refreshed their progress records for 10.1 s: that node is "
            "unreachable, or the processes are stopped");
}

TEST(ProgressRecordTest, RecordsYoungerThanTheLimitAreNotStale) {
  const absl::Time now = absl::FromUnixSeconds(1764090100);
  EXPECT_EQ(DescribeMissingRanks("world", 4123, CutOffNode(now), now,
                                 absl::Seconds(11)),
            "every rank entered it");
}

TEST(ProgressRecordTest, NamesAStaleRankThatNeverArrived) {
  ProgressRecord stopped = SampleRecord();  // world #4122, node 1, host n1.
  const absl::Time now = stopped.published + absl::Seconds(12);
  EXPECT_EQ(
      DescribeMissingRanks("world", 4123, {{1, stopped}}, now,
                           absl::Seconds(3)),
      // Entered 0.4 s before the record was last written.
      "rank 1 never arrived (last entered all_gather #4122 on group 'world' "
      "at step 17, 12.4 s ago); rank 1 (node 1, host n1) has not refreshed "
      "its progress record for 12.0 s: that node is unreachable, or the "
      "process is stopped");
}

TEST(ProgressRecordTest, SaysWhenEveryRankArrived) {
  ProgressRecord arrived = SampleRecord();
  EXPECT_EQ(
      DescribeMissingRanks("world/shard0", 12, {{1, arrived}}, absl::Now()),
      "every rank entered it");
}

// Two ranks' trackers on one store.
struct TwoRanks {
  c10::intrusive_ptr<c10d::HashStore> store =
      c10::make_intrusive<c10d::HashStore>();
  ProgressTracker rank0{store, TrackerOptions(0, absl::Milliseconds(1))};
  ProgressTracker rank1{store, TrackerOptions(1, absl::Milliseconds(1))};
};

TEST(ProgressTrackerTest, PublishesTheRecordPeersRead) {
  TwoRanks ranks;
  ProgressTracker& rank0 = ranks.rank0;
  ProgressTracker& rank1 = ranks.rank1;
  rank1.SetStep(5);
  rank1.Enter("all_reduce", "world", 3, 10, 40);
  const ProgressRecord expected = rank1.Current();
  ASSERT_TRUE(rank1.Flush(absl::Seconds(20)));
  auto peers = rank0.ReadPeers({1}, absl::Seconds(5));
  ASSERT_THAT(peers.status(), IsOk());
  ASSERT_TRUE((*peers)[0].second.has_value());
  EXPECT_EQ((*peers)[0].first, 1);
  EXPECT_TRUE(*(*peers)[0].second == expected)
      << FormatProgressRecord(*(*peers)[0].second);
  EXPECT_EQ(expected.op_step, 5);
  EXPECT_EQ(expected.group_seqs.at("world"), 3);
}

TEST(ProgressTrackerTest, PublishesAtMostOncePerInterval) {
  auto store = c10::make_intrusive<c10d::HashStore>();
  ProgressTracker rank0(store, TrackerOptions(0, absl::Hours(1)));
  rank0.Enter("all_reduce", "world", 1, 10, 40);
  ASSERT_TRUE(rank0.Flush(absl::Seconds(20)));
  for (int seq = 2; seq <= 100; ++seq) {
    rank0.Enter("all_reduce", "world", seq, 10, 40);
  }
  // The interval (an hour) has not passed: the 99 changes wait.
  EXPECT_EQ(rank0.num_published(), 1);
}

TEST(ProgressTrackerTest, ExplainsATimeoutNamingTheRankBehind) {
  TwoRanks ranks;
  ranks.rank1.SetStep(17);
  ranks.rank1.Enter("all_gather", "world", 4122, 10, 40);
  ASSERT_TRUE(ranks.rank1.Flush(absl::Seconds(20)));
  const absl::Status explained = ExplainCollectiveFailure(
      absl::UnavailableError("all_gather of 10 x Float on group 'world' (rank "
                             "0 of 2): Timed out waiting 10000ms"),
      "all_gather of 10 x Float on group 'world' (rank 0 of 2)", "all_gather",
      "world", 4123, absl::Seconds(10), ranks.rank0, {1}, absl::Seconds(5));
  EXPECT_EQ(explained.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(explained.message()),
              ::testing::MatchesRegex(
                  "all_gather of 10 x Float on group 'world' \\(rank 0 of "
                  "2\\): all_gather #4123 timed out after 10s: rank 1 never "
                  "arrived \\(last entered all_gather #4122 on group 'world' "
                  "at step 17, [0-9.]+ s ago\\). Cause: Timed out waiting "
                  "10000ms"));
}

TEST(ProgressTrackerTest, ExplainsAnotherFailureWithoutClaimingATimeout) {
  auto store = c10::make_intrusive<c10d::HashStore>();
  ProgressTracker rank0(store, TrackerOptions(0, absl::Milliseconds(1)));
  const absl::Status explained = ExplainCollectiveFailure(
      absl::InternalError("barrier: Connection reset by peer"), "barrier",
      "barrier", "world", 3, absl::Seconds(10), rank0, {1}, absl::Seconds(5));
  EXPECT_EQ(explained.message(),
            "barrier: barrier #3 failed: rank 1 never arrived (it recorded no "
            "progress yet). Cause: Connection reset by peer");
}

TEST(ProgressTrackerTest, RefreshesAnUnchangedRecord) {
  auto store = c10::make_intrusive<c10d::HashStore>();
  ProgressTracker rank1(store, TrackerOptions(1, absl::Milliseconds(1),
                                              absl::Milliseconds(5), 1, "n1"));
  ProgressTracker rank0(store, TrackerOptions(0));
  rank1.Enter("all_reduce", "world", 1, 10, 40);
  ASSERT_TRUE(rank1.Flush(absl::Seconds(20)));
  auto first = rank0.ReadPeers({1}, absl::Seconds(5));
  ASSERT_THAT(first.status(), IsOk());
  ASSERT_TRUE((*first)[0].second.has_value());
  // Nothing changes from here on; the writer refreshes every 5 ms.
  const int64_t published = rank1.num_published();
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  while (rank1.num_published() < published + 3 && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(1));
  }
  auto later = rank0.ReadPeers({1}, absl::Seconds(5));
  ASSERT_THAT(later.status(), IsOk());
  ASSERT_TRUE((*later)[0].second.has_value());
  const ProgressRecord& record = *(*later)[0].second;
  EXPECT_GT(record.published, (*first)[0].second->published);
  EXPECT_TRUE(record == *(*first)[0].second);
  EXPECT_EQ(record.node, 1);
  EXPECT_EQ(record.host, "n1");
}

TEST(ProgressTrackerTest, CountsRecordsStaleAfterThreeRefreshesOrThreeSeconds) {
  auto store = c10::make_intrusive<c10d::HashStore>();
  ProgressTracker often(
      store, TrackerOptions(0, absl::Milliseconds(20), absl::Seconds(1)));
  ProgressTracker rarely(
      store, TrackerOptions(1, absl::Milliseconds(20), absl::Seconds(5)));
  EXPECT_EQ(often.stale_after(), absl::Seconds(3));
  EXPECT_EQ(rarely.stale_after(), absl::Seconds(15));
}

TEST(ProgressTrackerTest, ReadsNothingForARankThatNeverPublished) {
  auto store = c10::make_intrusive<c10d::HashStore>();
  ProgressTracker rank0(store, TrackerOptions(0, absl::Milliseconds(1)));
  auto peers = rank0.ReadPeers({1}, absl::Seconds(5));
  ASSERT_THAT(peers.status(), IsOk());
  EXPECT_FALSE((*peers)[0].second.has_value());
}

// A store whose reads block until released: a stopped store host.
class StuckStore : public c10d::HashStore {
 public:
  std::vector<uint8_t> get(const std::string& key) override {
    release_.WaitForNotification();
    return c10d::HashStore::get(key);
  }
  bool check(const std::vector<std::string>& keys) override {
    release_.WaitForNotification();
    return c10d::HashStore::check(keys);
  }
  void Release() { release_.Notify(); }

 private:
  absl::Notification release_;
};

TEST(ProgressTrackerTest, ReadingAStuckStoreEndsAtTheDeadline) {
  auto store = c10::make_intrusive<StuckStore>();
  {
    ProgressTracker rank0(store, TrackerOptions(0, absl::Milliseconds(1)));
    const auto start = std::chrono::steady_clock::now();
    auto peers = rank0.ReadPeers({1}, absl::Milliseconds(200));
    const double elapsed_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count();
    EXPECT_THAT(peers.status(),
                StatusIs(absl::StatusCode::kDeadlineExceeded,
                         HasSubstr("did not answer within 200ms")));
    EXPECT_LT(elapsed_s, 5.0);
  }
  store->Release();  // Lets the abandoned reader finish.
}

}  // namespace
}  // namespace strata::comm
