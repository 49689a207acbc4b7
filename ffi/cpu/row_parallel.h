// CPU helpers shared by the kernels that walk a compressed neighbourhood structure (offsets,
// neighbours, edge ids): splitting rows into chunks of equal work on XLA's intra-op thread pool,
// prefetching gathered rows, writing large outputs past the caches, and validating the index data.
#pragma once

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <deque>
#include <limits>
#include <memory>
#include <mutex>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "jgo/args.h"
#include "xla/ffi/api/ffi.h"

namespace jgo {

// Gathered rows are prefetched this many edges ahead. The distance runs across row boundaries:
// with ~20 edges per row, prefetching within a row only left the first edges of every row
// unprefetched and was 2x slower.
constexpr int64_t kPrefetchDistance = 16;
constexpr int64_t kMinWorkPerTask = 1 << 15;  // elements; smaller jobs run on one thread
constexpr int64_t kCacheLine = 64;
constexpr int64_t kMaxPrefetchBytes = 1024;  // longer rows are streamed by the hardware

// An int32 or int64 index array read as int64, its width a run-time choice. For row walks whose work per
// index dwarfs a perfectly predicted branch (an attention edge's heads): compiled once instead of once per
// index type, which halves their share of the build. (Not DimeNet++'s triplet walks: their backward ran
// 20-30% slower through it in an alternating A/B; they read int32 indices, Int32Indices below.)
class Indices {
 public:
  Indices() = default;
  Indices(const int32_t* p) : p32_(p) {}  // NOLINT: implicit, as a pointer converts
  Indices(const int64_t* p) : p64_(p) {}  // NOLINT
  int64_t operator[](int64_t k) const { return p64_ ? p64_[k] : static_cast<int64_t>(p32_[k]); }
  explicit operator bool() const { return p32_ || p64_; }

 private:
  const int32_t* p32_ = nullptr;
  const int64_t* p64_ = nullptr;
};

// Index arrays as int32, for row walks compiled for int32 indices only: int32 arrays as they are, int64 ones as
// int32 copies. For walks whose work per index dwarfs a copy of it (a GEMM or a C x M update per edge or
// triplet): compiled once instead of once per index type, they halve their file's build. The caller checks
// first that the values the walks read lie in [0, 2^31) (Int32Indices::Fit); the copies live as long as this.
class Int32Indices {
 public:
  // Whether indices below `bound` (the largest row, edge, neighbour or triplet count the walks index) fit in int32;
  // if not, the error of `what`.
  static ffi::Error Fit(const char* what, int64_t bound) {
    if (bound <= int64_t{std::numeric_limits<int32_t>::max()}) return ffi::Error::Success();
    return InvalidArgument(std::string(what) + ": indices up to " + std::to_string(bound) +
                           " (2^31 or more rows, edges or triplets) are not supported on the CPU");
  }

  template <typename I>
  const int32_t* operator()(const I* p, int64_t n) {
    if constexpr (std::is_same_v<I, int32_t>) {
      return p;
    } else {
      copies_.emplace_back(n);
      std::transform(p, p + n, copies_.back().begin(), [](I i) { return static_cast<int32_t>(i); });
      return copies_.back().data();
    }
  }

  // Edge ids where an id outside [0, bound) stands for no edge (a mask's rows): int32 arrays as they are, int64 ones
  // as int32 copies holding -1 for every id outside [0, bound), so that none wraps onto a real edge's id.
  template <typename I>
  const int32_t* EdgeIds(const I* p, int64_t n, int64_t bound) {
    if constexpr (std::is_same_v<I, int32_t>) {
      return p;
    } else {
      copies_.emplace_back(n);
      std::transform(p, p + n, copies_.back().begin(), [bound](I i) { return i >= 0 && i < bound ? int32_t(i) : -1; });
      return copies_.back().data();
    }
  }

