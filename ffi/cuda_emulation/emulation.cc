// The emulated CUDA runtime: fibers for CUDA threads, a deterministic scheduler for the blocks in
// flight, barriers, warp collectives, shared memory, launch checks and the runtime API. The model
// it implements is described in jgo_emulation/device.h.
//
// Under ThreadSanitizer this file is compiled without instrumentation (tools/sanitize.sh passes
// -DJGO_EMULATION_TSAN instead): the scheduler's own bookkeeping is invisible to TSan, and the
// synchronisation CUDA guarantees is declared to it explicitly (launch start and end, barriers,
// __syncwarp), so whatever else two CUDA threads share unordered is reported as a race.
#include <sys/mman.h>
#if !defined(__x86_64__)
#include <ucontext.h>
#endif

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <unordered_map>
#include <vector>

#include "cuda_runtime.h"
#include "jgo_emulation/trace.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#define JGO_EMULATION_ASAN 1
#endif
#if defined(JGO_EMULATION_TSAN) || defined(__SANITIZE_THREAD__)
#include <sanitizer/tsan_interface.h>
#undef JGO_EMULATION_TSAN
#define JGO_EMULATION_TSAN 1
#endif

namespace jgo_emulation {
namespace {

constexpr int kWarp = 32;
constexpr size_t kStackBytes = 256 << 10;
constexpr size_t kGuardBytes = 4096;
constexpr size_t kDefaultShared = 48 << 10;         // without the kernel attribute
constexpr size_t kMaxShared = 227 << 10;            // per block, H100 opt-in
// Bytes past the end of dynamic shared memory checked for writes: at least the memory itself, so
// that an undersized allocation is caught rather than corrupting the heap.
size_t SharedCanary(size_t bytes) { return std::max<size_t>(4096, bytes); }
constexpr unsigned char kSharedFill = 0xff;         // uninitialised shared memory reads as NaN

// ---------------------------------------------------------------------------------------
// Errors: the CUDA-style last error of this OS thread, with the emulator's detail.

thread_local cudaError_t tls_last_error = cudaSuccess;
thread_local std::string tls_error_text;

const char* ErrorName(cudaError_t e) {
  switch (e) {
    case cudaSuccess: return "cudaSuccess";
    case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
    case cudaErrorInvalidConfiguration: return "cudaErrorInvalidConfiguration";
    case cudaErrorLaunchFailure: return "cudaErrorLaunchFailure";
  }
  return "cudaErrorUnknown";
}
const char* ErrorMeaning(cudaError_t e) {
  switch (e) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument";
    case cudaErrorLaunchFailure: return "unspecified launch failure";
  }
  return "unknown error";
}

cudaError_t SetError(cudaError_t e, const std::string& detail) {
  tls_last_error = e;
  tls_error_text = std::string(ErrorMeaning(e)) + " (emulated CUDA: " + detail + ")";
  return e;
}

std::string Triple(unsigned x, unsigned y, unsigned z) {
  return "(" + std::to_string(x) + "," + std::to_string(y) + "," + std::to_string(z) + ")";
}

// ---------------------------------------------------------------------------------------
// Context switches. On x86-64 a minimal switch of the callee-saved registers, the stack pointer
// and the floating-point control words (glibc's swapcontext also saves the signal mask, a system
// call per switch, which made it 5-10x slower); elsewhere ucontext.

#if defined(__x86_64__)
extern "C" void jgo_emulation_switch(void** save_sp, void* load_sp);
asm(R"(
  .text
  .globl jgo_emulation_switch
  .hidden jgo_emulation_switch
  .type jgo_emulation_switch, @function
jgo_emulation_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  subq $16, %rsp
  stmxcsr 8(%rsp)
  fnstcw (%rsp)
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  fldcw (%rsp)
  ldmxcsr 8(%rsp)
  addq $16, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size jgo_emulation_switch, .-jgo_emulation_switch
)");

struct Context {
  void* sp = nullptr;
};
// A context that starts `entry` (which never returns) on the stack [bottom, bottom + size).
void MakeContext(Context* c, char* bottom, size_t size, void (*entry)()) {
  uintptr_t top = (reinterpret_cast<uintptr_t>(bottom) + size) & ~uintptr_t(15);
  auto* sp = reinterpret_cast<uint64_t*>(top);
  *--sp = 0;                                     // the return address entry never uses
  *--sp = reinterpret_cast<uint64_t>(entry);     // where the first switch returns to
  for (int i = 0; i < 6; ++i) *--sp = 0;         // rbp, rbx, r12-r15
  sp -= 2;                                       // the control words, as the caller has them
  uint32_t mxcsr;
  uint16_t fpcw;
  asm volatile("stmxcsr %0" : "=m"(mxcsr));
  asm volatile("fnstcw %0" : "=m"(fpcw));
  std::memcpy(reinterpret_cast<char*>(sp) + 8, &mxcsr, sizeof mxcsr);
  std::memcpy(sp, &fpcw, sizeof fpcw);
  c->sp = sp;
}
void SwitchContext(Context* from, Context* to) { jgo_emulation_switch(&from->sp, to->sp); }
#else
struct Context {
  ucontext_t uc;
};
void MakeContext(Context* c, char* bottom, size_t size, void (*entry)()) {
  getcontext(&c->uc);
  c->uc.uc_stack.ss_sp = bottom;
  c->uc.uc_stack.ss_size = size;
  c->uc.uc_link = nullptr;
  makecontext(&c->uc, entry, 0);
}
void SwitchContext(Context* from, Context* to) { swapcontext(&from->uc, &to->uc); }
#endif

// ---------------------------------------------------------------------------------------
// Fibers

enum class State { kIdle, kReady, kBarrier, kCollective, kDone, kAbandoned };

struct Block;

struct Fiber {
  Context context;
  char* stack = nullptr;  // kGuardBytes of guard page, then kStackBytes
  State state = State::kIdle;
  Coords coords{};
  Block* block = nullptr;
  int linear = 0;  // thread index within the block
  const char* file = nullptr;
  int line = 0;
#if JGO_EMULATION_TSAN
  void* tsan_fiber = nullptr;
#endif
#if JGO_EMULATION_ASAN
  void* fake_stack = nullptr;
#endif
};

// One lane's part in a warp collective.
struct Slot {
  bool waiting = false;
  Collective kind{};
  unsigned mask = 0;
  uint64_t bits = 0;
  int param = 0, width = kWarp;
  uint64_t result = 0;
  const char* file = nullptr;
  int line = 0;
};

struct Warp {
  Slot slots[kWarp];
  unsigned live = 0;  // lanes that exist and have not exited
  // TSan sync objects, one per lane: a lane arriving at __syncwarp releases its own, and leaves acquiring those
  // of the lanes its mask names. (Not one per generation of the warp: lane groups of a warp meet in collectives
  // of their own, so two lanes of one __syncwarp can arrive in different generations.)
  char lane_sync[kWarp];
};

struct Block {
  uint3 idx{};
  std::vector<Fiber*> threads;
  std::vector<Warp> warps;
  unsigned char* shared = nullptr;  // dynamic shared memory, then the canary
  size_t shared_bytes = 0;
  int live = 0;     // threads not yet exited
  int arrived = 0;  // threads waiting at the barrier
  int barrier_generation = 0;
  char barrier_sync[2];  // TSan sync objects, alternating per barrier generation
};

struct Launch {
  const char* name;
  void* closure;
  void (*invoke)(void*);
  std::string error;  // the first failure
  char start_sync, end_sync;
};

// The scheduler of one OS thread: its own context, its pool of fibers and the current launch.
struct Scheduler {
  Context context;
  Fiber* running = nullptr;
  Launch* launch = nullptr;
  std::vector<std::unique_ptr<Fiber>> pool;
#if JGO_EMULATION_TSAN
  void* tsan_self = nullptr;
#endif
#if JGO_EMULATION_ASAN
  const void* stack_bottom = nullptr;
  size_t stack_size = 0;
#endif
  ~Scheduler() {
    for (auto& f : pool) {
#if JGO_EMULATION_TSAN
      if (f->tsan_fiber) __tsan_destroy_fiber(f->tsan_fiber);
#endif
      munmap(f->stack, kGuardBytes + kStackBytes);
    }
  }
};

thread_local Scheduler tls_scheduler;
const Coords kNoCoords{};
thread_local const Coords* tls_coords = &kNoCoords;

std::mutex attr_mutex;
std::unordered_map<const void*, size_t> shared_limits;  // cudaFuncAttributeMaxDynamicSharedMemorySize

void FiberMain();

// (Re)starts a fiber at FiberMain on its stack, discarding whatever it was doing.
void ResetFiber(Fiber* f) {
#if JGO_EMULATION_ASAN
  __asan_unpoison_memory_region(f->stack + kGuardBytes, kStackBytes);
#endif
#if JGO_EMULATION_TSAN
  if (f->tsan_fiber) __tsan_destroy_fiber(f->tsan_fiber);
  f->tsan_fiber = __tsan_create_fiber(0);
#endif
  MakeContext(&f->context, f->stack + kGuardBytes, kStackBytes, FiberMain);
  f->state = State::kIdle;
}

Fiber* NewFiber() {
  auto f = std::make_unique<Fiber>();
  void* mem = mmap(nullptr, kGuardBytes + kStackBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                   -1, 0);
  if (mem == MAP_FAILED) return nullptr;
  f->stack = static_cast<char*>(mem);
  mprotect(f->stack, kGuardBytes, PROT_NONE);  // a stack overflow faults instead of corrupting memory
  ResetFiber(f.get());
  tls_scheduler.pool.push_back(std::move(f));
  return tls_scheduler.pool.back().get();
}

// Switches from the scheduler into fiber f until it blocks, finishes or is abandoned.
void Resume(Fiber* f) {
  Scheduler& s = tls_scheduler;
  s.running = f;
  tls_coords = &f->coords;
#if JGO_EMULATION_TSAN
  s.tsan_self = __tsan_get_current_fiber();
  __tsan_switch_to_fiber(f->tsan_fiber, __tsan_switch_to_fiber_no_sync);
#endif
#if JGO_EMULATION_ASAN
  void* fake = nullptr;
  __sanitizer_start_switch_fiber(&fake, f->stack + kGuardBytes, kStackBytes);
#endif
  SwitchContext(&s.context, &f->context);
#if JGO_EMULATION_ASAN
  __sanitizer_finish_switch_fiber(fake, nullptr, nullptr);
#endif
  tls_coords = &kNoCoords;
  s.running = nullptr;
}

// Switches from the running fiber back to the scheduler; returns when the fiber is resumed.
void Yield(Fiber* f) {
  Scheduler& s = tls_scheduler;
#if JGO_EMULATION_TSAN
  __tsan_switch_to_fiber(s.tsan_self, __tsan_switch_to_fiber_no_sync);
#endif
#if JGO_EMULATION_ASAN
  __sanitizer_start_switch_fiber(&f->fake_stack, s.stack_bottom, s.stack_size);
#endif
  SwitchContext(&f->context, &s.context);
#if JGO_EMULATION_ASAN
  __sanitizer_finish_switch_fiber(f->fake_stack, &s.stack_bottom, &s.stack_size);
#endif
}

Fiber* Self() { return tls_scheduler.running; }

std::string Where(const Fiber* f) {
  return "block " + Triple(f->block->idx.x, f->block->idx.y, f->block->idx.z) + " thread " +
         Triple(f->coords.thread_idx.x, f->coords.thread_idx.y, f->coords.thread_idx.z);
}
std::string Site(const char* file, int line) {
  const char* base = file ? std::strrchr(file, '/') : nullptr;
  return std::string(base ? base + 1 : file ? file : "?") + ":" + std::to_string(line);
}

std::string Hex(unsigned v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%08x", v);
  return buf;
}

// Parks a fiber of a failed launch for good; its work is released to the launcher first.
[[noreturn]] void Park(Fiber* f) {
  f->state = State::kAbandoned;
  for (;;) {
#if JGO_EMULATION_TSAN
    __tsan_release(&tls_scheduler.launch->end_sync);
#endif
    Yield(f);
  }
}

// Fails the launch (the first failure is kept) and parks the calling fiber.
[[noreturn]] void Fail(Fiber* f, const std::string& what) {
  Launch* l = tls_scheduler.launch;
  if (l->error.empty()) l->error = std::string(l->name) + ": " + Where(f) + ": " + what;
  Park(f);
}

// After waiting: a fiber resumed because the launch failed stops there.
void StopIfFailed(Fiber* f) {
  if (!tls_scheduler.launch->error.empty()) Park(f);
}

void FiberMain() {
#if JGO_EMULATION_ASAN
  __sanitizer_finish_switch_fiber(nullptr, &tls_scheduler.stack_bottom, &tls_scheduler.stack_size);
#endif
  for (;;) {
    Fiber* f = Self();
    Launch* l = tls_scheduler.launch;
    StopIfFailed(f);
#if JGO_EMULATION_TSAN
    __tsan_acquire(&l->start_sync);
#endif
    l->invoke(l->closure);
#if JGO_EMULATION_TSAN
    __tsan_release(&l->end_sync);
#endif
    Block* b = f->block;
    Warp& w = b->warps[f->linear / kWarp];
    const int lane = f->linear % kWarp;
    w.live &= ~(1u << lane);
    --b->live;
    f->state = State::kDone;
    for (const Slot& other : w.slots) {
      if (other.waiting && (other.mask >> lane & 1u))
        Fail(f, "exited while lane " + std::to_string(&other - w.slots) + " waits for it in a warp collective at " +
                    Site(other.file, other.line) + " (mask " + Hex(other.mask) + ")");
    }
    if (b->arrived > 0 && b->arrived == b->live)
      Fail(f, "exited while other threads of its block wait at __syncthreads (divergent barrier)");
    Yield(f);
  }
}

// The source lane of a shuffle for `lane`, as PTX shfl.sync defines it (own lane when out of
// its segment).
int ShuffleSource(Collective kind, int lane, int param, int width) {
  const int seg = (kWarp - width) & 0x1f;
  const int clamp = kind == Collective::kShflUp ? 0 : 0x1f;
  const int max_lane = (lane & seg) | (clamp & ~seg), min_lane = lane & seg;
  const int b = param & 0x1f;
  int j = lane;
  bool ok = false;
  switch (kind) {
    case Collective::kShflUp: j = lane - b; ok = j >= max_lane; break;
    case Collective::kShflDown: j = lane + b; ok = j <= max_lane; break;
    case Collective::kShflXor: j = lane ^ b; ok = j <= max_lane; break;
    case Collective::kShflIdx: j = min_lane | (b & ~seg); ok = j <= max_lane; break;
    default: break;
  }
  return ok ? j : lane;
}

const char* CollectiveName(Collective k) {
  switch (k) {
    case Collective::kShflIdx: return "__shfl_sync";
    case Collective::kShflUp: return "__shfl_up_sync";
    case Collective::kShflDown: return "__shfl_down_sync";
    case Collective::kShflXor: return "__shfl_xor_sync";
    case Collective::kBallot: return "__ballot_sync";
    case Collective::kSyncWarp: return "__syncwarp";
  }
  return "?";
}

}  // namespace

