#include "checkpoint/contents.h"

#include <ATen/core/grad_mode.h>
#include <ATen/core/ivalue.h>
#include <ATen/ops/empty.h>
#include <c10/core/ScalarType.h>
#include <glog/logging.h>

#include <cstring>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "base/build_info.h"
#include "base/escape.h"
#include "base/regex.h"

namespace strata::checkpoint {

Meta NewMeta() {
  Meta meta;
  meta.time =
      absl::FormatTime(absl::RFC3339_sec, absl::Now(), absl::UTCTimeZone());
  meta.strata_version = kStrataVersion;
  meta.git_hash = GitCommit();
  return meta;
}

std::string DtypeName(at::ScalarType dtype) { return c10::toString(dtype); }

absl::StatusOr<at::ScalarType> DtypeFromName(const std::string& name) {
  static const at::ScalarType kTypes[] = {
      at::kByte, at::kChar,  at::kShort,  at::kInt,  at::kLong,
      at::kHalf, at::kFloat, at::kDouble, at::kBool, at::kBFloat16,
  };
  for (at::ScalarType t : kTypes) {
    if (name == c10::toString(t)) return t;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown dtype '", EscapeBytes(name), "'"));
}

namespace {

// "sgd_momentum" -> "'sgd_momentum' (SGD with momentum)", for errors.
std::string DescribeOptimizer(const std::string& name) {
  if (name == "sgd_momentum") return "'sgd_momentum' (SGD with momentum)";
  if (name == "sgd") return "'sgd' (SGD without momentum)";
  return absl::StrCat("'", name, "'");
}

}  // namespace

absl::Status CheckOptimizer(const std::string& where, const std::string& saved,
                            const std::string& live) {
  const std::string recorded = saved.empty() ? "adamw" : saved;
  if (recorded == live) return absl::OkStatus();
  if (recorded == kAdamOrAdamW && (live == "adam" || live == "adamw")) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat(
      where, " holds the state of optimizer ", DescribeOptimizer(recorded),
      ", but the strategy's optimizer is ", DescribeOptimizer(live),
      ": its state would mean something else. Load it with the same "
      "optimizer (the trainer's --optimizer, and --momentum > 0 or not for "
      "SGD), or load only the model (LoadOptions::load_optimizer = false; "
      "the trainer's --load_weights)"));
}

absl::Status CheckRuns(const std::vector<ShardedTensor>& runs) {
  for (const ShardedTensor& run : runs) {
    const int64_t total = NumElements(run.global_shape);
    if (!run.local.defined() || !run.local.is_contiguous() ||
        !run.local.device().is_cpu()) {
      return absl::InternalError(absl::StrCat(
          "state tensor '", run.name,
          "' is not a contiguous CPU tensor; checkpoints need the strategy's "
          "local runs as contiguous CPU tensors"));
    }
    if (run.offset < 0 || run.offset + run.local.numel() > total) {
      return absl::InternalError(absl::StrCat(
          "state tensor '", run.name, "': run [", run.offset, ", ",
          run.offset + run.local.numel(), ") is outside its global shape ",
          ShapeString(run.global_shape)));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<int>> MatchRuns(
    const std::string& where, const std::vector<ShardedTensor>& live,
    const std::set<std::string>& all_live_names,
    const std::vector<TensorInfo>& saved, const ReadOptions& options,
    bool revise, KeyReport* report) {
  std::vector<std::pair<std::regex, std::string>> rules;
  if (revise) {
    for (const auto& [pattern, replacement] : options.revise_keys) {
      absl::StatusOr<std::regex> re = CompileRegex(pattern);
      if (!re.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat("revise_keys: ", re.status().message()));
      }
      rules.emplace_back(*std::move(re), replacement);
    }
  }
  std::map<std::string, int> by_name;
  for (int i = 0; i < static_cast<int>(saved.size()); ++i) {
    std::string name = saved[i].name;
    for (const auto& [re, replacement] : rules) {
      name = std::regex_replace(name, re, replacement);
    }
    by_name[name] = i;
  }
  std::set<std::string> live_names;
  for (const auto& run : live) live_names.insert(run.name);
  if (report != nullptr) {
    *report = KeyReport();
    for (const std::string& name : all_live_names) {
      if (by_name.count(name) == 0) {
        report->missing.push_back(name);
      } else {
        ++report->loaded;
      }
    }
    for (const auto& [name, index] : by_name) {
      if (all_live_names.count(name) == 0) report->unexpected.push_back(name);
    }
  }
  if (options.strict) {
    std::vector<std::string> missing, unexpected;
    // A tolerated name: a parameter of may_be_missing, or its optimizer
    // state "<name>.<state>".
    const auto tolerated = [&](const std::string& name) {
      if (options.may_be_missing.count(name) > 0) return true;
      const size_t dot = name.rfind('.');
      return dot != std::string::npos &&
             options.may_be_missing.count(name.substr(0, dot)) > 0;
    };
    for (const std::string& name : live_names) {
      if (by_name.count(name) == 0 && !tolerated(name)) missing.push_back(name);
    }
    for (const auto& [name, index] : by_name) {
      if (all_live_names.count(name) == 0) unexpected.push_back(name);
    }
    if (!missing.empty() || !unexpected.empty()) {
      // Unexpected keys come from the file: quoted with escapes.
      for (std::string& key : unexpected) key = EscapeBytes(key);
      std::string message = absl::StrCat(where, " does not match the model");
      if (!missing.empty()) {
        absl::StrAppend(&message,
                        "; missing keys: ", absl::StrJoin(missing, ", "));
      }
      if (!unexpected.empty()) {
        absl::StrAppend(&message,
                        "; unexpected keys: ", absl::StrJoin(unexpected, ", "));
      }
      return absl::InvalidArgumentError(message);
    }
  }
  std::vector<int> match(live.size(), -1);
  for (size_t i = 0; i < live.size(); ++i) {
    auto it = by_name.find(live[i].name);
    if (it == by_name.end()) continue;
    const TensorInfo& info = saved[it->second];
    if (info.shape != live[i].global_shape) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": key '", live[i].name, "' has shape ",
                       ShapeString(info.shape), " in the checkpoint but ",
                       ShapeString(live[i].global_shape), " in the model"));
    }
    match[i] = it->second;
  }
  return match;
}

