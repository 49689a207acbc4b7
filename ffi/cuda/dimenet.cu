// CUDA handlers of the DimeNet++ triplet aggregation: jgo_dimenet_in and jgo_dimenet_out. Same
// operands, attributes and results as the CPU twin (cpu/dimenet.cc), same per-triplet math
// (jgo/dimenet.h), same shape checks (jgo/dimenet_args.h).
//
// One thread owns one row (an edge) of a grouping and walks its triplets, so every row output
// is written by one thread: no atomics. W_a and W_b, reductions over all triplets, are summed
// per thread into a fixed number of partials (scratch, laid out [weight][thread] for coalesced
// access) and the partials are then added in thread order by one thread per weight: bitwise
// reproducible. Index arrays are not validated on the host; out-of-range neighbours are skipped
// and offsets clamped, so no kernel reads or writes out of bounds.
//
// Compile check (zero warnings), from the repository root, on one line:
//   nvcc -std=c++17 -O3 -Xcompiler -fPIC -Xcompiler -Wall,-Wextra --Werror all-warnings
//     --generate-code=arch=compute_80,code=sm_80 --generate-code=arch=compute_90,code=sm_90
//     -Iffi -Iffi/common -isystem $(python -c 'import jax.ffi;print(jax.ffi.include_dir())')
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
constexpr int64_t kWeightThreads = 64 * kBlock;  // threads (and partials) of a weight reduction


template <typename T, typename I>
__global__ void DimenetInKernel(DimenetArgs a, const I* offsets, const I* nbr, const I* pos, DimenetOperands<T> o,
                                DimenetPlan p, bool backward, T* gvec, T* gsbf, T* gemb, T* coef, T* partials,
                                int64_t n_partials) {
  const int64_t C = a.C, M = a.M, out = a.outputs;
  T scratch[4 * kMaxMid];
  TripletTerms<T> t;
  BindScratch(t, scratch, M);
  const int64_t me = ThreadIndex();
  T* pwa = partials ? partials + me : nullptr;  // weight w of this thread at pwa[w * n_partials]
  T* pwb = partials ? pwa + kBasis * M * n_partials : nullptr;
  if (partials && me < n_partials)
    for (int64_t w = 0; w < (kBasis + C) * M; ++w) pwa[w * n_partials] = T(0);
  for (int64_t r = me; r < a.E; r += ThreadCount()) {
    T* gv = gvec ? gvec + 3 * r : nullptr;
    T* gs = gsbf ? gsbf + kBasis * r : nullptr;
    T* ge = gemb ? gemb + C * r : nullptr;
    if (gv)
      for (int i = 0; i < 3; ++i) gv[i] = T(0);
    if (gs)
      for (int s = 0; s < kBasis; ++s) gs[s] = T(0);
    if (ge)
      for (int64_t c = 0; c < C; ++c) ge[c] = T(0);
    const T* x = o.emb ? o.emb + C * r : nullptr;
    const T* dx = o.demb ? o.demb + C * r : nullptr;
    const int64_t begin = Clamp(offsets[r], 0, a.T), end = Clamp(offsets[r + 1], begin, a.T);
    for (int64_t k = begin; k < end; ++k) {
      const int64_t b = nbr[k];
      if (!InRange(b, a.E)) continue;
      TripletAngular(o, p, r, b, t);
      TripletCore(o, p, r, b, backward, t);
      const T* g = o.grad ? o.grad + C * b : nullptr;
      const T* dg = o.dgrad ? o.dgrad + C * b : nullptr;
      if (ge) {
        for (int64_t c = 0; c < C; ++c) {
          T proj, dproj;
          ProjOf(o, p, t, c, proj, dproj);
          ge[c] += (dg ? dg[c] * proj : T(0)) + (g ? g[c] * dproj : T(0));
        }
      }
      if (gs) {
        for (int s = 0; s < kBasis; ++s) {
          const int l = s / kRadial;
          gs[s] += (p.dvec ? t.y1[l] * t.angle.dc * t.k[s] : T(0)) + t.y[l] * t.dk[s];
        }
      }
      if (gv) {
        for (int i = 0; i < 3; ++i) gv[i] += t.dgamma * t.angle.ga[i] + (p.dvec ? t.gamma * t.angle.dga[i] : T(0));
        const int64_t q = pos[k];
        if (InRange(q, a.T)) {
          coef[2 * q] = t.gamma;
          coef[2 * q + 1] = t.dgamma;
        }
      }
      if (out & kOutWa) {
        for (int s = 0; s < kBasis; ++s) {
          const T dqs = p.dq ? t.dq[s] : T(0), qs = t.q[s];
          for (int64_t m = 0; m < M; ++m) pwa[(s * M + m) * n_partials] += dqs * t.h[m] + qs * t.dh[m];
        }
      }
      if ((out & kOutWb) && (p.h || p.dh)) {
        for (int64_t c = 0; c < C; ++c) {
          const T u = p.h ? g[c] * x[c] : T(0);
          const T du = (dg && x ? dg[c] * x[c] : T(0)) + (g && dx ? g[c] * dx[c] : T(0));
          for (int64_t m = 0; m < M; ++m)
            pwb[(c * M + m) * n_partials] += du * t.mid[m] + (p.dmid ? u * t.dmid[m] : T(0));
        }
      }
    }
  }
}

