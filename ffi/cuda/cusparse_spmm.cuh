// cuSPARSE's SpMM behind jgo_spmm's sums where it applies, chosen at run time by JGO_SPMM:
//   engine    the chunked row-walk engine (walk_reduce.cuh) for every call;
//   cusparse  cusparseSpMM with CUSPARSE_SPMM_CSR_ALG3 (the one CSR algorithm its documentation calls bitwise
//             deterministic) for a sum of copy_u or u_mul_e with one weight per edge, no mask, float32/64 node
//             rows without broadcasting, on a checked graph; the engine for every other call, and for all when
//             libcusparse cannot be loaded;
//   auto      (the default) the engine, until a GPU measurement shows ALG3 faster and bitwise reproducible on the
//             benchmark shapes (BENCHMARKS.md): then auto will pick it for those.
// libcusparse is loaded at run time (dlopen: the nvidia-cusparse wheel's library, which JAX's CUDA plugin already
// loads), so the plugin gains no link-time dependency; the few entry points and enum values used are declared
// here. The emulated CUDA platform has no cuSPARSE: there every call runs the engine. The matrix's nonzero count
// is read from the device (one stream synchronisation per call on this opt-in path: padded graphs end their rows
// before their last edge); the workspace comes from the FFI scratch allocator.
#pragma once

#include <cuda_runtime.h>

#include <cctype>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "cuda/launch.cuh"
#include "cuda/walk_reduce.cuh"

#ifndef JGO_CUDA_EMULATION
#include <dlfcn.h>

#include <mutex>
#endif

