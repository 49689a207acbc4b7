// The FFI handler symbols of every platform, registered by module.cc.
#pragma once

#include "xla/ffi/api/ffi.h"

XLA_FFI_DECLARE_HANDLER_SYMBOL(JgoSpmmCpu);
XLA_FFI_DECLARE_HANDLER_SYMBOL(JgoSddmmCpu);
XLA_FFI_DECLARE_HANDLER_SYMBOL(JgoEdgeSoftmaxCpu);

#ifdef JGO_WITH_CUDA
XLA_FFI_DECLARE_HANDLER_SYMBOL(JgoSpmmCuda);
XLA_FFI_DECLARE_HANDLER_SYMBOL(JgoSddmmCuda);
XLA_FFI_DECLARE_HANDLER_SYMBOL(JgoEdgeSoftmaxCuda);
#endif
