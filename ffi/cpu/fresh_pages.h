// Transparent huge pages for the CPU handlers' output buffers.
//
// XLA hands a handler freshly allocated output buffers (glibc maps large blocks anew, so their
// first write faults in one 4 KiB page at a time). Where transparent huge pages are in `madvise`
// mode, advising the 2 MiB-aligned interior of a large output with MADV_HUGEPAGE before the kernel
// writes it makes the first touch fault in 2 MiB pages instead (on the 2-core development VM the
// update_efeat, agg_dmpnn and agg_hg_basis forward kernels ran 2-4x faster). The advice changes no
// value and is best effort: an error (no THP support) or another system leaves the buffer as it was.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>

#if defined(__linux__)
#include <sys/mman.h>
#endif

#include "xla/ffi/api/ffi.h"

namespace jgo {

constexpr std::uintptr_t kHugePageBytes = std::uintptr_t{2} << 20;
// Outputs below this size are left alone: they hold at most one aligned huge page, not worth a system call.
constexpr std::size_t kFreshPagesMinBytes = std::size_t{4} << 20;

// Advises the 2 MiB-aligned interior of [data, data + bytes) to use huge pages.
inline void AdviseHugePages(void* data, std::size_t bytes) {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  if (data == nullptr || bytes < kFreshPagesMinBytes) return;
  const auto first = reinterpret_cast<std::uintptr_t>(data);
  const std::uintptr_t begin = (first + kHugePageBytes - 1) & ~(kHugePageBytes - 1);
  const std::uintptr_t end = (first + bytes) & ~(kHugePageBytes - 1);
  if (end > begin) madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE);  // advice: errors ignored
#else
  (void)data;
  (void)bytes;
#endif
}

namespace detail {
template <typename T>
inline void AdviseOutput(T&) {}  // operands and attributes
inline void AdviseOutput(xla::ffi::Result<xla::ffi::AnyBuffer>& out) {
  AdviseHugePages(out->untyped_data(), out->size_bytes());
}
}  // namespace detail

// FreshOutputs<kImpl>::Call is the handler kImpl with every output advised first (AdviseHugePages).
template <auto kImpl>
struct FreshOutputs;
template <typename R, typename... Args, R (*kImpl)(Args...)>
struct FreshOutputs<kImpl> {
  static R Call(Args... args) {
    (detail::AdviseOutput(args), ...);
    return kImpl(std::move(args)...);
  }
};

}  // namespace jgo
