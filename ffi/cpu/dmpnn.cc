// CPU handlers of Chemprop's directed bond message (agg_dmpnn): jgo_dmpnn_fwd and jgo_dmpnn_bwd,
// one pass each (the math and the operand layout: jgo/dmpnn.h).
//
// A task owns a range of nodes. Per node it sums the rows of the edges of one grouping (forward:
// the in-edges, CSC; backward: the out-edges, CSR) into a row buffer of D elements, then writes
// the rows of the edges of the other grouping, out[e] = sum - x[rev e] (plus the own block), each
// written exactly once: no [n, D] buffer, no atomics, and the result does not depend on the thread
// count. Nodes are split into ranges of equal work (edges of both groupings plus nodes). Gathered
// rows are prefetched kPrefetchDistance edges ahead. Every call checks both groupings
// (CheckCompressed) and rev_edge_ids (in [-1, E), an involution on the real edges naming none of the padding
// edges) before touching a feature row.
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "cpu/handler.h"
#include "cpu/row_parallel.h"
#include "cpu/vector_math.h"
#include "handlers.h"
#include "jgo/args.h"
#include "jgo/dmpnn.h"

namespace jgo {
namespace {

// First node r with a[r] + b[r] + r >= target (edges of both groupings and nodes all cost work).
template <typename I>
int64_t NodeAtWork(const I* a, const I* b, int64_t n_nodes, int64_t target) {
  int64_t lo = 0, hi = n_nodes;
  while (lo < hi) {
    const int64_t mid = (lo + hi) / 2;
    if (static_cast<int64_t>(a[mid]) + static_cast<int64_t>(b[mid]) + mid < target) lo = mid + 1; else hi = mid;
  }
  return lo;
}

// rev_edge_ids in [-1, E), and on the real edges (ids below n_real, the others padding: in no row) an
// involution on its defined entries that names no padding edge; the error names the first bad entry.
template <typename I>
ffi::Error CheckRev(const I* rev, int64_t n_edges, int64_t n_real, const char* fn) {
  for (int64_t e = 0; e < n_edges; ++e) {  // every entry in range first, so that rev[r] below is
    const int64_t r = rev[e];
    if (r < -1 || r >= n_edges)
      return InvalidArgument(std::string("agg_dmpnn (") + fn + "): rev_edge_ids[" + std::to_string(e) + "] = " +
                             std::to_string(r) + " is out of range " + Range(-1, n_edges));
  }
  for (int64_t e = 0; e < n_real; ++e) {
    const int64_t r = rev[e];
    if (r >= n_real)
      return InvalidArgument(std::string("agg_dmpnn (") + fn + "): rev_edge_ids[" + std::to_string(e) + "] = " +
                             std::to_string(r) + " names a padding edge: the edges from " + std::to_string(n_real) +
                             " on are padding (in no neighbourhood), so a real edge's reverse is a real edge or -1");
    if (r >= 0 && static_cast<int64_t>(rev[r]) != e)
      return InvalidArgument(std::string("agg_dmpnn (") + fn + "): rev_edge_ids must be an involution " +
                             "(rev[rev[e]] == e wherever rev[e] != -1): rev_edge_ids[" + std::to_string(e) + "] = " +
                             std::to_string(r) + " but rev_edge_ids[" + std::to_string(r) + "] = " +
                             std::to_string(static_cast<int64_t>(rev[r])));
  }
  return ffi::Error::Success();
}

// Nodes [v0, v1): the sum over the `in` grouping, written to the edges of the `out` grouping.
template <typename T, typename I, bool kFwd, bool kOwn>
void DmpnnNodes(const DmpnnArgs& a, const I* in_off, const I* in_eid, const I* out_off, const I* out_eid,
                const I* rev, const T* __restrict__ x, T* __restrict__ y, int64_t v0, int64_t v1) {
  const int64_t D = a.dim, E = a.n_edges, lx = a.in_len, ly = a.out_len;
  std::vector<T> buf(std::max<int64_t>(D, 1));
  T* __restrict__ acc = buf.data();
  for (int64_t v = v0; v < v1; ++v) {
    std::fill(acc, acc + D, T(0));
    const int64_t i1 = in_off[v + 1];
    for (int64_t k = in_off[v]; k < i1; ++k) {
      if (k + kPrefetchDistance < E) PrefetchRow(x + static_cast<int64_t>(in_eid[k + kPrefetchDistance]) * lx, D);
      const T* __restrict__ row = x + static_cast<int64_t>(in_eid[k]) * lx;
      for (int64_t c = 0; c < D; ++c) acc[c] += row[c];
    }
    const int64_t o1 = out_off[v + 1];
    for (int64_t k = out_off[v]; k < o1; ++k) {
      if (k + kPrefetchDistance < E) {
        const int64_t r = rev[out_eid[k + kPrefetchDistance]];
        if (r >= 0) PrefetchRow(x + r * lx, D);
      }
      const int64_t e = out_eid[k], r = rev[e];
      T* __restrict__ out = y + e * ly;
      if (r >= 0) {
        const T* __restrict__ back = x + r * lx;
        for (int64_t c = 0; c < D; ++c) out[c] = acc[c] - back[c];
      } else {
        std::copy(acc, acc + D, out);
      }
      if constexpr (kOwn && kFwd) {
        std::copy(x + e * lx, x + e * lx + D, out + D);  // [m | h]
      } else if constexpr (kOwn) {
        const T* __restrict__ own = x + e * lx + D;  // G's own block
        for (int64_t c = 0; c < D; ++c) out[c] += own[c];
      }
    }
  }
}

template <typename T, typename I>
ffi::Error DmpnnTyped(ffi::ThreadPool& pool, DmpnnPass pass, const DmpnnArgs& a, ffi::AnyBuffer in_offsets,
                      ffi::AnyBuffer in_eid, ffi::AnyBuffer out_offsets, ffi::AnyBuffer out_eid, ffi::AnyBuffer rev,
                      ffi::AnyBuffer x, ffi::AnyBuffer y) {
  const bool fwd = pass == DmpnnPass::kFwd;
  const char* fn = fwd ? "jgo_dmpnn_fwd" : "jgo_dmpnn_bwd";
  const I *io = in_offsets.typed_data<I>(), *ie = in_eid.typed_data<I>();
  const I *oo = out_offsets.typed_data<I>(), *oe = out_eid.typed_data<I>(), *rv = rev.typed_data<I>();
  const std::string in_what = std::string(fn) + (fwd ? " (CSC)" : " (CSR)");
  const std::string out_what = std::string(fn) + (fwd ? " (CSR)" : " (CSC)");
  if (auto err = CheckCompressed<I>(pool, io, nullptr, ie, a.n_nodes, a.n_edges, 0, false, in_what.c_str());
      err.failure())
    return err;
  if (auto err = CheckCompressed<I>(pool, oo, nullptr, oe, a.n_nodes, a.n_edges, 0, false, out_what.c_str());
      err.failure())
    return err;
  if (auto err = CheckRev(rv, a.n_edges, static_cast<int64_t>(io[a.n_nodes]), fn); err.failure()) return err;
  const T* xd = x.typed_data<T>();
  T* yd = y.typed_data<T>();
  const int64_t total = static_cast<int64_t>(io[a.n_nodes]) + static_cast<int64_t>(oo[a.n_nodes]) + a.n_nodes;
  const int64_t threads = std::max<int64_t>(1, pool.num_threads());
  const int64_t n_tasks =
      std::max<int64_t>(1, std::min<int64_t>(threads, total * std::max<int64_t>(1, a.dim) / kMinWorkPerTask));
  ParallelFor(pool, n_tasks, [&](int64_t t) {
    const int64_t v0 = NodeAtWork(io, oo, a.n_nodes, total * t / n_tasks);
    const int64_t v1 = NodeAtWork(io, oo, a.n_nodes, total * (t + 1) / n_tasks);
    if (fwd && a.concat_own) DmpnnNodes<T, I, true, true>(a, io, ie, oo, oe, rv, xd, yd, v0, v1);
    else if (fwd) DmpnnNodes<T, I, true, false>(a, io, ie, oo, oe, rv, xd, yd, v0, v1);
    else if (a.concat_own) DmpnnNodes<T, I, false, true>(a, io, ie, oo, oe, rv, xd, yd, v0, v1);
    else DmpnnNodes<T, I, false, false>(a, io, ie, oo, oe, rv, xd, yd, v0, v1);
  });
  if (a.n_edges > 0)  // the rows no node writes: the padding edges'
    ZeroPaddingEdges(oo, oe, a.n_nodes, a.n_edges, static_cast<int64_t>(y.element_count()) / a.n_edges, yd);
  return ffi::Error::Success();
}

ffi::Error Dmpnn(DmpnnPass pass, ffi::ThreadPool& pool, ffi::AnyBuffer in_offsets, ffi::AnyBuffer in_eid,
                 ffi::AnyBuffer out_offsets, ffi::AnyBuffer out_eid, ffi::AnyBuffer rev, ffi::AnyBuffer x,
                 ffi::AnyBuffer y, bool concat_own) {
  auto args = CheckDmpnn(pass, in_offsets, in_eid, out_offsets, out_eid, rev, x, y, concat_own);
  if (args.has_error()) return args.error();
  return DispatchTypes(x.element_type(), in_offsets.element_type(), [&](auto t, auto i) {
    return DmpnnTyped<decltype(t), decltype(i)>(pool, pass, *args, in_offsets, in_eid, out_offsets, out_eid, rev, x,
                                                y);
  });
}

ffi::Error DmpnnFwdCpu(ffi::ThreadPool pool, ffi::AnyBuffer in_offsets, ffi::AnyBuffer in_eid,
                       ffi::AnyBuffer out_offsets, ffi::AnyBuffer out_eid, ffi::AnyBuffer rev, ffi::AnyBuffer h,
                       ffi::Result<ffi::AnyBuffer> out, bool concat_own, bool /*checked: checked here anyway*/) {
  return Dmpnn(DmpnnPass::kFwd, pool, in_offsets, in_eid, out_offsets, out_eid, rev, h, *out, concat_own);
}

ffi::Error DmpnnBwdCpu(ffi::ThreadPool pool, ffi::AnyBuffer in_offsets, ffi::AnyBuffer in_eid,
                       ffi::AnyBuffer out_offsets, ffi::AnyBuffer out_eid, ffi::AnyBuffer rev, ffi::AnyBuffer G,
                       ffi::Result<ffi::AnyBuffer> grad_h, bool concat_own, bool /*checked: checked here anyway*/) {
  return Dmpnn(DmpnnPass::kBwd, pool, in_offsets, in_eid, out_offsets, out_eid, rev, G, *grad_h, concat_own);
}

}  // namespace
}  // namespace jgo

JGO_CPU_HANDLER(DmpnnFwd, jgo::DmpnnFwdCpu, jgo::BindDmpnn<xla::ffi::ThreadPool>());
JGO_CPU_HANDLER(DmpnnBwd, jgo::DmpnnBwdCpu, jgo::BindDmpnn<xla::ffi::ThreadPool>());
