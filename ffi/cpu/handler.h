// The definition of a CPU handler symbol.
#pragma once

#include "xla/ffi/api/ffi.h"

// Defines the handler symbol Jgo<Stem>Cpu of `impl`, bound by `binding` (a jgo::Bind<Op> factory
// given the context xla::ffi::ThreadPool).
#define JGO_CPU_HANDLER(Stem, impl, binding) XLA_FFI_DEFINE_HANDLER_SYMBOL(Jgo##Stem##Cpu, impl, binding)
