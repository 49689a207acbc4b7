// The extension module: {FFI target name -> handler capsule} for each platform.
#include <nanobind/nanobind.h>

#include "handlers.h"

namespace nb = nanobind;

namespace {
template <typename Fn>
nb::capsule Capsule(Fn* fn) {
  return nb::capsule(reinterpret_cast<void*>(fn));
}
}  // namespace

NB_MODULE(_ext, m) {
  m.def("cpu_targets", [] {
    nb::dict d;
    d["jgo_spmm"] = Capsule(JgoSpmmCpu);
    d["jgo_sddmm"] = Capsule(JgoSddmmCpu);
    d["jgo_edge_softmax"] = Capsule(JgoEdgeSoftmaxCpu);
    d["jgo_gat_fwd"] = Capsule(JgoGatFwdCpu);
    d["jgo_gat_bwd_dst"] = Capsule(JgoGatBwdDstCpu);
    d["jgo_gat_bwd_src"] = Capsule(JgoGatBwdSrcCpu);
    d["jgo_gatv2_fwd"] = Capsule(JgoGatv2FwdCpu);
    d["jgo_gatv2_bwd_dst"] = Capsule(JgoGatv2BwdDstCpu);
    d["jgo_gatv2_bwd_src"] = Capsule(JgoGatv2BwdSrcCpu);
    d["jgo_mha_simple_fwd"] = Capsule(JgoMhaSimpleFwdCpu);
    d["jgo_mha_simple_bwd_dst"] = Capsule(JgoMhaSimpleBwdDstCpu);
    d["jgo_mha_simple_bwd_src"] = Capsule(JgoMhaSimpleBwdSrcCpu);
    d["jgo_gno_fwd"] = Capsule(JgoGnoFwdCpu);
    d["jgo_gno_bwd_src"] = Capsule(JgoGnoBwdSrcCpu);
    d["jgo_gno_bwd_dst"] = Capsule(JgoGnoBwdDstCpu);
    d["jgo_dimenet_in"] = Capsule(JgoDimenetInCpu);
    d["jgo_dimenet_out"] = Capsule(JgoDimenetOutCpu);
    return d;
  });
  m.def("cuda_targets", [] {
    nb::dict d;
#ifdef JGO_WITH_CUDA
    d["jgo_spmm"] = Capsule(JgoSpmmCuda);
    d["jgo_sddmm"] = Capsule(JgoSddmmCuda);
    d["jgo_edge_softmax"] = Capsule(JgoEdgeSoftmaxCuda);
    d["jgo_gat_fwd"] = Capsule(JgoGatFwdCuda);
    d["jgo_gat_bwd_dst"] = Capsule(JgoGatBwdDstCuda);
    d["jgo_gat_bwd_src"] = Capsule(JgoGatBwdSrcCuda);
    d["jgo_gatv2_fwd"] = Capsule(JgoGatv2FwdCuda);
    d["jgo_gatv2_bwd_dst"] = Capsule(JgoGatv2BwdDstCuda);
    d["jgo_gatv2_bwd_src"] = Capsule(JgoGatv2BwdSrcCuda);
    d["jgo_mha_simple_fwd"] = Capsule(JgoMhaSimpleFwdCuda);
    d["jgo_mha_simple_bwd_dst"] = Capsule(JgoMhaSimpleBwdDstCuda);
    d["jgo_mha_simple_bwd_src"] = Capsule(JgoMhaSimpleBwdSrcCuda);
    d["jgo_gno_fwd"] = Capsule(JgoGnoFwdCuda);
    d["jgo_gno_bwd_src"] = Capsule(JgoGnoBwdSrcCuda);
    d["jgo_gno_bwd_dst"] = Capsule(JgoGnoBwdDstCuda);
    d["jgo_dimenet_in"] = Capsule(JgoDimenetInCuda);
    d["jgo_dimenet_out"] = Capsule(JgoDimenetOutCuda);
#endif
    return d;
  });
#ifdef JGO_WITH_CUDA
  m.attr("with_cuda") = true;
#else
  m.attr("with_cuda") = false;
#endif
}
