#include "strategies/ddp.h"

#include <ATen/ATen.h>
#include <glog/logging.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status.h"

namespace strata::strategies {
namespace {

// A parameter or buffer as the cross-rank check sees it.
struct TensorInfo {
  std::string name;
  std::vector<int64_t> shape;
  at::Tensor tensor;
};

constexpr uint64_t kFnvOffset = 14695981039346656037ull;
constexpr uint64_t kFnvPrime = 1099511628211ull;

uint64_t Fnv(uint64_t hash, const void* data, size_t size) {
  const auto* bytes = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < size; ++i) {
    hash ^= bytes[i];
    hash *= kFnvPrime;
  }
  return hash;
}

uint64_t HashInfo(uint64_t hash, const TensorInfo& info) {
  hash = Fnv(hash, info.name.data(), info.name.size() + 1);  // With '\0'.
  const int64_t ndim = info.shape.size();
  hash = Fnv(hash, &ndim, sizeof(ndim));
  return Fnv(hash, info.shape.data(), info.shape.size() * sizeof(int64_t));
}

std::string ShapeString(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

constexpr int64_t kMaxDims = 7;
// Per tensor: numel, ndim, kMaxDims dims (-1 padded), name hash.
constexpr int64_t kPerTensor = kMaxDims + 3;

// Checks that every rank of `group` holds tensors with the same names and
// shapes, in the same order. Every rank gets the same verdict.
absl::Status CheckSameTensors(comm::Group& group,
                              const std::vector<TensorInfo>& infos) {
  const int world = group.size();
  int64_t total = 0;
  uint64_t hash = kFnvOffset;
  for (const TensorInfo& info : infos) {
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
  STRATA_RETURN_IF_ERROR(Annotate(group.AllGather(mine, all),
                                  "ddp: exchanging model descriptors"));
  const int64_t* d = all.data_ptr<int64_t>();
  bool same = true;
  for (int r = 1; r < world; ++r) {
    for (int k = 0; k < 3; ++k) same = same && d[3 * r + k] == d[k];
  }
  if (same) return absl::OkStatus();
  for (int r = 1; r < world; ++r) {
    if (d[3 * r] != d[0]) {
      return absl::InvalidArgumentError(
          absl::StrCat("ddp: ranks hold different models: rank 0 has ", d[0],
                       " parameters and buffers (", d[1], " elements), rank ",
                       r, " has ", d[3 * r], " (", d[3 * r + 1],
                       " elements); every rank must build the same model"));
    }
  }
  // Same counts: the per-tensor descriptors have the same size everywhere.
  const int64_t n = infos.size();
  at::Tensor per = at::full({n * kPerTensor}, -1, at::kLong);
  int64_t* p = per.data_ptr<int64_t>();
  for (int64_t i = 0; i < n; ++i) {
    const TensorInfo& info = infos[i];
    int64_t numel = 1;
    for (int64_t dim : info.shape) numel *= dim;
    p[i * kPerTensor] = numel;
    p[i * kPerTensor + 1] = info.shape.size();
    for (int64_t k = 0; k < std::min<int64_t>(kMaxDims, info.shape.size());
         ++k) {
      p[i * kPerTensor + 2 + k] = info.shape[k];
    }
    p[i * kPerTensor + kPerTensor - 1] = static_cast<int64_t>(
        Fnv(kFnvOffset, info.name.data(), info.name.size()));
  }
  at::Tensor all_per = at::empty({world * n * kPerTensor}, at::kLong);
  STRATA_RETURN_IF_ERROR(Annotate(group.AllGather(per, all_per),
                                  "ddp: exchanging parameter descriptors"));
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
            "ddp: parameter '", infos[i].name, "' (#", i,
            " in registration order, as named on rank ", group.rank(),
            ") differs across ranks: rank 0 has shape ",
            ShapeString(shape_of(0, i)), ", rank ", r, " has shape ",
            ShapeString(shape_of(r, i)),
            "; every rank must build the same model"));
      }
      if (!names_equal) {
        return absl::InvalidArgumentError(absl::StrCat(
            "ddp: parameter #", i, " in registration order (named '",
            infos[i].name, "' on rank ", group.rank(),
            ") has different names on rank 0 and rank ", r,
            "; every rank must build the same model"));
      }
    }
  }
  // Only shapes beyond kMaxDims dims can differ unseen here.
  return absl::InvalidArgumentError(
      "ddp: ranks hold different models (their parameter descriptors "
      "differ); every rank must build the same model");
}

}  // namespace

