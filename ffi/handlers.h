// The FFI handler symbols of every platform built, one per target of targets.h: the CPU and emulated ones
// registered by module.cc, the CUDA ones listed by cuda_plugin.cc.
#pragma once

#include "targets.h"
#include "xla/ffi/api/ffi.h"

#define JGO_DECLARE_CPU(target, Stem) XLA_FFI_DECLARE_HANDLER_SYMBOL(Jgo##Stem##Cpu);
JGO_TARGETS(JGO_DECLARE_CPU)
JGO_HOST_TARGETS(JGO_DECLARE_CPU)
#undef JGO_DECLARE_CPU

#ifdef JGO_WITH_CUDA
#define JGO_DECLARE_CUDA(target, Stem) XLA_FFI_DECLARE_HANDLER_SYMBOL(Jgo##Stem##Cuda);
JGO_TARGETS(JGO_DECLARE_CUDA)
#undef JGO_DECLARE_CUDA
#endif

#ifdef JGO_WITH_CUDA_EMULATION
#define JGO_DECLARE_CUDA_EMULATION(target, Stem) XLA_FFI_DECLARE_HANDLER_SYMBOL(Jgo##Stem##CudaEmulation);
JGO_TARGETS(JGO_DECLARE_CUDA_EMULATION)
#undef JGO_DECLARE_CUDA_EMULATION
#endif
