// CPU handler of jgo_check_edges: the id check of a traced edge list (jgo/edge_list_args.h).
//
// Fixed chunks of the flat arrays run on XLA's intra-op thread pool; each finds its first bad id
// (and copies its slice when XLA did not alias an output to its input), and the first chunk with
// one names the edge, so the error does not depend on the number of threads.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "cpu/handler.h"
#include "cpu/row_parallel.h"
#include "handlers.h"
#include "jgo/edge_list_args.h"

namespace jgo {
namespace {

constexpr int64_t kCheckChunk = 1 << 16;  // ids per task

// The flat position of the first id of x outside [0, n), or -1; copies x to out if they differ.
template <typename I>
int64_t FirstBadId(ffi::ThreadPool& pool, const I* x, I* out, int64_t count, int64_t n) {
  const int64_t chunks = (count + kCheckChunk - 1) / kCheckChunk;
  std::vector<int64_t> first(chunks, -1);
  ParallelFor(pool, chunks, [&](int64_t c) {
    const int64_t begin = c * kCheckChunk, end = std::min(count, begin + kCheckChunk);
    if (out != x) std::memcpy(out + begin, x + begin, sizeof(I) * (end - begin));
    bool bad = false;
    for (int64_t i = begin; i < end; ++i) bad |= !IdInRange(x[i], n);  // vectorises; the search below rarely runs
    if (!bad) return;
    for (int64_t i = begin; i < end; ++i) {
      if (!IdInRange(x[i], n)) {
        first[c] = i;
        return;
      }
    }
  });
  for (int64_t pos : first) {
    if (pos >= 0) return pos;
  }
  return -1;
}

template <typename I>
ffi::Error CheckTyped(ffi::ThreadPool& pool, const EdgeListArgs& a, ffi::AnyBuffer src, ffi::AnyBuffer dst,
                      ffi::Result<ffi::AnyBuffer> src_out, ffi::Result<ffi::AnyBuffer> dst_out) {
  const I* s = static_cast<const I*>(src.untyped_data());
  const I* d = static_cast<const I*>(dst.untyped_data());
  const int64_t bad_src = FirstBadId(pool, s, static_cast<I*>(src_out->untyped_data()), a.count, a.n_src);
  const int64_t bad_dst = FirstBadId(pool, d, static_cast<I*>(dst_out->untyped_data()), a.count, a.n_dst);
  if (bad_src >= 0) return EdgeIdError(a, "src", s[bad_src], bad_src);
  if (bad_dst >= 0) return EdgeIdError(a, "dst", d[bad_dst], bad_dst);
  return ffi::Error::Success();
}

ffi::Error CheckEdgesCpu(ffi::ThreadPool pool, ffi::AnyBuffer src, ffi::AnyBuffer dst,
                         ffi::Result<ffi::AnyBuffer> src_out, ffi::Result<ffi::AnyBuffer> dst_out, int64_t n_src,
                         int64_t n_dst) {
  auto a = CheckEdgeList(src, dst, *src_out, *dst_out, n_src, n_dst);
  if (!a.has_value()) return a.error();
  if (src.element_type() == ffi::DataType::S64) return CheckTyped<int64_t>(pool, *a, src, dst, src_out, dst_out);
  return CheckTyped<int32_t>(pool, *a, src, dst, src_out, dst_out);
}

}  // namespace
}  // namespace jgo

JGO_CPU_HANDLER(CheckEdges, jgo::CheckEdgesCpu, jgo::BindCheckEdges<xla::ffi::ThreadPool>());
