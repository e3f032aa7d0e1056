// --trace_steps / --trace_dir through the train binary at two ranks: the
// merged trace.json that rank 0 writes.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/time/time.h"
#include "base/json.h"
#include "base/testing/subprocess.h"
#include "launch/testing/run_output.h"

namespace strata::launch {
namespace {

using ::strata::launch::testing::TempDir;

struct Span {
  std::string name;
  std::string category;
  int64_t start_us = 0;
  int64_t end_us = 0;
  int pid = 0;
  int tid = 0;
  nlohmann::json args;
};

struct Trace {
  std::vector<Span> spans;
  std::map<int, std::string> process_names;            // pid -> name.
  std::map<std::pair<int, int>, std::string> threads;  // (pid, tid) -> name.
};

// Runs 5 steps of gpt-tiny at two ranks tracing steps 2..3 and returns the
// parsed trace; `more` flags follow.
Trace TraceRun(const std::string& name, const std::vector<std::string>& more) {
  const std::string out = TempDir(name);
  std::vector<std::string> args = {
      ::strata::testing::RunfilePath("launch/train/train"),
      "--nproc=2",
      "--steps=5",
      "--warmup_steps=1",
      "--seq_len=16",
      "--markov_tokens=5000",
      "--global_batch=4",
      "--log_interval=5",
      "--eval_interval=0",
      "--eval_batches=1",
      "--output_dir=" + out,
      "--trace_steps=2:3",
      "--trace_dir=" + out + "/trace"};
  args.insert(args.end(), more.begin(), more.end());
  const ::strata::testing::RunResult run = ::strata::testing::Run(
      args, {{"OMP_NUM_THREADS", "1"}}, absl::Seconds(120));
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_THAT(run.err, ::testing::HasSubstr(out + "/trace/trace.json"));
  Trace trace;
  auto text = testing::ReadFile(out + "/trace/trace.json");
  auto parsed = ParseJson(text, "trace.json");
  EXPECT_TRUE(parsed.ok()) << parsed.status();
  if (!parsed.ok()) return trace;
  for (const auto& e : parsed->at("traceEvents")) {
    const int pid = e.at("pid").get<int>();
    const int tid = e.at("tid").get<int>();
    if (e.at("ph") == "M") {
      const std::string value = e.at("args").value("name", "");
      if (e.at("name") == "process_name") trace.process_names[pid] = value;
      if (e.at("name") == "thread_name") trace.threads[{pid, tid}] = value;
      continue;
    }
    EXPECT_EQ(e.at("ph"), "X");
    Span s;
    s.name = e.at("name").get<std::string>();
    s.category = e.at("cat").get<std::string>();
    s.start_us = e.at("ts").get<int64_t>();
    s.end_us = s.start_us + e.at("dur").get<int64_t>();
    s.pid = pid;
    s.tid = tid;
    s.args = e.at("args");
    trace.spans.push_back(std::move(s));
  }
  return trace;
}

std::vector<Span> Named(const Trace& t, int pid, absl::string_view prefix) {
  std::vector<Span> out;
  for (const Span& s : t.spans) {
    if (s.pid == pid && absl::StartsWith(s.name, prefix)) out.push_back(s);
  }
  return out;
}

class TraceTrainTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ddp_ = new Trace(TraceRun("ddp", {"--strategy=ddp"}));
  }
  static void TearDownTestSuite() { delete ddp_; }
  static Trace* ddp_;
};
Trace* TraceTrainTest::ddp_ = nullptr;

TEST_F(TraceTrainTest, OneProcessPerRank) {
  EXPECT_EQ(ddp_->process_names,
            (std::map<int, std::string>{{0, "rank 0"}, {1, "rank 1"}}));
  for (int pid : {0, 1}) {
    std::set<std::string> names;
    for (const auto& [key, name] : ddp_->threads) {
      if (key.first == pid) names.insert(name);
    }
    EXPECT_EQ(names.count("train"), 1u) << "rank " << pid;
    EXPECT_EQ(names.count("world collectives"), 1u) << "rank " << pid;
  }
}

// On every track, spans nest: sorted by start (longer first on ties), each
// span ends no later than the innermost span still open around it.
void ExpectNested(const Trace& t) {
  std::map<std::pair<int, int>, std::vector<Span>> tracks;
  for (const Span& s : t.spans) tracks[{s.pid, s.tid}].push_back(s);
  ASSERT_FALSE(tracks.empty());
  for (auto& [key, spans] : tracks) {
    std::sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) {
      return a.start_us != b.start_us ? a.start_us < b.start_us
                                      : a.end_us > b.end_us;
    });
    std::vector<const Span*> open;
    for (const Span& s : spans) {
      while (!open.empty() && open.back()->end_us <= s.start_us)
        open.pop_back();
      if (!open.empty()) {
        EXPECT_LE(s.end_us, open.back()->end_us)
            << s.name << " crosses " << open.back()->name << " on rank "
            << key.first << " track "
            << (t.threads.count(key) ? t.threads.at(key) : "(unnamed)");
      }
      open.push_back(&s);
    }
  }
}

