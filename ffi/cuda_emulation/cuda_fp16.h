// Emulated cuda_fp16.h: the IEEE binary16 storage type and the conversions the kernels use
// (round to nearest even, as the device instructions).
#pragma once

#include "jgo_emulation/half_bits.h"

struct __half {
  unsigned short __x;
};

inline float __half2float(__half h) { return ::jgo_emulation::HalfBitsToFloat(h.__x); }
inline __half __float2half_rn(float f) { return __half{::jgo_emulation::FloatToHalfBits(f)}; }
inline __half __float2half(float f) { return __float2half_rn(f); }