// ---------------------------------------------------------------------------------------
// Device side

const Coords& Current() { return *tls_coords; }

void SyncThreads(const char* file, int line) {
  Fiber* f = Self();
  if (!f) return;
  Block* b = f->block;
  const int generation = b->barrier_generation;
  f->file = file;
  f->line = line;
#if JGO_EMULATION_TSAN
  __tsan_release(&b->barrier_sync[generation & 1]);
#endif
  if (++b->arrived < b->live) {
    f->state = State::kBarrier;
    Yield(f);
    StopIfFailed(f);
  } else {  // the last to arrive releases the others
    if (b->live != static_cast<int>(b->threads.size()))
      Fail(f, "__syncthreads at " + Site(file, line) + " after threads of the block exited (divergent barrier)");
    for (Fiber* t : b->threads) {
      if (t->state != State::kBarrier) continue;
      if (t->line != line || t->file != file)
        Fail(f, "divergent __syncthreads: this thread at " + Site(file, line) + ", thread " +
                    std::to_string(t->linear) + " at " + Site(t->file, t->line));
      t->state = State::kReady;
    }
    b->arrived = 0;
    ++b->barrier_generation;
  }
#if JGO_EMULATION_TSAN
  __tsan_acquire(&b->barrier_sync[generation & 1]);
#endif
  (void)generation;
}

