#include "strategies/replicas.h"

#include <ATen/ATen.h>

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/fnv.h"
#include "base/shape.h"
#include "base/status.h"
#include "optim/clip.h"

namespace strata::strategies {
namespace {

uint64_t HashInfo(uint64_t hash, const NamedShape& info) {
  hash = Fnv1a(hash, info.name.data(), info.name.size() + 1);  // With '\0'.
  const int64_t ndim = info.shape.size();
  hash = Fnv1a(hash, &ndim, sizeof(ndim));
  return Fnv1a(hash, info.shape.data(), info.shape.size() * sizeof(int64_t));
}

constexpr int64_t kMaxDims = 7;
// Per tensor: numel, ndim, kMaxDims dims (-1 padded), name hash.
constexpr int64_t kPerTensor = kMaxDims + 3;

}  // namespace

absl::Status CheckSameOnAllRanks(comm::Group& group,
                                 const std::vector<NamedShape>& infos,
                                 const SameOnAllRanksWording& wording) {
  const SameOnAllRanksWording& w = wording;
  const int world = group.size();
  int64_t total = 0;
  uint64_t hash = kFnv1aOffset;
  for (const NamedShape& info : infos) {
    int64_t numel = 1;
    for (int64_t d : info.shape) numel *= d;
    total += numel;
    hash = HashInfo(hash, info);
  }
  at::Tensor mine = at::empty({3}, at::kLong);
  mine[0] = static_cast<int64_t>(infos.size());
  mine[1] = total;
  mine[2] = static_cast<int64_t>(hash);
  at::Tensor all = at::empty({world * 3}, at::kLong);
  STRATA_RETURN_IF_ERROR(
      Annotate(group.AllGather(mine, all), "exchanging model descriptors"));
  const int64_t* d = all.data_ptr<int64_t>();
  bool same = true;
  for (int r = 1; r < world; ++r) {
    for (int k = 0; k < 3; ++k) same = same && d[3 * r + k] == d[k];
  }
  if (same) return absl::OkStatus();
  for (int r = 1; r < world; ++r) {
    if (d[3 * r] != d[0]) {
      return absl::InvalidArgumentError(
          absl::StrCat(w.differ, ": rank 0 has ", d[0], " ", w.items, " (",
                       d[1], " elements), rank ", r, " has ", d[3 * r], " (",
                       d[3 * r + 1], " elements); ", w.remedy));
    }
  }
  // Same counts: the per-tensor descriptors have the same size everywhere.
  const int64_t n = infos.size();
  at::Tensor per = at::full({n * kPerTensor}, -1, at::kLong);
  int64_t* p = per.data_ptr<int64_t>();
  for (int64_t i = 0; i < n; ++i) {
    const NamedShape& info = infos[i];
    int64_t numel = 1;
    for (int64_t dim : info.shape) numel *= dim;
    p[i * kPerTensor] = numel;
    p[i * kPerTensor + 1] = info.shape.size();
    for (int64_t k = 0; k < std::min<int64_t>(kMaxDims, info.shape.size());
         ++k) {
      p[i * kPerTensor + 2 + k] = info.shape[k];
    }
    p[i * kPerTensor + kPerTensor - 1] = static_cast<int64_t>(
        Fnv1a(kFnv1aOffset, info.name.data(), info.name.size()));
  }
  at::Tensor all_per = at::empty({world * n * kPerTensor}, at::kLong);
  STRATA_RETURN_IF_ERROR(Annotate(group.AllGather(per, all_per),
                                  "exchanging parameter descriptors"));
  const int64_t* q = all_per.data_ptr<int64_t>();
  auto shape_of = [&](int r, int64_t i) {
    const int64_t* t = q + (r * n + i) * kPerTensor;
    std::vector<int64_t> shape;
    for (int64_t k = 0; k < std::min<int64_t>(t[1], kMaxDims); ++k) {
      shape.push_back(t[2 + k]);
    }
    return shape;
  };
  for (int64_t i = 0; i < n; ++i) {
    for (int r = 1; r < world; ++r) {
      const int64_t* a = q + i * kPerTensor;
      const int64_t* b = q + (r * n + i) * kPerTensor;
      bool shapes_equal = true,
           names_equal = a[kPerTensor - 1] == b[kPerTensor - 1];
      for (int64_t k = 0; k + 1 < kPerTensor; ++k) {
        shapes_equal = shapes_equal && a[k] == b[k];
      }
      if (!shapes_equal) {
        return absl::InvalidArgumentError(absl::StrCat(
            w.item, " '", infos[i].name, "' (#", i, " ", w.order,
            ", as named on rank ", group.rank(),
            ") differs across ranks: rank 0 has shape ",
            ShapeString(shape_of(0, i)), ", rank ", r, " has shape ",
            ShapeString(shape_of(r, i)), "; ", w.remedy));
      }
      if (!names_equal) {
        return absl::InvalidArgumentError(absl::StrCat(
            w.item, " #", i, " ", w.order, " (named '", infos[i].name,
            "' on rank ", group.rank(), ") has different names on rank 0 and ",
            "rank ", r, "; ", w.remedy));
      }
    }
  }
  // Only shapes beyond kMaxDims dims can differ unseen here.
  return absl::InvalidArgumentError(absl::StrCat(
      w.differ, " (their ", w.item, " descriptors differ); ", w.remedy));
}

absl::Status CheckSameModelOnAllRanks(comm::Group& group,
                                      const std::string& kind,
                                      const models::UnitModel& model) {
  std::vector<NamedShape> infos;
  for (const auto& item : model.named_parameters()) {
    infos.push_back({item.key(), item.value().sizes().vec()});
  }
  for (const auto& item : model.named_buffers()) {
    infos.push_back(
        {absl::StrCat("buffer:", item.key()), item.value().sizes().vec()});
  }
  return Annotate(CheckSameOnAllRanks(group, infos, SameOnAllRanksWording()),
                  kind);
}

absl::Status BroadcastFromRankZero(comm::Group& group, const std::string& kind,
                                   models::UnitModel& model,
                                   at::Tensor flat_params) {
  STRATA_RETURN_IF_ERROR(
      Annotate(group.Broadcast(flat_params, /*root=*/0),
               absl::StrCat(kind, ": broadcasting parameters from rank 0")));
  for (const auto& item : model.named_buffers()) {
    at::Tensor buffer = item.value();
    at::Tensor staged = buffer.is_contiguous() ? buffer : buffer.contiguous();
    STRATA_RETURN_IF_ERROR(Annotate(group.Broadcast(staged, /*root=*/0),
                                    absl::StrCat(kind, ": broadcasting buffer:",
                                                 item.key(), " from rank 0")));
    if (!staged.is_same(buffer)) {
      at::NoGradGuard no_grad;
      buffer.copy_(staged);
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<double> ClipGradients(at::Tensor grads,
                                     const OptimizerConfig& config,
                                     comm::Group* group,
                                     const std::string& kind) {
  const double max_norm = config.grad_clip > 0
                              ? config.grad_clip
                              : std::numeric_limits<double>::infinity();
  const double norm_type = config.grad_clip_norm_type;
  if (group == nullptr) return optim::ClipGradNorm(grads, max_norm, norm_type);
  absl::Status reduce_status;
  const double norm =
      optim::ClipGradNorm(grads, max_norm, norm_type, [&](double local) {
        at::Tensor part = at::full({1}, local, at::kDouble);
        reduce_status = group->AllReduce(part, optim::NormPartsAdd(norm_type)
                                                   ? comm::ReduceOp::kSum
                                                   : comm::ReduceOp::kMax);
        return reduce_status.ok() ? part.item<double>()
                                  : std::numeric_limits<double>::quiet_NaN();
      });
  STRATA_RETURN_IF_ERROR(Annotate(
      reduce_status, absl::StrCat(kind,
                                  ": all-reduce of the gradient norm on "
                                  "rank ",
                                  group->rank())));
  return norm;
}

}  // namespace strata::strategies
