// The chunked row-walk engine under every CUDA kernel that walks a compressed grouping (offsets
// [n_rows + 1] into positions [0, n_edges)): gspmm, the aggregations, pool, gsddmm, edge_softmax,
// update_efeat's row sums and agg_dmpnn. Deterministic: the same bits on every GPU and every run.
//
// Work: a chunk is at most kChunk = 256 consecutive positions of one row, never a whole row: chunk c of
// row r covers [begin_r + 256 c, min(end_r, begin_r + 256 (c + 1))), so a row of up to 256 edges is one
// chunk (walked in position order, the bits of a serial walk) and a longer one ceil(deg / 256) chunks.
// Chunk (r, c) sits at coordinate r + begin_r + 256 c, which grows strictly along the rows (the merge
// path of rows and positions); walker w (a group of lanes) owns the chunks whose coordinate lies in
// window [W w, W w + W), W = 2^shift coordinates: short rows are packed several to a walker, a walker has
// at most 256 + W positions and W + 1 rows, and which chunk goes where depends on the offsets alone.
// Ownership is a function of the row alone, so even malformed offsets never give a row two owners. A
// walker finds its first row with a search by all its lanes (FirstRowEndingAfter: G-ary, ~4 steps at G = 32).
// W is 256, or smaller (down to 32) where 256 would give too few walkers to fill the device (WindowShift):
// a walker walks its rows one after the other, so a grouping of short rows in few windows leaves most of
// the GPU idle behind a few long walks. W changes which walker walks a chunk, never how the chunk is walked
// or combined: the results are the same bits whatever W (and whatever the device).
//
// Lanes over features: a walker of G lanes (a power of two <= 32) covers a tile of G * kV features,
// kV = 16 bytes / sizeof(T) per lane, so F = 128 float32 is one 128-bit load per lane per gathered row
// and F = 64 half a warp; wider features take several tiles (walkers). Positions are staged once per
// G edges (G >= 8: one coalesced load, broadcast by shuffles) or 8 at a time (G < 8: each lane loads
// them, a broadcast within the walker), and kInFlight = 8 gathers are issued before the first is
// consumed. Indices are clamped into range and masked (never a branch per edge); 32-bit index math.
//
// Split rows (more than 256 edges) leave one partial per chunk in scratch memory (PartialSlot); each
// chunk's walker then arrives at the row's integer counter and the last to arrive folds the partials
// in chunk order (sum; value and winning edge for max/min; (m, l) of a softmax). The counter picks who
// folds, never the order: no floating-point atomics, results independent of the block order.
//
// Each kernel built on this engine declares it to the SASS cost cards (python -m benchmarks.gpu_model
// --cards --check) with the line `// gpu-model: engine mlp>=N vector-if ...` above its template: its gather
// loop keeps at least N global loads in flight before the first is consumed (8 is the aim; a lower N is the
// floor measured in the SASS, explained above the marker) and, on the vector path (kVector, or kV > 1 for
// edge_softmax's heads), loads each gathered row with 128-bit loads. The strided path (F % kV != 0,
// broadcast or unaligned operands) is the scalar tail and loads 32 or 64 bits. The kernels are
// __launch_bounds__(kBlock, 1): latency is hidden by the loads in flight per warp, not by warps per SM, so
// ptxas may take the registers the gathers in flight need (without a minimum of blocks, nvcc 13's ptxas
// capped them at 80 or 128 for occupancy and spilled the float64, 64-bit index and mask instantiations).
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <string>
#include <type_traits>
#include <utility>

#include "cuda/launch.cuh"
#include "jgo/math.h"

