// A graph structure's int32 view for kernels compiled for int32 indices only (the CUDA twin of the CPU walks'
// Int32Indices, cpu/row_parallel.h): int32 buffers as they are; int64 ones copied to int32 in scratch by one
// launch. Offsets are clamped into [0, n_edges], as every walk clamps them; a neighbour or edge id outside
// [0, 2^31) becomes -1, which the kernels skip as out of range, as they skip the wide id itself (it never wraps
// onto another node or edge). A file whose handlers take it instantiates its kernels once, not per index type.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "cuda/chunk_walk.cuh"
#include "cuda/launch.cuh"

namespace jgo {
inline namespace JGO_CUDA_PLATFORM {

struct Int32Graph {
  const int32_t* offsets;
  const int32_t* nbr;
  const int32_t* eid;
};

// out[0, n_offsets) = offsets clamped into [0, n_edges]; then the n_edges neighbour ids, then the n_edges edge ids,
// each id outside [0, 2^31) as -1.
// (static: a kernel of its own in each file that includes it)
static __global__ void __launch_bounds__(kBlock)
    NarrowGraphKernel(const int64_t* __restrict__ offsets, const int64_t* __restrict__ nbr,
                      const int64_t* __restrict__ eid, int64_t n_offsets, int64_t n_edges, int32_t* __restrict__ out) {
  for (int64_t k = ThreadIndex(); k < n_offsets + 2 * n_edges; k += ThreadCount()) {
    if (k < n_offsets) {
      out[k] = static_cast<int32_t>(Clamp(offsets[k], 0, n_edges));
    } else {
      const int64_t i = k - n_offsets, id = i < n_edges ? nbr[i] : eid[i - n_edges];
      out[k] = InRange(id, kMaxIndex + 1) ? static_cast<int32_t>(id) : -1;
    }
  }
}

// The int32 view of (offsets, nbr, eid), int32 or int64 alike (nbr and eid of one length, below 2^31: EngineSizes).
inline ffi::ErrorOr<Int32Graph> Int32GraphOf(const char* name, cudaStream_t stream, CudaScratch& scratch,
                                             ffi::AnyBuffer offsets, ffi::AnyBuffer nbr, ffi::AnyBuffer eid) {
  if (offsets.element_type() == ffi::DataType::S32)
    return Int32Graph{offsets.typed_data<int32_t>(), nbr.typed_data<int32_t>(), eid.typed_data<int32_t>()};
  const int64_t n_offsets = static_cast<int64_t>(offsets.element_count());
  const int64_t n_edges = static_cast<int64_t>(nbr.element_count());
  if (auto err = EngineSizes(name, {n_offsets, n_edges}); err.failure()) return ffi::Unexpected(std::move(err));
  const size_t bytes = sizeof(int32_t) * static_cast<size_t>(n_offsets + 2 * n_edges + 1);
  auto mem = ScratchBytes(scratch, bytes, 256);
  if (!mem.has_value()) {
    return ffi::Unexpected(ffi::Error::Internal(std::string("jaxgraphops: ") + name + ": out of scratch memory (" +
                                                std::to_string(bytes) + " bytes: an int64 graph's int32 copy)"));
  }
  int32_t* out = static_cast<int32_t*>(*mem);
  if (auto err = Launch(name, NarrowGraphKernel, n_offsets + 2 * n_edges, stream, offsets.typed_data<int64_t>(),
                        nbr.typed_data<int64_t>(), eid.typed_data<int64_t>(), n_offsets, n_edges, out);
      err.failure())
    return ffi::Unexpected(std::move(err));
  return Int32Graph{out, out + n_offsets, out + n_offsets + n_edges};
}

}  // namespace JGO_CUDA_PLATFORM
}  // namespace jgo
