// 64-bit FNV-1a: a small, unsalted, platform-independent hash, for values
// that must agree across processes and runs (parameter seeds, model and
// layout descriptors exchanged between ranks). absl::Hash is salted per
// process and cannot serve there.
#ifndef STRATA_BASE_FNV_H_
#define STRATA_BASE_FNV_H_

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace strata {

inline constexpr uint64_t kFnv1aOffset = 14695981039346656037ull;
inline constexpr uint64_t kFnv1aPrime = 1099511628211ull;

// Continues the hash `hash` (start from kFnv1aOffset) over `size` bytes.
inline uint64_t Fnv1a(uint64_t hash, const void* data, size_t size) {
  const auto* bytes = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < size; ++i) {
    hash ^= bytes[i];
    hash *= kFnv1aPrime;
  }
  return hash;
}

inline uint64_t Fnv1a(uint64_t hash, std::string_view s) {
  return Fnv1a(hash, s.data(), s.size());
}

}  // namespace strata

#endif  // STRATA_BASE_FNV_H_
