// Uniform neighbour sampling (jgo_sample_neighbors), identical on CPU and CUDA: the counter-based
// random numbers, the per-seed sampler, the argument checks and the binding.
//
// jgo_sample_neighbors  (csc_offsets [n_dst+1], csc_src [E], csc_eid [E], seeds [S], key uint32[2])
//                       -> (src [S*fanout], eid [S*fanout])            attributes: fanout, replace, n_src
//
// Seed s (position s of `seeds`, a destination node, or -1 for a padding seed) owns the output
// slots s*fanout .. s*fanout+fanout-1. Without replacement it takes min(deg, fanout) distinct
// in-edges uniformly (all of them, in CSC order, when deg <= fanout; otherwise Floyd's algorithm,
// the chosen CSC positions written in increasing order); with replacement `fanout` independent
// uniform draws (none when deg = 0). Each chosen CSC position k gives src = csc_src[k] (a global
// source id) and eid = csc_eid[k] (the input edge id); unused slots hold -1 in both.
//
// Random numbers: draw `d` of seed position `s` is Philox-4x32-10 of the counter (d, s_lo, s_hi, 0)
// under the key, a pure function of (key, s, d): the sample of a seed depends neither on the
// threads nor on the platform, and the pure-JAX twin (jaxgraphops/reference.py,
// sample_neighbor_positions) computes the same bits. A uniform integer in [0, n) is Lemire's
// multiply-shift with rejection over the block's four words (exact unless all four are rejected,
// probability below (n / 2^32)^4; the last word is then used).
#pragma once

#include <cstdint>
#include <string>

#include "jgo/args.h"
#include "jgo/math.h"
#include "jgo/philox.h"