 private:
  std::deque<std::vector<int32_t>> copies_;
};

template <typename T>
inline void PrefetchRow(const T* row, int64_t len) {
  const char* p = reinterpret_cast<const char*>(row);
  const int64_t bytes = std::min<int64_t>(len * static_cast<int64_t>(sizeof(T)), kMaxPrefetchBytes);
  for (int64_t b = 0; b < bytes; b += kCacheLine) __builtin_prefetch(p + b, 0, 1);
}

// The size of the level-3 cache one core sees, as Linux lists it (sysconf's figure is the whole package's on
// AMD: 256 MiB where a core shares 32 MiB); 32 MiB where no such file is.
inline int64_t LastLevelCacheBytes() {
  int64_t bytes = int64_t{32} << 20;
  if (std::FILE* f = std::fopen("/sys/devices/system/cpu/cpu0/cache/index3/size", "r")) {
    long long size = 0;
    char unit = 0;
    if (std::fscanf(f, "%lld%c", &size, &unit) >= 1 && size > 0)
      bytes = size << (unit == 'K' ? 10 : unit == 'M' ? 20 : 0);
    std::fclose(f);
  }
  return bytes;
}

// Whether a walk writes its output rows with non-temporal stores (StreamStore): whole cache lines past the
// caches, without reading each line first. Only for outputs larger than the last-level cache, which they
// would not stay in anyway, and whose rows are whole lines from a line boundary. On the 2-core
// development VM: 1.05-1.35x for gspmm sums of 51-102 MB outputs on uniform, mesh and RCM-ordered graphs.
inline bool StreamRows(const void* out, int64_t n_rows, int64_t row_bytes) {
#if defined(__x86_64__)
  static const int64_t cache_bytes = LastLevelCacheBytes();
  return reinterpret_cast<std::uintptr_t>(out) % kCacheLine == 0 && row_bytes % kCacheLine == 0 &&
         n_rows * row_bytes > cache_bytes;
#else
  (void)out, (void)n_rows, (void)row_bytes;
  return false;
#endif
}

// Stores the vector v (16, 32 or 64 bytes) at p (aligned to its size) past the caches.
template <typename V>
inline __attribute__((always_inline)) void StreamStore(void* p, const V& v) {
#if defined(__x86_64__)
  if constexpr (sizeof(V) == 16) asm volatile("movntps %1, %0" : "=m"(*static_cast<V*>(p)) : "x"(v));
  else asm volatile("vmovntps %1, %0" : "=m"(*static_cast<V*>(p)) : "v"(v));
#else
  std::memcpy(p, &v, sizeof(V));
#endif
}

// Orders the non-temporal stores before the task's completion is published.
inline void StreamFence() {
#if defined(__x86_64__)
  asm volatile("sfence" ::: "memory");
#endif
}

// A non-owning reference to a callable void(int64_t) (the callable outlives the call it is passed to):
// ParallelFor below is compiled once, not once per kernel's lambda (its pool machinery made a third of
// a kernel file's code and compile time).
class TaskRef {
 public:
  template <typename F, typename = std::enable_if_t<!std::is_same_v<std::decay_t<F>, TaskRef>>>
  TaskRef(F&& f)  // NOLINT(google-explicit-constructor): a lambda converts at the call
      : object_(const_cast<void*>(static_cast<const void*>(&f))),
        call_([](void* object, int64_t t) { (*static_cast<std::remove_reference_t<F>*>(object))(t); }) {}
  void operator()(int64_t t) const { call_(object_, t); }