uint64_t WarpCollective(Collective kind, unsigned mask, uint64_t bits, int param, int width, const char* file,
                        int line) {
  Fiber* f = Self();
  if (!f) return bits;
  Block* b = f->block;
  Warp& w = b->warps[f->linear / kWarp];
  const int lane = f->linear % kWarp;
  auto call = [&] { return std::string(CollectiveName(kind)) + " at " + Site(file, line) + " (mask " + Hex(mask) + ")"; };
  if (!(mask >> lane & 1u)) Fail(f, call() + " does not name the calling lane " + std::to_string(lane));
  if (width < 1 || width > kWarp || (width & (width - 1)))
    Fail(f, call() + ": width " + std::to_string(width) + " is not a power of two <= 32");
  const int in_warp = std::min<int>(kWarp, static_cast<int>(b->threads.size()) - f->linear / kWarp * kWarp);
  for (int k = 0; k < kWarp; ++k) {
    if (!(mask >> k & 1u)) continue;
    if (k >= in_warp) Fail(f, call() + " names lane " + std::to_string(k) + ", which the block does not have");
    if (!(w.live >> k & 1u)) Fail(f, call() + " names lane " + std::to_string(k) + ", which has exited");
    const Slot& o = w.slots[k];
    if (o.waiting && o.mask != mask)
      Fail(f, call() + ": lane " + std::to_string(k) + " waits in " + CollectiveName(o.kind) + " at " +
                  Site(o.file, o.line) + " with mask " + Hex(o.mask) + " (lanes disagree on the mask)");
    if (o.waiting && o.kind != kind)
      Fail(f, call() + ": lane " + std::to_string(k) + " waits in " + CollectiveName(o.kind) + " at " +
                  Site(o.file, o.line) + " with the same mask");
  }
  Slot& me = w.slots[lane];
  me = Slot{true, kind, mask, bits, param, width, 0, file, line};
#if JGO_EMULATION_TSAN
  if (kind == Collective::kSyncWarp) __tsan_release(&w.lane_sync[lane]);
#endif
  bool complete = true;
  for (int k = 0; k < kWarp && complete; ++k) complete = !(mask >> k & 1u) || w.slots[k].waiting;
  if (complete) {  // the last lane to arrive computes every lane's result
    uint64_t ballot = 0;
    for (int k = 0; k < kWarp; ++k)
      if ((mask >> k & 1u) && w.slots[k].bits) ballot |= 1ull << k;
    for (int k = 0; k < kWarp; ++k) {
      if (!(mask >> k & 1u)) continue;
      Slot& s = w.slots[k];
      if (kind == Collective::kBallot) {
        s.result = ballot;
      } else if (kind == Collective::kSyncWarp) {
        s.result = 0;
      } else {
        const int src = ShuffleSource(kind, k, s.param, s.width);
        if (!(mask >> src & 1u))
          Fail(f, call() + ": lane " + std::to_string(k) + " reads lane " + std::to_string(src) +
                      ", which the mask does not name");
        s.result = w.slots[src].bits;
      }
    }
    for (int k = 0; k < kWarp; ++k) {
      if (!(mask >> k & 1u)) continue;
      w.slots[k].waiting = false;
      Fiber* t = b->threads[f->linear / kWarp * kWarp + k];
      if (t != f) t->state = State::kReady;
    }
  } else {
    f->state = State::kCollective;
    f->file = file;
    f->line = line;
    Yield(f);
    StopIfFailed(f);
  }
#if JGO_EMULATION_TSAN
  if (kind == Collective::kSyncWarp) {
    for (int k = 0; k < kWarp; ++k)
      if (mask >> k & 1u) __tsan_acquire(&w.lane_sync[k]);
  }
#endif
  return me.result;
}

