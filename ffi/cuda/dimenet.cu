// CUDA handlers of the DimeNet++ triplet aggregation: jgo_dimenet_in and jgo_dimenet_out. Same
// operands, attributes and results as the CPU twin (cpu/dimenet.cc), same per-triplet math
// (jgo/dimenet.h), same shape checks (jgo/dimenet_args.h).
//
// One thread owns one row (an edge) of a grouping and walks its triplets, so every row output is
// written by one thread: no atomics. W_b, a reduction over all triplets, is summed per thread
// into a fixed number of partials (scratch, laid out [weight][thread] so neighbouring threads
// touch neighbouring words), which one thread per weight then adds in thread order: bitwise
// reproducible. Index arrays are not validated on the host; out-of-range neighbours are skipped
// and offsets clamped, so no kernel reads or writes out of bounds.
//
// Compile check (zero warnings), from the repository root, on one line:
//   nvcc -std=c++17 -O3 -Xcompiler -fPIC -Xcompiler -Wall,-Wextra --Werror all-warnings
//     --generate-code=arch=compute_80,code=sm_80 --generate-code=arch=compute_90,code=sm_90
//     -Iffi -Iffi/common -isystem third_party/xla_ffi
//     -DJGO_WITH_CUDA -c ffi/cuda/dimenet.cu
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "cuda/launch.cuh"
#include "handlers.h"
#include "jgo/args.h"
#include "jgo/dimenet.h"
#include "jgo/dimenet_args.h"