namespace jgo {
inline namespace JGO_CUDA_PLATFORM {

constexpr int kChunkShift = 8;
constexpr int kChunk = 1 << kChunkShift;  // positions of a chunk at most
constexpr int kMinWindowShift = 5;        // windows of 32 to 256 coordinates
constexpr int kInFlight = 8;              // gathers issued before the first is consumed
constexpr int64_t kMaxIndex = (int64_t{1} << 31) - 1;  // the engine's 32-bit index math: sizes below 2^31

// ---------------------------------------------------------------------------------------
// Walkers and windows

// A walker: `group` lanes (a power of two <= 32, never straddling a warp) and this lane's place in it.
struct Walker {
  int group, lane;
  int base;       // the group's first lane in the warp
  unsigned mask;  // the group's shuffle mask
};

__device__ __forceinline__ Walker ThisWalker(int group) {
  const int in_warp = static_cast<int>(threadIdx.x) % kWarp;
  return Walker{group, in_warp & (group - 1), in_warp & ~(group - 1), GroupMask(group)};
}

// Lanes per walker for F features of kV per lane: a power of two covering ceil(F / kV), at most a warp.
inline int WalkerLanes(int64_t F, int kV) { return GroupWidth((F + kV - 1) / kV); }

// The windows of 2^shift coordinates of a grouping of n_rows rows over n_edges positions: chunk coordinates
// stay below n_rows + n_edges (a row's coordinate is r + begin_r), and the windows after the rows' last one
// hold the positions' tail [offsets[n_rows], n_edges) (padding edges) for kernels that write per position.
inline int64_t Windows(int64_t n_rows, int64_t n_edges, int shift) { return ((n_rows + n_edges) >> shift) + 1; }

// The streaming multiprocessors of the current device (132 when the driver does not say).
inline int64_t DeviceSms() {
  int device = 0, value = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&value, cudaDevAttrMultiProcessorCount, device) != cudaSuccess || value <= 0) {
    cudaGetLastError();
    return 132;
  }
  return value;
}

// The window shift of a launch whose windows take `lanes_per_window` lanes each (walkers x their lanes):
// the largest in [kMinWindowShift, kChunkShift] whose windows give every SM at least two blocks' worth of
// lanes (a wave at the engine kernels' two resident blocks an SM): 256 on large graphs, smaller on a small or
// short-rowed grouping that would otherwise run on a fraction of the SMs. (Four blocks an SM shrank the windows
// of agg_hg_basis' forward too, whose walkers' setup is heavy: modelled slower, BENCHMARKS.md.)
inline int WindowShift(int64_t n_rows, int64_t n_edges, int64_t lanes_per_window) {
  const int64_t fill = 2 * int64_t(kBlock) * DeviceSms();
  int shift = kChunkShift;
  while (shift > kMinWindowShift && Windows(n_rows, n_edges, shift) * lanes_per_window < fill) --shift;
  return shift;
}

// Blocks of kBlock threads for `walkers` walkers of `group` lanes (grid-stride beyond kMaxBlocks).
inline int64_t WalkerBlocks(int64_t walkers, int group) {
  return std::min<int64_t>((walkers * group + kBlock - 1) / kBlock, kMaxBlocks);
}

// Calls fn(walker index) for this thread's walkers of `walkers` (grid-stride), uniformly in each walker.
// 32-bit: a launch has fewer than 2^31 walkers (EngineSizes).
template <typename Fn>
__device__ __forceinline__ void ForEachWalker(int64_t walkers, int group, Fn fn) {
  const uint32_t shift = __ffs(group) - 1;  // group is a power of two
  const uint32_t stride = (gridDim.x * blockDim.x) >> shift;
  for (uint32_t w = (blockIdx.x * blockDim.x + threadIdx.x) >> shift; w < walkers; w += stride) fn(int64_t(w));
}

template <typename X>
__device__ __forceinline__ X Min(X a, X b) { return b < a ? b : a; }
template <typename X>
__device__ __forceinline__ X Max(X a, X b) { return a < b ? b : a; }

__device__ __forceinline__ int ClampIndex(int64_t v, int n) {  // v into [0, n - 1] (0 when n == 0)
  return static_cast<int>(v < 0 ? 0 : v >= n ? (n > 0 ? n - 1 : 0) : v);
}

// ---------------------------------------------------------------------------------------
// Chunks

// A chunk: positions [lo, hi) of row `row`, whose positions are [begin, end); chunk `index` of `count`.
struct Chunk {
  int row, begin, end, lo, hi, index, count;
  __device__ bool split() const { return count > 1; }
};

