#include "checkpoint/save_plan.h"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "checkpoint/metadata.pb.h"
#include "comm/exchange.h"

namespace strata::checkpoint {
namespace {

struct Holding {
  int64_t begin = 0, end = 0;
  int rank = 0;
  int run = 0;
};

}  // namespace

absl::StatusOr<SavePlan> PlanSave(const std::vector<proto::RankRuns>& all,
                                  int64_t split_bytes) {
  SavePlan plan;
  // (section, name) -> index into plan.tensors; holdings per tensor.
  std::map<std::pair<int, std::string>, size_t> index;
  std::vector<std::vector<Holding>> holdings;
  std::vector<int> first_rank;
  for (int section = 0; section < 2; ++section) {
    for (int r = 0; r < static_cast<int>(all.size()); ++r) {
      int run_index = 0;  // Index within this rank's section list.
      for (const proto::RankRuns::Run& run : all[r].runs()) {
        if (run.section() != section) continue;
        const int this_run = run_index++;
        const std::vector<int64_t> shape(run.global_shape().begin(),
                                         run.global_shape().end());
        STRATA_ASSIGN_OR_RETURN(at::ScalarType dtype,
                                DtypeFromName(run.dtype()));
        auto [it, inserted] = index.emplace(std::make_pair(section, run.name()),
                                            plan.tensors.size());
        if (inserted) {
          PlannedTensor t;
          t.section = static_cast<Section>(section);
          t.name = run.name();
          t.shape = shape;
          t.dtype = dtype;
          plan.tensors.push_back(std::move(t));
          holdings.emplace_back();
          first_rank.push_back(r);
        }
        const PlannedTensor& t = plan.tensors[it->second];
        if (t.shape != shape || t.dtype != dtype) {
          return absl::InvalidArgumentError(absl::StrCat(
              "ranks disagree on state tensor '", run.name(), "': rank ",
              first_rank[it->second], " has ", ShapeString(t.shape), " ",
              DtypeName(t.dtype), ", rank ", r, " has ", ShapeString(shape),
              " ", run.dtype()));
        }
        if (run.numel() > 0) {
          holdings[it->second].push_back(
              {run.offset(), run.offset() + run.numel(), r, this_run});
        }
      }
    }
  }
  for (size_t i = 0; i < plan.tensors.size(); ++i) {
    PlannedTensor& t = plan.tensors[i];
    const int64_t numel = NumElements(t.shape);
    const int64_t item = c10::elementSize(t.dtype);
    std::set<int64_t> cuts = {0, numel};
    for (const Holding& h : holdings[i]) {
      cuts.insert(h.begin);
      cuts.insert(h.end);
    }
    std::vector<int64_t> points(cuts.begin(), cuts.end());
    int64_t rotation = static_cast<int64_t>(i);
    for (size_t k = 0; k + 1 < points.size(); ++k) {
      const int64_t a = points[k], b = points[k + 1];
      if (a >= numel) break;
      // The holders of [a, b), one run per rank (the first).
      std::vector<const Holding*> holders;
      std::set<int> ranks;
      for (const Holding& h : holdings[i]) {
        if (h.begin <= a && h.end >= b && ranks.insert(h.rank).second) {
          holders.push_back(&h);
        }
      }
      std::sort(
          holders.begin(), holders.end(),
          [](const Holding* x, const Holding* y) { return x->rank < y->rank; });
      if (holders.empty()) {
        return absl::InvalidArgumentError(
            absl::StrCat("state tensor '", t.name, "' ", ShapeString(t.shape),
                         ": elements [", a, ", ", b, ") are held by no rank"));
      }
      const int64_t n = b - a;
      const int64_t parts = std::max<int64_t>(
          1, std::min<int64_t>(static_cast<int64_t>(holders.size()),
                               n * item / std::max<int64_t>(split_bytes, 1)));
      if (parts == 1) {
        const Holding* h = holders[rotation++ % holders.size()];
        t.pieces.push_back({a, n, h->rank, h->run});
        continue;
      }
      for (int64_t p = 0; p < parts; ++p) {
        const int64_t lo = a + n * p / parts, hi = a + n * (p + 1) / parts;
        if (hi > lo) {
          t.pieces.push_back({lo, hi - lo, holders[p]->rank, holders[p]->run});
        }
      }
    }
  }
  return plan;
}

proto::RankRuns DescribeRuns(const TensorState& state) {
  proto::RankRuns mine;
  for (int section = 0; section < 2; ++section) {
    const auto& runs = section == 0 ? state.model : state.optimizer;
    for (const ShardedTensor& run : runs) {
      proto::RankRuns::Run* r = mine.add_runs();
      r->set_section(section);
      r->set_name(run.name);
      for (int64_t d : run.global_shape) r->add_global_shape(d);
      r->set_dtype(DtypeName(run.local.scalar_type()));
      r->set_offset(run.offset);
      r->set_numel(run.local.numel());
    }
  }
  return mine;
}

absl::StatusOr<SavePlan> MakeSavePlan(comm::Group* group,
                                      const TensorState& state,
                                      int64_t split_bytes) {
  STRATA_RETURN_IF_ERROR(CheckRuns(state.model));
  STRATA_RETURN_IF_ERROR(CheckRuns(state.optimizer));
  const proto::RankRuns mine = DescribeRuns(state);
  STRATA_ASSIGN_OR_RETURN(
      std::vector<std::string> bytes,
      comm::AllGatherBytes(group, mine.SerializeAsString()));
  std::vector<proto::RankRuns> all(bytes.size());
  for (size_t r = 0; r < bytes.size(); ++r) {
    if (!all[r].ParseFromString(bytes[r])) {
      return absl::InternalError(
          absl::StrCat("cannot parse the state description of rank ", r));
    }
  }
  // Every rank computes the same plan from the same input, so errors agree.
  return PlanSave(all, split_bytes);
}

}  // namespace strata::checkpoint