c10::IValue ValueToIValue(const Value& value) {
  if (const auto* i = std::get_if<int64_t>(&value)) return *i;
  if (const auto* d = std::get_if<double>(&value)) return *d;
  if (const auto* s = std::get_if<std::string>(&value)) return *s;
  const Bytes& b = std::get<Bytes>(value);
  at::Tensor t = at::empty({static_cast<int64_t>(b.data.size())}, at::kByte);
  if (!b.data.empty()) std::memcpy(t.data_ptr(), b.data.data(), b.data.size());
  return t;
}

std::optional<Value> ValueFromIValue(const c10::IValue& value) {
  if (value.isInt()) return Value(value.toInt());
  if (value.isDouble()) return Value(value.toDouble());
  if (value.isString()) return Value(value.toStringRef());
  if (value.isTensor() && value.toTensor().scalar_type() == at::kByte &&
      value.toTensor().dim() == 1) {
    const at::Tensor t = value.toTensor().contiguous();
    if (t.numel() == 0) return Value(Bytes{});  // No data pointer.
    return Value(
        Bytes{std::string(static_cast<const char*>(t.data_ptr()), t.numel())});
  }
  return std::nullopt;
}

void CopyStaged(const std::vector<ShardedTensor>& runs,
                const std::vector<at::Tensor>& staged) {
  CHECK_EQ(runs.size(), staged.size());
  at::NoGradGuard no_grad;
  for (size_t i = 0; i < runs.size(); ++i) {
    if (!staged[i].defined()) continue;
    CHECK_EQ(staged[i].numel(), runs[i].local.numel()) << runs[i].name;
    at::Tensor target = runs[i].local;
    target.copy_(staged[i].reshape(target.sizes()));
  }
}

}  // namespace strata::checkpoint