void* DynamicShared() {
  Fiber* f = Self();
  return f ? f->block->shared : nullptr;
}

// ---------------------------------------------------------------------------------------
// Launch

namespace {

unsigned EnvUnsigned(const char* name, unsigned fallback) {
  const char* v = std::getenv(name);
  return v && *v ? static_cast<unsigned>(std::strtoul(v, nullptr, 10)) : fallback;
}

bool CheckConfig(const char* name, const void* kernel, dim3 grid, dim3 block, size_t shared) {
  const uint64_t threads = uint64_t(block.x) * block.y * block.z;
  if (block.x == 0 || block.y == 0 || block.z == 0 || block.x > 1024 || block.y > 1024 || block.z > 64 ||
      threads > 1024) {
    SetError(cudaErrorInvalidConfiguration,
             std::string(name) + ": block " + Triple(block.x, block.y, block.z) + " (at most 1024 threads)");
    return false;
  }
  if (grid.x == 0 || grid.y == 0 || grid.z == 0 || grid.x > 0x7fffffffu || grid.y > 65535 || grid.z > 65535) {
    SetError(cudaErrorInvalidConfiguration,
             std::string(name) + ": grid " + Triple(grid.x, grid.y, grid.z) + " (y and z at most 65535)");
    return false;
  }
  size_t limit = kDefaultShared;
  {
    std::lock_guard<std::mutex> lock(attr_mutex);
    auto it = shared_limits.find(kernel);
    if (it != shared_limits.end()) limit = std::max(limit, it->second);
  }
  if (shared > limit) {
    SetError(cudaErrorInvalidValue, std::string(name) + ": " + std::to_string(shared) +
                                        " bytes of dynamic shared memory above the kernel's limit of " +
                                        std::to_string(limit) + " (raise cudaFuncAttributeMaxDynamicSharedMemorySize)");
    return false;
  }
  return true;
}

}  // namespace