// The first row r in [0, n_rows] whose coordinates end after `target`: r + 1 + end_r > target (n_rows if
// none). A search by the walker's lanes: each step probes `group` evenly spaced rows (ballot), so the
// interval shrinks by group + 1 per step (binary for one lane). Every lane returns the same row; with
// malformed (decreasing) offsets some row in range.
template <typename I>
__device__ int FirstRowEndingAfter(const I* __restrict__ offsets, int n_rows, int n_edges, int64_t target,
                                   const Walker& w) {
  int lo = 0, hi = n_rows;
  while (lo < hi) {
    const int step = (hi - lo + w.group) / (w.group + 1);
    const int64_t p = lo + int64_t(w.lane + 1) * step - 1;
    bool before = false;
    if (p < hi) before = p + 1 + ClampIndex(offsets[p + 1], n_edges + 1) <= target;
    const int c = __popc(__ballot_sync(w.mask, before));
    const int first = lo;
    lo = static_cast<int>(Min<int64_t>(hi, first + int64_t(c) * step));
    hi = static_cast<int>(Min<int64_t>(hi, first + int64_t(c + 1) * step - 1));
  }
  return lo;
}

// Calls fn(chunk) for every chunk of window `window` (of 2^shift coordinates) of the grouping, in row order,
// uniformly in the walker (every lane reads the same offsets). A row's chunk index follows from its
// coordinate; at most 2^shift + 1 rows are looked at, so malformed offsets cannot make a walker loop long.
template <typename I, typename Fn>
__device__ __forceinline__ void ForEachChunk(const I* __restrict__ offsets, int n_rows, int n_edges, int64_t window,
                                             int shift, const Walker& w, Fn fn) {
  const int size = 1 << shift;
  const int64_t lo = window << shift, hi = lo + size;
  int r = FirstRowEndingAfter(offsets, n_rows, n_edges, lo, w);
  if (r >= n_rows) return;
  int64_t next = offsets[r];
  for (int seen = 0; seen <= size && r < n_rows; ++seen, ++r) {
    const int begin = ClampIndex(next, n_edges + 1);
    next = offsets[r + 1];
    const int end = Max(begin, ClampIndex(next, n_edges + 1));
    const int64_t start = int64_t(r) + begin;
    if (start >= hi) break;
    const int count = Max(1, (end - begin + kChunk - 1) >> kChunkShift);
    const int c = start >= lo ? 0 : static_cast<int>((lo - start + kChunk - 1) >> kChunkShift);
    if (c < count && start + (int64_t(c) << kChunkShift) < hi) {  // the row's chunk c lies in this window
      const int first = begin + (c << kChunkShift);
      fn(Chunk{r, begin, end, first, Min(end, first + kChunk), c, count});
    }
  }
}

// Calls fn(k) for the positions after the rows' end, k in [offsets[n_rows], n_edges) (a padded graph's padding
// edges: on a checked graph their ids are their positions), at coordinates n_rows + k, that window `window`
// covers (of 2^shift coordinates): a kernel that writes one row per edge zeroes theirs, so that the output of a
// checked graph needs no zero fill. Uniform in the walker; most windows return before reading anything.
template <typename I, typename Fn>
__device__ __forceinline__ void ForEachTailPosition(const I* __restrict__ offsets, int n_rows, int n_edges,
                                                    int64_t window, int shift, Fn fn) {
  const int64_t lo = (window << shift) - n_rows, hi = lo + (int64_t{1} << shift);
  if (hi <= 0) return;
  const int real = ClampIndex(offsets[n_rows], n_edges + 1);
  for (int64_t k = Max<int64_t>(lo, real); k < Min<int64_t>(hi, n_edges); ++k) fn(static_cast<int>(k));
}

// ---------------------------------------------------------------------------------------
// Split rows: partials in scratch memory, folded in chunk order by the last chunk to arrive

