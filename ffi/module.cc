// The extension module of the core package: {FFI target name -> handler capsule} of the CPU handlers and,
// in a development build, the emulated CUDA handlers, from targets.h. The CUDA handlers are a plugin
// package of their own (ffi/cuda_plugin.cc).
#include <nanobind/nanobind.h>

#include "handlers.h"
#ifdef JGO_WITH_CUDA_EMULATION
#include "testing/record.h"
#endif

namespace nb = nanobind;

namespace {
template <typename Fn>
nb::capsule Capsule(Fn* fn) {
  return nb::capsule(reinterpret_cast<void*>(fn));
}
}  // namespace

#ifdef JGO_WITH_CUDA_EMULATION
// The emulated handlers are called through the recorder: with JGO_FFI_RECORD=DIR their calls are
// written to DIR for tools/sanitize.sh (otherwise the handler is called directly).
#define JGO_RECORDED(target, Stem)                                                       \
  extern "C" XLA_FFI_Error* Jgo##Stem##CudaEmulationRecorded(XLA_FFI_CallFrame* frame) { \
    return jgo::testing::CallAndRecord(#target, Jgo##Stem##CudaEmulation, frame);        \
  }
JGO_TARGETS(JGO_RECORDED)
#endif

// d[target name] = the capsule of the target's handler on one platform.
#define JGO_CPU_ENTRY(target, Stem) d[#target] = Capsule(Jgo##Stem##Cpu);
#define JGO_CUDA_EMULATION_ENTRY(target, Stem) d[#target] = Capsule(Jgo##Stem##CudaEmulationRecorded);

NB_MODULE(_ext, m) {
  m.def("cpu_targets", [] {
    nb::dict d;
    JGO_TARGETS(JGO_CPU_ENTRY)
    return d;
  });
  m.def("host_targets", [] {
    nb::dict d;
    JGO_HOST_TARGETS(JGO_CPU_ENTRY)
    return d;
  });
  m.def("cuda_emulation_targets", [] {
    nb::dict d;
#ifdef JGO_WITH_CUDA_EMULATION
    JGO_TARGETS(JGO_CUDA_EMULATION_ENTRY)
#endif
    return d;
  });
#ifdef JGO_WITH_CUDA_EMULATION
  m.attr("with_cuda_emulation") = true;
#else
  m.attr("with_cuda_emulation") = false;
#endif
}
