// CUDA handlers of Chemprop's directed bond message (agg_dmpnn): jgo_dmpnn_fwd and jgo_dmpnn_bwd.
// Same operands, attribute and results as the CPU twin (cpu/dmpnn.cc), same math and checks
// (jgo/dmpnn.h).
//
// One kernel serves both passes. A group of lanes (a power of two <= 32 covering D, GroupWidth)
// owns one node and one chunk of `group` adjacent columns; each lane sums its column over the
// edges of the first grouping in a register, then writes that column of every edge of the second
// grouping, out[e, c] = sum - x[rev e, c] (plus the own block). Lanes of a group read and write
// adjacent elements of one row: coalesced. Each output element is written by one thread: no
// atomics, no [n, D] buffer, bitwise reproducible. Offsets are clamped and edge ids out of range
// skipped, so no kernel reads or writes out of bounds; the result is zero-filled first, for the
// rows a malformed grouping never names. An edge whose rev entry lies outside [-1, E) or breaks
// the involution (rev[rev[e]] != e) gets NaN in its written block: the CUDA kernels cannot raise.
//
// Compile check (zero warnings), from the repository root, on one line:
//   nvcc -std=c++17 -O3 -Xcompiler -fPIC -Xcompiler -Wall,-Wextra --Werror all-warnings
//     --generate-code=arch=compute_90,code=sm_90
//     -Iffi -Iffi/common -isystem third_party/xla_ffi
//     -DJGO_WITH_CUDA -c ffi/cuda/dmpnn.cu
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "cuda/launch.cuh"
#include "handlers.h"
#include "jgo/args.h"
#include "jgo/dmpnn.h"

namespace jgo {
namespace {

template <typename T, typename I, bool kFwd, bool kOwn>
__global__ void DmpnnKernel(DmpnnArgs a, int group, int64_t n_chunks, const I* in_off, const I* in_eid,
                            const I* out_off, const I* out_eid, const I* rev, const T* x, T* y) {
  const int64_t D = a.dim, E = a.n_edges, lx = a.in_len, ly = a.out_len;
  const int64_t total = a.n_nodes * n_chunks * group;
  for (int64_t t = ThreadIndex(); t < total; t += ThreadCount()) {
    const int64_t task = t / group;
    const int64_t v = task / n_chunks;
    const int64_t c = (task % n_chunks) * group + t % group;
    if (c >= D) continue;
    const int64_t i0 = Clamp(in_off[v], 0, E), i1 = Clamp(in_off[v + 1], i0, E);
    T acc = T(0);
    for (int64_t k = i0; k < i1; ++k) {
      const int64_t e = in_eid[k];
      if (InRange(e, E)) acc += x[e * lx + c];
    }
    const int64_t o0 = Clamp(out_off[v], 0, E), o1 = Clamp(out_off[v + 1], o0, E);
    for (int64_t k = o0; k < o1; ++k) {
      const int64_t e = out_eid[k];
      if (!InRange(e, E)) continue;
      const int64_t r = rev[e];
      T val;
      if (!DmpnnRevValid(rev, E, e)) val = DmpnnPoison<T>();
      else val = DmpnnMessage(acc, r >= 0 ? x[r * lx + c] : T(0), r >= 0);
      if constexpr (kOwn && kFwd) y[e * ly + D + c] = x[e * lx + c];  // [m | h]
      if constexpr (kOwn && !kFwd) val += x[e * lx + D + c];          // G's own block
      y[e * ly + c] = val;
    }
  }
}

template <typename T, typename I>
ffi::Error DmpnnTyped(cudaStream_t stream, DmpnnPass pass, const DmpnnArgs& a, ffi::AnyBuffer in_offsets,
                      ffi::AnyBuffer in_eid, ffi::AnyBuffer out_offsets, ffi::AnyBuffer out_eid, ffi::AnyBuffer rev,
                      ffi::AnyBuffer x, ffi::AnyBuffer y) {
  const bool fwd = pass == DmpnnPass::kFwd;
  const char* name = fwd ? "jgo_dmpnn_fwd" : "jgo_dmpnn_bwd";
  if (auto err = ZeroFill(name, y.untyped_data(), y.size_bytes(), stream); err.failure()) return err;
  const int group = GroupWidth(a.dim);
  const int64_t n_chunks = (a.dim + group - 1) / group;
  const int64_t threads = a.dim == 0 ? 0 : a.n_nodes * n_chunks * group;
  auto kernel = fwd ? (a.concat_own ? DmpnnKernel<T, I, true, true> : DmpnnKernel<T, I, true, false>)
                    : (a.concat_own ? DmpnnKernel<T, I, false, true> : DmpnnKernel<T, I, false, false>);
  return Launch(name, kernel, threads, stream, a, group, n_chunks, in_offsets.typed_data<I>(),
                static_cast<const I*>(in_eid.typed_data<I>()), static_cast<const I*>(out_offsets.typed_data<I>()),
                static_cast<const I*>(out_eid.typed_data<I>()), static_cast<const I*>(rev.typed_data<I>()),
                static_cast<const T*>(x.typed_data<T>()), y.typed_data<T>());
}

ffi::Error Dmpnn(DmpnnPass pass, cudaStream_t stream, ffi::AnyBuffer in_offsets, ffi::AnyBuffer in_eid,
                 ffi::AnyBuffer out_offsets, ffi::AnyBuffer out_eid, ffi::AnyBuffer rev, ffi::AnyBuffer x,
                 ffi::AnyBuffer y, bool concat_own) {
  auto args = CheckDmpnn(pass, in_offsets, in_eid, out_offsets, out_eid, rev, x, y, concat_own);
  if (args.has_error()) return args.error();
  return DispatchTypes(x.element_type(), in_offsets.element_type(), [&](auto t, auto i) {
    return DmpnnTyped<decltype(t), decltype(i)>(stream, pass, *args, in_offsets, in_eid, out_offsets, out_eid, rev,
                                                x, y);
  });
}

ffi::Error DmpnnFwdCuda(cudaStream_t stream, ffi::AnyBuffer in_offsets, ffi::AnyBuffer in_eid,
                        ffi::AnyBuffer out_offsets, ffi::AnyBuffer out_eid, ffi::AnyBuffer rev, ffi::AnyBuffer h,
                        ffi::Result<ffi::AnyBuffer> out, bool concat_own) {
  return Dmpnn(DmpnnPass::kFwd, stream, in_offsets, in_eid, out_offsets, out_eid, rev, h, *out, concat_own);
}

ffi::Error DmpnnBwdCuda(cudaStream_t stream, ffi::AnyBuffer in_offsets, ffi::AnyBuffer in_eid,
                        ffi::AnyBuffer out_offsets, ffi::AnyBuffer out_eid, ffi::AnyBuffer rev, ffi::AnyBuffer G,
                        ffi::Result<ffi::AnyBuffer> grad_h, bool concat_own) {
  return Dmpnn(DmpnnPass::kBwd, stream, in_offsets, in_eid, out_offsets, out_eid, rev, G, *grad_h, concat_own);
}

}  // namespace
}  // namespace jgo

JGO_CUDA_HANDLER(DmpnnFwd, jgo::DmpnnFwdCuda, jgo::BindDmpnn<jgo::CudaStream>());
JGO_CUDA_HANDLER(DmpnnBwd, jgo::DmpnnBwdCuda, jgo::BindDmpnn<jgo::CudaStream>());