// Scratch of the split rows of a grouping over n_edges positions, of `width` partial values (and
// indices, for max/min) per chunk. A split row (> 256 positions) begins at begin_r; its chunks use the
// slots 2 floor(begin_r / 256) + c and, per feature tile, the counter floor(begin_r / 256): split rows are
// more than 256 positions apart, so no two share a slot or a counter (for ordered offsets; malformed offsets
// stay in bounds). The walkers of a chunk's feature tiles write disjoint features of its slot and arrive at
// counters of their own, so each tile's last walker folds that tile once all of its chunks are in.
struct SplitScratch {
  int* counters;  // [tiles, counter_count], zeroed before the launch
  void* values;   // [slot_count, width] of the partial's value type
  void* args;     // [slot_count, width] of int (max/min), else unused

  static int64_t CounterCount(int64_t n_edges) { return (n_edges >> kChunkShift) + 1; }
  static int64_t SlotCount(int64_t n_edges) { return 2 * (n_edges >> kChunkShift) + 2; }
  // No row of a grouping over at most kChunk positions is split: no scratch.
  static bool Needed(int64_t n_edges) { return n_edges > kChunk; }
};

// The split-row scratch of a launch over n_edges positions: `width` partial values of `value_bytes` each
// per slot (and as many int arguments when `with_args`), a counter per split row and feature tile (`tiles`
// walkers per chunk), zeroed on the stream. Nothing when no row can be split.
inline ffi::ErrorOr<SplitScratch> SplitScratchFor(const char* name, CudaScratch& scratch, cudaStream_t stream,
                                                  int64_t n_edges, int64_t width, size_t value_bytes,
                                                  bool with_args, int64_t tiles) {
  SplitScratch s{nullptr, nullptr, nullptr};
  if (!SplitScratch::Needed(n_edges)) return s;
  auto round = [](int64_t bytes) { return (bytes + 255) / 256 * 256; };
  const int64_t slots = SplitScratch::SlotCount(n_edges);
  const int64_t counter_bytes = round(tiles * SplitScratch::CounterCount(n_edges) * int64_t(sizeof(int)));
  const int64_t value_total = round(slots * width * int64_t(value_bytes));
  const int64_t arg_total = with_args ? slots * width * int64_t(sizeof(int)) : 0;
  auto mem = ScratchBytes(scratch, static_cast<size_t>(counter_bytes + value_total + arg_total), 256);
  if (!mem.has_value()) {
    return ffi::Unexpected(ffi::Error::Internal(std::string("jaxgraphops: ") + name + ": out of scratch memory (" +
                                                std::to_string(counter_bytes + value_total + arg_total) +
                                                " bytes for the partials of rows over 256 edges)"));
  }
  char* base = static_cast<char*>(*mem);
  s.counters = reinterpret_cast<int*>(base);
  s.values = base + counter_bytes;
  s.args = with_args ? base + counter_bytes + value_total : nullptr;
  const size_t counters = static_cast<size_t>(counter_bytes);
  if (auto err = Status(name, cudaMemsetAsync(s.counters, 0, counters, stream)); err.failure())
    return ffi::Unexpected(std::move(err));
  return s;
}

// The engine indexes in 32 bits: every size below 2^31 (the lowerings route larger graphs to XLA).
inline ffi::Error EngineSizes(const char* name, std::initializer_list<int64_t> sizes) {
  for (int64_t n : sizes) {
    if (n > kMaxIndex) {
      return ffi::Error::InvalidArgument(std::string("jaxgraphops: ") + name + ": a size of " + std::to_string(n) +
                                         " is beyond the CUDA kernels' 32-bit indexing (at most 2^31 - 1 rows, "
                                         "edges and elements per row)");
    }
  }
  return ffi::Error::Success();
}

__device__ __forceinline__ int64_t PartialSlot(const Chunk& c, int64_t slot_count) {
  return Min<int64_t>(2 * int64_t(c.begin >> kChunkShift) + c.index, slot_count - 1);
}
// The counter of a split row's chunks in feature tile `tile` (counters [tiles, counter_count]).
__device__ __forceinline__ int64_t SplitCounter(const Chunk& c, int64_t counter_count, int tile) {
  return Min<int64_t>(c.begin >> kChunkShift, counter_count - 1) + int64_t(tile) * counter_count;
}

