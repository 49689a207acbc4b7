// The emulated runtime's side of the memory trace (ffi/cuda_emulation/trace.cc): what a traced access
// asks about the running CUDA thread, and the hooks a launch calls. The hooks are weak: without
// trace.cc linked in they are null and a launch calls none of them.
//
// The trace sees kernel memory accesses through the host compiler's ThreadSanitizer instrumentation
// (the kernel translation units compiled with -fsanitize=thread, no TSan runtime linked: trace.cc
// defines the __tsan_* entry points), so no kernel line changes; tools/gpu_trace.mk builds it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "jgo_emulation/types.h"

namespace jgo_emulation {

// The running CUDA thread as the tracer needs it: its fiber's stack (its registers and locals), its
// block's dynamic shared memory (with the canary after it), the block's linear index in the grid and
// the thread's linear index in the block.
struct TraceFrame {
  const char* stack_lo;
  const char* stack_hi;
  const char* shared_lo;
  const char* shared_hi;
  uint64_t block;
  int thread;
};

// The frame of the fiber running on this OS thread; false outside a kernel.
bool CurrentTraceFrame(TraceFrame* frame);

// The tracer (trace.cc; its driver is tools/gpu_trace/trace_replay.cc): launches on the calling OS thread
// between Start and Finish are traced into `dir`, through one LRU model of the L2 per size in `l2_mb`
// (megabytes), which keep their contents from one launch to the next; SetCase numbers the launches that
// follow (their files are launch-CASE-SEQ.json/.bin).
namespace trace {
void Start(const std::string& dir, const std::vector<double>& l2_mb);
void SetCase(int index);
void Finish();
}  // namespace trace

}  // namespace jgo_emulation

extern "C" {
// A launch that passed its configuration checks starts (kernel: the kernel function's address).
__attribute__((weak)) void jgo_emulation_trace_launch(const char* name, const void* kernel, dim3 grid, dim3 block,
                                                      size_t shared_bytes);
// The blocks in flight have finished (their shared memory is still allocated).
__attribute__((weak)) void jgo_emulation_trace_blocks_done();
// The launch has ended, failed when `failed`.
__attribute__((weak)) void jgo_emulation_trace_launch_done(bool failed);
// cudaMemsetAsync (cudaMemset) is about to set `bytes` bytes at `ptr`.
__attribute__((weak)) void jgo_emulation_trace_memset(const void* ptr, size_t bytes);
}