// out[w] = sum over the partials of weight w, in thread order.
template <typename T>
__global__ void SumPartialsKernel(const T* partials, int64_t n_partials, int64_t n_weights, int64_t first, T* out) {
  for (int64_t w = ThreadIndex(); w < n_weights; w += ThreadCount()) {
    const T* p = partials + (first + w) * n_partials;
    T total = T(0);
    for (int64_t i = 0; i < n_partials; ++i) total += p[i];
    out[w] = total;
  }
}

template <typename T, typename I>
__global__ void DimenetOutKernel(DimenetArgs a, const I* offsets, const I* nbr, DimenetOperands<T> o, DimenetPlan p,
                                 const T* coef, T* gout, T* gvec) {
  const int64_t C = a.C, M = a.M;
  T scratch[4 * kMaxMid];
  TripletTerms<T> t;
  BindScratch(t, scratch, M);
  for (int64_t r = ThreadIndex(); r < a.E; r += ThreadCount()) {
    T* go = gout ? gout + C * r : nullptr;
    T* gv = gvec ? gvec + 3 * r : nullptr;
    if (go)
      for (int64_t c = 0; c < C; ++c) go[c] = T(0);
    if (gv)
      for (int i = 0; i < 3; ++i) gv[i] = T(0);
    const int64_t begin = Clamp(offsets[r], 0, a.T), end = Clamp(offsets[r + 1], begin, a.T);
    for (int64_t k = begin; k < end; ++k) {
      const int64_t e_in = nbr[k];
      if (!InRange(e_in, a.E)) continue;
      TripletAngular(o, p, e_in, r, t);
      if (go) {
        TripletCore(o, p, e_in, r, false, t);
        const T* x = o.emb ? o.emb + C * e_in : nullptr;
        const T* dx = o.demb ? o.demb + C * e_in : nullptr;
        for (int64_t c = 0; c < C; ++c) {
          T proj, dproj;
          ProjOf(o, p, t, c, proj, dproj);
          go[c] += (dx ? dx[c] * proj : T(0)) + (x ? x[c] * dproj : T(0));
        }
      }
      if (gv) {
        const T gamma = coef[2 * k], dgamma = coef[2 * k + 1];
        for (int i = 0; i < 3; ++i) gv[i] += dgamma * t.angle.gb[i] + (p.dvec ? gamma * t.angle.dgb[i] : T(0));
      }
    }
  }
}

template <typename T, typename I>
ffi::Error InTyped(cudaStream_t stream, ffi::ScratchAllocator& scratch, const DimenetArgs& a,
                   const ffi::AnyBuffer& offsets, const ffi::AnyBuffer& nbr, const ffi::AnyBuffer& pos,
                   const ffi::AnyBuffer* ops, ffi::AnyBuffer* res) {
  const DimenetOperands<T> o = OperandsOf<T>(ops, a);
  const DimenetPlan p = MakePlan(o, a.outputs);
  const int64_t out = a.outputs;
  const bool backward = (out & (kOutSbf | kOutVec | kOutWa)) != 0 || ((out & kOutWb) && (p.h || p.dh));
  const bool want_w = (out & (kOutWa | kOutWb)) != 0;
  const int64_t n_w = (kBasis + a.C) * a.M;
  T* partials = nullptr;
  if (want_w) {
    auto mem = scratch.Allocate(sizeof(T) * n_w * kWeightThreads, alignof(T));
    if (!mem.has_value()) return ffi::Error::Internal("jaxgraphops: dimenet_in: no scratch for the weight partials");
    partials = static_cast<T*>(*mem);
  }
  auto ptr = [&](int i, int64_t bit) { return (out & bit) ? res[i].typed_data<T>() : nullptr; };
  const int64_t threads = want_w ? kWeightThreads : a.E;
  if (auto err = Launch("dimenet_in", DimenetInKernel<T, I>, threads, stream, a, offsets.typed_data<I>(),
                        nbr.typed_data<I>(), pos.typed_data<I>(), o, p, backward, ptr(0, kOutVec), ptr(1, kOutSbf),
                        ptr(2, kOutEmb), ptr(5, kOutVec), partials, want_w ? kWeightThreads : int64_t(0));
      err.failure())
    return err;
  if (out & kOutWa) {
    if (auto err = Launch("dimenet_in (W_a)", SumPartialsKernel<T>, kBasis * a.M, stream,
                          static_cast<const T*>(partials), kWeightThreads, kBasis * a.M, int64_t(0),
                          res[3].typed_data<T>());
        err.failure())
      return err;
  }
  if (out & kOutWb) {
    if (auto err = Launch("dimenet_in (W_b)", SumPartialsKernel<T>, a.C * a.M, stream, static_cast<const T*>(partials),
                          kWeightThreads, a.C * a.M, kBasis * a.M, res[4].typed_data<T>());
        err.failure())
      return err;
  }
  return ffi::Error::Success();
}