class DdpStrategy::ReadyHook : public torch::autograd::FunctionPostHook {
 public:
  ReadyHook(DdpStrategy* owner, size_t entry) : owner_(owner), entry_(entry) {}
  torch::autograd::variable_list operator()(
      const torch::autograd::variable_list& outputs,
      const torch::autograd::variable_list& /*inputs*/) override {
    owner_->MarkReady(entry_);
    return outputs;
  }

 private:
  DdpStrategy* const owner_;
  const size_t entry_;
};

absl::StatusOr<std::unique_ptr<DdpStrategy>> DdpStrategy::Create(
    const StrategyOptions& options, std::shared_ptr<models::UnitModel> model,
    comm::Group* group, const OptimizerConfig& config,
    const optim::LrScheduleOptions& schedule) {
  STRATA_RETURN_IF_ERROR(ValidateStrategyOptions(options));
  if (group == nullptr) {
    return absl::InvalidArgumentError(
        "--strategy ddp needs a process group, got none");
  }
  if (model == nullptr) {
    return absl::InvalidArgumentError("strategy 'ddp': model is null");
  }
  STRATA_RETURN_IF_ERROR(ValidateOptimizerConfig(config));
  STRATA_RETURN_IF_ERROR(optim::ValidateLrScheduleOptions(schedule));

  std::vector<TensorInfo> infos;
  for (const auto& item : model->named_parameters()) {
    infos.push_back({item.key(), item.value().sizes().vec(), item.value()});
  }
  const size_t num_params = infos.size();
  for (const auto& item : model->named_buffers()) {
    infos.push_back({absl::StrCat("buffer:", item.key()),
                     item.value().sizes().vec(), item.value()});
  }
  STRATA_RETURN_IF_ERROR(CheckSameTensors(*group, infos));

  STRATA_ASSIGN_OR_RETURN(Parts parts, BuildParts(*model, config, schedule,
                                                  /*reverse_order=*/true));
  // Rank 0's weights everywhere: the flat buffer holds every parameter.
  at::Tensor params = parts.flat->params();
  STRATA_RETURN_IF_ERROR(Annotate(group->Broadcast(params, /*root=*/0),
                                  "ddp: broadcasting parameters from rank 0"));
  for (size_t i = num_params; i < infos.size(); ++i) {
    at::Tensor buffer = infos[i].tensor;
    at::Tensor staged = buffer.is_contiguous() ? buffer : buffer.contiguous();
    STRATA_RETURN_IF_ERROR(Annotate(
        group->Broadcast(staged, /*root=*/0),
        absl::StrCat("ddp: broadcasting ", infos[i].name, " from rank 0")));
    if (!staged.is_same(buffer)) {
      at::NoGradGuard no_grad;
      buffer.copy_(staged);
    }
  }
  std::unique_ptr<DdpStrategy> strategy(new DdpStrategy(
      std::move(model), config, std::move(parts), options, group));
  strategy->BuildBuckets();
  strategy->AddHooks();
  return strategy;
}

DdpStrategy::DdpStrategy(std::shared_ptr<models::UnitModel> model,
                         const OptimizerConfig& config, Parts parts,
                         const StrategyOptions& options, comm::Group* group)
    : SingleStrategy(std::move(model), config, std::move(parts)),
      options_(options),
      group_(group) {}

DdpStrategy::~DdpStrategy() {
  for (const auto& [node, key] : hooks_) node->del_post_hook(key);
  for (auto& work : works_) {
    absl::Status status = work->Wait();
    if (!status.ok()) LOG(WARNING) << "ddp: at destruction: " << status;
  }
}

void DdpStrategy::BuildBuckets() {
  const auto& entries = flat().entries();
  const int64_t elem = flat().grads().element_size();
  bucket_of_entry_.assign(entries.size(), 0);
  Bucket current;
  int64_t cap = options_.first_bucket_bytes;
  for (size_t i = 0; i < entries.size(); ++i) {
    const auto& e = entries[i];
    if (!current.entries.empty() && (current.numel + e.numel) * elem > cap) {
      buckets_.push_back(std::move(current));
      current = Bucket();
      current.offset = e.offset;
      cap = options_.bucket_bytes;
    }
    if (current.entries.empty()) current.offset = e.offset;
    CHECK_EQ(current.offset + current.numel, e.offset);
    current.numel += e.numel;
    current.entries.push_back(i);
    bucket_of_entry_[i] = buckets_.size();
  }
  if (!current.entries.empty()) buckets_.push_back(std::move(current));
  // Padding (none with align 1) would belong to no bucket.
  CHECK_EQ(buckets_.back().offset + buckets_.back().numel, flat().numel());
  for (const Bucket& b : buckets_) {
    bucket_views_.push_back(flat().grads().narrow(0, b.offset, b.numel));
  }
  pending_.assign(buckets_.size(), 0);
  entry_ready_.assign(entries.size(), false);
  VLOG(1) << "ddp: " << buckets_.size() << " buckets over " << entries.size()
          << " parameters";
}

