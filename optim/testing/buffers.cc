#include "optim/testing/buffers.h"

#include <ATen/Context.h>
#include <ATen/ops/randn.h>

namespace strata::optim::testing {

std::vector<ParamRange> Ranges(const std::vector<int64_t>& sizes,
                               const std::vector<double>& weight_decays) {
  std::vector<ParamRange> ranges;
  int64_t offset = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    ranges.push_back({offset, sizes[i], weight_decays[i]});
    offset += sizes[i];
  }
  return ranges;
}

std::vector<at::Tensor> RandomParts(const std::vector<int64_t>& sizes,
                                    int seed) {
  at::manual_seed(seed);
  std::vector<at::Tensor> parts;
  for (int64_t n : sizes) parts.push_back(at::randn({n}));
  return parts;
}

}  // namespace strata::optim::testing
