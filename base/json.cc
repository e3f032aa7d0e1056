#include "base/json.h"

#include <algorithm>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace strata {
namespace {

using Json = nlohmann::json;

// Follows the parse's events to find keys given twice in one object.
class DuplicateKeyFinder {
 public:
  bool OnEvent(Json::parse_event_t event, const Json& parsed) {
    switch (event) {
      case Json::parse_event_t::object_start:
      case Json::parse_event_t::array_start: {
        Frame frame;
        frame.object = event == Json::parse_event_t::object_start;
        if (!stack_.empty()) {
          const Frame& parent = stack_.back();
          frame.path = parent.object ? Join(parent.path, parent.key)
                                     : parent.path + "[]";
        }
        stack_.push_back(std::move(frame));
        break;
      }
      case Json::parse_event_t::object_end:
      case Json::parse_event_t::array_end:
        if (!stack_.empty()) stack_.pop_back();
        break;
      case Json::parse_event_t::key: {
        if (stack_.empty() || !parsed.is_string()) break;
        Frame& frame = stack_.back();
        frame.key = parsed.get<std::string>();
        if (!frame.keys.insert(frame.key).second && duplicate_.empty()) {
          duplicate_ = Join(frame.path, frame.key);
        }
        break;
      }
      case Json::parse_event_t::value:
        break;
    }
    return true;
  }

  // The first duplicate key's path ("a.b.key"), empty if none.
  const std::string& duplicate() const { return duplicate_; }

 private:
  struct Frame {
    bool object = false;
    std::string path;  // Of this object or array.
    std::set<std::string> keys;
    std::string key;  // The object's key being read.
  };

  static std::string Join(const std::string& path, const std::string& key) {
    return path.empty() ? key : absl::StrCat(path, ".", key);
  }

  std::vector<Frame> stack_;
  std::string duplicate_;
};

// "line:column" of the 1-based byte offset `byte` (nlohmann's: the byte
// last read).
std::string Position(absl::string_view text, size_t byte) {
  const size_t end = std::min(byte == 0 ? 0 : byte - 1, text.size());
  const absl::string_view before = text.substr(0, end);
  const size_t line = 1 + std::count(before.begin(), before.end(), '\n');
  const size_t last_newline = before.rfind('\n');
  const size_t column =
      last_newline == absl::string_view::npos ? end + 1 : end - last_newline;
  return absl::StrCat(line, ":", column);
}

// nlohmann's message without "[json.exception.parse_error.101] " and the
// "parse error at line 3, column 5: " Position() already gives.
std::string WithoutPrefix(absl::string_view what) {
  const size_t bracket = what.find("] ");
  if (what.substr(0, 1) == "[" && bracket != absl::string_view::npos) {
    what.remove_prefix(bracket + 2);
  }
  if (absl::StartsWith(what, "parse error at line")) {
    const size_t colon = what.find(": ");
    if (colon != absl::string_view::npos) what.remove_prefix(colon + 2);
  }
  return std::string(what);
}

}  // namespace

absl::StatusOr<Json> ParseJson(absl::string_view text,
                               absl::string_view source) {
  DuplicateKeyFinder finder;
  Json root;
  try {
    root = Json::parse(text.begin(), text.end(),
                       [&finder](int, Json::parse_event_t event, Json& parsed) {
                         return finder.OnEvent(event, parsed);
                       });
  } catch (const Json::parse_error& e) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ":", Position(text, e.byte),
                     ": JSON syntax error: ", WithoutPrefix(e.what())));
  } catch (const Json::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(
        source, ": cannot read the JSON: ", WithoutPrefix(e.what())));
  }
  if (!finder.duplicate().empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": ", finder.duplicate(),
                     ": the key appears twice in its object; keep one"));
  }
  return root;
}

}  // namespace strata