void DdpStrategy::AddHooks() {
  for (size_t i = 0; i < flat().entries().size(); ++i) {
    if (!flat().entries()[i].requires_grad) continue;
    std::shared_ptr<torch::autograd::Node> accumulator =
        torch::autograd::impl::grad_accumulator(flat().parameter(i));
    CHECK(accumulator != nullptr) << flat().entries()[i].name;
    const uintptr_t key =
        accumulator->add_post_hook(std::make_unique<ReadyHook>(this, i));
    hooks_.emplace_back(std::move(accumulator), key);
  }
}

absl::Status DdpStrategy::BeforeMicroBatch(bool last_micro_batch) {
  if (gradients_ready_ || armed_) {
    return absl::FailedPreconditionError(
        "ddp: ForwardBackward called after the step's last micro-batch "
        "(last_micro_batch = true) without Step() in between");
  }
  if (!last_micro_batch) return absl::OkStatus();
  std::fill(entry_ready_.begin(), entry_ready_.end(), false);
  for (size_t b = 0; b < buckets_.size(); ++b) {
    pending_[b] = 0;
    for (size_t i : buckets_[b].entries) {
      if (flat().entries()[i].requires_grad) ++pending_[b];
    }
  }
  next_bucket_ = 0;
  armed_ = true;
  return absl::OkStatus();
}

absl::Status DdpStrategy::AfterBackward(bool last_micro_batch) {
  if (!last_micro_batch) return absl::OkStatus();
  armed_ = false;
  gradients_ready_ = true;
  return absl::OkStatus();
}

void DdpStrategy::MarkReady(size_t entry) {
  if (!armed_ || entry_ready_[entry]) return;
  entry_ready_[entry] = true;
  --pending_[bucket_of_entry_[entry]];
  while (next_bucket_ < buckets_.size() && pending_[next_bucket_] == 0) {
    LaunchBucket(next_bucket_++, /*from_backward=*/true);
  }
}

void DdpStrategy::LaunchBucket(size_t bucket, bool from_backward) {
  works_.push_back(
      group_->AllReduceAsync(bucket_views_[bucket], comm::ReduceOp::kAverage));
  ++(from_backward ? launched_in_backward_ : launched_at_step_);
}

void DdpStrategy::ResetStep() {
  armed_ = false;
  gradients_ready_ = false;
  works_.clear();
}

absl::Status DdpStrategy::FinishGradients() {
  if (!gradients_ready_) {
    // A backward that threw leaves armed_ set: start the next step afresh.
    for (auto& work : works_) work->Wait().IgnoreError();
    ResetStep();
    return absl::FailedPreconditionError(
        "ddp: Step() needs a completed ForwardBackward with "
        "last_micro_batch = true first");
  }
  std::vector<std::string> unused;
  for (size_t i = 0; i < entry_ready_.size(); ++i) {
    if (flat().entries()[i].requires_grad && !entry_ready_[i]) {
      unused.push_back(flat().entries()[i].name);
    }
  }
  absl::Status status;
  if (!unused.empty() && !options_.allow_unused_parameters) {
    status = absl::FailedPreconditionError(absl::StrCat(
        "ddp: parameters got no gradient in the last backward: ",
        absl::StrJoin(unused, ", "),
        "; use them in the loss, set requires_grad = false, or set "
        "allow_unused_parameters (--allow_unused_parameters) to reduce their "
        "zero gradients at Step()"));
  } else {
    while (next_bucket_ < buckets_.size()) {
      LaunchBucket(next_bucket_++, /*from_backward=*/false);
    }
  }
  for (size_t k = 0; k < works_.size(); ++k) {
    absl::Status wait = works_[k]->Wait();
    if (!wait.ok() && status.ok()) {
      const Bucket& b = buckets_[k];
      status = Annotate(
          wait, absl::StrCat("ddp: all-reduce of gradient bucket ", k, " of ",
                             buckets_.size(), " (elements [", b.offset, ", ",
                             b.offset + b.numel, "), parameters '",
                             flat().entries()[b.entries.front()].name, "' .. '",
                             flat().entries()[b.entries.back()].name, "')"));
    }
  }
  ResetStep();
  return status;
}

}  // namespace strata::strategies