// After this walker wrote its chunk's partial: true on every lane of the walker that arrived last at the
// row's counter, which then folds the partials. Each lane fences its own writes, the walker meets, its
// first lane arrives (an integer atomic), and the last walker's lanes meet again before reading.
__device__ __forceinline__ bool ArriveLast(int* counter, const Chunk& c, const Walker& w) {
  __threadfence();
  __syncwarp(w.mask);
  int arrived = 0;
  if (w.lane == 0) arrived = atomicAdd(counter, 1);
  arrived = __shfl_sync(w.mask, arrived, 0, w.group);
  const bool last = arrived == c.count - 1;
  if (last) {
    __threadfence();
    __syncwarp(w.mask);
  }
  return last;
}

// ---------------------------------------------------------------------------------------
// Vectors: kN elements of X through 16-byte (or 8-byte) loads and stores

template <typename X, int kN>
struct Vec {
  X v[kN];
};

// Loads kN elements at p (aligned to their size). Read-only data: the non-coherent path where allowed.
template <typename X, int kN>
__device__ __forceinline__ Vec<X, kN> LoadVec(const X* __restrict__ p) {
  Vec<X, kN> out;
  constexpr int kBytes = int(sizeof(X)) * kN;
  if constexpr (kBytes % 16 == 0) {
#pragma unroll
    for (int q = 0; q < kBytes / 16; ++q) {
      const uint4 raw = __ldg(reinterpret_cast<const uint4*>(p) + q);
      std::memcpy(&out.v[q * 16 / int(sizeof(X))], &raw, 16);
    }
  } else if constexpr (kBytes == 8) {
    const uint2 raw = __ldg(reinterpret_cast<const uint2*>(p));
    std::memcpy(&out.v[0], &raw, 8);
  } else {
#pragma unroll
    for (int i = 0; i < kN; ++i) out.v[i] = __ldg(p + i);
  }
  return out;
}

// Loads kN elements written earlier in the same launch by other blocks (partials): through L2.
template <typename X, int kN>
__device__ __forceinline__ Vec<X, kN> LoadVecCoherent(const X* p) {
  Vec<X, kN> out;
#pragma unroll
  for (int i = 0; i < kN; ++i) out.v[i] = __ldcg(p + i);
  return out;
}

// Stores kN elements at p (aligned to their size); `stream`: past the caches (outputs larger than L2).
template <typename X, int kN>
__device__ __forceinline__ void StoreVec(X* __restrict__ p, const Vec<X, kN>& x, bool stream) {
  constexpr int kBytes = int(sizeof(X)) * kN;
  if constexpr (kBytes % 16 == 0) {
#pragma unroll
    for (int q = 0; q < kBytes / 16; ++q) {
      uint4 raw;
      std::memcpy(&raw, &x.v[q * 16 / int(sizeof(X))], 16);
      uint4* dst = reinterpret_cast<uint4*>(p) + q;
      if (stream) {
        __stcs(dst, raw);
      } else {
        *dst = raw;
      }
    }
  } else {
#pragma unroll
    for (int i = 0; i < kN; ++i) {
      if (stream) {
        __stcs(p + i, x.v[i]);
      } else {
        p[i] = x.v[i];
      }
    }
  }
}

// Whether outputs of `bytes` bytes are written past the caches: larger than the device's L2.
inline bool StreamStores(int64_t bytes) {
  static const int64_t l2 = [] {
    int device = 0, value = 0;
    if (cudaGetDevice(&device) != cudaSuccess ||
        cudaDeviceGetAttribute(&value, cudaDevAttrL2CacheSize, device) != cudaSuccess) {
      cudaGetLastError();
      return int64_t{50} << 20;
    }
    return static_cast<int64_t>(value);
  }();
  return bytes > l2;
}

// ---------------------------------------------------------------------------------------
// Staging: the positions of a block of edges, read once, handed to the walker's lanes

