// The definition of a CPU handler symbol.
#pragma once

#include "cpu/fresh_pages.h"
#include "xla/ffi/api/ffi.h"

// Defines the handler symbol Jgo<Stem>Cpu of `impl`, bound by `binding` (a jgo::Bind<Op> factory
// given the context xla::ffi::ThreadPool). Its large outputs are advised to use huge pages before
// `impl` runs (cpu/fresh_pages.h).
#define JGO_CPU_HANDLER(Stem, impl, binding) \
  XLA_FFI_DEFINE_HANDLER_SYMBOL(Jgo##Stem##Cpu, jgo::FreshOutputs<impl>::Call, binding)
