// Bit-exact conversions between float and the 16-bit float formats (binary16, bfloat16), rounding
// to nearest even like the CUDA conversion instructions.
#pragma once

#include <cstdint>
#include <cstring>

namespace jgo_emulation {

inline uint32_t FloatBits(float f) {
  uint32_t x;
  std::memcpy(&x, &f, sizeof x);
  return x;
}
inline float BitsFloat(uint32_t x) {
  float f;
  std::memcpy(&f, &x, sizeof f);
  return f;
}

inline unsigned short FloatToHalfBits(float f) {
  const uint32_t x = FloatBits(f), sign = (x >> 16) & 0x8000u, mag = x & 0x7fffffffu;
  if (mag >= 0x7f800000u)  // inf, or NaN kept quiet with the top payload bits
    return static_cast<unsigned short>(sign | 0x7c00u | (mag > 0x7f800000u ? 0x200u | ((mag >> 13) & 0x3ffu) : 0u));
  if (mag >= 0x477ff000u) return static_cast<unsigned short>(sign | 0x7c00u);  // >= 65520 rounds to inf
  if (mag < 0x38800000u) {                                                      // below 2^-14: subnormal or 0
    if (mag < 0x33000000u) return static_cast<unsigned short>(sign);            // below 2^-25
    const uint32_t e = mag >> 23, m = (mag & 0x7fffffu) | 0x800000u, shift = 126 - e;
    uint32_t h = m >> shift;
    const uint32_t rest = m & ((1u << shift) - 1u), halfway = 1u << (shift - 1);
    if (rest > halfway || (rest == halfway && (h & 1u))) ++h;
    return static_cast<unsigned short>(sign | h);
  }
  uint32_t h = (mag - 0x38000000u) >> 13;  // exponent rebiased from 127 to 15
  const uint32_t rest = mag & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;
  return static_cast<unsigned short>(sign | h);
}

inline float HalfBitsToFloat(unsigned short bits) {
  const uint32_t sign = (bits & 0x8000u) << 16, e = (bits >> 10) & 0x1fu;
  uint32_t m = bits & 0x3ffu;
  if (e == 0x1f) return BitsFloat(sign | 0x7f800000u | (m << 13));
  if (e != 0) return BitsFloat(sign | ((e + 112) << 23) | (m << 13));
  if (m == 0) return BitsFloat(sign);
  uint32_t shift = 0;  // subnormal: normalise
  while (!(m & 0x400u)) {
    m <<= 1;
    ++shift;
  }
  return BitsFloat(sign | ((113 - shift) << 23) | ((m & 0x3ffu) << 13));
}

inline unsigned short FloatToBfloatBits(float f) {
  const uint32_t x = FloatBits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<unsigned short>((x >> 16) | 0x40u);
  return static_cast<unsigned short>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

inline float BfloatBitsToFloat(unsigned short bits) { return BitsFloat(static_cast<uint32_t>(bits) << 16); }

}  // namespace jgo_emulation