// The indices of one staged edge as every lane of the walker sees them: its neighbour j, its edge id e
// (both clamped into range), a per-edge scalar s, and whether it counts (in the chunk, ids in range).
template <typename T>
struct Staged {
  int j, e;
  T s;
  int t;  // a per-edge index (Positions::aux, kAux), -1 where out of [0, aux_bound)
};

// What a walk reads per position: the neighbour (bounded by nbr_bound), the edge id (bounded by n_edges) and a
// per-edge scalar scalar[e * scalar_stride].
template <typename I, typename T>
struct Positions {
  const I* __restrict__ nbr;
  const I* __restrict__ eid;
  const T* __restrict__ scalar;
  int nbr_bound, n_edges;
  int64_t scalar_stride;
  const I* __restrict__ aux = nullptr;  // a per-edge index aux[e] (an edge type), staged with the ids (kAux)
  int aux_bound = 0;
};

// Whether index value v lies in [0, n) (n >= 0): one unsigned comparison in v's own width.
template <typename I>
__device__ __forceinline__ bool InBound(I v, int n) {
  using U = std::make_unsigned_t<I>;
  return static_cast<U>(v) < static_cast<U>(n);
}

// Stages the position k (if `in`) as lane-local values: indices in range, else 0 (an edge that does not count,
// whose rows are never read), and whether the edge counts (in the chunk, its ids in range).
// kNbrIsPosition: the neighbour of position k is k itself (pool's rows, read in order; no nbr array).
template <bool kNbr, bool kEid, bool kScalar, bool kNbrIsPosition, bool kAux = false, typename I, typename T>
__device__ __forceinline__ bool StageOne(const Positions<I, T>& p, int k, bool in, Staged<T>& out) {
  bool ok = in;
  out.j = 0;
  out.e = 0;
  out.s = T(0);
  out.t = -1;
  if constexpr (kNbr) {
    const I raw = !in ? I(0) : kNbrIsPosition ? static_cast<I>(k) : p.nbr[k];
    const bool fits = InBound(raw, p.nbr_bound);
    out.j = fits ? static_cast<int>(raw) : 0;
    ok = ok && fits;
  }
  if constexpr (kEid) {
    const I raw = in ? p.eid[k] : I(0);
    const bool fits = InBound(raw, p.n_edges);
    out.e = fits ? static_cast<int>(raw) : 0;
    ok = ok && fits;
  }
  if constexpr (kScalar) {
    if (ok) out.s = p.scalar[static_cast<uint64_t>(static_cast<uint32_t>(out.e)) * p.scalar_stride];
  }
  if constexpr (kAux) {
    if (ok) {
      const I raw = p.aux[out.e];
      out.t = InBound(raw, p.aux_bound) ? static_cast<int>(raw) : -1;
    }
  }
  return ok;
}

// a * b as a 64-bit product of two 32-bit values (one IMAD.WIDE.U32 with the addend it is added to).
__device__ __forceinline__ uint64_t MulWide(uint32_t a, uint32_t b) {
#ifdef __CUDA_ARCH__
  uint64_t r;
  asm("mul.wide.u32 %0, %1, %2;" : "=l"(r) : "r"(a), "r"(b));
  return r;
#else
  return static_cast<uint64_t>(a) * b;
#endif
}

// Walks positions [lo, hi) in groups of kGroup edges, in position order: group(staged, bits) gets the
// group's staged edges and the bits of those that count (bit u: staged[u] is in [lo, hi) with ids in range),
// so it can issue its kGroup loads (per gathered operand) before it consumes the first. The indices are
// staged once per G positions (G >= kGroup: one coalesced load, lane i holding position i, handed out by
// shuffles) or kGroup at a time (G < kGroup: every lane loads them, a broadcast within the walker).
// kNbr/kEid/kScalar: what the walk reads per position; kEidOut: whether group needs the edge ids (a walk may
// read them only to stage a per-edge scalar); kNbrIsPosition: see StageOne (alone, nothing is staged: position
// k's row is k, whole groups unpredicated, the last group's rows past end masked, end = min(hi, nbr_bound));
// kAux: stage aux[e] too (Staged::t).
template <bool kNbr, bool kEid, bool kScalar, int kGroup, bool kEidOut = kEid, bool kNbrIsPosition = false,
          bool kAux = false, typename I, typename T, typename Group>
