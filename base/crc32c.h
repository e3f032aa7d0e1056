// CRC-32C (Castagnoli), the checksum of every checkpoint chunk: hardware
// (SSE4.2 `crc32` instruction, three interleaved streams) when the CPU has
// it, a table-driven fallback otherwise. Both give the same value.
#ifndef STRATA_BASE_CRC32C_H_
#define STRATA_BASE_CRC32C_H_

#include <cstddef>
#include <cstdint>

namespace strata::checkpoint {

// The CRC-32C of `size` bytes at `data`, continuing from `crc` (the value
// returned for the bytes before; 0 to start). Crc32c("123456789") is
// 0xE3069283. Thread-safe.
uint32_t Crc32c(const void* data, size_t size, uint32_t crc = 0);

// The table-driven implementation (for tests: must equal Crc32c).
uint32_t Crc32cPortable(const void* data, size_t size, uint32_t crc = 0);

// Whether Crc32c uses the SSE4.2 instruction on this CPU.
bool Crc32cIsHardware();

}  // namespace strata::checkpoint

#endif  // STRATA_BASE_CRC32C_H_