namespace jgo {
namespace {

constexpr int64_t kMaxMid = 32;                  // n_mid bound of the per-thread scratch
constexpr int64_t kWeightThreads = 64 * kBlock;  // threads (and partials) of the W_b reduction

template <typename T, typename I>
__global__ void DimenetInKernel(DimenetArgs a, const I* offsets, const I* nbr, const I* pos, DimenetOperands<T> o,
                                DimenetPlan p, T* gvec, T* ga, T* gemb, T* coef, T* partials, int64_t n_partials) {
  const int64_t C = a.C, M = a.M, out = a.outputs;
  const bool want_h = (out & (kOutA | kOutVec)) != 0, want_vec = (out & kOutVec) != 0;
  const bool want_mid = (out & (kOutEmb | kOutWb)) != 0;
  const int order = (want_vec || p.dvec ? 1 : 0) + (want_vec && p.dvec ? 1 : 0);
  T storage[4 * kMaxMid];
  Triplet<T, 0> t;
  t.Bind(storage, M);
  const int64_t me = ThreadIndex();
  T* pw = partials ? partials + me : nullptr;  // W_b[c, m] of this thread at pw[(c * M + m) * n_partials]
  if (pw && me < n_partials)
    for (int64_t w = 0; w < C * M; ++w) pw[w * n_partials] = T(0);
  for (int64_t r = me; r < a.E; r += ThreadCount()) {
    T* gv = gvec ? gvec + 3 * r : nullptr;
    T* gar = ga ? ga + kSpherical * M * r : nullptr;
    T* ge = gemb ? gemb + C * r : nullptr;
    if (gv)
      for (int i = 0; i < 3; ++i) gv[i] = T(0);
    if (gar)
      for (int64_t s = 0; s < kSpherical * M; ++s) gar[s] = T(0);
    if (ge)
      for (int64_t c = 0; c < C; ++c) ge[c] = T(0);
    const T* x = o.emb ? o.emb + C * r : nullptr;
    const T* dx = o.demb ? o.demb + C * r : nullptr;
    const EdgeDir<T> dr = DirOf(o.vec + 3 * r);
    const int64_t begin = Clamp(offsets[r], 0, a.T), end = Clamp(offsets[r + 1], begin, a.T);
    for (int64_t k = begin; k < end; ++k) {
      const int64_t b = nbr[k];
      if (!InRange(b, a.E)) continue;
      t.Angular(o, p, r, b, dr, DirOf(o.vec + 3 * b), order);
      if (want_mid) t.Project(o, p, r);
      const T* g = o.grad ? o.grad + C * b : nullptr;
      const T* dg = o.dgrad ? o.dgrad + C * b : nullptr;
      if (ge) {  // dG[b] (.) proj + G[b] (.) dproj
        for (int64_t c = 0; c < C; ++c) {
          const T* w = o.wb + c * M;
          const T* dw = o.dwb ? o.dwb + c * M : nullptr;
          T proj = T(0), dproj = T(0);
          for (int64_t m = 0; m < M; ++m) {
            proj += w[m] * t.mid[m];
            dproj += w[m] * t.dmid[m] + (dw ? dw[m] * t.mid[m] : T(0));
          }
          ge[c] += (dg ? dg[c] * proj : T(0)) + (g ? g[c] * dproj : T(0));
        }
      }
      if (pw) {  // du (x) mid + u (x) dmid
        for (int64_t c = 0; c < C; ++c) {
          const T u = g && x ? g[c] * x[c] : T(0);
          const T du = (dg && x ? dg[c] * x[c] : T(0)) + (g && dx ? g[c] * dx[c] : T(0));
          for (int64_t m = 0; m < M; ++m) pw[(c * M + m) * n_partials] += du * t.mid[m] + u * t.dmid[m];
        }
      }
      if (!want_h) continue;
      t.Backproject(o, p, r, b);
      if (gar)
        for (int l = 0; l < kSpherical; ++l)
          for (int64_t m = 0; m < M; ++m) gar[l * M + m] += t.dy[l] * t.h[m] + t.y[l] * t.dh[m];
      if (gv) {
        for (int i = 0; i < 3; ++i) gv[i] += t.dgamma * t.angle.ga[i] + t.gamma * t.angle.dga[i];
        const int64_t q = pos[k];
        if (InRange(q, a.T)) {
          coef[2 * q] = t.gamma;
          coef[2 * q + 1] = t.dgamma;
        }
      }
    }
  }
}

// out[w] = sum over the partials of weight w, in thread order.
template <typename T>
__global__ void SumPartialsKernel(const T* partials, int64_t n_partials, int64_t n_weights, T* out) {
  for (int64_t w = ThreadIndex(); w < n_weights; w += ThreadCount()) {
    const T* p = partials + w * n_partials;
    T total = T(0);
    for (int64_t i = 0; i < n_partials; ++i) total += p[i];
    out[w] = total;
  }
}

template <typename T, typename I>
__global__ void DimenetOutKernel(DimenetArgs a, const I* offsets, const I* nbr, DimenetOperands<T> o, DimenetPlan p,
                                 const T* coef, T* gout, T* gvec) {
  const int64_t C = a.C, M = a.M;
  T storage[4 * kMaxMid];
  Triplet<T, 0> t;
  t.Bind(storage, M);
  for (int64_t r = ThreadIndex(); r < a.E; r += ThreadCount()) {
    T* go = gout ? gout + C * r : nullptr;
    T* gv = gvec ? gvec + 3 * r : nullptr;
    if (go)
      for (int64_t c = 0; c < C; ++c) go[c] = T(0);
    if (gv)
      for (int i = 0; i < 3; ++i) gv[i] = T(0);
    const EdgeDir<T> dr = DirOf(o.vec + 3 * r);
    const int64_t begin = Clamp(offsets[r], 0, a.T), end = Clamp(offsets[r + 1], begin, a.T);
    for (int64_t k = begin; k < end; ++k) {
      const int64_t e_in = nbr[k];
      if (!InRange(e_in, a.E)) continue;
      t.Angular(o, p, e_in, r, DirOf(o.vec + 3 * e_in), dr, p.dvec ? 1 : 0);
      if (go) {  // dX[a] (.) proj + X[a] (.) dproj
        t.Project(o, p, e_in);
        const T* x = o.emb ? o.emb + C * e_in : nullptr;
        const T* dx = o.demb ? o.demb + C * e_in : nullptr;
        for (int64_t c = 0; c < C; ++c) {
          const T* w = o.wb + c * M;
          const T* dw = o.dwb ? o.dwb + c * M : nullptr;
          T proj = T(0), dproj = T(0);
          for (int64_t m = 0; m < M; ++m) {
            proj += w[m] * t.mid[m];
            dproj += w[m] * t.dmid[m] + (dw ? dw[m] * t.mid[m] : T(0));
          }
          go[c] += (dx ? dx[c] * proj : T(0)) + (x ? x[c] * dproj : T(0));
        }
      }
      if (gv) {
        const T gamma = coef[2 * k], dgamma = coef[2 * k + 1];
        for (int i = 0; i < 3; ++i) gv[i] += dgamma * t.angle.gb[i] + gamma * t.angle.dgb[i];
      }
    }
  }
}

template <typename T, typename I>
ffi::Error InTyped(cudaStream_t stream, CudaScratch& scratch, const DimenetArgs& a,
                   const ffi::AnyBuffer& offsets, const ffi::AnyBuffer& nbr, const ffi::AnyBuffer& pos,
                   const ffi::AnyBuffer* ops, ffi::AnyBuffer* res) {
  const DimenetOperands<T> o = OperandsOf<T>(ops, a);
  const int64_t out = a.outputs;
  const bool want_wb = (out & kOutWb) != 0;
  T* partials = nullptr;
  if (want_wb) {
    auto mem = ScratchBytes(scratch, sizeof(T) * a.C * a.M * kWeightThreads, alignof(T));
    if (!mem.has_value()) return ffi::Error::Internal("jaxgraphops: dimenet_in: no scratch for the W_b partials");
    partials = static_cast<T*>(*mem);
  }
  auto ptr = [&](int i, int64_t bit) { return (out & bit) ? res[i].typed_data<T>() : static_cast<T*>(nullptr); };
  // A coefficient no triplet reaches (skipped for an out-of-range index, or a position no triplet names) stays 0.
  if ((out & kOutVec) != 0) {
    if (auto err = ZeroFill("jgo_dimenet_in", res[4].untyped_data(), res[4].size_bytes(), stream); err.failure())
      return err;
  }
  const int64_t threads = want_wb ? kWeightThreads : a.E;
  if (auto err = Launch("jgo_dimenet_in", DimenetInKernel<T, I>, threads, stream, a, offsets.typed_data<I>(),
                        nbr.typed_data<I>(), pos.typed_data<I>(), o, MakePlan(o), ptr(0, kOutVec), ptr(1, kOutA),
                        ptr(2, kOutEmb), ptr(4, kOutVec), partials, want_wb ? kWeightThreads : int64_t(0));
      err.failure())
    return err;
  if (!want_wb) return ffi::Error::Success();
  return Launch("jgo_dimenet_in (W_b)", SumPartialsKernel<T>, a.C * a.M, stream, static_cast<const T*>(partials),
                kWeightThreads, a.C * a.M, res[3].typed_data<T>());
}

ffi::Error DimenetInCuda(cudaStream_t stream, CudaScratch scratch, ffi::AnyBuffer offsets,
                         ffi::AnyBuffer nbr, ffi::AnyBuffer pos, ffi::AnyBuffer vec, ffi::AnyBuffer A,
                         ffi::AnyBuffer emb, ffi::AnyBuffer wb, ffi::AnyBuffer wbt, ffi::AnyBuffer grad,
                         ffi::AnyBuffer dvec, ffi::AnyBuffer dA, ffi::AnyBuffer demb, ffi::AnyBuffer dwb,
                         ffi::AnyBuffer dwbt, ffi::AnyBuffer dgrad, ffi::Result<ffi::AnyBuffer> r_vec,
                         ffi::Result<ffi::AnyBuffer> r_a, ffi::Result<ffi::AnyBuffer> r_emb,
                         ffi::Result<ffi::AnyBuffer> r_wb, ffi::Result<ffi::AnyBuffer> r_coef, int64_t outputs) {
  const ffi::AnyBuffer ops[kDimenetOperands] = {vec, A, emb, wb, wbt, grad, dvec, dA, demb, dwb, dwbt, dgrad};
  auto args = CheckDimenet("jgo_dimenet_in", offsets, nbr, ops, outputs);
  if (args.has_error()) return args.error();
  const DimenetArgs& a = *args;
  if (a.M > kMaxMid) return InvalidArgument("jgo_dimenet_in: n_mid above 32 is not supported on CUDA");
  ffi::AnyBuffer res[5] = {*r_vec, *r_a, *r_emb, *r_wb, *r_coef};
  if (auto err = CheckDimenetIn(a, offsets, pos, vec, res); err.failure()) return err;
  return DispatchTypes(vec.element_type(), offsets.element_type(), [&](auto t, auto i) {
    return InTyped<decltype(t), decltype(i)>(stream, scratch, a, offsets, nbr, pos, ops, res);
  });
}

ffi::Error DimenetOutCuda(cudaStream_t stream, ffi::AnyBuffer offsets, ffi::AnyBuffer nbr, ffi::AnyBuffer vec,
                          ffi::AnyBuffer A, ffi::AnyBuffer emb, ffi::AnyBuffer wb, ffi::AnyBuffer wbt,
                          ffi::AnyBuffer grad, ffi::AnyBuffer dvec, ffi::AnyBuffer dA, ffi::AnyBuffer demb,
                          ffi::AnyBuffer dwb, ffi::AnyBuffer dwbt, ffi::AnyBuffer dgrad, ffi::AnyBuffer coef,
                          ffi::Result<ffi::AnyBuffer> r_grad, ffi::Result<ffi::AnyBuffer> r_vec, int64_t outputs) {
  const ffi::AnyBuffer ops[kDimenetOperands] = {vec, A, emb, wb, wbt, grad, dvec, dA, demb, dwb, dwbt, dgrad};
  auto args = CheckDimenet("jgo_dimenet_out", offsets, nbr, ops, outputs);
  if (args.has_error()) return args.error();
  const DimenetArgs& a = *args;
  if (a.M > kMaxMid) return InvalidArgument("jgo_dimenet_out: n_mid above 32 is not supported on CUDA");
  if (auto err = CheckDimenetOut(a, vec, coef, *r_grad, *r_vec); err.failure()) return err;
  const bool want_vec = (outputs & kOutVec) != 0, want_grad = (outputs & kOutGrad) != 0;
  return DispatchTypes(vec.element_type(), offsets.element_type(), [&](auto t, auto i) {
    using T = decltype(t);
    using I = decltype(i);
    const DimenetOperands<T> o = OperandsOf<T>(ops, a);
    return Launch("jgo_dimenet_out", DimenetOutKernel<T, I>, a.E, stream, a, offsets.typed_data<I>(),
                  nbr.typed_data<I>(), o, MakePlan(o), want_vec ? coef.typed_data<T>() : static_cast<const T*>(nullptr),
                  want_grad ? r_grad->typed_data<T>() : static_cast<T*>(nullptr),
                  want_vec ? r_vec->typed_data<T>() : static_cast<T*>(nullptr));
  });
}

}  // namespace
}  // namespace jgo

JGO_CUDA_HANDLER_NO_TRAITS(DimenetIn, jgo::DimenetInCuda, jgo::BindDimenetIn<jgo::CudaStream, jgo::CudaScratch>());
JGO_CUDA_HANDLER_NO_TRAITS(DimenetOut, jgo::DimenetOutCuda, jgo::BindDimenetOut<jgo::CudaStream>());