ffi::Error DimenetInCuda(cudaStream_t stream, ffi::ScratchAllocator scratch, ffi::AnyBuffer offsets,
                         ffi::AnyBuffer nbr, ffi::AnyBuffer pos, ffi::AnyBuffer vec, ffi::AnyBuffer sbf,
                         ffi::AnyBuffer emb, ffi::AnyBuffer wa, ffi::AnyBuffer wb, ffi::AnyBuffer grad,
                         ffi::AnyBuffer dvec, ffi::AnyBuffer dsbf, ffi::AnyBuffer demb, ffi::AnyBuffer dwa,
                         ffi::AnyBuffer dwb, ffi::AnyBuffer dgrad, ffi::Result<ffi::AnyBuffer> r_vec,
                         ffi::Result<ffi::AnyBuffer> r_sbf, ffi::Result<ffi::AnyBuffer> r_emb,
                         ffi::Result<ffi::AnyBuffer> r_wa, ffi::Result<ffi::AnyBuffer> r_wb,
                         ffi::Result<ffi::AnyBuffer> r_coef, int64_t outputs) {
  const ffi::AnyBuffer ops[12] = {vec, sbf, emb, wa, wb, grad, dvec, dsbf, demb, dwa, dwb, dgrad};
  auto args = CheckDimenet("dimenet_in", offsets, nbr, ops, outputs);
  if (args.has_error()) return args.error();
  const DimenetArgs& a = *args;
  if (a.M > kMaxMid) return InvalidArgument("dimenet_in: n_mid above 32 is not supported on CUDA");
  if (pos.element_type() != offsets.element_type() || static_cast<int64_t>(pos.element_count()) != a.T)
    return InvalidArgument("dimenet_in: positions must be [n_triplets] of the index dtype");
  ffi::AnyBuffer res[6] = {*r_vec, *r_sbf, *r_emb, *r_wa, *r_wb, *r_coef};
  const int64_t sizes[6] = {3 * a.E, kBasis * a.E, a.C * a.E, kBasis * a.M, a.C * a.M, 2 * a.T};
  const int64_t bits[6] = {kOutVec, kOutSbf, kOutEmb, kOutWa, kOutWb, kOutVec};
  const char* names[6] = {"vec", "sbf_rad", "emb", "W_a", "W_b", "coef"};
  for (int i = 0; i < 6; ++i)
    if (auto err = CheckResult("dimenet_in", names[i], res[i], (outputs & bits[i]) != 0, sizes[i], vec.element_type());
        err.failure())
      return err;
  return DispatchTypes(vec.element_type(), offsets.element_type(), [&](auto t, auto i) {
    return InTyped<decltype(t), decltype(i)>(stream, scratch, a, offsets, nbr, pos, ops, res);
  });
}