void RunKernel(const char* kernel_name, const void* kernel_id, dim3 grid, dim3 block, size_t shared_bytes,
               void* closure, void (*invoke)(void*)) {
  Scheduler& s = tls_scheduler;
  if (s.running) {
    SetError(cudaErrorLaunchFailure, std::string(kernel_name) + ": launched from a kernel");
    return;
  }
  if (!CheckConfig(kernel_name, kernel_id, grid, block, shared_bytes)) return;
  if (jgo_emulation_trace_launch) jgo_emulation_trace_launch(kernel_name, kernel_id, grid, block, shared_bytes);
  Launch launch{kernel_name, closure, invoke, {}, 0, 0};
  s.launch = &launch;
  const unsigned in_flight = std::max(1u, EnvUnsigned("JGO_EMU_BLOCKS_IN_FLIGHT", 2));
  const unsigned seed = EnvUnsigned("JGO_EMU_SHUFFLE", 0);
  std::mt19937_64 rng(seed);
  const uint64_t n_blocks = uint64_t(grid.x) * grid.y * grid.z;
  const int per_block = static_cast<int>(block.x * block.y * block.z);
  std::vector<uint64_t> order(n_blocks);
  for (uint64_t i = 0; i < n_blocks; ++i) order[i] = i;
  if (seed) std::shuffle(order.begin(), order.end(), rng);
  const size_t fibers_needed = size_t(in_flight) * per_block;
  while (s.pool.size() < fibers_needed) {
    if (!NewFiber()) {
      SetError(cudaErrorMemoryAllocation, std::string(kernel_name) + ": no memory for fiber stacks");
      s.launch = nullptr;
      return;
    }
  }
  std::vector<Block> blocks(in_flight);
  std::vector<Fiber*> schedule;
  for (uint64_t first = 0; first < n_blocks && launch.error.empty(); first += in_flight) {
    const unsigned count = static_cast<unsigned>(std::min<uint64_t>(in_flight, n_blocks - first));
    schedule.clear();
    for (unsigned k = 0; k < count; ++k) {
      Block& b = blocks[k];
      const uint64_t id = order[first + k];
      b.idx = uint3{static_cast<unsigned>(id % grid.x), static_cast<unsigned>(id / grid.x % grid.y),
                    static_cast<unsigned>(id / (uint64_t(grid.x) * grid.y))};
      b.threads.assign(per_block, nullptr);
      b.warps.assign((per_block + kWarp - 1) / kWarp, Warp{});
      for (int t = 0; t < per_block; ++t) b.warps[t / kWarp].live |= 1u << (t % kWarp);
      b.shared_bytes = shared_bytes;
      const size_t allocated = shared_bytes + SharedCanary(shared_bytes);
      b.shared = shared_bytes ? static_cast<unsigned char*>(std::malloc(allocated)) : nullptr;
      if (b.shared) {
        std::memset(b.shared, kSharedFill, allocated);
#if JGO_EMULATION_ASAN
        __asan_poison_memory_region(b.shared + shared_bytes, SharedCanary(shared_bytes));
#endif
      }
      b.live = per_block;
      b.arrived = 0;
      b.barrier_generation = 0;
      // Fibers rotate with the block so that one fiber does not play the same thread in
      // consecutive blocks (TSan orders a fiber's work in program order).
      const size_t base = size_t(k) * per_block, rotate = size_t(id % 7) * 37;
      for (int t = 0; t < per_block; ++t) {
        Fiber* f = s.pool[base + (t + rotate) % per_block].get();
        f->block = &b;
        f->linear = t;
        f->coords = Coords{uint3{t % block.x, t / block.x % block.y, t / (block.x * block.y)}, b.idx, block, grid};
        f->state = State::kReady;
        b.threads[t] = f;
        schedule.push_back(f);
      }
    }
#if JGO_EMULATION_TSAN
    __tsan_release(&launch.start_sync);
#endif
    for (bool pending = true; pending && launch.error.empty();) {
      if (seed) std::shuffle(schedule.begin(), schedule.end(), rng);
      bool progressed = false;
      pending = false;
      for (Fiber* f : schedule) {
        if (f->state == State::kReady) {
          Resume(f);
          progressed = true;
          if (!launch.error.empty()) break;
        }
        pending |= f->state != State::kDone;
      }
      if (pending && !progressed && launch.error.empty()) {  // nobody can move: describe the first waiter
        for (Fiber* f : schedule) {
          if (f->state != State::kCollective) continue;
          const Warp& w = f->block->warps[f->linear / kWarp];
          const Slot& me = w.slots[f->linear % kWarp];
          for (int k = 0; k < kWarp && launch.error.empty(); ++k) {
            if (!(me.mask >> k & 1u) || w.slots[k].waiting) continue;
            const Fiber* other = f->block->threads[f->linear / kWarp * kWarp + k];
            launch.error = std::string(kernel_name) + ": " + Where(f) + ": " + CollectiveName(me.kind) + " at " +
                           Site(me.file, me.line) + " (mask " + Hex(me.mask) + ") waits for lane " +
                           std::to_string(k) + ", which waits at " + Site(other->file, other->line);
          }
          if (!launch.error.empty()) break;
        }
        if (launch.error.empty()) launch.error = std::string(kernel_name) + ": deadlock";
      }
    }
    if (!launch.error.empty())  // the fibers still in the kernel stop (and release their work)
      for (Fiber* f : schedule)
        if (f->state != State::kDone) Resume(f);
#if JGO_EMULATION_TSAN
    __tsan_acquire(&launch.end_sync);
#endif
    if (jgo_emulation_trace_blocks_done) jgo_emulation_trace_blocks_done();
    for (unsigned k = 0; k < count; ++k) {
      Block& b = blocks[k];
      if (b.shared) {
#if JGO_EMULATION_ASAN
        __asan_unpoison_memory_region(b.shared + shared_bytes, SharedCanary(shared_bytes));
#endif
        for (size_t i = 0; i < SharedCanary(shared_bytes) && launch.error.empty(); ++i) {
          if (b.shared[shared_bytes + i] != kSharedFill)
            launch.error = std::string(kernel_name) + ": block " + Triple(b.idx.x, b.idx.y, b.idx.z) +
                           " wrote past its " + std::to_string(shared_bytes) + " bytes of dynamic shared memory";
        }
        std::free(b.shared);
        b.shared = nullptr;
      }
      for (Fiber* f : b.threads)
        if (f->state != State::kDone) ResetFiber(f);  // parked mid-kernel
    }
  }
  s.launch = nullptr;
  if (jgo_emulation_trace_launch_done) jgo_emulation_trace_launch_done(!launch.error.empty());
  if (!launch.error.empty()) SetError(cudaErrorLaunchFailure, launch.error);
}

