// The XLA FFI contexts of the emulated CUDA handlers, which XLA calls as CPU custom calls: the CPU
// platform has no stream to decode and no device allocator behind ffi::ScratchAllocator, so the
// emulated bindings decode a placeholder stream and a host scratch allocator instead.
#pragma once

#include <cstdlib>
#include <optional>
#include <utility>
#include <vector>

#include "jgo_emulation/types.h"
#include "xla/ffi/api/ffi.h"

namespace jgo_emulation {

// Binds the (placeholder) stream: Ctx<StreamContext>() passes a cudaStream_t.
struct StreamContext {};

// Scratch memory in host memory, freed when the handler returns (ffi::ScratchAllocator's contract). Like XLA's
// GPU allocator it refuses an alignment that is not a power of two or exceeds 16 bytes (kMaxAlignment of XLA's
// XLA_FFI_DeviceMemory_Allocate): a handler asking for more fails here as it would on a GPU.
class HostScratch {
 public:
  HostScratch() = default;
  HostScratch(HostScratch&& other) noexcept : blocks_(std::move(other.blocks_)) {}
  HostScratch& operator=(HostScratch&&) = delete;
  ~HostScratch() {
    for (void* p : blocks_) std::free(p);
  }
  static constexpr size_t kMaxAlignment = 16;
  std::optional<void*> Allocate(size_t size, size_t alignment = 1) {
    if (alignment == 0 || (alignment & (alignment - 1)) != 0 || alignment > kMaxAlignment) return std::nullopt;
    if (alignment < sizeof(void*)) alignment = sizeof(void*);
    void* p = nullptr;
    if (posix_memalign(&p, alignment, size == 0 ? 1 : size) != 0) return std::nullopt;
    blocks_.push_back(p);
    return p;
  }

 private:
  std::vector<void*> blocks_;
};

}  // namespace jgo_emulation

namespace xla::ffi {

template <>
struct CtxDecoding<jgo_emulation::StreamContext> {
  using Type = cudaStream_t;
  static std::optional<Type> Decode(const XLA_FFI_Api*, XLA_FFI_ExecutionContext*, DiagnosticEngine&) {
    static char placeholder;
    return reinterpret_cast<cudaStream_t>(&placeholder);
  }
};

template <>
struct CtxDecoding<jgo_emulation::HostScratch> {
  using Type = jgo_emulation::HostScratch;
  static std::optional<Type> Decode(const XLA_FFI_Api*, XLA_FFI_ExecutionContext*, DiagnosticEngine&) {
    return jgo_emulation::HostScratch();
  }
};

}  // namespace xla::ffi