namespace jgo {
inline namespace JGO_CUDA_PLATFORM {

enum class SpmmBackend { kEngine, kCusparse };

// JGO_SPMM, read at each call; an unknown value is an error naming the variable.
inline ffi::ErrorOr<SpmmBackend> SpmmBackendChoice() {
  const char* raw = std::getenv("JGO_SPMM");
  std::string v = raw ? raw : "";
  std::string s;
  for (char c : v)
    if (!std::isspace(static_cast<unsigned char>(c)))
      s += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (s.empty() || s == "auto" || s == "engine") return SpmmBackend::kEngine;
  if (s == "cusparse") return SpmmBackend::kCusparse;
  return ffi::Unexpected(ffi::Error::InvalidArgument("jaxgraphops: JGO_SPMM='" + v +
                                                     "' is not one of auto, engine, cusparse"));
}

// Whether cuSPARSE computes this reduce (see the top of the file). `weights`: u_mul_e's edge operand is one value
// per edge.
template <typename T, typename I>
bool CusparseApplies(const ReduceProblem<T, I>& p, bool checked) {
  const bool weights = p.op == Op::kMul && p.edge_strides.s0 == 0 && p.edge_strides.s1 == 0 && p.edge_strides.s2 == 0;
  return checked && p.reduce == Reduce::kSum && p.mask == Mask::kNone && (p.op == Op::kCopyNode || weights) &&
         Contiguous(p.node_strides, p.dims) && p.node_len == p.dims.size() && p.n_edges > 0;
}

#ifndef JGO_CUDA_EMULATION

// The entry points of libcusparse used here (cusparse.h's generic API) and their enum values.
struct Cusparse {
  using Status = int;
  using Handle = void*;
  using Mat = void*;
  enum : int { kIndex32 = 2, kIndex64 = 3, kBaseZero = 0, kR32F = 0, kR64F = 1, kOrderRow = 2, kOpN = 0,
               kCsrAlg3 = 12 };
  Status (*create)(Handle*) = nullptr;
  Status (*set_stream)(Handle, cudaStream_t) = nullptr;
  Status (*create_csr)(Mat*, int64_t, int64_t, int64_t, void*, void*, void*, int, int, int, int) = nullptr;
  Status (*create_dn_mat)(Mat*, int64_t, int64_t, int64_t, void*, int, int) = nullptr;
  Status (*destroy_sp_mat)(Mat) = nullptr;
  Status (*destroy_dn_mat)(Mat) = nullptr;
  Status (*buffer_size)(Handle, int, int, const void*, Mat, Mat, const void*, Mat, int, int, size_t*) = nullptr;
  Status (*preprocess)(Handle, int, int, const void*, Mat, Mat, const void*, Mat, int, int, void*) = nullptr;
  Status (*spmm)(Handle, int, int, const void*, Mat, Mat, const void*, Mat, int, int, void*) = nullptr;

  bool loaded() const { return spmm != nullptr; }

  // The library, loaded once per process (nothing when it is not there).
  static const Cusparse& Get() {
    static const Cusparse lib = [] {
      Cusparse c;
      void* so = nullptr;
      for (const char* name : {"libcusparse.so.12", "libcusparse.so.13", "libcusparse.so"})
        if ((so = dlopen(name, RTLD_NOW | RTLD_LOCAL)) != nullptr) break;
      if (so == nullptr) return c;
      auto sym = [so](auto& fn, const char* name) {
        fn = reinterpret_cast<std::decay_t<decltype(fn)>>(dlsym(so, name));
      };
      sym(c.create, "cusparseCreate");
      sym(c.set_stream, "cusparseSetStream");
      sym(c.create_csr, "cusparseCreateCsr");
      sym(c.create_dn_mat, "cusparseCreateDnMat");
      sym(c.destroy_sp_mat, "cusparseDestroySpMat");
      sym(c.destroy_dn_mat, "cusparseDestroyDnMat");
      sym(c.buffer_size, "cusparseSpMM_bufferSize");
      sym(c.preprocess, "cusparseSpMM_preprocess");
      sym(c.spmm, "cusparseSpMM");
      const bool all = c.create && c.set_stream && c.create_csr && c.create_dn_mat && c.destroy_sp_mat &&
                       c.destroy_dn_mat && c.buffer_size && c.preprocess && c.spmm;
      return all ? c : Cusparse{};
    }();
    return lib;
  }
};

// The CSR values: each position's edge weight (w[eid[k] * stride]), or 1 without weights.
template <typename T, typename I>
__global__ void __launch_bounds__(kBlock) CsrValuesKernel(const I* __restrict__ eid, const T* __restrict__ w,
                                                          int64_t stride, int64_t n, int64_t n_edges,
                                                          T* __restrict__ values) {
  for (int64_t k = ThreadIndex(); k < n; k += ThreadCount()) {
    if (w == nullptr) {
      values[k] = T(1);
    } else {
      const int64_t e = eid[k];
      values[k] = e >= 0 && e < n_edges ? w[e * stride] : T(0);
    }
  }
}

// Runs the reduce on cuSPARSE (ALG3); the caller checked CusparseApplies and the library.
template <typename T, typename I>
ffi::Error CusparseSum(const char* name, cudaStream_t stream, CudaScratch& scratch, const ReduceProblem<T, I>& p) {
  const Cusparse& cs = Cusparse::Get();
  auto fail = [name](const char* what, int status) {
    return ffi::Error::Internal(std::string("jaxgraphops: ") + name + ": cuSPARSE " + what + " failed (status " +
                                std::to_string(status) + ")");
  };
  thread_local Cusparse::Handle handle = nullptr;
  if (handle == nullptr) {
    if (int s = cs.create(&handle); s != 0) return fail("cusparseCreate", s);
  }
  if (int s = cs.set_stream(handle, stream); s != 0) return fail("cusparseSetStream", s);
  I nnz = 0;  // where the rows end: a padded graph's last edges are in no row
  if (auto e = Status(name, cudaMemcpyAsync(&nnz, p.offsets + p.n_rows, sizeof(I), cudaMemcpyDeviceToHost, stream));
      e.failure())
    return e;
  if (auto e = Status(name, cudaStreamSynchronize(stream)); e.failure()) return e;
  const int64_t F = p.dims.size();
  auto mem = ScratchBytes(scratch, static_cast<size_t>(std::max<int64_t>(int64_t(nnz), 1) * int64_t(sizeof(T))), 256);
  if (!mem.has_value()) return ffi::Error::Internal(std::string("jaxgraphops: ") + name + ": out of scratch memory");
  T* values = static_cast<T*>(*mem);
  const T* w = p.op == Op::kMul ? p.edge : nullptr;
  if (auto e = Launch(name, CsrValuesKernel<T, I>, int64_t(nnz), stream, p.eid, w, p.edge_len, int64_t(nnz),
                      p.n_edges, values);
      e.failure())
    return e;
  const int index = sizeof(I) == 8 ? Cusparse::kIndex64 : Cusparse::kIndex32;
  const int type = sizeof(T) == 8 ? Cusparse::kR64F : Cusparse::kR32F;
  Cusparse::Mat a = nullptr, b = nullptr, c = nullptr;
  auto done = [&](ffi::Error err) {
    if (a) cs.destroy_sp_mat(a);
    if (b) cs.destroy_dn_mat(b);
    if (c) cs.destroy_dn_mat(c);
    return err;
  };
  if (int s = cs.create_csr(&a, p.n_rows, p.node_rows, int64_t(nnz), const_cast<I*>(p.offsets), const_cast<I*>(p.nbr),
                            values, index, index, Cusparse::kBaseZero, type);
      s != 0)
    return done(fail("cusparseCreateCsr", s));
  if (int s = cs.create_dn_mat(&b, p.node_rows, F, F, const_cast<T*>(p.node), type, Cusparse::kOrderRow); s != 0)
    return done(fail("cusparseCreateDnMat", s));
  if (int s = cs.create_dn_mat(&c, p.n_rows, F, F, p.out, type, Cusparse::kOrderRow); s != 0)
    return done(fail("cusparseCreateDnMat", s));
  const T one = T(1), zero = T(0);
  size_t bytes = 0;
  if (int s = cs.buffer_size(handle, Cusparse::kOpN, Cusparse::kOpN, &one, a, b, &zero, c, type, Cusparse::kCsrAlg3,
                             &bytes);
      s != 0)
    return done(fail("cusparseSpMM_bufferSize", s));
  void* buffer = nullptr;
  if (bytes > 0) {
    auto buf = ScratchBytes(scratch, bytes, 256);
    if (!buf.has_value())
      return done(ffi::Error::Internal(std::string("jaxgraphops: ") + name + ": out of scratch memory"));
    buffer = *buf;
  }
  if (int s = cs.preprocess(handle, Cusparse::kOpN, Cusparse::kOpN, &one, a, b, &zero, c, type, Cusparse::kCsrAlg3,
                            buffer);
      s != 0)
    return done(fail("cusparseSpMM_preprocess", s));
  if (int s = cs.spmm(handle, Cusparse::kOpN, Cusparse::kOpN, &one, a, b, &zero, c, type, Cusparse::kCsrAlg3, buffer);
      s != 0)
    return done(fail("cusparseSpMM", s));
  return done(ffi::Error::Success());
}

#endif  // JGO_CUDA_EMULATION

// Runs the reduce on cuSPARSE when JGO_SPMM asks for it, it applies and the library is there (`ran` says
// whether it did); an unknown JGO_SPMM is an error.
template <typename T, typename I>
ffi::Error MaybeCusparse(const char* name, cudaStream_t stream, CudaScratch& scratch, const ReduceProblem<T, I>& p,
                         bool checked, bool& ran) {
  ran = false;
  auto backend = SpmmBackendChoice();
  if (backend.has_error()) return backend.error();
  if (*backend != SpmmBackend::kCusparse || !CusparseApplies(p, checked)) return ffi::Error::Success();
#ifdef JGO_CUDA_EMULATION
  (void)name;
  (void)stream;
  (void)scratch;
  return ffi::Error::Success();  // no cuSPARSE on the emulated platform: the engine runs
#else
  if (!Cusparse::Get().loaded()) return ffi::Error::Success();
  ran = true;
  return CusparseSum(name, stream, scratch, p);
#endif
}

}  // namespace JGO_CUDA_PLATFORM
}  // namespace jgo
