// CPU handlers of jgo_sample_neighbors (jgo/sampling.h): uniform sampling of the in-edges of each
// seed, with or without replacement; and of jgo_sample_relabel (CPU only, below): the block's
// relabelling, which on other platforms is sort-based jax.numpy code with the same result.
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

// ---------------------------------------------------------------------------------------
// jgo_sample_relabel  (seeds [S], slot_src [E]) -> (local_src [E], input_nodes [N], csr_offsets [N+1],
//                                                    csr_eid [E]),  N = S + E
//
// The block's input nodes: the seeds as given, then each global id of slot_src (>= 0) not seen
// before, in slot order, then -1; local_src[e] is the local id of slot e's source (the first
// position holding its id; N - 1 for a padding slot), and csr_* group the slots by local source in
// slot order. One pass with an open-addressing hash map (XLA's CPU sort took ~25x longer). The
// jax.numpy twin is jaxgraphops/sampling.py's _relabel_block; the result is defined uniquely, so
// the two agree exactly.

template <typename I>
ffi::Error RelabelTyped(ffi::AnyBuffer seeds, ffi::AnyBuffer slot_src, ffi::Result<ffi::AnyBuffer> local_out,
                        ffi::Result<ffi::AnyBuffer> nodes_out, ffi::Result<ffi::AnyBuffer> offsets_out,
                        ffi::Result<ffi::AnyBuffer> eid_out) {
  const int64_t S = seeds.element_count(), E = slot_src.element_count(), N = S + E;
  const I* sd = static_cast<const I*>(seeds.untyped_data());
  const I* ss = static_cast<const I*>(slot_src.untyped_data());
  I* local = static_cast<I*>(local_out->untyped_data());
  I* nodes = static_cast<I*>(nodes_out->untyped_data());
  I* offsets = static_cast<I*>(offsets_out->untyped_data());
  I* csr_eid = static_cast<I*>(eid_out->untyped_data());
  int64_t cap = 16, bits = 4;
  while (cap < 2 * N) cap *= 2, ++bits;
  std::vector<I> keys(cap, static_cast<I>(-1)), vals(cap);
  const uint64_t mask = static_cast<uint64_t>(cap - 1);
  // the local id of global id v >= 0, inserting `fresh` if v is new (then returns -1)
  auto find_or_insert = [&](I v, I fresh) -> I {
    uint64_t h = (static_cast<uint64_t>(v) * 0x9E3779B97F4A7C15ull) >> (64 - bits);  // Fibonacci hashing
    for (;; ++h) {
      const uint64_t i = h & mask;
      if (keys[i] == v) return vals[i];
      if (keys[i] < 0) {
        keys[i] = v;
        vals[i] = fresh;
        return static_cast<I>(-1);
      }
    }
  };
  for (int64_t i = 0; i < S; ++i) {
    nodes[i] = sd[i];
    if (sd[i] >= 0) find_or_insert(sd[i], static_cast<I>(i));
  }
  int64_t next = S;
  for (int64_t e = 0; e < E; ++e) {
    const I v = ss[e];
    if (v < 0) {
      local[e] = static_cast<I>(N - 1);
      continue;
    }
    const I found = find_or_insert(v, static_cast<I>(next));
    if (found >= 0) {
      local[e] = found;
    } else {
      local[e] = static_cast<I>(next);
      nodes[next++] = v;
    }
  }
  std::fill(nodes + next, nodes + N, static_cast<I>(-1));
  std::fill(offsets, offsets + N + 1, static_cast<I>(0));
  for (int64_t e = 0; e < E; ++e) ++offsets[static_cast<int64_t>(local[e]) + 1];
  for (int64_t i = 0; i < N; ++i) offsets[i + 1] += offsets[i];
  std::vector<I> cursor(offsets, offsets + N);
  for (int64_t e = 0; e < E; ++e) csr_eid[cursor[local[e]]++] = static_cast<I>(e);
  return ffi::Error::Success();
}

ffi::Error SampleRelabelCpu(ffi::ThreadPool, ffi::AnyBuffer seeds, ffi::AnyBuffer slot_src, ffi::Result<ffi::AnyBuffer> local_out,
                            ffi::Result<ffi::AnyBuffer> nodes_out, ffi::Result<ffi::AnyBuffer> offsets_out,
                            ffi::Result<ffi::AnyBuffer> eid_out) {
  const auto it = seeds.element_type();
  const int64_t S = seeds.element_count(), E = slot_src.element_count();
  if (!IsIndexType(it) || slot_src.element_type() != it || local_out->element_type() != it ||
      nodes_out->element_type() != it || offsets_out->element_type() != it || eid_out->element_type() != it)
    return InvalidArgument("jgo_sample_relabel: seeds, slots and results must share an int32/int64 dtype");
  if (static_cast<int64_t>(local_out->element_count()) != E || static_cast<int64_t>(eid_out->element_count()) != E ||
      static_cast<int64_t>(nodes_out->element_count()) != S + E ||
      static_cast<int64_t>(offsets_out->element_count()) != S + E + 1)
    return InvalidArgument("jgo_sample_relabel: results must be [E], [S + E], [S + E + 1] and [E]");
  if (it == ffi::DataType::S64) return RelabelTyped<int64_t>(seeds, slot_src, local_out, nodes_out, offsets_out, eid_out);
  return RelabelTyped<int32_t>(seeds, slot_src, local_out, nodes_out, offsets_out, eid_out);
}

}  // namespace
}  // namespace jgo

JGO_CPU_HANDLER(SampleRelabel, jgo::SampleRelabelCpu,
                jgo::BindWith<xla::ffi::ThreadPool>()
                    .Arg<xla::ffi::AnyBuffer>()   // seeds
                    .Arg<xla::ffi::AnyBuffer>()   // slot sources
                    .Ret<xla::ffi::AnyBuffer>()   // local sources
                    .Ret<xla::ffi::AnyBuffer>()   // input nodes
                    .Ret<xla::ffi::AnyBuffer>()   // csr offsets
                    .Ret<xla::ffi::AnyBuffer>());  // csr edge ids
JGO_CPU_HANDLER(SampleNeighbors, jgo::SampleNeighborsCpu, jgo::BindSampleNeighbors<xla::ffi::ThreadPool>());