TEST_F(TraceTrainTest, SpansNestOnEveryTrack) { ExpectNested(*ddp_); }

// The two traced steps, each holding its units' forwards and backwards.
TEST_F(TraceTrainTest, StepsHoldTheirUnitSpans) {
  for (int pid : {0, 1}) {
    const std::vector<Span> steps = Named(*ddp_, pid, "step ");
    ASSERT_EQ(steps.size(), 2u) << "rank " << pid;
    // gpt-tiny: embed, blocks.0, blocks.1, head; one micro-batch per step.
    const std::vector<Span> forwards = Named(*ddp_, pid, "forward ");
    const std::vector<Span> backwards = Named(*ddp_, pid, "backward ");
    EXPECT_EQ(forwards.size(), 8u) << "rank " << pid;
    EXPECT_EQ(backwards.size(), 8u) << "rank " << pid;
    for (const Span& f : forwards) {
      int inside = 0;
      for (const Span& step : steps) {
        inside += step.start_us <= f.start_us && f.end_us <= step.end_us;
      }
      EXPECT_EQ(inside, 1) << f.name << " on rank " << pid;
    }
  }
}

TEST_F(TraceTrainTest, OneOptimizerStepAndClipPerStep) {
  for (int pid : {0, 1}) {
    EXPECT_EQ(Named(*ddp_, pid, "optimizer step").size(), 2u);
    EXPECT_EQ(Named(*ddp_, pid, "clip gradients").size(), 2u);
  }
}

// DDP all-reduces gradient buckets: every collective span names its op and
// group and carries its bytes; the all-reduces' bytes are whole fp32
// elements.
TEST_F(TraceTrainTest, CollectivesCarryTheirBytes) {
  for (int pid : {0, 1}) {
    int all_reduces = 0;
    for (const Span& s : ddp_->spans) {
      if (s.pid != pid || s.category != "comm") continue;
      EXPECT_GT(s.args.at("bytes").get<int64_t>(), 0) << s.name;
      EXPECT_EQ(s.args.at("group"), "world");
      if (s.name == "all_reduce") {
        ++all_reduces;
        EXPECT_EQ(s.args.at("bytes").get<int64_t>() % 4, 0);
      }
    }
    EXPECT_GE(all_reduces, 2) << "rank " << pid;  // One per step at least.
  }
}

// With --async_save every step: the training thread's snapshot copy and the
// writer thread's write, on a track named "checkpoint writer". The save of
// step 2 is waited for when step 3 saves, so its write is inside the window.
TEST(TraceCheckpointTest, AsyncSaveCopyAndWriteAreTraced) {
  const Trace t =
      TraceRun("ddp_ckpt", {"--strategy=ddp", "--save_every=1", "--async_save",
                            "--ckpt_dir=" + TempDir("ddp_ckpt") + "/ckpt"});
  for (int pid : {0, 1}) {
    EXPECT_EQ(Named(t, pid, "checkpoint copy").size(), 2u) << "rank " << pid;
    const std::vector<Span> writes = Named(t, pid, "checkpoint write");
    ASSERT_FALSE(writes.empty()) << "rank " << pid;
    for (const Span& w : writes) {
      EXPECT_EQ(t.threads.at({pid, w.tid}), "checkpoint writer");
    }
  }
}

// Whether, on some rank, an all-gather in flight overlaps a unit's forward.
// The unit's own gather completes before its forward starts (FSDP waits for
// it), so an overlapping all-gather is one issued for a later unit.
bool AllGatherOverlapsAForward(const Trace& t) {
  for (int pid : {0, 1}) {
    for (const Span& f : Named(t, pid, "forward blocks.")) {
      for (const Span& g : t.spans) {
        if (g.pid == pid && g.name == "all_gather" && g.start_us < f.end_us &&
            f.start_us < g.end_us) {
          return true;
        }
      }
    }
  }
  return false;
}

TEST(TraceFsdpTest, PrefetchedAllGatherOverlapsTheForward) {
  const Trace t =
      TraceRun("fsdp_prefetch", {"--strategy=fsdp", "--fsdp_forward_prefetch"});
  EXPECT_TRUE(AllGatherOverlapsAForward(t));
}

// The control: without forward prefetch each unit's all-gather is issued
// after the previous forward ended and waited for before its own.
TEST(TraceFsdpTest, WithoutPrefetchNoAllGatherOverlapsAForward) {
  const Trace t = TraceRun("fsdp_no_prefetch", {"--strategy=fsdp"});
  ASSERT_FALSE(Named(t, 0, "forward blocks.").empty());
  EXPECT_FALSE(AllGatherOverlapsAForward(t));
}

}  // namespace
}  // namespace strata::launch
