// Records FFI calls for the replay driver (replay.cc).
//
// With JGO_FFI_RECORD naming a directory, every call of a handler wrapped by CallAndRecord is
// written to a new case file there (case_io.h): <target>.<n>.jgocase, n < JGO_FFI_RECORD_LIMIT
// (default 60) per target. Left out: calls whose buffers total more than JGO_FFI_RECORD_MAX_MB
// (default 4) megabytes, and calls alike (same types, ranks, attributes and power-of-16 size
// class) to 4 recorded before, so that the files cover the variants.
// The results are filled with the sentinel (case_io.h) before the call, so that unwritten elements
// are recorded as such. Without JGO_FFI_RECORD the handler is called directly.
#pragma once

#include "xla/ffi/api/c_api.h"

namespace jgo::testing {

// Calls the handler with the frame, recording the call (see above). Thread-safe. The recorded
// platform is "cpu" for the CPU handler of the target (handlers.h), "cuda-emulation" otherwise.
XLA_FFI_Error* CallAndRecord(const char* target, XLA_FFI_Handler* handler, XLA_FFI_CallFrame* frame);

}  // namespace jgo::testing
