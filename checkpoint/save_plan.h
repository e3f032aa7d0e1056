// The save plan: which rank writes which elements of every tensor, agreed by
// all ranks from what each holds. Replicated elements (held by several
// ranks, e.g. DDP's parameters) are written once: large replicated ranges are
// split evenly between the ranks holding them (so they write in parallel),
// small ones go to one of them, rotating over tensors.
#ifndef STRATA_CHECKPOINT_SAVE_PLAN_H_
#define STRATA_CHECKPOINT_SAVE_PLAN_H_

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "checkpoint/contents.h"
#include "checkpoint/metadata.pb.h"
#include "comm/group.h"

namespace strata::checkpoint {

enum class Section { kModel = 0, kOptimizer = 1 };

struct PlannedTensor {
  Section section = Section::kModel;
  std::string name;
  std::vector<int64_t> shape;
  at::ScalarType dtype = at::kFloat;
  // Disjoint, in offset order, covering [0, numel) exactly. Each lies inside
  // one run of `rank`: run `run` of that rank's section list.
  struct Piece {
    int64_t offset = 0;
    int64_t numel = 0;
    int rank = 0;
    int run = 0;
  };
  std::vector<Piece> pieces;
};

struct SavePlan {
  // Model tensors first, in rank 0's order (then tensors only later ranks
  // hold, in rank order), then optimizer tensors likewise.
  std::vector<PlannedTensor> tensors;
};

// What `state` holds, as exchanged between ranks: one proto::RankRuns::Run
// per run (model runs first, then optimizer runs, each in list order).
proto::RankRuns DescribeRuns(const TensorState& state);

// The planning step of MakeSavePlan, without communication: the plan from
// every rank's holdings (`all[r]` is rank r's DescribeRuns). Deterministic,
// so every rank computes the same plan and the same errors (see below).
absl::StatusOr<SavePlan> PlanSave(const std::vector<proto::RankRuns>& all,
                                  int64_t split_bytes);

// DescribeRuns, all-gathered, then PlanSave. A collective over `group` (null:
// one process); `state` is this rank's. A range held by k ranks is split
// into min(k, its bytes / `split_bytes`) near-equal parts, one per holder in
// rank order; a range too small to split goes to one holder, rotating over
// tensors (tensor i's first range to its (i mod k)-th holder). Errors (the
// same on every rank, InvalidArgument): ranks disagree on a tensor's shape or
// dtype (naming it and both ranks), elements that no rank holds (naming the
// tensor and range); Internal for a run that is not a contiguous CPU tensor
// inside its global shape.
absl::StatusOr<SavePlan> MakeSavePlan(comm::Group* group,
                                      const TensorState& state,
                                      int64_t split_bytes = int64_t{1} << 20);

}  // namespace strata::checkpoint

#endif  // STRATA_CHECKPOINT_SAVE_PLAN_H_
