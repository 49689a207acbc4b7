// The extension module of the core package, jaxgraphops._ext: {FFI target name -> handler capsule} of the CPU
// handlers and, in a development build, the emulated CUDA handlers, from targets.h. The CUDA handlers are a
// plugin package of their own (ffi/cuda_plugin.cc). Plain CPython C API, the limited API where the build is
// for the stable ABI (cmake/core.cmake): four names need no binding library.
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "handlers.h"
#ifdef JGO_WITH_CUDA_EMULATION
#include "testing/record.h"
#endif

#ifdef JGO_WITH_CUDA_EMULATION
// The emulated handlers are called through the recorder: with JGO_FFI_RECORD=DIR their calls are
// written to DIR for tools/sanitize.sh (otherwise the handler is called directly).
#define JGO_RECORDED(target, Stem)                                                       \
  extern "C" XLA_FFI_Error* Jgo##Stem##CudaEmulationRecorded(XLA_FFI_CallFrame* frame) { \
    return jgo::testing::CallAndRecord(#target, Jgo##Stem##CudaEmulation, frame);        \
  }
JGO_TARGETS(JGO_RECORDED)
#endif

namespace {

// d[name] = a capsule of the handler fn (unnamed, as jax.ffi.pycapsule makes them); false with a Python
// error set on failure.
template <typename Fn>
bool Put(PyObject* d, const char* name, Fn* fn) {
  PyObject* capsule = PyCapsule_New(reinterpret_cast<void*>(fn), nullptr, nullptr);
  if (capsule == nullptr) return false;
  const int status = PyDict_SetItemString(d, name, capsule);
  Py_DECREF(capsule);
  return status == 0;
}

// d[#target] = the capsule of fn, or, on failure, d released and nullptr returned (a Python error set).
#define JGO_PUT(target, fn)   \
  if (!Put(d, #target, fn)) { \
    Py_DECREF(d);             \
    return nullptr;           \
  }
#define JGO_CPU_ENTRY(target, Stem) JGO_PUT(target, Jgo##Stem##Cpu)
#define JGO_CUDA_EMULATION_ENTRY(target, Stem) JGO_PUT(target, Jgo##Stem##CudaEmulationRecorded)

PyObject* CpuTargets(PyObject*, PyObject*) {
  PyObject* d = PyDict_New();
  if (d == nullptr) return nullptr;
  JGO_TARGETS(JGO_CPU_ENTRY)
  return d;
}

PyObject* HostTargets(PyObject*, PyObject*) {
  PyObject* d = PyDict_New();
  if (d == nullptr) return nullptr;
  JGO_HOST_TARGETS(JGO_CPU_ENTRY)
  return d;
}

PyObject* CudaEmulationTargets(PyObject*, PyObject*) {
  PyObject* d = PyDict_New();
  if (d == nullptr) return nullptr;
#ifdef JGO_WITH_CUDA_EMULATION
  JGO_TARGETS(JGO_CUDA_EMULATION_ENTRY)
#endif
  return d;
}

PyMethodDef kMethods[] = {
    {"cpu_targets", CpuTargets, METH_NOARGS, "{target name: capsule} of the CPU handlers"},
    {"host_targets", HostTargets, METH_NOARGS, "{target name: capsule} of the host-only CPU handlers"},
    {"cuda_emulation_targets", CudaEmulationTargets, METH_NOARGS,
     "{target name: capsule} of the emulated CUDA handlers (empty unless built with JGO_CUDA_EMULATION=ON)"},
    {nullptr, nullptr, 0, nullptr},
};

PyModuleDef kModule = {PyModuleDef_HEAD_INIT, "_ext", "The FFI handlers of jaxgraphops' kernels.", -1, kMethods,
                       nullptr, nullptr, nullptr, nullptr};

}  // namespace

PyMODINIT_FUNC PyInit__ext() {
  PyObject* m = PyModule_Create(&kModule);
  if (m == nullptr) return nullptr;
#ifdef JGO_WITH_CUDA_EMULATION
  PyObject* emulation = Py_True;
#else
  PyObject* emulation = Py_False;
#endif
  if (PyModule_AddObjectRef(m, "with_cuda_emulation", emulation) < 0) {
    Py_DECREF(m);
    return nullptr;
  }
  return m;
}
