// Emulated cuda_bf16.h: the bfloat16 storage type and the conversions the kernels use (round to
// nearest even, NaN kept quiet, as the device instructions).
#pragma once

#include "jgo_emulation/half_bits.h"

struct __nv_bfloat16 {
  unsigned short __x;
};

inline float __bfloat162float(__nv_bfloat16 h) { return ::jgo_emulation::BfloatBitsToFloat(h.__x); }
inline __nv_bfloat16 __float2bfloat16_rn(float f) { return __nv_bfloat16{::jgo_emulation::FloatToBfloatBits(f)}; }
inline __nv_bfloat16 __float2bfloat16(float f) { return __float2bfloat16_rn(f); }
