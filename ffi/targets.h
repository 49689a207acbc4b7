// Every FFI target, as X(target name, symbol stem): on each platform its handler is the symbol
// Jgo<Stem>Cpu, Jgo<Stem>Cuda or Jgo<Stem>CudaEmulation (handlers.h), registered by module.cc (CPU,
// emulated) and by the CUDA plugin (cuda_plugin.cc).
#pragma once

#define JGO_TARGETS(X)                             \
  X(jgo_spmm, Spmm)                                \
  X(jgo_sddmm, Sddmm)                              \
  X(jgo_edge_softmax, EdgeSoftmax)                 \
  X(jgo_gat_fwd, GatFwd)                           \
  X(jgo_gat_bwd_dst, GatBwdDst)                    \
  X(jgo_gat_bwd_src, GatBwdSrc)                    \
  X(jgo_gatv2_fwd, Gatv2Fwd)                       \
  X(jgo_gatv2_bwd_dst, Gatv2BwdDst)                \
  X(jgo_gatv2_bwd_src, Gatv2BwdSrc)                \
  X(jgo_mha_simple_fwd, MhaSimpleFwd)              \
  X(jgo_mha_simple_bwd_dst, MhaSimpleBwdDst)       \
  X(jgo_mha_simple_bwd_src, MhaSimpleBwdSrc)       \
  X(jgo_gno_fwd, GnoFwd)                           \
  X(jgo_gno_bwd_src, GnoBwdSrc)                    \
  X(jgo_gno_bwd_dst, GnoBwdDst)                    \
  X(jgo_dimenet_in, DimenetIn)                     \
  X(jgo_dimenet_out, DimenetOut)                   \
  X(jgo_check_edges, CheckEdges)                   \
  X(jgo_update_efeat_fwd, UpdateEfeatFwd)          \
  X(jgo_update_efeat_bwd_src, UpdateEfeatBwdSrc)   \
  X(jgo_update_efeat_bwd_dst, UpdateEfeatBwdDst)   \
  X(jgo_update_efeat_bwd_edge, UpdateEfeatBwdEdge) \
  X(jgo_dmpnn_fwd, DmpnnFwd)                       \
  X(jgo_dmpnn_bwd, DmpnnBwd)                       \
  X(jgo_hg_basis_norm, HgBasisNorm)                \
  X(jgo_hg_basis_fwd, HgBasisFwd)                  \
  X(jgo_hg_basis_bwd_src, HgBasisBwdSrc)           \
  X(jgo_sample_neighbors, SampleNeighbors)        \
  X(jgo_pool_sorted, PoolSorted)                   \
  X(jgo_pool_sorted_bwd, PoolSortedBwd)

// Targets with a CPU handler only (Jgo<Stem>Cpu), registered for the CPU platform whichever
// handlers serve the targets above: on a GPU these ops are XLA's own.
#define JGO_HOST_TARGETS(X)                \
  X(jgo_rows_dot, RowsDot)                 \
  X(jgo_sample_relabel, SampleRelabel)
