// CUDA handler of jgo_check_edges: the id check of a traced edge list (jgo/edge_list_args.h).
//
// One grid-stride pass per array records the first bad position with atomicMin (and copies the
// ids when XLA did not alias an output to its input); the handler then waits for the two
// positions, since the error must be returned from the call. Not command-buffer compatible.
#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/launch.cuh"
#include "handlers.h"
#include "jgo/edge_list_args.h"

namespace jgo {
namespace {

using Pos = unsigned long long;  // atomicMin's 64-bit type

template <typename I>
__global__ void FirstBadIdKernel(const I* x, I* out, int64_t count, int64_t n, Pos* first) {
  for (int64_t i = ThreadIndex(); i < count; i += ThreadCount()) {
    const I v = x[i];
    if (out != x) out[i] = v;
    if (!IdInRange(v, n)) atomicMin(first, static_cast<Pos>(i));
  }
}

template <typename I>
ffi::Error CheckTyped(cudaStream_t stream, CudaScratch& scratch, const EdgeListArgs& a, ffi::AnyBuffer src,
                      ffi::AnyBuffer dst, ffi::Result<ffi::AnyBuffer> src_out, ffi::Result<ffi::AnyBuffer> dst_out) {
  constexpr const char* kName = "jgo_check_edges";
  if (a.count == 0) return ffi::Error::Success();
  auto mem = ScratchBytes(scratch, 2 * sizeof(Pos), alignof(Pos));
  if (!mem.has_value()) return ffi::Error::Internal("jaxgraphops: check_edges: out of scratch memory");
  Pos* first = static_cast<Pos*>(*mem);
  Pos host[2] = {static_cast<Pos>(a.count), static_cast<Pos>(a.count)};  // count: no bad id
  if (auto e = Status(kName, cudaMemcpyAsync(first, host, sizeof(host), cudaMemcpyHostToDevice, stream)); e.failure())
    return e;
  const I* s = static_cast<const I*>(src.untyped_data());
  const I* d = static_cast<const I*>(dst.untyped_data());
  if (auto e = Launch(kName, FirstBadIdKernel<I>, a.count, stream, s, static_cast<I*>(src_out->untyped_data()),
                      a.count, a.n_src, first);
      e.failure())
    return e;
  if (auto e = Launch(kName, FirstBadIdKernel<I>, a.count, stream, d, static_cast<I*>(dst_out->untyped_data()),
                      a.count, a.n_dst, first + 1);
      e.failure())
    return e;
  if (auto e = Status(kName, cudaMemcpyAsync(host, first, sizeof(host), cudaMemcpyDeviceToHost, stream)); e.failure())
    return e;
  if (auto e = Status(kName, cudaStreamSynchronize(stream)); e.failure()) return e;
  const bool src_bad = host[0] < static_cast<Pos>(a.count);
  if (!src_bad && host[1] >= static_cast<Pos>(a.count)) return ffi::Error::Success();
  const int64_t pos = static_cast<int64_t>(src_bad ? host[0] : host[1]);
  I id = 0;
  if (auto e = Status(kName, cudaMemcpy(&id, (src_bad ? s : d) + pos, sizeof(I), cudaMemcpyDeviceToHost)); e.failure())
    return e;
  return EdgeIdError(a, src_bad ? "src" : "dst", id, pos);
}

ffi::Error CheckEdgesCuda(cudaStream_t stream, CudaScratch scratch, ffi::AnyBuffer src, ffi::AnyBuffer dst,
                          ffi::Result<ffi::AnyBuffer> src_out, ffi::Result<ffi::AnyBuffer> dst_out, int64_t n_src,
                          int64_t n_dst) {
  auto a = CheckEdgeList(src, dst, *src_out, *dst_out, n_src, n_dst);
  if (!a.has_value()) return a.error();
  if (src.element_type() == ffi::DataType::S64)
    return CheckTyped<int64_t>(stream, scratch, *a, src, dst, src_out, dst_out);
  return CheckTyped<int32_t>(stream, scratch, *a, src, dst, src_out, dst_out);
}

}  // namespace
}  // namespace jgo

JGO_CUDA_HANDLER_NO_TRAITS(CheckEdges, jgo::CheckEdgesCuda, jgo::BindCheckEdges<jgo::CudaStream, jgo::CudaScratch>());
