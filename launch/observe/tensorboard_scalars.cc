#include "launch/observe/tensorboard_scalars.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

namespace strata::launch {

absl::Status WriteProgressScalars(const ProgressRecord& r,
                                  TensorBoardWriter& writer) {
  std::vector<std::pair<std::string, double>> scalars = {
      {"train/loss", r.loss}};
  if (r.eval_loss.has_value()) scalars.push_back({"eval/loss", *r.eval_loss});
  scalars.insert(scalars.end(), {{"lr", r.lr},
                                 {"grad_norm", r.grad_norm},
                                 {"tokens_per_s", r.tokens_per_s},
                                 {"mfu", r.mfu}});
  if (r.phases.has_value()) {
    const double busy_s = r.phases->forward_backward_s + r.phases->step_s;
    if (busy_s > 0) {
      scalars.push_back({"exposed_comm_share", r.phases->comm_wait_s / busy_s});
    }
  }
  if (r.loss_scale.has_value()) {
    scalars.push_back({"loss_scale", *r.loss_scale});
    scalars.push_back({"skipped_steps", static_cast<double>(r.skipped_steps)});
  }
  for (size_t rank = 0; rank < r.peak_resident_bytes.size(); ++rank) {
    scalars.push_back(
        {absl::StrCat("memory/peak_resident_mib/rank", rank),
         static_cast<double>(r.peak_resident_bytes[rank]) / (1 << 20)});
  }
  for (const auto& [tag, value] : scalars) {
    if (absl::Status s = writer.AddScalar(tag, value, r.step); !s.ok()) {
      return s;
    }
  }
  return writer.Flush();
}

}  // namespace strata::launch