// ---------------------------------------------------------------------------------------
// Trace support (jgo_emulation/trace.h): the running fiber's frame. The calls of the weak trace hooks
// in RunKernel and cudaMemsetAsync are the rest of it; nothing else in this file knows about the trace.

bool CurrentTraceFrame(TraceFrame* frame) {
  const Fiber* f = tls_scheduler.running;
  if (!f) return false;
  const Block* b = f->block;
  const Coords& c = f->coords;
  frame->stack_lo = f->stack + kGuardBytes;
  frame->stack_hi = f->stack + kGuardBytes + kStackBytes;
  frame->shared_lo = reinterpret_cast<const char*>(b->shared);
  frame->shared_hi = b->shared ? frame->shared_lo + b->shared_bytes + SharedCanary(b->shared_bytes) : nullptr;
  frame->block = c.block_idx.x + uint64_t(c.grid_dim.x) * (c.block_idx.y + uint64_t(c.grid_dim.y) * c.block_idx.z);
  frame->thread = f->linear;
  return true;
}

}  // namespace jgo_emulation

// ---------------------------------------------------------------------------------------
// Runtime API

using jgo_emulation::SetError;

cudaError_t cudaGetLastError() {
  const cudaError_t e = jgo_emulation::tls_last_error;
  jgo_emulation::tls_last_error = cudaSuccess;
  return e;
}
cudaError_t cudaPeekAtLastError() { return jgo_emulation::tls_last_error; }

