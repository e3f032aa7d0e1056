// The timeline trace recorder (train --trace_steps/--trace_dir): spans of
// work on each thread, written as Chrome trace JSON that Perfetto
// (ui.perfetto.dev) and chrome://tracing open.
//
// Process-wide and off by default. Off, every instrumentation point costs one
// relaxed atomic load and a branch: no clock read, no allocation (Span's
// constructor and Record check Enabled() first). On, each thread appends to
// its own buffer, registered once per thread with the process registry; the
// buffer's mutex is only ever contended by Collect, so the hot path takes an
// uncontended lock. Events are Chrome "complete" events (ph "X"): name,
// category, start and duration in microseconds of steady_clock (the clock
// every process on one machine shares), the thread, and a few arguments.
//
// Spans on one thread nest: Span is scoped, and a span that was open when
// tracing started or stopped is dropped rather than recorded half. Work whose
// start and end happen on different threads or overlap other work of the
// same kind (a collective from issue to completion) goes on a named virtual
// track (RecordOnTrack): the recorder splits the track into lanes ("world
// collectives", "world collectives #2", ...) so that spans on one lane never
// overlap, as the viewers require of a track.
//
// The library layers record through this header (comm/, optim/,
// strategies/, checkpoint/); launch/observe/trace_session.h turns the recorder
// on for a window of steps and merges the ranks' events into one file.
#ifndef STRATA_BASE_TRACE_H_
#define STRATA_BASE_TRACE_H_

#include <atomic>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"

namespace strata::trace {

namespace internal {
extern std::atomic<bool> enabled;
}  // namespace internal

// Whether spans are being recorded now. One relaxed load.
inline bool Enabled() {
  return internal::enabled.load(std::memory_order_relaxed);
}

// Microseconds of std::chrono::steady_clock (CLOCK_MONOTONIC on Linux).
int64_t NowMicros();

// One argument of an event: an integer or a string value.
struct Arg {
  std::string key;
  int64_t int_value = 0;
  std::string string_value;
  bool is_string = false;
};
Arg IntArg(std::string key, int64_t value);
Arg StringArg(std::string key, std::string value);

struct Event {
  std::string name;
  std::string category;
  int64_t start_us = 0;
  int64_t duration_us = 0;
  int tid = 0;  // The recorder's thread or lane id (>= 1).
  std::vector<Arg> args;
};

// Clears every buffer (dropping those of threads that exited) and starts
// recording.
void Start();
// Stops recording; the events stay until the next Start.
void Stop();

// Names the calling thread in the trace ("train", "comm worker"). Cheap
// enough to call at thread start whether or not tracing is on.
void SetThreadName(std::string name);

// Records [start_us, end_us) on the calling thread. No-op when off.
void Record(absl::string_view name, absl::string_view category,
            int64_t start_us, int64_t end_us, std::vector<Arg> args = {});

// Records [start_us, end_us) on a lane of the virtual track `track`: the
// first lane whose spans all ended by start_us. No-op when off.
void RecordOnTrack(absl::string_view track, absl::string_view name,
                   absl::string_view category, int64_t start_us, int64_t end_us,
                   std::vector<Arg> args = {});

// A scoped span on the calling thread. `name` and `category` must outlive it
// (string literals); use the string overload for a computed name, built only
// when Enabled().
class Span {
 public:
  Span(const char* name, const char* category)
      : name_(name),
        category_(category),
        start_us_(Enabled() ? NowMicros() : -1) {}
  ~Span() {
    if (start_us_ >= 0) Record(name_, category_, start_us_, NowMicros());
  }
  Span(const Span&) = delete;
  Span& operator=(const Span&) = delete;

 private:
  const char* name_;
  const char* category_;
  int64_t start_us_;
};

struct Recording {
  std::vector<Event> events;
  // (tid, name) of every named thread and lane with events.
  std::vector<std::pair<int, std::string>> thread_names;
};

// A copy of every buffer's events (safe while recording).
Recording Collect();

// The recording as Chrome trace events of process `pid` named
// `process_name`: a JSON array (text) of "M" metadata events (process and
// thread names) and "X" events, with timestamps shifted by -origin_us.
std::string ChromeTraceEvents(const Recording& recording, int pid,
                              absl::string_view process_name,
                              int64_t origin_us);

}  // namespace strata::trace

#endif  // STRATA_BASE_TRACE_H_
