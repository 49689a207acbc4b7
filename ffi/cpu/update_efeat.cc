// CPU handlers of the edge-update input (update_efeat): the fused forward jgo_update_efeat_fwd, one
// pass over the edges in input order writing whole output rows, and the two atomic-free backward
// passes, jgo_update_efeat_bwd_src over the reverse CSR (grad x_src) and jgo_update_efeat_bwd_dst
// over the CSC (grad x_dst), and jgo_update_efeat_bwd_edge, G's edge block (grad edge_feat). Math,
// checks and bindings: jgo/update_efeat.h.
//
// The forward splits the edges into contiguous ranges, one per pool thread; the gathered node rows
// are prefetched kPrefetchDistance edges ahead (the edge features stream in order). Each range
// checks its ids before it writes; the error names the first bad edge over all ranges, so it does
// not depend on the thread count. The backward walks rows in chunks of equal work (ForRowChunks),
// each row summing its edges' G rows (prefetched ahead) in the structure's order, so its bits do
// not depend on the thread count either.
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "cpu/handler.h"
#include "cpu/row_parallel.h"
#include "handlers.h"
#include "jgo/args.h"
#include "jgo/update_efeat.h"

namespace jgo {
namespace {

// ---------------------------------------------------------------------------------------
// jgo_update_efeat_fwd

template <typename T, typename I, int kParts, bool kSum>
void EfeatFwdEdges(const EfeatArgs& a, const I* src, const I* dst, const T* ef, const T* xs, const T* xd, T* out,
                   int64_t e0, int64_t e1) {
  constexpr bool kE = (kParts & kEfeatEdge) != 0, kS = (kParts & kEfeatSrc) != 0, kD = (kParts & kEfeatDst) != 0;
  const int64_t W = a.width, Fe = a.f_edge, Fs = a.f_src, Fd = a.f_dst;
  for (int64_t e = e0; e < e1; ++e) {
    if (e + kPrefetchDistance < e1) {
      const int64_t q = e + kPrefetchDistance;
      if constexpr (kS) PrefetchRow(xs + static_cast<int64_t>(src[q]) * Fs, Fs);
      if constexpr (kD) PrefetchRow(xd + static_cast<int64_t>(dst[q]) * Fd, Fd);
    }
    const T* er = kE ? ef + e * Fe : nullptr;
    const T* sr = kS ? xs + static_cast<int64_t>(src[e]) * Fs : nullptr;
    const T* dr = kD ? xd + static_cast<int64_t>(dst[e]) * Fd : nullptr;
    T* o = out + e * W;
    if constexpr (kSum) {
      for (int64_t c = 0; c < W; ++c) o[c] = EfeatSum<kParts>(er, sr, dr, c);
    } else {
      if constexpr (kE) o = std::copy_n(er, Fe, o);
      if constexpr (kS) o = std::copy_n(sr, Fs, o);
      if constexpr (kD) std::copy_n(dr, Fd, o);
    }
  }
}

// The first edge of [e0, e1) whose id of a present node part is out of range, or -1.
template <typename I>
int64_t FirstBadEdge(const EfeatArgs& a, const I* src, const I* dst, int64_t e0, int64_t e1) {
  const bool s = (a.parts & kEfeatSrc) != 0, d = (a.parts & kEfeatDst) != 0;
  for (int64_t e = e0; e < e1; ++e) {
    if (s && (src[e] < 0 || static_cast<int64_t>(src[e]) >= a.n_src_rows)) return e;
    if (d && (dst[e] < 0 || static_cast<int64_t>(dst[e]) >= a.n_dst_rows)) return e;
  }
  return -1;
}

template <typename T, typename I>
ffi::Error EfeatFwdTyped(ffi::ThreadPool& pool, const EfeatArgs& a, ffi::AnyBuffer offsets, ffi::AnyBuffer src,
                         ffi::AnyBuffer dst, ffi::AnyBuffer edge_feat, ffi::AnyBuffer x_src, ffi::AnyBuffer x_dst,
                         ffi::AnyBuffer out) {
  const int64_t real = offsets.typed_data<I>()[a.n_rows];  // the edges from here on are padding: rows of 0
  if (real < 0 || real > a.n_edges)
    return InvalidArgument("jgo_update_efeat_fwd: the offsets end at " + std::to_string(real) + ", outside " +
                           Range(0, a.n_edges + 1));
  const I* s = src.typed_data<I>();
  const I* d = dst.typed_data<I>();
  const T* ef = (a.parts & kEfeatEdge) ? edge_feat.typed_data<T>() : nullptr;
  const T* xs = (a.parts & kEfeatSrc) ? x_src.typed_data<T>() : nullptr;
  const T* xd = (a.parts & kEfeatDst) ? x_dst.typed_data<T>() : nullptr;
  T* od = out.typed_data<T>();
  const int64_t E = real;
  const int64_t threads = std::max<int64_t>(1, pool.num_threads());
  const int64_t n_tasks =
      std::max<int64_t>(1, std::min<int64_t>(threads, E * std::max<int64_t>(1, a.width) / kMinWorkPerTask));
  std::vector<int64_t> bad(n_tasks, -1);
  ParallelFor(pool, n_tasks, [&](int64_t t) {
    const int64_t e0 = E * t / n_tasks, e1 = E * (t + 1) / n_tasks;
    bad[t] = FirstBadEdge(a, s, d, e0, e1);
    if (bad[t] >= 0) return;
    DispatchEfeatParts(a.parts, [&](auto parts) {
      if (a.sum) EfeatFwdEdges<T, I, decltype(parts)::value, true>(a, s, d, ef, xs, xd, od, e0, e1);
      else EfeatFwdEdges<T, I, decltype(parts)::value, false>(a, s, d, ef, xs, xd, od, e0, e1);
    });
  });
  std::fill(od + real * a.width, od + a.n_edges * a.width, T(0));
  for (int64_t e : bad) {
    if (e < 0) continue;  // the ranges are in edge order: the first bad range holds the first bad edge
    const bool src_bad = (a.parts & kEfeatSrc) && (s[e] < 0 || static_cast<int64_t>(s[e]) >= a.n_src_rows);
    const int64_t id = src_bad ? static_cast<int64_t>(s[e]) : static_cast<int64_t>(d[e]);
    return InvalidArgument(std::string("jgo_update_efeat_fwd: edge ") + std::to_string(e) + " has " +
                           (src_bad ? "src" : "dst") + " node index " + std::to_string(id) + ", out of range " +
                           Range(0, src_bad ? a.n_src_rows : a.n_dst_rows));
  }
  return ffi::Error::Success();
}

ffi::Error EfeatFwdCpu(ffi::ThreadPool pool, ffi::AnyBuffer offsets, ffi::AnyBuffer src, ffi::AnyBuffer dst,
                       ffi::AnyBuffer edge_feat, ffi::AnyBuffer x_src, ffi::AnyBuffer x_dst,
                       ffi::Result<ffi::AnyBuffer> out, bool sum, bool has_edge, bool has_src, bool has_dst) {
  auto args = CheckEfeatFwd(offsets, src, dst, edge_feat, x_src, x_dst, *out, sum, has_edge, has_src, has_dst);
  if (args.has_error()) return args.error();
  return DispatchTypes(out->element_type(), src.element_type(), [&](auto t, auto i) {
    return EfeatFwdTyped<decltype(t), decltype(i)>(pool, *args, offsets, src, dst, edge_feat, x_src, x_dst, *out);
  });
}

// ---------------------------------------------------------------------------------------
// jgo_update_efeat_bwd_src / _bwd_dst: grad[r] = sum over the edges e of row r of G[e, col : col + width]

template <typename T, typename I>
void EfeatBwdRows(const EfeatBwdArgs& a, const I* offsets, const I* eid, const T* G, T* grad, int64_t r0,
                  int64_t r1) {
  const int64_t W = a.width, F = a.g_width;
  const T* Gc = G + a.col;
  const int64_t last = offsets[r1];
  for (int64_t r = r0; r < r1; ++r) {
    T* g = grad + r * W;
    std::fill(g, g + W, T(0));
    for (int64_t k = offsets[r], end = offsets[r + 1]; k < end; ++k) {
      if (k + kPrefetchDistance < last) PrefetchRow(Gc + static_cast<int64_t>(eid[k + kPrefetchDistance]) * F, W);
      const T* row = Gc + static_cast<int64_t>(eid[k]) * F;
      for (int64_t c = 0; c < W; ++c) g[c] += row[c];
    }
  }
}

template <typename T, typename I>
ffi::Error EfeatBwdTyped(ffi::ThreadPool& pool, const char* name, const EfeatBwdArgs& a, ffi::AnyBuffer offsets,
                         ffi::AnyBuffer eid, ffi::AnyBuffer G, ffi::AnyBuffer grad) {
  const I* o = offsets.typed_data<I>();
  const I* e = eid.typed_data<I>();
  if (auto err = CheckCompressed(pool, o, static_cast<const I*>(nullptr), e, a.n_rows, a.n_edges, 0, false, name);
      err.failure())
    return err;
  const T* gd = G.typed_data<T>();
  T* out = grad.typed_data<T>();
  ForRowChunks(pool, o, a.n_rows, a.width,
               [&](int64_t r0, int64_t r1) { EfeatBwdRows<T, I>(a, o, e, gd, out, r0, r1); });
  return ffi::Error::Success();
}

ffi::Error EfeatBwd(ffi::ThreadPool& pool, const char* name, ffi::AnyBuffer offsets, ffi::AnyBuffer eid,
                    ffi::AnyBuffer G, ffi::AnyBuffer grad, int64_t col) {
  auto args = CheckEfeatBwd(name, offsets, eid, G, grad, col);
  if (args.has_error()) return args.error();
  return DispatchTypes(G.element_type(), offsets.element_type(), [&](auto t, auto i) {
    return EfeatBwdTyped<decltype(t), decltype(i)>(pool, name, *args, offsets, eid, G, grad);
  });
}

ffi::Error EfeatBwdSrcCpu(ffi::ThreadPool pool, ffi::AnyBuffer offsets, ffi::AnyBuffer eid, ffi::AnyBuffer G,
                          ffi::Result<ffi::AnyBuffer> grad, int64_t col) {
  return EfeatBwd(pool, "jgo_update_efeat_bwd_src", offsets, eid, G, *grad, col);
}

ffi::Error EfeatBwdDstCpu(ffi::ThreadPool pool, ffi::AnyBuffer offsets, ffi::AnyBuffer eid, ffi::AnyBuffer G,
                          ffi::Result<ffi::AnyBuffer> grad, int64_t col) {
  return EfeatBwd(pool, "jgo_update_efeat_bwd_dst", offsets, eid, G, *grad, col);
}

// ---------------------------------------------------------------------------------------
// jgo_update_efeat_bwd_edge: grad[e] = G[e, col : col + width] for the real edges, 0 at the padding edges

template <typename T, typename I>
ffi::Error EfeatBwdEdgeTyped(ffi::ThreadPool& pool, const EfeatBwdArgs& a, ffi::AnyBuffer offsets, ffi::AnyBuffer G,
                             ffi::AnyBuffer grad) {
  const int64_t real = offsets.typed_data<I>()[a.n_rows];
  if (real < 0 || real > a.n_edges)
    return InvalidArgument("jgo_update_efeat_bwd_edge: the offsets end at " + std::to_string(real) + ", out of range " +
                           Range(0, a.n_edges + 1));
  const T* gd = G.typed_data<T>() + a.col;
  T* out = grad.typed_data<T>();
  const int64_t W = a.width, F = a.g_width;
  const int64_t threads = std::max<int64_t>(1, pool.num_threads());
  const int64_t n_tasks = std::max<int64_t>(1, std::min<int64_t>(threads, a.n_edges * W / kMinWorkPerTask));
  ParallelFor(pool, n_tasks, [&](int64_t t) {
    const int64_t e0 = a.n_edges * t / n_tasks, e1 = a.n_edges * (t + 1) / n_tasks;
    for (int64_t e = e0; e < std::min(e1, real); ++e) std::copy_n(gd + e * F, W, out + e * W);
    if (e1 > real) std::fill(out + std::max(e0, real) * W, out + e1 * W, T(0));
  });
  return ffi::Error::Success();
}

ffi::Error EfeatBwdEdgeCpu(ffi::ThreadPool pool, ffi::AnyBuffer offsets, ffi::AnyBuffer G,
                           ffi::Result<ffi::AnyBuffer> grad, int64_t col) {
  auto args = CheckEfeatBwdEdge(offsets, G, *grad, col);
  if (args.has_error()) return args.error();
  return DispatchTypes(G.element_type(), offsets.element_type(), [&](auto t, auto i) {
    return EfeatBwdEdgeTyped<decltype(t), decltype(i)>(pool, *args, offsets, G, *grad);
  });
}

}  // namespace
}  // namespace jgo

JGO_CPU_HANDLER(UpdateEfeatFwd, jgo::EfeatFwdCpu, jgo::BindEfeatFwd<xla::ffi::ThreadPool>());
JGO_CPU_HANDLER(UpdateEfeatBwdSrc, jgo::EfeatBwdSrcCpu, jgo::BindEfeatBwd<xla::ffi::ThreadPool>());
JGO_CPU_HANDLER(UpdateEfeatBwdDst, jgo::EfeatBwdDstCpu, jgo::BindEfeatBwd<xla::ffi::ThreadPool>());
JGO_CPU_HANDLER(UpdateEfeatBwdEdge, jgo::EfeatBwdEdgeCpu, jgo::BindEfeatBwdEdge<xla::ffi::ThreadPool>());
