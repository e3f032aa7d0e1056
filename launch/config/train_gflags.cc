#include "launch/config/train_gflags.h"

#include <gflags/gflags.h>
#include <glog/logging.h>

#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <type_traits>
#include <utility>

#include "absl/status/status.h"
#include "base/status.h"
#include "launch/config/train_flag_table.h"

namespace strata::launch {
namespace {

// How a field is stored as a gflags flag: the field's own type where gflags
// has it, else its FlagSpelling as a string.
template <class T>
struct GflagsType {
  using type = std::string;
};
template <>
struct GflagsType<bool> {
  using type = bool;
};
template <>
struct GflagsType<int> {
  using type = GFLAGS_NAMESPACE::int32;
};
template <>
struct GflagsType<int64_t> {
  using type = GFLAGS_NAMESPACE::int64;
};
template <>
struct GflagsType<uint64_t> {
  using type = GFLAGS_NAMESPACE::uint64;
};
template <>
struct GflagsType<double> {
  using type = double;
};

// Whether T is stored through its FlagSpelling.
template <class T>
constexpr bool kSpelled =
    std::is_same_v<typename GflagsType<T>::type, std::string> &&
    !std::is_same_v<T, std::string>;

// The flag values gflags reads and writes, by flag name: kept for the life
// of the process (gflags holds pointers to them). Written only by
// RegisterTrainFlags.
std::map<std::string, void*>& FlagStorage() {
  static auto* storage = new std::map<std::string, void*>;
  return *storage;
}

template <class S>
S* Keep(S value) {
  static auto* values = new std::deque<S>;  // Addresses stay put.
  values->push_back(std::move(value));
  return &values->back();
}

class Registrar {
 public:
  explicit Registrar(const char* file) : file_(file) {}

  template <class T>
  void operator()(const char* name, T* field, const char* help) {
    Register(name, *field, help);
  }
  template <class T>
  void TestHook(const char* name, T* field, const char* /*what*/) {
    Register(name, *field, GFLAGS_NAMESPACE::kStrippedFlagHelp);
  }

 private:
  template <class T>
  void Register(const char* name, const T& value, const char* help) {
    using S = typename GflagsType<T>::type;
    S initial;
    if constexpr (kSpelled<T>) {
      initial = FlagSpelling<T>::Format(value);
    } else {
      initial = static_cast<S>(value);
    }
    CHECK(FlagStorage().count(name) == 0)
        << "--" << name << " is registered twice";
    S* current = Keep<S>(initial);
    GFLAGS_NAMESPACE::FlagRegisterer(name, help, file_, current,
                                     Keep<S>(initial));
    FlagStorage()[name] = current;
  }

  const char* file_;
};

// Each field from its flag's current value; the first value that does not
// parse (an enumerated flag's) is the error, naming the flag.
class Reader {
 public:
  template <class T>
  void operator()(const char* name, T* field, const char* /*help*/) {
    Read(name, field);
  }
  template <class T>
  void TestHook(const char* name, T* field, const char* /*what*/) {
    Read(name, field);
  }
  const absl::Status& status() const { return status_; }

 private:
  template <class T>
  void Read(const char* name, T* field) {
    using S = typename GflagsType<T>::type;
    const auto it = FlagStorage().find(name);
    CHECK(it != FlagStorage().end())
        << "--" << name << " is not registered: call RegisterTrainFlags";
    const S& value = *static_cast<const S*>(it->second);
    if constexpr (kSpelled<T>) {
      absl::StatusOr<T> parsed = FlagSpelling<T>::Parse(name, value);
      if (!parsed.ok()) {
        if (status_.ok()) status_ = parsed.status();
        return;
      }
      *field = *std::move(parsed);
    } else {
      *field = static_cast<T>(value);
    }
  }

  absl::Status status_;
};

}  // namespace

void RegisterTrainFlags(const char* file) {
  TrainOptions defaults = TrainFlagDefaults();
  VisitTrainFlags(defaults, Registrar(file));
}

absl::StatusOr<TrainOptions> TrainOptionsFromRegisteredFlags() {
  TrainOptions o;
  Reader reader;
  VisitTrainFlags(o, reader);
  STRATA_RETURN_IF_ERROR(reader.status());
  return o;
}

}  // namespace strata::launch
