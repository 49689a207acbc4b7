// CPU handler of jgo_sample_neighbors (jgo/sampling.h): uniform sampling of the in-edges of each
// seed, with or without replacement.
//
// Fixed chunks of seeds run on XLA's intra-op thread pool. A seed's sample is a function of the key
// and its position only (counter-based random numbers), so the result does not depend on the
// number of threads; each chunk records its first bad seed and the first chunk with one names it.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "cpu/handler.h"
#include "cpu/row_parallel.h"
#include "handlers.h"
#include "jgo/sampling.h"

namespace jgo {
namespace {

constexpr int64_t kSeedsPerTask = 256;

template <typename I>
ffi::Error SampleTyped(ffi::ThreadPool& pool, const SampleArgs& a, ffi::AnyBuffer offsets, ffi::AnyBuffer csc_src,
                       ffi::AnyBuffer csc_eid, ffi::AnyBuffer seeds, ffi::Result<ffi::AnyBuffer> src_out,
                       ffi::Result<ffi::AnyBuffer> eid_out) {
  const I* off = static_cast<const I*>(offsets.untyped_data());
  const I* src = static_cast<const I*>(csc_src.untyped_data());
  const I* eid = static_cast<const I*>(csc_eid.untyped_data());
  const I* sd = static_cast<const I*>(seeds.untyped_data());
  I* so = static_cast<I*>(src_out->untyped_data());
  I* eo = static_cast<I*>(eid_out->untyped_data());
  const int64_t chunks = (a.n_seeds + kSeedsPerTask - 1) / kSeedsPerTask;
  std::vector<int64_t> first_bad(chunks, -1);
  std::vector<int> first_status(chunks, kSampleOk);
  ParallelFor(pool, chunks, [&](int64_t c) {
    const int64_t s0 = c * kSeedsPerTask, s1 = std::min(a.n_seeds, s0 + kSeedsPerTask);
    for (int64_t s = s0; s < s1; ++s) {
      // the in-edges of the next seed are read at random: start fetching them now
      if (s + 1 < s1 && sd[s + 1] >= 0 && sd[s + 1] < a.n_dst) {
        const int64_t b = off[sd[s + 1]];
        if (b >= 0 && b < a.n_edges) {
          __builtin_prefetch(src + b, 0, 1);
          __builtin_prefetch(eid + b, 0, 1);
        }
      }
      const int status = SampleSeed(a, off, src, eid, sd, s, so + s * a.fanout, eo + s * a.fanout);
      if (status != kSampleOk && first_bad[c] < 0) {
        first_bad[c] = s;
        first_status[c] = status;
      }
    }
  });
  for (int64_t c = 0; c < chunks; ++c) {
    if (first_bad[c] >= 0) return SampleError(a, first_status[c], first_bad[c], sd[first_bad[c]]);
  }
  return ffi::Error::Success();
}

ffi::Error SampleNeighborsCpu(ffi::ThreadPool pool, ffi::AnyBuffer offsets, ffi::AnyBuffer csc_src,
                              ffi::AnyBuffer csc_eid, ffi::AnyBuffer seeds, ffi::AnyBuffer key,
                              ffi::Result<ffi::AnyBuffer> src_out, ffi::Result<ffi::AnyBuffer> eid_out, int64_t fanout,
                              bool replace, int64_t n_src) {
  auto a = CheckSample(offsets, csc_src, csc_eid, seeds, key, *src_out, *eid_out, fanout, replace, n_src);
  if (!a.has_value()) return a.error();
  const uint32_t* k = static_cast<const uint32_t*>(key.untyped_data());
  a->k0 = k[0];
  a->k1 = k[1];
  if (offsets.element_type() == ffi::DataType::S64)
    return SampleTyped<int64_t>(pool, *a, offsets, csc_src, csc_eid, seeds, src_out, eid_out);
  return SampleTyped<int32_t>(pool, *a, offsets, csc_src, csc_eid, seeds, src_out, eid_out);
}

}  // namespace
}  // namespace jgo

JGO_CPU_HANDLER(SampleNeighbors, jgo::SampleNeighborsCpu, jgo::BindSampleNeighbors<xla::ffi::ThreadPool>());
