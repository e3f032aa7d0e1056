#include "comm/exchange.h"

#include <ATen/ops/empty.h>
#include <ATen/ops/full.h>

#include <cstring>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "base/status.h"

namespace strata::comm {

absl::StatusOr<std::vector<std::string>> AllGatherBytes(
    Group* group, const std::string& bytes) {
  if (group == nullptr || group->size() == 1)
    return std::vector<std::string>{bytes};
  const int n = group->size();
  at::Tensor size =
      at::full({1}, static_cast<int64_t>(bytes.size()), at::kLong);
  at::Tensor sizes = at::empty({n}, at::kLong);
  STRATA_RETURN_IF_ERROR(group->AllGather(size, sizes));
  std::vector<int64_t> counts(n);
  int64_t total = 0;
  for (int r = 0; r < n; ++r) {
    counts[r] = sizes[r].item<int64_t>();
    total += counts[r];
  }
  at::Tensor input = at::empty({static_cast<int64_t>(bytes.size())}, at::kByte);
  if (!bytes.empty()) std::memcpy(input.data_ptr(), bytes.data(), bytes.size());
  at::Tensor output = at::empty({total}, at::kByte);
  STRATA_RETURN_IF_ERROR(group->AllGatherV(input, output, counts));
  std::vector<std::string> out(n);
  const char* p = static_cast<const char*>(output.data_ptr());
  for (int r = 0; r < n; ++r) {
    out[r].assign(p, counts[r]);
    p += counts[r];
  }
  return out;
}

absl::StatusOr<std::set<std::string>> AllGatherNames(
    Group* group, const std::vector<std::string>& names) {
  std::set<std::string> unique(names.begin(), names.end());
  std::string bytes;
  for (const std::string& name : unique) {
    bytes += name;
    bytes.push_back('\0');
  }
  STRATA_ASSIGN_OR_RETURN(std::vector<std::string> all,
                          AllGatherBytes(group, bytes));
  std::set<std::string> out;
  for (const std::string& rank_bytes : all) {
    for (absl::string_view name :
         absl::StrSplit(rank_bytes, '\0', absl::SkipEmpty())) {
      out.emplace(name);
    }
  }
  return out;
}

absl::Status AgreeOnStatus(Group* group, const absl::Status& local) {
  if (group == nullptr || group->size() == 1) return local;
  const std::string mine =
      local.ok()
          ? std::string()
          : absl::StrCat(static_cast<int>(local.code()), ":", local.message());
  STRATA_ASSIGN_OR_RETURN(std::vector<std::string> all,
                          AllGatherBytes(group, mine));
  int first = -1, failed = 0;
  for (int r = 0; r < static_cast<int>(all.size()); ++r) {
    if (all[r].empty()) continue;
    ++failed;
    if (first < 0) first = r;
  }
  if (first < 0) return absl::OkStatus();
  std::pair<std::string, std::string> parts =
      absl::StrSplit(all[first], absl::MaxSplits(':', 1));
  int code = static_cast<int>(absl::StatusCode::kUnknown);
  if (!absl::SimpleAtoi(parts.first, &code)) {
    code = static_cast<int>(absl::StatusCode::kUnknown);
  }
  std::string message = absl::StrCat("rank ", first, ": ", parts.second);
  if (failed > 1) {
    absl::StrAppend(&message, " (and ", failed - 1, " more ranks failed)");
  }
  return absl::Status(static_cast<absl::StatusCode>(code), message);
}

}  // namespace strata::comm
