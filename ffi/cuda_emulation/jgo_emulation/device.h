// The device side of the emulated CUDA platform: what kernel code sees (thread coordinates,
// __syncthreads, warp collectives, shared memory, atomics) and the launch entry point.
//
// A launch runs its blocks a few at a time ("in flight", default 2) on the calling OS thread;
// every CUDA thread of those blocks is a fiber with its own stack, and a fiber runs until it
// finishes or waits at a barrier or a warp collective, so __syncthreads is a real barrier, the
// lanes named by a shuffle mask meet in lockstep, and blocks in flight interleave at their sync
// points (races between blocks change results). Misuse fails the launch with a message that
// names the kernel, the thread and the source line: a divergent barrier, a mask that names a lane
// that exited or waits elsewhere, lanes that disagree on the mask, a shuffle that reads a lane
// outside its mask, a write past the dynamic shared memory. Scheduling is deterministic; the
// environment can change it:
//   JGO_EMU_BLOCKS_IN_FLIGHT=N   blocks interleaved at a time (default 2)
//   JGO_EMU_SHUFFLE=SEED         shuffle the block order and the order fibers are resumed in
// and what the device reports: JGO_EMU_SMS=N multiprocessors (default 132, an H100 SXM).
// Under ThreadSanitizer fibers are annotated as TSan fibers with no implicit synchronisation:
// only barriers, __syncwarp and the launch boundaries order memory, so a missing barrier or a
// race between blocks is reported as a data race.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <tuple>
#include <type_traits>
#include <utility>

#include "jgo_emulation/types.h"

namespace jgo_emulation {

// The coordinates of the running CUDA thread (threadIdx, blockIdx, blockDim, gridDim).
struct Coords {
  uint3 thread_idx, block_idx;
  dim3 block_dim, grid_dim;
};
// The running fiber's coordinates (zeros outside a kernel).
const Coords& Current();

void SyncThreads(const char* file, int line);

// Warp collectives: every lane named by `mask` must call the same collective with the same mask.
enum class Collective : int { kShflIdx, kShflUp, kShflDown, kShflXor, kBallot, kSyncWarp };
uint64_t WarpCollective(Collective kind, unsigned mask, uint64_t bits, int param, int width, const char* file,
                        int line);

template <typename T>
uint64_t ToBits(T v) {
  static_assert(sizeof(T) <= 8 && std::is_trivially_copyable_v<T>, "shuffles move at most 8-byte values");
  uint64_t b = 0;
  std::memcpy(&b, &v, sizeof(T));
  return b;
}
template <typename T>
T FromBits(uint64_t b) {
  T v;
  std::memcpy(&v, &b, sizeof(T));
  return v;
}
template <typename T>
T Shuffle(Collective kind, unsigned mask, T v, int param, int width, const char* file, int line) {
  return FromBits<T>(WarpCollective(kind, mask, ToBits(v), param, width, file, line));
}

// The block's dynamic shared memory (the launch's byte count; nullptr when 0), fresh per block and
// filled with 0xff bytes (NaN), as uninitialised shared memory.
void* DynamicShared();

// Runs `invoke(closure)` on every thread of the grid; reports through the last error.
void RunKernel(const char* kernel_name, const void* kernel_id, dim3 grid, dim3 block, size_t shared_bytes,
               void* closure, void (*invoke)(void*));

// kernel<<<grid, block, shared_bytes, stream>>>(args...), `name` naming it in errors: the
// arguments are converted to the kernel's parameter types once, as CUDA does, and every thread
// gets its own copy.
template <typename... Params, typename... Args>
void LaunchKernel(const char* name, void (*kernel)(Params...), dim3 grid, dim3 block, size_t shared_bytes,
                  cudaStream_t, Args&&... args) {
  static_assert(sizeof...(Params) == sizeof...(Args), "kernel launched with the wrong number of arguments");
  struct Closure {
    void (*kernel)(Params...);
    std::tuple<std::decay_t<Params>...> params;
  };
  Closure c{kernel, std::tuple<std::decay_t<Params>...>(static_cast<Params>(std::forward<Args>(args))...)};
  RunKernel(name, reinterpret_cast<const void*>(kernel), grid, block, shared_bytes, &c,
            [](void* p) {
              auto* closure = static_cast<Closure*>(p);
              auto params = closure->params;  // this thread's copy
              std::apply(closure->kernel, params);
            });
}

// Atomics on global or shared memory, as real atomics.
template <typename T>
T AtomicAdd(T* p, T v) {
  if constexpr (std::is_integral_v<T>) {
    // CUDA orders memory around an arrival counter with __threadfence, which ThreadSanitizer does not
    // model; an acquire-release add gives it the same order (the engine's split rows, chunk_walk.cuh).
    return __atomic_fetch_add(p, v, __ATOMIC_ACQ_REL);
  } else {  // floating point: a compare-and-swap loop on the bits
    using Bits = std::conditional_t<sizeof(T) == 8, uint64_t, uint32_t>;
    Bits* q = reinterpret_cast<Bits*>(p);
    Bits old = __atomic_load_n(q, __ATOMIC_RELAXED), next;
    T value;
    do {
      std::memcpy(&value, &old, sizeof(T));
      const T sum = value + v;
      std::memcpy(&next, &sum, sizeof(T));
    } while (!__atomic_compare_exchange_n(q, &old, next, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED));
    return value;
  }
}
template <typename T>
T AtomicCas(T* p, T expected, T desired) {
  __atomic_compare_exchange_n(p, &expected, desired, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
  return expected;
}
template <typename T>
T AtomicExch(T* p, T v) {
  return __atomic_exchange_n(p, v, __ATOMIC_RELAXED);
}
template <typename T, typename Pick>
T AtomicUpdate(T* p, T v, Pick pick) {
  T old = __atomic_load_n(p, __ATOMIC_RELAXED);
  while (!__atomic_compare_exchange_n(p, &old, pick(old, v), false, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
  }
  return old;
}

}  // namespace jgo_emulation