 private:
  void* object_;
  void (*call_)(void*, int64_t);
};

// Runs body(t) for t in [0, n_tasks) on the pool and the calling thread. Tasks are claimed from a
// shared counter, and the caller claims tasks too, so it only ever waits for tasks that are already
// running: XLA runs independent custom calls concurrently on the same pool, and a caller that waited
// for a task still queued behind another waiting caller would deadlock (two backward passes on a
// 2-thread pool did). Pool closures that start after every task was claimed exit at once; they share
// the counters through `state`, and touch `body` only after claiming a task, while the caller waits.
inline void ParallelFor(ffi::ThreadPool& pool, int64_t n_tasks, TaskRef body) {
  if (n_tasks <= 1) {
    if (n_tasks == 1) body(0);
    return;
  }
  struct State {
    std::atomic<int64_t> next{0};
    std::mutex mu;
    std::condition_variable done;
    int64_t finished = 0;
  };
  auto state = std::make_shared<State>();
  auto work = [state, n_tasks, body] {
    for (int64_t t = state->next.fetch_add(1); t < n_tasks; t = state->next.fetch_add(1)) {
      body(t);
      std::lock_guard<std::mutex> lock(state->mu);
      if (++state->finished == n_tasks) state->done.notify_all();
    }
  };
  for (int64_t t = 1; t < n_tasks; ++t) {
    auto task = work;  // Schedule takes its closure by value (an rvalue)
    pool.Schedule(std::move(task));
  }
  work();
  std::unique_lock<std::mutex> lock(state->mu);
  state->done.wait(lock, [&] { return state->finished == n_tasks; });
}

// First row r with offsets[r] + r >= target (rows and edges both cost work).
template <typename I>
int64_t RowAtWork(const I* offsets, int64_t n_rows, int64_t target) {
  int64_t lo = 0, hi = n_rows;
  while (lo < hi) {
    const int64_t mid = (lo + hi) / 2;
    if (static_cast<int64_t>(offsets[mid]) + mid < target) lo = mid + 1; else hi = mid;
  }
  return lo;
}

// Runs body(chunk, r0, r1) for the n_chunks chunks of equal work (edges + rows) of a compressed
// structure, on the pool and the calling thread. The work is that of the edges in rows (a padding edge
// after the last row costs nothing).
template <typename I, typename Body>
void ForEachRowChunk(ffi::ThreadPool& pool, int64_t n_chunks, const I* offsets, int64_t n_rows, Body&& body) {
  const int64_t total = static_cast<int64_t>(offsets[n_rows]) + n_rows;
  ParallelFor(pool, n_chunks, [&](int64_t t) {
    body(t, RowAtWork(offsets, n_rows, total * t / n_chunks), RowAtWork(offsets, n_rows, total * (t + 1) / n_chunks));
  });
}

// Runs rows(r0, r1) over chunks of equal work (edges + rows, times the row length) of a
// compressed structure, one chunk per pool thread. Only for outputs owned by rows: where the
// split lands does not change a bit of them (a reduction over rows uses ReductionChunks).
template <typename I, typename Rows>
void ForRowChunks(ffi::ThreadPool& pool, const I* offsets, int64_t n_rows, int64_t row_len, Rows&& rows) {
  const int64_t total = static_cast<int64_t>(offsets[n_rows]) + n_rows;
  const int64_t threads = std::max<int64_t>(1, pool.num_threads());
  const int64_t n_tasks = std::max<int64_t>(1, std::min<int64_t>(threads, total * std::max<int64_t>(1, row_len) / kMinWorkPerTask));
  ForEachRowChunk(pool, n_tasks, offsets, n_rows, [&](int64_t, int64_t r0, int64_t r1) { rows(r0, r1); });
}

// The number of chunks of a reduction over rows (parameter gradients): `units` rows and edges of
// `unit_work` elements each, summed into partials of `partial_len` elements per chunk. It depends
// on the problem size only, never on the pool, and the chunks' partials are added in chunk order,
// so the sums are bitwise identical on any number of threads (the pool still runs the chunks in
// parallel). A chunk does at least kMinWorkPerTask and 8 partials' worth of work, and the cap
// bounds the partials' memory.
constexpr int64_t kMaxReductionChunks = 64;
constexpr int64_t kWorkPerPartial = 8;
inline int64_t ReductionChunks(int64_t units, int64_t unit_work, int64_t partial_len) {
  const int64_t work = units * std::max<int64_t>(1, unit_work);
  const int64_t by_partial = work / (kWorkPerPartial * std::max<int64_t>(1, partial_len));
  return std::clamp<int64_t>(std::min(work / kMinWorkPerTask, by_partial), 1, kMaxReductionChunks);
}

inline std::string Range(int64_t lo, int64_t hi) {
  return "[" + std::to_string(lo) + ", " + std::to_string(hi) + ")";
}

// Validates a compressed neighbourhood structure, one position at a time, naming the first defect:
// offsets start at 0, never decrease and end at most at n_edges (the positions after it hold the padding
// edges, in no row: jaxgraphops.Graph); if check_eid, the edge ids are a permutation of [0, n_edges) (so
// every edge-valued output element is written exactly once, by one task: a row's or ZeroPaddingEdges')
// and, if check_nbr, the neighbour of every position in a row lies in [0, n_nbr). The error path of
// CheckCompressed.
template <typename I>
ffi::Error FirstCompressedDefect(const I* offsets, const I* nbr, const I* eid, int64_t n_rows, int64_t n_edges,
                                 int64_t n_nbr, bool check_nbr, const char* what, bool check_eid) {
  if (offsets[0] != 0 || offsets[n_rows] < 0 || static_cast<int64_t>(offsets[n_rows]) > n_edges)
    return InvalidArgument(std::string(what) + ": offsets must start at 0 and end at most at n_edges=" +
                           std::to_string(n_edges));
  const int64_t in_rows = offsets[n_rows];
  for (int64_t r = 0; r < n_rows; ++r) {
    if (offsets[r + 1] < offsets[r])
      return InvalidArgument(std::string(what) + ": offsets decrease at row " + std::to_string(r));
  }
  std::vector<bool> seen(check_eid ? n_edges : 0);
  for (int64_t k = 0; k < n_edges; ++k) {
    const int64_t e = eid[k];
    if (check_eid && (e < 0 || e >= n_edges))
      return InvalidArgument(std::string(what) + ": edge id " + std::to_string(e) + " at position " +
                             std::to_string(k) + " is out of range " + Range(0, n_edges));
    if (check_eid && seen[e])
      return InvalidArgument(std::string(what) + ": edge id " + std::to_string(e) + " appears twice (again at " +
                             "position " + std::to_string(k) + "): csc_eid and csr_eid must be permutations of " +
                             Range(0, n_edges));
    if (check_eid) seen[e] = true;
    if (check_nbr && k < in_rows) {
      const int64_t j = nbr[k];
      if (j < 0 || j >= n_nbr)
        return InvalidArgument(std::string(what) + ": edge " + std::to_string(e) + " has node index " +
                               std::to_string(j) + ", out of range " + Range(0, n_nbr));
    }
  }
  return InvalidArgument(std::string(what) + ": the index data changed while it was checked");
}

// Validates a compressed neighbourhood structure (the conditions of FirstCompressedDefect) on the pool,
// exactly: each task checks the offsets of a range of rows and the ids of a range of positions, and sets
// the bit of every edge id it meets in a bitmap of its own (a repeat within the task is a duplicate);
// then the bitmaps, word by word, must cover every id once. Any defect sends the call to
// FirstCompressedDefect, so the error names the first defect in position order, whatever the number of
// threads. Costs a pass over the index arrays plus n_tasks bitmaps of n_edges bits (at most
// kMaxCheckBitmaps: a few L2-resident MB for millions of edges). A kernel that reads no edge id (a sum of
// node rows) passes check_eid = false: its result cannot depend on them.
constexpr int64_t kMaxCheckBitmaps = 8;
template <typename I>
ffi::Error CheckCompressed(ffi::ThreadPool& pool, const I* offsets, const I* nbr, const I* eid, int64_t n_rows,
                           int64_t n_edges, int64_t n_nbr, bool check_nbr, const char* what, bool check_eid = true) {
  auto defect = [&] {
    return FirstCompressedDefect(offsets, nbr, eid, n_rows, n_edges, n_nbr, check_nbr, what, check_eid);
  };
  if (offsets[0] != 0 || offsets[n_rows] < 0 || static_cast<int64_t>(offsets[n_rows]) > n_edges) return defect();
  const int64_t in_rows = offsets[n_rows];
  const int64_t threads = std::max<int64_t>(1, pool.num_threads());
  const int64_t n_tasks =
      std::clamp<int64_t>((n_rows + n_edges) / kMinWorkPerTask, 1, std::min(kMaxCheckBitmaps, threads));
  const int64_t n_words = check_eid ? (n_edges + 63) / 64 : 0;
  std::vector<uint64_t> bits(static_cast<size_t>(n_tasks * n_words));
  std::atomic<bool> bad{false};
  ParallelFor(pool, n_tasks, [&](int64_t t) {
    bool ok = true;
    for (int64_t r = n_rows * t / n_tasks, r1 = n_rows * (t + 1) / n_tasks; r < r1; ++r)
      ok &= offsets[r + 1] >= offsets[r];
    uint64_t* mine = bits.data() + t * n_words;
    const int64_t k0 = n_edges * t / n_tasks, k1 = n_edges * (t + 1) / n_tasks;
    for (int64_t k = k0; k < k1 && check_eid && ok; ++k) {
      const uint64_t e = static_cast<uint64_t>(static_cast<int64_t>(eid[k]));  // a negative id is huge
      const uint64_t bit = uint64_t{1} << (e % 64);
      ok = e < static_cast<uint64_t>(n_edges) && (mine[e / 64] & bit) == 0;
      if (ok) mine[e / 64] |= bit;
    }
    for (int64_t k = k0; k < std::min(k1, in_rows) && check_nbr; ++k)
      ok &= static_cast<uint64_t>(static_cast<int64_t>(nbr[k])) < static_cast<uint64_t>(n_nbr);
    if (!ok) bad.store(true, std::memory_order_relaxed);
  });
  if (bad.load()) return defect();
  if (!check_eid) return ffi::Error::Success();
  const uint64_t tail = n_edges % 64 == 0 ? ~uint64_t{0} : (uint64_t{1} << (n_edges % 64)) - 1;
  ParallelFor(pool, n_tasks, [&](int64_t t) {
    bool ok = true;
    for (int64_t w = n_words * t / n_tasks, w1 = n_words * (t + 1) / n_tasks; w < w1; ++w) {
      uint64_t seen = 0, twice = 0;
      for (int64_t b = 0; b < n_tasks; ++b) {
        const uint64_t word = bits[static_cast<size_t>(b * n_words + w)];
        twice |= seen & word;
        seen |= word;
      }
      ok &= twice == 0 && seen == (w == n_words - 1 ? tail : ~uint64_t{0});
    }
    if (!ok) bad.store(true, std::memory_order_relaxed);
  });
  return bad.load() ? defect() : ffi::Error::Success();
}

// Zeroes the rows of an edge-valued output [n_edges, width] at the padding edges: the positions from
// offsets[n_rows] on (after CheckCompressed), which no row walk visits.
template <typename T, typename I>
void ZeroPaddingEdges(const I* offsets, const I* eid, int64_t n_rows, int64_t n_edges, int64_t width, T* out) {
  if (out == nullptr) return;
  for (int64_t k = offsets[n_rows]; k < n_edges; ++k)
    std::fill_n(out + static_cast<int64_t>(eid[k]) * width, width, T(0));
}

}  // namespace jgo