ffi::Error DimenetOutCuda(cudaStream_t stream, ffi::AnyBuffer offsets, ffi::AnyBuffer nbr, ffi::AnyBuffer vec,
                          ffi::AnyBuffer sbf, ffi::AnyBuffer emb, ffi::AnyBuffer wa, ffi::AnyBuffer wb,
                          ffi::AnyBuffer grad, ffi::AnyBuffer dvec, ffi::AnyBuffer dsbf, ffi::AnyBuffer demb,
                          ffi::AnyBuffer dwa, ffi::AnyBuffer dwb, ffi::AnyBuffer dgrad, ffi::AnyBuffer coef,
                          ffi::Result<ffi::AnyBuffer> r_grad, ffi::Result<ffi::AnyBuffer> r_vec, int64_t outputs) {
  const ffi::AnyBuffer ops[12] = {vec, sbf, emb, wa, wb, grad, dvec, dsbf, demb, dwa, dwb, dgrad};
  auto args = CheckDimenet("dimenet_out", offsets, nbr, ops, outputs);
  if (args.has_error()) return args.error();
  const DimenetArgs& a = *args;
  if (a.M > kMaxMid) return InvalidArgument("dimenet_out: n_mid above 32 is not supported on CUDA");
  if ((outputs & ~(kOutGrad | kOutVec)) != 0) return InvalidArgument("dimenet_out: computes only grad and vec");
  const bool want_vec = (outputs & kOutVec) != 0;
  if (coef.element_type() != vec.element_type() || static_cast<int64_t>(coef.element_count()) != (want_vec ? 2 * a.T : 0))
    return InvalidArgument("dimenet_out: coef must be [n_triplets, 2] when vec is requested");
  if (auto err = CheckResult("dimenet_out", "grad", *r_grad, (outputs & kOutGrad) != 0, a.C * a.E, vec.element_type());
      err.failure())
    return err;
  if (auto err = CheckResult("dimenet_out", "vec", *r_vec, want_vec, 3 * a.E, vec.element_type()); err.failure())
    return err;
  return DispatchTypes(vec.element_type(), offsets.element_type(), [&](auto t, auto i) {
    using T = decltype(t);
    using I = decltype(i);
    const DimenetOperands<T> o = OperandsOf<T>(ops, a);
    return Launch("dimenet_out", DimenetOutKernel<T, I>, a.E, stream, a, offsets.typed_data<I>(), nbr.typed_data<I>(), o,
                  MakePlan(o, outputs), want_vec ? coef.typed_data<T>() : static_cast<const T*>(nullptr),
                  (outputs & kOutGrad) ? r_grad->typed_data<T>() : static_cast<T*>(nullptr),
                  want_vec ? r_vec->typed_data<T>() : static_cast<T*>(nullptr));
  });
}

}  // namespace
}  // namespace jgo

using AnyBuf = xla::ffi::AnyBuffer;

XLA_FFI_DEFINE_HANDLER_SYMBOL(JgoDimenetInCuda, jgo::DimenetInCuda,
                              xla::ffi::Ffi::Bind()
                                  .Ctx<xla::ffi::PlatformStream<cudaStream_t>>()
                                  .Ctx<xla::ffi::ScratchAllocator>()
                                  .Arg<AnyBuf>()  // in_offsets [E+1]
                                  .Arg<AnyBuf>()  // in_out [T]
                                  .Arg<AnyBuf>()  // in_pos [T]
                                  .Arg<AnyBuf>()  // vec
                                  .Arg<AnyBuf>()  // sbf_rad
                                  .Arg<AnyBuf>()  // emb
                                  .Arg<AnyBuf>()  // W_a
                                  .Arg<AnyBuf>()  // W_b
                                  .Arg<AnyBuf>()  // grad
                                  .Arg<AnyBuf>()  // direction: vec
                                  .Arg<AnyBuf>()  // direction: sbf_rad
                                  .Arg<AnyBuf>()  // direction: emb
                                  .Arg<AnyBuf>()  // direction: W_a
                                  .Arg<AnyBuf>()  // direction: W_b
                                  .Arg<AnyBuf>()  // direction: grad
                                  .Ret<AnyBuf>()  // vec component, e_in part
                                  .Ret<AnyBuf>()  // sbf_rad component
                                  .Ret<AnyBuf>()  // emb component
                                  .Ret<AnyBuf>()  // W_a component
                                  .Ret<AnyBuf>()  // W_b component
                                  .Ret<AnyBuf>()  // coef [T,2] or [0]
                                  .Attr<int64_t>("outputs"));

XLA_FFI_DEFINE_HANDLER_SYMBOL(JgoDimenetOutCuda, jgo::DimenetOutCuda,
                              xla::ffi::Ffi::Bind()
                                  .Ctx<xla::ffi::PlatformStream<cudaStream_t>>()
                                  .Arg<AnyBuf>()  // out_offsets [E+1]
                                  .Arg<AnyBuf>()  // out_in [T]
                                  .Arg<AnyBuf>()  // vec
                                  .Arg<AnyBuf>()  // sbf_rad
                                  .Arg<AnyBuf>()  // emb
                                  .Arg<AnyBuf>()  // W_a
                                  .Arg<AnyBuf>()  // W_b
                                  .Arg<AnyBuf>()  // grad
                                  .Arg<AnyBuf>()  // direction: vec
                                  .Arg<AnyBuf>()  // direction: sbf_rad
                                  .Arg<AnyBuf>()  // direction: emb
                                  .Arg<AnyBuf>()  // direction: W_a
                                  .Arg<AnyBuf>()  // direction: W_b
                                  .Arg<AnyBuf>()  // direction: grad
                                  .Arg<AnyBuf>()  // coef [T,2] or [0]
                                  .Ret<AnyBuf>()  // grad component
                                  .Ret<AnyBuf>()  // vec component, e_out part
                                  .Attr<int64_t>("outputs"));
