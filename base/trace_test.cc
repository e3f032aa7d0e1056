#include "base/trace.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <thread>

#include "base/json.h"

namespace strata::trace {
namespace {

using ::testing::SizeIs;

// The events of `tid` in a recording.
std::vector<Event> OnThread(const Recording& r, int tid) {
  std::vector<Event> out;
  for (const Event& e : r.events) {
    if (e.tid == tid) out.push_back(e);
  }
  return out;
}

TEST(TraceTest, OffRecordsNothing) {
  Stop();
  Start();  // Clears earlier tests' events.
  Stop();
  { Span span("off", "test"); }
  Record("off", "test", 1, 2);
  RecordOnTrack("track", "off", "test", 1, 2);
  EXPECT_TRUE(Collect().events.empty());
}

TEST(TraceTest, SpansOnOneThreadNest) {
  Start();
  {
    Span outer("outer", "test");
    { Span inner("inner", "test"); }
  }
  Stop();
  const Recording r = Collect();
  ASSERT_THAT(r.events, SizeIs(2));
  // The inner span ends first, so it is recorded first.
  const Event& inner = r.events[0];
  const Event& outer = r.events[1];
  EXPECT_EQ(inner.name, "inner");
  EXPECT_EQ(outer.name, "outer");
  EXPECT_EQ(inner.tid, outer.tid);
  EXPECT_LE(outer.start_us, inner.start_us);
  EXPECT_GE(outer.start_us + outer.duration_us,
            inner.start_us + inner.duration_us);
}

TEST(TraceTest, ASpanOpenWhenTracingStartsIsDropped) {
  Stop();
  {
    Span before("before", "test");
    Start();
  }
  Stop();
  EXPECT_TRUE(Collect().events.empty());
}

TEST(TraceTest, ThreadsGetTheirOwnNamedTrack) {
  Start();
  int other_tid = 0;
  std::thread t([&] {
    SetThreadName("worker");
    Record("on worker", "test", 10, 20);
  });
  t.join();
  Record("on main", "test", 10, 20);
  Stop();
  const Recording r = Collect();
  ASSERT_THAT(r.events, SizeIs(2));
  for (const Event& e : r.events) {
    if (e.name == "on worker") other_tid = e.tid;
  }
  ASSERT_NE(other_tid, 0);
  EXPECT_THAT(OnThread(r, other_tid), SizeIs(1));
  bool named = false;
  for (const auto& [tid, name] : r.thread_names) {
    if (tid == other_tid) named = name == "worker";
  }
  EXPECT_TRUE(named);
}

TEST(TraceTest, OverlappingSpansOnATrackGoToSeparateLanes) {
  Start();
  RecordOnTrack("comm", "a", "test", 0, 100);
  RecordOnTrack("comm", "b", "test", 50, 150);   // Overlaps a: lane 2.
  RecordOnTrack("comm", "c", "test", 100, 120);  // After a: lane 1.
  Stop();
  const Recording r = Collect();
  ASSERT_THAT(r.events, SizeIs(3));
  int a = 0, b = 0, c = 0;
  for (const Event& e : r.events) {
    if (e.name == "a") a = e.tid;
    if (e.name == "b") b = e.tid;
    if (e.name == "c") c = e.tid;
  }
  EXPECT_NE(a, b);
  EXPECT_EQ(a, c);
}

TEST(TraceTest, JsonEscapesNamesAndKeepsArguments) {
  Start();
  const std::string name = "quote \" backslash \\ newline \n tab \t \x01";
  Record(
      name, "test", 1000, 1250,
      {IntArg("bytes", int64_t{1} << 40), StringArg("unit", "blocks.\"0\"")});
  Stop();
  const std::string text = ChromeTraceEvents(Collect(), 3, "rank 3", 1000);
  auto parsed = ParseJson(text, "trace");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  bool found = false;
  for (const auto& e : *parsed) {
    if (e["ph"] != "X") continue;
    found = true;
    EXPECT_EQ(e["name"], name);
    EXPECT_EQ(e["pid"], 3);
    EXPECT_EQ(e["ts"], 0);     // 1000 - origin 1000.
    EXPECT_EQ(e["dur"], 250);  // 1250 - 1000.
    EXPECT_EQ(e["args"]["bytes"], int64_t{1} << 40);
    EXPECT_EQ(e["args"]["unit"], "blocks.\"0\"");
  }
  EXPECT_TRUE(found);
}

TEST(TraceTest, JsonNamesTheProcess) {
  Start();
  Stop();
  auto parsed = ParseJson(ChromeTraceEvents(Collect(), 1, "rank 1", 0), "t");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  bool named = false;
  for (const auto& e : *parsed) {
    if (e["ph"] == "M" && e["name"] == "process_name") {
      named = e["args"]["name"] == "rank 1" && e["pid"] == 1;
    }
  }
  EXPECT_TRUE(named);
}

}  // namespace
}  // namespace strata::trace