__device__ __forceinline__ void WalkPositions(const Positions<I, T>& p, int lo, int hi, const Walker& w,
                                              Group group) {
  static_assert(kGroup > 0 && 32 % kGroup == 0, "groups of a power of two up to 32 edges");
  if constexpr (kNbrIsPosition && !kEid && !kScalar && !kAux) {  // position k reads row k: nothing to stage
    const int end = Min(hi, p.nbr_bound);                       // positions from the bound on do not count
    auto rows = [&](int kg, Staged<T> (&s)[kGroup]) {
#pragma unroll
      for (int u = 0; u < kGroup; ++u) s[u] = Staged<T>{kg + u, 0, T(0), -1};  // past end: masked, never read
    };
    int kg = lo;
    for (; kg + kGroup <= end; kg += kGroup) {  // whole groups: no predicates
      Staged<T> s[kGroup];
      rows(kg, s);
      group(s, (1u << kGroup) - 1u);
    }
    for (; kg < end; kg += kGroup) {  // the chunk's last group: the rows past its end masked
      Staged<T> s[kGroup];
      rows(kg, s);
      group(s, (1u << (end - kg)) - 1u);
    }
    return;
  }
  if (w.group >= kGroup) {
    for (int kb = lo; kb < hi; kb += w.group) {  // one staged block of G positions, lane i holding position kb + i
      Staged<T> mine;
      const bool ok = StageOne<kNbr, kEid, kScalar, kNbrIsPosition, kAux>(p, kb + w.lane, kb + w.lane < hi, mine);
      const unsigned live = __ballot_sync(w.mask, ok) >> w.base;
      const int count = Min(w.group, hi - kb);
      constexpr unsigned kAll = (1u << kGroup) - 1u;
      // the group's positions g .. g + kGroup - 1 moved to lanes 0 .. kGroup - 1, then broadcast from there
      auto shuffled = [&](int g, Staged<T> (&s)[kGroup]) {
        Staged<T> here;
        here.j = kNbr ? __shfl_down_sync(w.mask, mine.j, g, w.group) : 0;
        here.e = kEidOut ? __shfl_down_sync(w.mask, mine.e, g, w.group) : 0;
        here.s = kScalar ? __shfl_down_sync(w.mask, mine.s, g, w.group) : T(0);
        here.t = kAux ? __shfl_down_sync(w.mask, mine.t, g, w.group) : -1;
#pragma unroll
        for (int u = 0; u < kGroup; ++u) {
          s[u].j = kNbr ? __shfl_sync(w.mask, here.j, u, w.group) : 0;
          s[u].e = kEidOut ? __shfl_sync(w.mask, here.e, u, w.group) : 0;
          s[u].s = kScalar ? __shfl_sync(w.mask, here.s, u, w.group) : T(0);
          s[u].t = kAux ? __shfl_sync(w.mask, here.t, u, w.group) : -1;
        }
      };
      int g = 0;
      for (; g + kGroup <= count && ((live >> g) & kAll) == kAll; g += kGroup) {  // whole groups: no predicates
        Staged<T> s[kGroup];
        shuffled(g, s);
        group(s, kAll);
      }
      for (; g < count; g += kGroup) {  // the rest: the chunk's last group, or edges whose ids were out of range
        Staged<T> s[kGroup];
        shuffled(g, s);
        group(s, (live >> g) & kAll);
      }
    }
  } else {
    for (int kg = lo; kg < hi; kg += kGroup) {  // every lane stages the group's positions itself
      Staged<T> s[kGroup];
      unsigned bits = 0;
#pragma unroll
      for (int u = 0; u < kGroup; ++u)
        bits |= unsigned(StageOne<kNbr, kEid, kScalar, kNbrIsPosition, kAux>(p, kg + u, kg + u < hi, s[u])) << u;
      group(s, bits);
    }
  }
}

}  // namespace JGO_CUDA_PLATFORM
}  // namespace jgo
