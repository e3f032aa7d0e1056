#include "comm/progress.h"

#include <glog/logging.h>

#include <algorithm>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/notification.h"
#include "base/status.h"

namespace strata::comm {
namespace {

constexpr char kVersion[] = "v1";

absl::Status ParseInt(absl::string_view key, absl::string_view value,
                      int64_t* out) {
  if (!absl::SimpleAtoi(value, out)) {
    return absl::InvalidArgumentError(
        absl::StrCat("progress record: field '", key,
                     "' must be an integer, got '", value, "'"));
  }
  return absl::OkStatus();
}

std::string StoreKey(absl::string_view scope, int global_rank) {
  return absl::StrCat("strata_progress/", scope, "/", global_rank);
}

}  // namespace

bool ProgressRecord::operator==(const ProgressRecord& other) const {
  return step == other.step && op == other.op && group == other.group &&
         seq == other.seq && numel == other.numel && bytes == other.bytes &&
         op_step == other.op_step && entered == other.entered &&
         group_seqs == other.group_seqs && node == other.node &&
         host == other.host;
}

std::string DescribeLocation(const ProgressRecord& r) {
  std::vector<std::string> parts;
  if (r.node >= 0) parts.push_back(absl::StrCat("node ", r.node));
  if (!r.host.empty()) parts.push_back(absl::StrCat("host ", r.host));
  return absl::StrJoin(parts, ", ");
}

std::string FormatProgressRecord(const ProgressRecord& r) {
  std::string groups =
      absl::StrJoin(r.group_seqs, ",", [](std::string* out, const auto& entry) {
        absl::StrAppend(out, entry.first, ":", entry.second);
      });
  return absl::StrCat(
      kVersion, " step=", r.step, " op=", r.op.empty() ? "-" : r.op,
      " group=", r.group.empty() ? "-" : r.group, " seq=", r.seq,
      " numel=", r.numel, " bytes=", r.bytes, " op_step=", r.op_step,
      " entered_us=", absl::ToUnixMicros(r.entered),
      " groups=", groups.empty() ? "-" : groups, " node=", r.node,
      " host=", r.host.empty() ? "-" : r.host,
      " published_us=", absl::ToUnixMicros(r.published));
}

absl::StatusOr<ProgressRecord> ParseProgressRecord(absl::string_view text) {
  std::vector<absl::string_view> fields =
      absl::StrSplit(text, ' ', absl::SkipEmpty());
  if (fields.empty() || fields[0] != kVersion) {
    return absl::InvalidArgumentError(
        absl::StrCat("progress record: expected it to start with '", kVersion,
                     "', got '", text.substr(0, 40), "'"));
  }
  ProgressRecord r;
  const std::vector<std::string> required = {"step",    "op",         "group",
                                             "seq",     "numel",      "bytes",
                                             "op_step", "entered_us", "groups"};
  std::map<std::string, bool> seen;
  for (size_t i = 1; i < fields.size(); ++i) {
    const size_t eq = fields[i].find('=');
    if (eq == absl::string_view::npos) {
      return absl::InvalidArgumentError(absl::StrCat(
          "progress record: expected key=value, got '", fields[i], "'"));
    }
    const absl::string_view key = fields[i].substr(0, eq);
    const absl::string_view value = fields[i].substr(eq + 1);
    seen[std::string(key)] = true;
    if (key == "step") {
      STRATA_RETURN_IF_ERROR(ParseInt(key, value, &r.step));
    } else if (key == "op") {
      r.op = value == "-" ? "" : std::string(value);
    } else if (key == "group") {
      r.group = value == "-" ? "" : std::string(value);
    } else if (key == "seq") {
      STRATA_RETURN_IF_ERROR(ParseInt(key, value, &r.seq));
    } else if (key == "numel") {
      STRATA_RETURN_IF_ERROR(ParseInt(key, value, &r.numel));
    } else if (key == "bytes") {
      STRATA_RETURN_IF_ERROR(ParseInt(key, value, &r.bytes));
    } else if (key == "op_step") {
      STRATA_RETURN_IF_ERROR(ParseInt(key, value, &r.op_step));
    } else if (key == "entered_us") {
      int64_t micros = 0;
      STRATA_RETURN_IF_ERROR(ParseInt(key, value, &micros));
      r.entered = absl::FromUnixMicros(micros);
    } else if (key == "node") {
      int64_t node = 0;
      STRATA_RETURN_IF_ERROR(ParseInt(key, value, &node));
      r.node = static_cast<int>(node);
    } else if (key == "host") {
      r.host = value == "-" ? "" : std::string(value);
    } else if (key == "published_us") {
      int64_t micros = 0;
      STRATA_RETURN_IF_ERROR(ParseInt(key, value, &micros));
      r.published = absl::FromUnixMicros(micros);
    } else if (key == "groups") {
      if (value == "-") continue;
      for (absl::string_view entry : absl::StrSplit(value, ',')) {
        const size_t colon = entry.rfind(':');
        int64_t seq = 0;
        if (colon == absl::string_view::npos || colon == 0 ||
            !absl::SimpleAtoi(entry.substr(colon + 1), &seq)) {
          return absl::InvalidArgumentError(
              absl::StrCat("progress record: field 'groups' must be a list of "
                           "<group>:<seq>, got '",
                           entry, "'"));
        }
        r.group_seqs[std::string(entry.substr(0, colon))] = seq;
      }
    }
  }
  for (const std::string& key : required) {
    if (!seen[key]) {
      return absl::InvalidArgumentError(
          absl::StrCat("progress record: field '", key, "' is missing"));
    }
  }
  return r;
}

std::string DescribeLastOp(const ProgressRecord& r, absl::Time now) {
  if (r.seq == 0) {
    return r.step >= 0 ? absl::StrCat("has entered no collective yet (at step ",
                                      r.step, ")")
                       : "has entered no collective yet";
  }
  std::string text = absl::StrFormat("last entered %s #%d on group '%s'", r.op,
                                     r.seq, r.group);
  if (r.op_step >= 0) absl::StrAppend(&text, " at step ", r.op_step);
  absl::StrAppendFormat(&text, ", %.1f s ago",
                        absl::ToDoubleSeconds(now - r.entered));
  return text;
}

std::string DescribeMissingRanks(
    absl::string_view group, int64_t seq,
    const std::vector<std::pair<int, absl::optional<ProgressRecord>>>& peers,
    absl::Time now, absl::Duration stale_after) {
  std::vector<std::string> missing;
  // Peers whose records stopped being refreshed, by location; the oldest
  // refresh of each location.
  std::map<std::string, std::vector<int>> stale_ranks;
  std::map<std::string, absl::Time> stale_since;
  for (const auto& [rank, record] : peers) {
    if (!record.has_value()) {
      missing.push_back(absl::StrFormat(
          "rank %d never arrived (it recorded no progress yet)", rank));
      continue;
    }
    if (record->published != absl::UnixEpoch() &&
        now - record->published > stale_after) {
      const std::string where = DescribeLocation(*record);
      stale_ranks[where].push_back(rank);
      auto [it, inserted] = stale_since.emplace(where, record->published);
      if (!inserted) it->second = std::min(it->second, record->published);
    }
    auto it = record->group_seqs.find(std::string(group));
    if (it != record->group_seqs.end() && it->second >= seq) continue;
    missing.push_back(absl::StrFormat("rank %d never arrived (%s)", rank,
                                      DescribeLastOp(*record, now)));
  }
  std::string text =
      missing.empty() ? "every rank entered it" : absl::StrJoin(missing, "; ");
  for (const auto& [where, ranks] : stale_ranks) {
    const bool one = ranks.size() == 1;
    absl::StrAppendFormat(
        &text, "; %s %s%s %s not refreshed %s progress record%s for %.1f s: %s",
        one ? "rank" : "ranks", absl::StrJoin(ranks, ", "),
        where.empty() ? "" : absl::StrCat(" (", where, ")"),
        one ? "has" : "have", one ? "its" : "their", one ? "" : "s",
        absl::ToDoubleSeconds(now - stale_since[where]),
        where.empty() ? "unreachable, or stopped"
                      : "that node is unreachable, or the process" +
                            std::string(one ? " is" : "es are") + " stopped");
  }
  return text;
}

absl::Status ExplainCollectiveFailure(
    const absl::Status& status, absl::string_view description,
    absl::string_view op, absl::string_view group, int64_t seq,
    absl::Duration timeout, const ProgressTracker& tracker,
    absl::Span<const int> peers, absl::Duration read_deadline) {
  const bool timed_out =
      absl::StrContains(absl::AsciiStrToLower(status.message()), "timed out");
  auto records = tracker.ReadPeers(peers, read_deadline);
  const std::string who =
      records.ok() ? DescribeMissingRanks(group, seq, *records, absl::Now(),
                                          tracker.stale_after())
                   : absl::StrCat("the peers' progress is unknown: ",
                                  records.status().message());
  const absl::string_view cause =
      absl::StripPrefix(absl::StripPrefix(status.message(), description), ": ");
  return absl::Status(
      status.code(),
      absl::StrCat(description, ": ", op, " #", seq,
                   timed_out ? absl::StrCat(" timed out after ",
                                            absl::FormatDuration(timeout))
                             : std::string(" failed"),
                   ": ", who, ". Cause: ", cause));
}

// --- ProgressTracker --------------------------------------------------------

struct ProgressTracker::Shared {
  c10::intrusive_ptr<c10d::Store> store;
  std::string key;
  absl::Duration publish_interval;
  absl::Duration refresh_interval;

