#include "base/crc32c.h"

#include <cstring>

#if defined(__x86_64__)
#include <nmmintrin.h>
#endif

namespace strata::checkpoint {
namespace {

constexpr uint32_t kPoly = 0x82F63B78;  // Reflected Castagnoli polynomial.

struct Tables {
  uint32_t byte[8][256];
  Tables() {
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ kPoly : c >> 1;
      byte[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; ++i) {
      for (int t = 1; t < 8; ++t) {
        byte[t][i] = (byte[t - 1][i] >> 8) ^ byte[0][byte[t - 1][i] & 0xff];
      }
    }
  }
};

const Tables& GetTables() {
  static const Tables* tables = new Tables();
  return *tables;
}

// Multiplication in GF(2)[x] modulo the polynomial (reflected), used to
// shift a CRC over zero bytes when combining interleaved streams.
uint32_t GfMultiply(uint32_t a, uint32_t b) {
  uint32_t product = 0;
  for (int i = 0; i < 32; ++i) {
    if (b & 0x80000000u) product ^= a;
    b <<= 1;
    a = (a & 1) ? (a >> 1) ^ kPoly : a >> 1;
  }
  return product;
}

// x^(8 * n) mod P in reflected form: shifting a CRC state over n zero bytes
// is a multiplication by it.
uint32_t ShiftFactor(size_t n) {
  uint32_t result = 0x80000000u;  // x^0.
  uint32_t square = 0x00800000u;  // x^8 (one byte).
  while (n > 0) {
    if (n & 1) result = GfMultiply(result, square);
    square = GfMultiply(square, square);
    n >>= 1;
  }
  return result;
}

#if defined(__x86_64__)
bool HasSse42() {
  static const bool has = __builtin_cpu_supports("sse4.2");
  return has;
}

// Blocks of this many bytes per stream: three streams of kBlock bytes are
// checksummed in parallel (the crc32 instruction has a latency of 3 cycles
// and a throughput of 1) and combined with one shift each.
constexpr size_t kBlock = 8192;

__attribute__((target("sse4.2"))) uint32_t Crc32cSse42(const uint8_t* p,
                                                       size_t n, uint32_t crc) {
  static const uint32_t shift_block = ShiftFactor(kBlock);
  uint64_t c0 = ~crc;
  while (n > 0 && (reinterpret_cast<uintptr_t>(p) & 7) != 0) {
    c0 = _mm_crc32_u8(static_cast<uint32_t>(c0), *p++);
    --n;
  }
  while (n >= 3 * kBlock) {
    uint64_t c1 = 0, c2 = 0;
    const uint8_t* p1 = p + kBlock;
    const uint8_t* p2 = p + 2 * kBlock;
    for (size_t i = 0; i < kBlock; i += 8) {
      uint64_t w0, w1, w2;
      std::memcpy(&w0, p + i, 8);
      std::memcpy(&w1, p1 + i, 8);
      std::memcpy(&w2, p2 + i, 8);
      c0 = _mm_crc32_u64(c0, w0);
      c1 = _mm_crc32_u64(c1, w1);
      c2 = _mm_crc32_u64(c2, w2);
    }
    // crc(A B) = shift(crc(A), |B|) xor crc0(B), where crc0 starts from 0
    // with no pre/post inversion: the streams were started from 0.
    c0 = GfMultiply(static_cast<uint32_t>(c0), shift_block) ^ c1;
    c0 = GfMultiply(static_cast<uint32_t>(c0), shift_block) ^ c2;
    p += 3 * kBlock;
    n -= 3 * kBlock;
  }
  while (n >= 8) {
    uint64_t w;
    std::memcpy(&w, p, 8);
    c0 = _mm_crc32_u64(c0, w);
    p += 8;
    n -= 8;
  }
  while (n > 0) {
    c0 = _mm_crc32_u8(static_cast<uint32_t>(c0), *p++);
    --n;
  }
  return ~static_cast<uint32_t>(c0);
}
#endif

}  // namespace

uint32_t Crc32cPortable(const void* data, size_t size, uint32_t crc) {
  const Tables& t = GetTables();
  const uint8_t* p = static_cast<const uint8_t*>(data);
  uint32_t c = ~crc;
  while (size >= 8) {
    uint32_t lo, hi;
    std::memcpy(&lo, p, 4);
    std::memcpy(&hi, p + 4, 4);
    lo ^= c;
    c = t.byte[7][lo & 0xff] ^ t.byte[6][(lo >> 8) & 0xff] ^
        t.byte[5][(lo >> 16) & 0xff] ^ t.byte[4][lo >> 24] ^
        t.byte[3][hi & 0xff] ^ t.byte[2][(hi >> 8) & 0xff] ^
        t.byte[1][(hi >> 16) & 0xff] ^ t.byte[0][hi >> 24];
    p += 8;
    size -= 8;
  }
  while (size > 0) {
    c = (c >> 8) ^ t.byte[0][(c ^ *p++) & 0xff];
    --size;
  }
  return ~c;
}

bool Crc32cIsHardware() {
#if defined(__x86_64__)
  return HasSse42();
#else
  return false;
#endif
}

uint32_t Crc32c(const void* data, size_t size, uint32_t crc) {
#if defined(__x86_64__)
  if (HasSse42()) {
    return Crc32cSse42(static_cast<const uint8_t*>(data), size, crc);
  }
#endif
  return Crc32cPortable(data, size, crc);
}

}  // namespace strata::checkpoint
