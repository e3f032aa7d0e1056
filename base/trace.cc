#include "base/trace.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"

namespace strata::trace {

namespace internal {
std::atomic<bool> enabled{false};
}  // namespace internal

namespace {

struct Buffer {
  absl::Mutex mu;
  std::vector<Event> events ABSL_GUARDED_BY(mu);
  std::string name ABSL_GUARDED_BY(mu);
  int tid = 0;
};

// A lane of a virtual track: the latest end of its spans.
struct Lane {
  std::shared_ptr<Buffer> buffer;
  int64_t end_us = 0;
};

struct Registry {
  absl::Mutex mu;
  // Buffers outlive their threads (a group's worker exits with the group).
  std::vector<std::shared_ptr<Buffer>> buffers ABSL_GUARDED_BY(mu);
  std::map<std::string, std::vector<Lane>, std::less<>> tracks
      ABSL_GUARDED_BY(mu);
  int next_tid ABSL_GUARDED_BY(mu) = 1;
};

Registry& TheRegistry() {
  static Registry* registry = new Registry;
  return *registry;
}

std::shared_ptr<Buffer> NewBuffer(Registry& r, std::string name) {
  auto buffer = std::make_shared<Buffer>();
  absl::MutexLock lock(&r.mu);
  buffer->tid = r.next_tid++;
  {
    absl::MutexLock buffer_lock(&buffer->mu);
    buffer->name = std::move(name);
  }
  r.buffers.push_back(buffer);
  return buffer;
}

Buffer& ThisThread() {
  thread_local std::shared_ptr<Buffer> buffer =
      NewBuffer(TheRegistry(), /*name=*/"");
  return *buffer;
}

Event MakeEvent(absl::string_view name, absl::string_view category,
                int64_t start_us, int64_t end_us, int tid,
                std::vector<Arg> args) {
  Event e;
  e.name = std::string(name);
  e.category = std::string(category);
  e.start_us = start_us;
  e.duration_us = end_us > start_us ? end_us - start_us : 0;
  e.tid = tid;
  e.args = std::move(args);
  return e;
}

nlohmann::json ArgsJson(const std::vector<Arg>& args) {
  nlohmann::json out = nlohmann::json::object();
  for (const Arg& a : args) {
    if (a.is_string) {
      out[a.key] = a.string_value;
    } else {
      out[a.key] = a.int_value;
    }
  }
  return out;
}

}  // namespace

int64_t NowMicros() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

Arg IntArg(std::string key, int64_t value) {
  Arg a;
  a.key = std::move(key);
  a.int_value = value;
  return a;
}

Arg StringArg(std::string key, std::string value) {
  Arg a;
  a.key = std::move(key);
  a.string_value = std::move(value);
  a.is_string = true;
  return a;
}

void Start() {
  Registry& r = TheRegistry();
  {
    absl::MutexLock lock(&r.mu);
    // Buffers of threads that exited (only the registry holds them: a new
    // thread per asynchronous checkpoint save) go; lanes stay.
    r.buffers.erase(std::remove_if(r.buffers.begin(), r.buffers.end(),
                                   [](const std::shared_ptr<Buffer>& b) {
                                     return b.use_count() == 1;
                                   }),
                    r.buffers.end());
    for (const auto& buffer : r.buffers) {
      absl::MutexLock buffer_lock(&buffer->mu);
      buffer->events.clear();
    }
    for (auto& [track, lanes] : r.tracks) {
      for (Lane& lane : lanes) lane.end_us = 0;
    }
  }
  internal::enabled.store(true, std::memory_order_relaxed);
}

void Stop() { internal::enabled.store(false, std::memory_order_relaxed); }

void SetThreadName(std::string name) {
  Buffer& buffer = ThisThread();
  absl::MutexLock lock(&buffer.mu);
  buffer.name = std::move(name);
}

void Record(absl::string_view name, absl::string_view category,
            int64_t start_us, int64_t end_us, std::vector<Arg> args) {
  if (!Enabled()) return;
  Buffer& buffer = ThisThread();
  Event e =
      MakeEvent(name, category, start_us, end_us, buffer.tid, std::move(args));
  absl::MutexLock lock(&buffer.mu);
  buffer.events.push_back(std::move(e));
}

void RecordOnTrack(absl::string_view track, absl::string_view name,
                   absl::string_view category, int64_t start_us, int64_t end_us,
                   std::vector<Arg> args) {
  if (!Enabled()) return;
  Registry& r = TheRegistry();
  std::shared_ptr<Buffer> lane_buffer;
  {
    absl::MutexLock lock(&r.mu);
    std::vector<Lane>& lanes = r.tracks[std::string(track)];
    Lane* lane = nullptr;
    for (Lane& l : lanes) {
      if (l.end_us <= start_us) {
        lane = &l;
        break;
      }
    }
    if (lane == nullptr) {
      // A lane is a buffer without a thread; its name numbers it.
      auto buffer = std::make_shared<Buffer>();
      buffer->tid = r.next_tid++;
      {
        absl::MutexLock buffer_lock(&buffer->mu);
        buffer->name = lanes.empty()
                           ? std::string(track)
                           : absl::StrCat(track, " #", lanes.size() + 1);
      }
      r.buffers.push_back(buffer);
      lanes.push_back(Lane{buffer, 0});
      lane = &lanes.back();
    }
    lane->end_us = std::max(lane->end_us, end_us);
    lane_buffer = lane->buffer;
    // Appended under the registry lock: two spans on one lane are recorded
    // in the order the lane was handed out.
    Event e = MakeEvent(name, category, start_us, end_us, lane_buffer->tid,
                        std::move(args));
    absl::MutexLock buffer_lock(&lane_buffer->mu);
    lane_buffer->events.push_back(std::move(e));
  }
}

Recording Collect() {
  Registry& r = TheRegistry();
  Recording out;
  absl::MutexLock lock(&r.mu);
  for (const auto& buffer : r.buffers) {
    absl::MutexLock buffer_lock(&buffer->mu);
    out.events.insert(out.events.end(), buffer->events.begin(),
                      buffer->events.end());
    if (!buffer->name.empty() && !buffer->events.empty()) {
      out.thread_names.emplace_back(buffer->tid, buffer->name);
    }
  }
  return out;
}

std::string ChromeTraceEvents(const Recording& recording, int pid,
                              absl::string_view process_name,
                              int64_t origin_us) {
  nlohmann::json events = nlohmann::json::array();
  events.push_back({{"name", "process_name"},
                    {"ph", "M"},
                    {"pid", pid},
                    {"tid", 0},
                    {"args", {{"name", std::string(process_name)}}}});
  events.push_back({{"name", "process_sort_index"},
                    {"ph", "M"},
                    {"pid", pid},
                    {"tid", 0},
                    {"args", {{"sort_index", pid}}}});
  for (const auto& [tid, name] : recording.thread_names) {
    events.push_back({{"name", "thread_name"},
                      {"ph", "M"},
                      {"pid", pid},
                      {"tid", tid},
                      {"args", {{"name", name}}}});
    events.push_back({{"name", "thread_sort_index"},
                      {"ph", "M"},
                      {"pid", pid},
                      {"tid", tid},
                      {"args", {{"sort_index", tid}}}});
  }
  for (const Event& e : recording.events) {
    events.push_back({{"name", e.name},
                      {"cat", e.category},
                      {"ph", "X"},
                      {"ts", e.start_us - origin_us},
                      {"dur", e.duration_us},
                      {"pid", pid},
                      {"tid", e.tid},
                      {"args", ArgsJson(e.args)}});
  }
  // Replaces ill-formed UTF-8 in names (U+FFFD) instead of throwing.
  return events.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace strata::trace
