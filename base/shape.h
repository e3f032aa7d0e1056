// Plain tensor-shape helpers shared by every package (error messages and
// element counts), so that no layer needs LibTorch's tensor types to talk
// about a shape.
#ifndef STRATA_BASE_SHAPE_H_
#define STRATA_BASE_SHAPE_H_

#include <cstdint>
#include <string>

#include "absl/types/span.h"

namespace strata {

// "[2, 3]" for {2, 3}; "[]" for a scalar. Accepts a std::vector<int64_t>, an
// at::IntArrayRef (via .vec() or {data, size}) or any span of int64_t.
std::string ShapeString(absl::Span<const int64_t> shape);

// The product of the dimensions (1 for a scalar).
int64_t NumElements(absl::Span<const int64_t> shape);

}  // namespace strata

#endif  // STRATA_BASE_SHAPE_H_