const char* cudaGetErrorString(cudaError_t error) {
  if (error != cudaSuccess && !jgo_emulation::tls_error_text.empty() &&
      jgo_emulation::tls_error_text.rfind(jgo_emulation::ErrorMeaning(error), 0) == 0)
    return jgo_emulation::tls_error_text.c_str();
  return jgo_emulation::ErrorMeaning(error);
}
const char* cudaGetErrorName(cudaError_t error) { return jgo_emulation::ErrorName(error); }

cudaError_t cudaFuncSetAttribute(const void* kernel, cudaFuncAttribute attr, int value) {
  if (attr != cudaFuncAttributeMaxDynamicSharedMemorySize || value < 0 ||
      static_cast<size_t>(value) > jgo_emulation::kMaxShared)
    return SetError(cudaErrorInvalidValue, "cudaFuncSetAttribute: at most " +
                                               std::to_string(jgo_emulation::kMaxShared) + " bytes of shared memory");
  std::lock_guard<std::mutex> lock(jgo_emulation::attr_mutex);
  jgo_emulation::shared_limits[kernel] = static_cast<size_t>(value);
  return cudaSuccess;
}

cudaError_t cudaGetDevice(int* device) {
  *device = 0;
  return cudaSuccess;
}

cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr, int device) {
  if (device != 0) return SetError(cudaErrorInvalidValue, "cudaDeviceGetAttribute: no device " + std::to_string(device));
  switch (attr) {  // an H100 SXM
    case cudaDevAttrMaxThreadsPerBlock: *value = 1024; return cudaSuccess;
    case cudaDevAttrMaxSharedMemoryPerBlock: *value = static_cast<int>(jgo_emulation::kDefaultShared); return cudaSuccess;
    case cudaDevAttrWarpSize: *value = jgo_emulation::kWarp; return cudaSuccess;
    case cudaDevAttrMultiProcessorCount: *value = static_cast<int>(jgo_emulation::EnvUnsigned("JGO_EMU_SMS", 132)); return cudaSuccess;
    case cudaDevAttrL2CacheSize: *value = 50 << 20; return cudaSuccess;
    case cudaDevAttrMaxSharedMemoryPerBlockOptin: *value = static_cast<int>(jgo_emulation::kMaxShared); return cudaSuccess;
  }
  return SetError(cudaErrorInvalidValue, "cudaDeviceGetAttribute: attribute " + std::to_string(attr));
}

// Streams are ordered queues; every operation runs to completion when issued, so they are.
cudaError_t cudaMemsetAsync(void* ptr, int value, size_t bytes, cudaStream_t) {
  if (bytes && !ptr) return SetError(cudaErrorInvalidValue, "cudaMemsetAsync on a null pointer");
  if (bytes && jgo_emulation_trace_memset) jgo_emulation_trace_memset(ptr, bytes);
  if (bytes) std::memset(ptr, value, bytes);
  return cudaSuccess;
}
cudaError_t cudaMemset(void* ptr, int value, size_t bytes) { return cudaMemsetAsync(ptr, value, bytes, nullptr); }
cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind, cudaStream_t) {
  if (bytes && (!dst || !src)) return SetError(cudaErrorInvalidValue, "cudaMemcpyAsync with a null pointer");
  if (bytes) std::memmove(dst, src, bytes);
  return cudaSuccess;
}
cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
  return cudaMemcpyAsync(dst, src, bytes, kind, nullptr);
}
cudaError_t cudaStreamSynchronize(cudaStream_t) { return cudaSuccess; }
cudaError_t cudaDeviceSynchronize() { return cudaSuccess; }
