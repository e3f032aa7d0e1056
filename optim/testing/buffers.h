// Helpers for optimizer tests: flat-buffer layouts and random contents.
#ifndef STRATA_OPTIM_TESTING_BUFFERS_H_
#define STRATA_OPTIM_TESTING_BUFFERS_H_

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

#include "optim/optimizer.h"

namespace strata::optim::testing {

// Consecutive ranges of `sizes` elements from offset 0, range i with
// `weight_decays[i]`.
std::vector<ParamRange> Ranges(const std::vector<int64_t>& sizes,
                               const std::vector<double>& weight_decays);

// One N(0, 1) tensor per size, from LibTorch's global generator seeded with
// `seed`.
std::vector<at::Tensor> RandomParts(const std::vector<int64_t>& sizes,
                                    int seed);

}  // namespace strata::optim::testing

#endif  // STRATA_OPTIM_TESTING_BUFFERS_H_
