// CUDA handler of jgo_sample_neighbors (jgo/sampling.h): one thread per seed runs the sampler the
// CPU handler runs (same counter-based random numbers, same Floyd's algorithm), so both platforms
// return the same sample bit for bit. The seed's output row is Floyd's working set: no scratch
// memory, no atomics.
//
// Malformed input (a seed outside [-1, n_dst), offsets out of order, a source or edge id out of
// range) is not reported: the seed's slots are left as padding (-1), and the kernel never reads or
// writes out of bounds. The CPU handler reports it.
#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/launch.cuh"
#include "handlers.h"
#include "jgo/sampling.h"

namespace jgo {
namespace {

template <typename I>
__global__ void SampleKernel(SampleArgs a, const I* offsets, const I* csc_src, const I* csc_eid, const I* seeds,
                             const uint32_t* key, I* src_out, I* eid_out) {
  a.k0 = key[0];
  a.k1 = key[1];
  for (int64_t s = ThreadIndex(); s < a.n_seeds; s += ThreadCount())
    SampleSeed(a, offsets, csc_src, csc_eid, seeds, s, src_out + s * a.fanout, eid_out + s * a.fanout);
}

template <typename I>
ffi::Error SampleTyped(cudaStream_t stream, const SampleArgs& a, ffi::AnyBuffer offsets, ffi::AnyBuffer csc_src,
                       ffi::AnyBuffer csc_eid, ffi::AnyBuffer seeds, ffi::AnyBuffer key,
                       ffi::Result<ffi::AnyBuffer> src_out, ffi::Result<ffi::AnyBuffer> eid_out) {
  if (a.fanout == 0) return ffi::Error::Success();
  return Launch("jgo_sample_neighbors", SampleKernel<I>, a.n_seeds, stream, a,
                static_cast<const I*>(offsets.untyped_data()), static_cast<const I*>(csc_src.untyped_data()),
                static_cast<const I*>(csc_eid.untyped_data()), static_cast<const I*>(seeds.untyped_data()),
                static_cast<const uint32_t*>(key.untyped_data()), static_cast<I*>(src_out->untyped_data()),
                static_cast<I*>(eid_out->untyped_data()));
}

ffi::Error SampleNeighborsCuda(cudaStream_t stream, ffi::AnyBuffer offsets, ffi::AnyBuffer csc_src,
                               ffi::AnyBuffer csc_eid, ffi::AnyBuffer seeds, ffi::AnyBuffer key,
                               ffi::Result<ffi::AnyBuffer> src_out, ffi::Result<ffi::AnyBuffer> eid_out,
                               int64_t fanout, bool replace, int64_t n_src) {
  auto a = CheckSample(offsets, csc_src, csc_eid, seeds, key, *src_out, *eid_out, fanout, replace, n_src);
  if (!a.has_value()) return a.error();
  if (offsets.element_type() == ffi::DataType::S64)
    return SampleTyped<int64_t>(stream, *a, offsets, csc_src, csc_eid, seeds, key, src_out, eid_out);
  return SampleTyped<int32_t>(stream, *a, offsets, csc_src, csc_eid, seeds, key, src_out, eid_out);
}

}  // namespace
}  // namespace jgo

JGO_CUDA_HANDLER(SampleNeighbors, jgo::SampleNeighborsCuda, jgo::BindSampleNeighbors<jgo::CudaStream>());