  mutable absl::Mutex mu;
  absl::CondVar changed;  // Signalled on a new record version and on stop.
  ProgressRecord record ABSL_GUARDED_BY(mu);
  int64_t version ABSL_GUARDED_BY(mu) = 0;
  int64_t num_published ABSL_GUARDED_BY(mu) = 0;
  // The version last written to the store.
  int64_t published_version ABSL_GUARDED_BY(mu) = 0;
  // Flush(): write the next change without waiting out the interval.
  bool flush ABSL_GUARDED_BY(mu) = false;
  bool stopping ABSL_GUARDED_BY(mu) = false;
  bool stopped ABSL_GUARDED_BY(mu) = false;
};

ProgressTracker::ProgressTracker(c10::intrusive_ptr<c10d::Store> store,
                                 ProgressTrackerOptions options)
    : global_rank_(options.global_rank),
      stale_after_(std::max(
          3 * std::max(options.refresh_interval, options.publish_interval),
          absl::Seconds(3))),
      shared_(std::make_shared<Shared>()) {
  CHECK(store);
  shared_->store = std::move(store);
  shared_->key = StoreKey(options.scope, options.global_rank);
  shared_->publish_interval = options.publish_interval;
  shared_->refresh_interval =
      std::max(options.refresh_interval, options.publish_interval);
  shared_->record.node = options.node;
  shared_->record.host = std::move(options.host);
  publisher_ = std::thread(&ProgressTracker::Publish, shared_);
}

ProgressTracker::~ProgressTracker() {
  bool stopped = false;
  {
    absl::MutexLock lock(&shared_->mu);
    shared_->stopping = true;
    shared_->changed.SignalAll();
    const absl::Time deadline = absl::Now() + absl::Seconds(1);
    while (!shared_->stopped &&
           !shared_->changed.WaitWithDeadline(&shared_->mu, deadline)) {
    }
    stopped = shared_->stopped;
  }
  if (stopped) {
    publisher_.join();
  } else {
    // Blocked on a store that does not answer; it owns what it uses.
    LOG(WARNING) << "progress records: the store did not answer within 1 s; "
                    "leaving the publishing thread behind";
    publisher_.detach();
  }
}

void ProgressTracker::Publish(std::shared_ptr<Shared> s) {
  int64_t published_version = 0;
  absl::Time last_publish = absl::InfinitePast();
  while (true) {
    std::string text;
    int64_t version = 0;
    {
      absl::MutexLock lock(&s->mu);
      // At most one write per interval; then wait for a change, or (once
      // something was written) for the refresh that shows peers this rank is
      // still there.
      const absl::Time not_before = last_publish + s->publish_interval;
      while (!s->stopping && !s->flush && absl::Now() < not_before) {
        s->changed.WaitWithDeadline(&s->mu, not_before);
      }
      const absl::Time refresh_at = last_publish == absl::InfinitePast()
                                        ? absl::InfiniteFuture()
                                        : last_publish + s->refresh_interval;
      while (!s->stopping && s->version == published_version &&
             absl::Now() < refresh_at) {
        s->changed.WaitWithDeadline(&s->mu, refresh_at);
      }
      if (s->stopping) break;
      ProgressRecord record = s->record;
      // Microseconds: what the record keeps.
      record.published = absl::FromUnixMicros(absl::ToUnixMicros(absl::Now()));
      text = FormatProgressRecord(record);
      version = s->version;
      s->flush = false;
    }
    absl::Status status = StatusFromCall(
        absl::StrCat("writing progress record '", s->key, "'"), [&] {
          s->store->set(s->key, std::vector<uint8_t>(text.begin(), text.end()));
        });
    last_publish = absl::Now();
    published_version = version;
    if (!status.ok()) {
      // The store is gone (its host exited): nothing more to publish to.
      VLOG(1) << status.message();
      break;
    }
    absl::MutexLock lock(&s->mu);
    ++s->num_published;
    s->published_version = version;
    s->changed.SignalAll();
  }
  absl::MutexLock lock(&s->mu);
  s->stopped = true;
  s->changed.SignalAll();
}

void ProgressTracker::SetStep(int64_t step) {
  absl::MutexLock lock(&shared_->mu);
  if (shared_->record.step == step) return;
  shared_->record.step = step;
  ++shared_->version;
  shared_->changed.SignalAll();
}

void ProgressTracker::Enter(absl::string_view op, absl::string_view group,
                            int64_t seq, int64_t numel, int64_t bytes) {
  // Microseconds: what the record keeps.
  const absl::Time now = absl::FromUnixMicros(absl::ToUnixMicros(absl::Now()));
  absl::MutexLock lock(&shared_->mu);
  ProgressRecord& r = shared_->record;
  r.op.assign(op.data(), op.size());
  r.group.assign(group.data(), group.size());
  r.seq = seq;
  r.numel = numel;
  r.bytes = bytes;
  r.op_step = r.step;
  r.entered = now;
  r.group_seqs[r.group] = seq;
  ++shared_->version;
  shared_->changed.SignalAll();
}

ProgressRecord ProgressTracker::Current() const {
  absl::MutexLock lock(&shared_->mu);
  return shared_->record;
}

bool ProgressTracker::Flush(absl::Duration deadline) {
  absl::MutexLock lock(&shared_->mu);
  Shared& s = *shared_;
  const int64_t target = s.version;
  if (s.published_version >= target) return true;
  s.flush = true;
  s.changed.SignalAll();
  const absl::Time until = absl::Now() + deadline;
  while (s.published_version < target && !s.stopped) {
    if (s.changed.WaitWithDeadline(&s.mu, until)) break;
  }
  return s.published_version >= target;
}

int64_t ProgressTracker::num_published() const {
  absl::MutexLock lock(&shared_->mu);
  return shared_->num_published;
}

absl::StatusOr<std::vector<std::pair<int, absl::optional<ProgressRecord>>>>
ProgressTracker::ReadPeers(absl::Span<const int> global_ranks,
                           absl::Duration deadline) const {
  struct Read {
    absl::Notification done;
    absl::Status status;
    std::vector<std::pair<int, absl::optional<std::string>>> texts;
  };
  auto read = std::make_shared<Read>();
  std::vector<int> ranks(global_ranks.begin(), global_ranks.end());
  std::string scope_key = shared_->key.substr(0, shared_->key.rfind('/'));
  std::thread([read, store = shared_->store, ranks, scope_key] {
    read->status = StatusFromCall("reading peers' progress records", [&] {
      for (int rank : ranks) {
        const std::string key = absl::StrCat(scope_key, "/", rank);
        absl::optional<std::string> text;
        if (store->check({key})) {
          std::vector<uint8_t> bytes = store->get(key);
          text = std::string(bytes.begin(), bytes.end());
        }
        read->texts.emplace_back(rank, std::move(text));
      }
    });
    read->done.Notify();
  }).detach();
  if (!read->done.WaitForNotificationWithTimeout(deadline)) {
    return absl::DeadlineExceededError(absl::StrCat(
        "the store holding the progress records did not answer within ",
        absl::FormatDuration(deadline),
        " (is the rank hosting it, rank 0, stopped?)"));
  }
  STRATA_RETURN_IF_ERROR(read->status);
  std::vector<std::pair<int, absl::optional<ProgressRecord>>> records;
  for (auto& [rank, text] : read->texts) {
    if (!text.has_value()) {
      records.emplace_back(rank, absl::nullopt);
      continue;
    }
    absl::StatusOr<ProgressRecord> record = ParseProgressRecord(*text);
    if (!record.ok()) {
      return Annotate(record.status(), absl::StrCat("rank ", rank));
    }
    records.emplace_back(rank, *std::move(record));
  }
  return records;
}

}  // namespace strata::comm
