#include "models/unit.h"

#include <ATen/ATen.h>

#include <stdexcept>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "glog/logging.h"

namespace strata::models {
namespace {

void CheckTargetDtype(const at::Tensor& targets) {
  if (targets.scalar_type() != at::kLong) {
    throw std::invalid_argument(
        absl::StrCat("UnitModel::Loss: targets must be int64, got ",
                     c10::toString(targets.scalar_type())));
  }
}

}  // namespace

void UnitModel::AddInterceptor(std::shared_ptr<UnitInterceptor> interceptor) {
  CHECK(interceptor != nullptr);
  auto list = std::make_shared<InterceptorList>(*interceptors_);
  list->push_back(std::move(interceptor));
  interceptors_ = std::move(list);
}

void UnitModel::ClearInterceptors() {
  interceptors_ = std::make_shared<const InterceptorList>();
}

int UnitModel::num_interceptors() const {
  return static_cast<int>(interceptors_->size());
}

at::Tensor UnitModel::Loss(const at::Tensor& logits,
                           const at::Tensor& targets) {
  if (logits.dim() != 3 || targets.dim() != 2 ||
      logits.size(0) != targets.size(0) || logits.size(1) != targets.size(1)) {
    throw std::invalid_argument(absl::StrCat(
        "UnitModel::Loss: expected logits [B, T, V] and targets [B, T], got "
        "logits ",
        c10::str(logits.sizes()), " and targets ", c10::str(targets.sizes())));
  }
  CheckTargetDtype(targets);
  const int64_t vocab = logits.size(2);
  return at::cross_entropy_loss(logits.reshape({-1, vocab}).to(at::kFloat),
                                targets.reshape({-1}));
}

at::Tensor UnitModel::ForwardLoss(const at::Tensor& tokens,
                                  const at::Tensor& targets) {
  return Loss(Forward(tokens), targets);
}

void UnitModel::CheckTargets(const at::Tensor& tokens,
                             const at::Tensor& targets) {
  if (!targets.defined() || targets.dim() != 2 ||
      targets.sizes() != tokens.sizes()) {
    throw std::invalid_argument(absl::StrCat(
        "UnitModel::Loss: expected targets [B, T] of the tokens' shape ",
        c10::str(tokens.sizes()), ", got ",
        targets.defined() ? c10::str(targets.sizes()) : "an undefined tensor"));
  }
  CheckTargetDtype(targets);
}

absl::StatusOr<at::Tensor> UnitModel::InitialParameter(const std::string& name,
                                                       uint64_t seed) const {
  return absl::UnimplementedError(
      absl::StrCat("model '", this->name(),
                   "' does not support deferred initialisation (no "
                   "InitialParameter for '",
                   name, "')"));
}

void UnitModel::RegisterUnit(std::string name, std::string type,
                             torch::nn::Module* module) {
  CHECK(module != nullptr) << "unit '" << name << "' has no module";
  for (const UnitInfo& unit : units_) {
    CHECK(unit.name != name) << "unit '" << name << "' registered twice";
  }
  std::unordered_map<const void*, std::string> full_names;
  for (const auto& item : named_parameters(/*recurse=*/true)) {
    full_names.emplace(item.value().unsafeGetTensorImpl(), item.key());
  }
  UnitInfo info;
  info.name = std::move(name);
  info.type = std::move(type);
  info.index = static_cast<int>(units_.size());
  info.module = module;
  for (const auto& item : module->named_parameters(/*recurse=*/true)) {
    auto it = full_names.find(item.value().unsafeGetTensorImpl());
    CHECK(it != full_names.end())
        << "unit '" << info.name << "': parameter '" << item.key()
        << "' of its module is not a parameter of the model (register the "
           "module in the model before registering the unit)";
    for (const UnitInfo& unit : units_) {
      for (const std::string& owned : unit.parameters) {
        CHECK(owned != it->second)
            << "parameter '" << owned << "' belongs to unit '" << unit.name
            << "' and to unit '" << info.name
            << "'; a parameter read by several units is owned by one and "
               "declared in SharedParameters()";
      }
    }
    info.parameters.push_back(it->second);
  }
  units_.push_back(std::move(info));
}

at::Tensor UnitModel::CallUnit(int unit_index, const at::Tensor& input,
                               const UnitForward& forward) {
  CHECK_GE(unit_index, 0);
  CHECK_LT(unit_index, static_cast<int>(units_.size()));
  std::shared_ptr<const InterceptorList> interceptors = interceptors_;
  if (interceptors->empty()) return forward(input);
  // Build the chain inside out: the last interceptor wraps `forward`, the
  // first added wraps them all. Each link owns what it calls, so the chain
  // outlives this call (recomputation in backward).
  UnitForward chain = forward;
  for (auto it = interceptors->rbegin(); it != interceptors->rend(); ++it) {
    chain = [this, unit_index, interceptor = *it,
             inner = std::move(chain)](const at::Tensor& x) {
      return interceptor->Run(units_[unit_index], x, inner);
    };
  }
  return chain(input);
}

void UnitModel::CheckTokens(const at::Tensor& tokens, int64_t vocab_size,
                            int64_t max_seq_len) {
  if (!tokens.defined() || tokens.dim() != 2) {
    throw std::invalid_argument(absl::StrCat(
        "model input: tokens must be a 2-D [batch, sequence] tensor, got ",
        tokens.defined() ? c10::str(tokens.sizes()) : "an undefined tensor"));
  }
  if (tokens.scalar_type() != at::kLong) {
    throw std::invalid_argument(
        absl::StrCat("model input: tokens must be int64, got ",
                     c10::toString(tokens.scalar_type())));
  }
  if (tokens.size(0) == 0 || tokens.size(1) == 0) {
    throw std::invalid_argument(
        absl::StrCat("model input: tokens ", c10::str(tokens.sizes()),
                     " is empty; expected at least one token"));
  }
  if (tokens.size(1) > max_seq_len) {
    throw std::invalid_argument(absl::StrCat(
        "model input: sequence length ", tokens.size(1),
        " exceeds the model's maximum context seq_len = ", max_seq_len));
  }
  const int64_t min_id = tokens.min().item<int64_t>();
  const int64_t max_id = tokens.max().item<int64_t>();
  if (min_id < 0 || max_id >= vocab_size) {
    throw std::invalid_argument(
        absl::StrCat("model input: token ids must be in [0, ", vocab_size - 1,
                     "] for vocab_size ", vocab_size, ", got ids from ", min_id,
                     " to ", max_id));
  }
}

void UnitModel::CheckMaterialized() const {
  for (const at::Tensor& parameter : parameters(/*recurse=*/true)) {
    if (!parameter.is_meta()) continue;
    std::vector<std::string> meta;
    for (const auto& item : named_parameters(/*recurse=*/true)) {
      if (item.value().is_meta()) meta.push_back(item.key());
    }
    const size_t shown = std::min<size_t>(meta.size(), 5);
    throw std::invalid_argument(absl::StrCat(
        "model '", name(), "' has ", meta.size(),
        " parameter(s) on the meta device (built deferred and not "
        "materialised), e.g. '",
        absl::StrJoin(meta.begin(), meta.begin() + shown, "', '"),
        "'; call Materialize (models/init.h) or load a state dict first"));
  }
}

}  // namespace strata::models