namespace jgo {

// A uniform integer in [0, n), 1 <= n < 2^32: draw `draw` of seed position `pos`.
JGO_HD uint32_t UniformBelow(uint32_t k0, uint32_t k1, int64_t pos, uint32_t draw, uint32_t n) {
  const uint64_t p = static_cast<uint64_t>(pos);
  const Philox4 r = Philox4x32(draw, static_cast<uint32_t>(p), static_cast<uint32_t>(p >> 32), 0u, k0, k1);
  const uint32_t threshold = (0u - n) % n;  // 2^32 mod n: products whose low word is below it are biased
  uint32_t hi = 0, lo = 0;
  for (int w = 0; w < 4; ++w) {
    MulHiLo32(r.v[w], n, hi, lo);
    if (lo >= threshold) break;
  }
  return hi;
}

// The largest in-degree a seed may have (uniform draws are 32-bit).
constexpr int64_t kMaxSampledDegree = 0xFFFFFFFFll;

// Writes the CSC positions (relative to the seed's first in-edge, so in [0, deg)) chosen for seed
// position `pos` into slots[0, fanout): min(deg, fanout) of them without replacement (increasing),
// fanout with replacement (in draw order; none if deg = 0); -1 in the unused slots. `slots` is the
// seed's row of the output, also the working set of Floyd's algorithm (no scratch memory).
template <typename I>
JGO_HD void SamplePositions(uint32_t k0, uint32_t k1, int64_t pos, int64_t deg, int64_t fanout, bool replace,
                            I* slots) {
  int64_t taken = 0;
  if (replace) {
    if (deg > 0) {
      for (; taken < fanout; ++taken)
        slots[taken] = static_cast<I>(UniformBelow(k0, k1, pos, static_cast<uint32_t>(taken), static_cast<uint32_t>(deg)));
    }
  } else if (deg <= fanout) {
    for (; taken < deg; ++taken) slots[taken] = static_cast<I>(taken);
  } else {
    // Floyd: for j = deg-fanout .. deg-1, draw t uniform in [0, j]; take t, or j if t is taken. The
    // taken set stays sorted in slots[0, taken): binary search, then a shift to insert.
    for (int64_t j = deg - fanout; j < deg; ++j, ++taken) {
      const int64_t t = UniformBelow(k0, k1, pos, static_cast<uint32_t>(taken), static_cast<uint32_t>(j + 1));
      int64_t lo = 0, hi = taken;
      while (lo < hi) {
        const int64_t mid = (lo + hi) / 2;
        if (static_cast<int64_t>(slots[mid]) < t) lo = mid + 1; else hi = mid;
      }
      const bool member = lo < taken && static_cast<int64_t>(slots[lo]) == t;
      // j exceeds every taken value (all were drawn below j), so it goes last
      const int64_t value = member ? j : t;
      const int64_t at = member ? taken : lo;
      for (int64_t m = taken; m > at; --m) slots[m] = slots[m - 1];
      slots[at] = static_cast<I>(value);
    }
  }
  for (int64_t m = taken; m < fanout; ++m) slots[m] = static_cast<I>(-1);
}

// ---------------------------------------------------------------------------------------
// Arguments

struct SampleArgs {
  int64_t n_dst, n_src, n_edges, n_seeds, fanout;
  bool replace;
  uint32_t k0, k1;
};

// Shapes and attributes (the key's words are read on the host by the CPU handler and by the CUDA
// kernel from device memory, so they are filled in later).
inline ffi::ErrorOr<SampleArgs> CheckSample(const ffi::AnyBuffer& offsets, const ffi::AnyBuffer& csc_src,
                                            const ffi::AnyBuffer& csc_eid, const ffi::AnyBuffer& seeds,
                                            const ffi::AnyBuffer& key, const ffi::AnyBuffer& src_out,
                                            const ffi::AnyBuffer& eid_out, int64_t fanout, bool replace,
                                            int64_t n_src) {
  auto view = CheckGraphView("jgo_sample_neighbors", offsets, csc_src, csc_eid);
  if (view.has_error()) return ffi::Unexpected(view.error());
  const auto it = view->index_type;
  if (seeds.element_type() != it || src_out.element_type() != it || eid_out.element_type() != it)
    return Fail("jgo_sample_neighbors: seeds and results must have the graph's int32/int64 dtype");
  if (key.element_type() != ffi::DataType::U32 || key.element_count() != 2)
    return Fail("jgo_sample_neighbors: key must be uint32[2]");
  if (fanout < 0) return Fail("jgo_sample_neighbors: fanout must be >= 0, got " + std::to_string(fanout));
  if (n_src < 0) return Fail("jgo_sample_neighbors: n_src must be >= 0");
  SampleArgs a;
  a.n_dst = view->n_rows;
  a.n_src = n_src;
  a.n_edges = view->n_edges;
  a.n_seeds = static_cast<int64_t>(seeds.element_count());
  a.fanout = fanout;
  a.replace = replace;
  if (static_cast<int64_t>(src_out.element_count()) != a.n_seeds * fanout ||
      static_cast<int64_t>(eid_out.element_count()) != a.n_seeds * fanout)
    return Fail("jgo_sample_neighbors: results must have len(seeds) * fanout elements");
  a.k0 = a.k1 = 0;
  return a;
}

// Samples seed position s into src/eid rows (the eid row holds the positions meanwhile). Returns
// 0, or an error code for the CPU handler's message: 1 seed out of range, 2 offsets out of order or
// out of [0, E], 3 degree above kMaxSampledDegree, 4 a source or edge id out of range. On an error
// the rows are left as padding (-1): the CUDA kernel's policy for malformed input.
enum SampleStatus : int { kSampleOk = 0, kBadSeed = 1, kBadOffsets = 2, kBadDegree = 3, kBadId = 4 };

template <typename I>
JGO_HD int SampleSeed(const SampleArgs& a, const I* offsets, const I* csc_src, const I* csc_eid, const I* seeds,
                      int64_t s, I* src_row, I* eid_row) {
  const int64_t v = seeds[s];
  int status = kSampleOk;
  int64_t begin = 0, deg = 0;
  if (v < -1 || v >= a.n_dst) {
    status = kBadSeed;
  } else if (v >= 0) {
    begin = offsets[v];
    const int64_t end = offsets[v + 1];
    if (begin < 0 || end < begin || end > a.n_edges) status = kBadOffsets;
    else if (end - begin > kMaxSampledDegree) status = kBadDegree;
    else deg = end - begin;
  }
  if (status != kSampleOk) deg = 0;
  SamplePositions(a.k0, a.k1, s, deg, a.fanout, a.replace, eid_row);
  for (int64_t m = 0; m < a.fanout; ++m) {
    const int64_t p = eid_row[m];
    if (p < 0) {
      src_row[m] = static_cast<I>(-1);
      continue;
    }
    const int64_t j = csc_src[begin + p], e = csc_eid[begin + p];
    if (j < 0 || j >= a.n_src || e < 0 || e >= a.n_edges) {
      status = kBadId;
      src_row[m] = eid_row[m] = static_cast<I>(-1);
      continue;
    }
    src_row[m] = static_cast<I>(j);
    eid_row[m] = static_cast<I>(e);
  }
  return status;
}

inline ffi::Error SampleError(const SampleArgs& a, int status, int64_t s, int64_t seed) {
  const std::string where = "seed " + std::to_string(seed) + " at position " + std::to_string(s);
  switch (status) {
    case kBadSeed:
      return InvalidArgument("jgo_sample_neighbors: " + where + " out of range [0, " + std::to_string(a.n_dst) +
                             ") (-1 marks a padding seed)");
    case kBadOffsets:
      return InvalidArgument("jgo_sample_neighbors: the CSC offsets of " + where + " are out of order or outside [0, " +
                             std::to_string(a.n_edges) + "]");
    case kBadDegree:
      return InvalidArgument("jgo_sample_neighbors: " + where + " has more than 2^32 - 1 in-edges");
    default:
      return InvalidArgument("jgo_sample_neighbors: an in-edge of " + where +
                             " has a source or edge id out of range (n_src=" + std::to_string(a.n_src) +
                             ", E=" + std::to_string(a.n_edges) + ")");
  }
}

template <typename... Ctx>
auto BindSampleNeighbors() {
  return BindWith<Ctx...>()
      .template Arg<ffi::AnyBuffer>()  // csc offsets
      .template Arg<ffi::AnyBuffer>()  // csc sources
      .template Arg<ffi::AnyBuffer>()  // csc edge ids
      .template Arg<ffi::AnyBuffer>()  // seeds
      .template Arg<ffi::AnyBuffer>()  // key, uint32[2]
      .template Ret<ffi::AnyBuffer>()  // sampled sources
      .template Ret<ffi::AnyBuffer>()  // sampled edge ids
      .template Attr<int64_t>("fanout")
      .template Attr<bool>("replace")
      .template Attr<int64_t>("n_src");
}

}  // namespace jgo
