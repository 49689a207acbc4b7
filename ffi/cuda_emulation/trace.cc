// The memory trace of emulated launches (jgo_emulation/trace.h), for the GPU model
// (benchmarks/gpu_model): which global and shared memory each warp-level instruction touches.
//
// The kernel translation units are compiled with the host compiler's ThreadSanitizer instrumentation
// (-fsanitize=thread) and no TSan runtime: every load and store the optimised host code keeps calls a
// __tsan_* entry point, defined here. While a traced launch runs, an access by a CUDA thread (a fiber
// of the emulated runtime) outside its fiber's stack, the launching thread's stack and the loaded
// images is a device memory access (reads of threadIdx and the like, which live in the fiber, are not):
// global, or shared when inside its block's dynamic shared memory.
// The entry point's return address names the call site (a load or store of the kernel's source).
//
// When a round of blocks ends, each warp's accesses are folded: the n-th execution of a call site by
// each of the warp's 32 lanes is one warp-level instruction (lanes that run a site fewer times are
// inactive in its later executions). Per instruction: the active lanes, the bytes they ask for and
// the distinct 32-byte sectors (coalescing); the global sectors go, in order, through LRU models of
// the L2 (128-byte lines of four sectors, one model per size): a sector not present is read from
// DRAM, a sector made dirty is written to it once (write-back); a load whose lines the warp touched
// among its last 32 lines is an L1 hit. Per launch it writes, to
// JGO_EMU_TRACE_DIR (trace::Start):
//   launch-CCC-SSS.json  the launch (handler name, kernel address, grid, block, shared memory) and per
//                        call site: executions, lanes, bytes, sectors, L1 hits, DRAM sectors read and
//                        written per L2 size;
//   launch-CCC-SSS.bin   per block, per call site: the warp-level executions summed over the block's
//                        warps and those of its busiest warp (the most memory instructions), as
//                        uint32 arrays: block ids [B], offsets [B + 1], site, total, busiest [N].
// A cudaMemsetAsync between launches is recorded as a launch of that name with one site and no blocks.
// Nothing is traced outside trace::Start/Finish, or in a launch on another OS thread.
#include "jgo_emulation/trace.h"

#include "jgo_emulation/device.h"

#include <dlfcn.h>
#include <link.h>
#include <pthread.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <string>
#include <unordered_map>
#include <vector>

namespace jgo_emulation::trace {
namespace {

constexpr int kWarp = 32;
constexpr uint64_t kSector = 32, kLine = 128;

// ---------------------------------------------------------------------------------------
// An LRU L2 of 128-byte lines holding 32-byte sectors (fully associative).

// Line -> node index, open addressing with linear probing (a third of the time of std::unordered_map here).
class LineTable {
 public:
  explicit LineTable(uint64_t lines) {
    size_t n = 16;
    while (n < 2 * lines) n *= 2;
    keys_.assign(n, 0);
    values_.assign(n, 0);
    mask_ = n - 1;
  }
  uint32_t* Find(uint64_t line) {
    for (size_t i = Hash(line);; i = (i + 1) & mask_) {
      if (keys_[i] == line + 1) return &values_[i];
      if (keys_[i] == 0) return nullptr;
    }
  }
  void Insert(uint64_t line, uint32_t value) {
    size_t i = Hash(line);
    while (keys_[i] != 0) i = (i + 1) & mask_;
    keys_[i] = line + 1;
    values_[i] = value;
  }
  void Erase(uint64_t line) {  // backward-shift deletion keeps every probe sequence unbroken
    size_t i = Hash(line);
    while (keys_[i] != line + 1) i = (i + 1) & mask_;
    for (size_t j = (i + 1) & mask_; keys_[j] != 0; j = (j + 1) & mask_) {
      const size_t home = Hash(keys_[j] - 1);
      if (((j - home) & mask_) >= ((j - i) & mask_)) {  // j's home is not between i and j: move it to i
        keys_[i] = keys_[j];
        values_[i] = values_[j];
        i = j;
      }
    }
    keys_[i] = 0;
  }

 private:
  size_t Hash(uint64_t line) const { return (line * 0x9E3779B97F4A7C15ull >> 20) & mask_; }
  std::vector<uint64_t> keys_;  // line + 1, 0 when empty
  std::vector<uint32_t> values_;
  size_t mask_;
};

class Lru {
 public:
  explicit Lru(uint64_t bytes) : capacity_(std::max<uint64_t>(1, bytes / kLine)), index_(capacity_) {
    nodes_.reserve(capacity_);
  }
  struct Result {
    bool read_miss, dirtied;
  };
  Result Access(uint64_t sector, bool write) {
    const uint64_t line = sector * kSector / kLine;
    const uint8_t bit = uint8_t(1u << (sector % (kLine / kSector)));
    uint32_t n;
    if (uint32_t* found = index_.Find(line)) {
      n = *found;
      if (n != head_) {
        Unlink(n);
        PushFront(n);
      }
    } else {
      n = Allocate(line);
      PushFront(n);
    }
    Node& node = nodes_[n];
    Result r{!write && !(node.valid & bit), write && !(node.dirty & bit)};
    node.valid |= bit;
    if (write) node.dirty |= bit;
    return r;
  }

 private:
  struct Node {
    uint64_t line;
    uint32_t prev, next;
    uint8_t valid, dirty;
  };
  static constexpr uint32_t kNone = ~0u;
  uint32_t Allocate(uint64_t line) {
    uint32_t n;
    if (nodes_.size() < capacity_) {
      n = static_cast<uint32_t>(nodes_.size());
      nodes_.push_back({});
    } else {  // evict the least recently used line
      n = tail_;
      Unlink(n);
      index_.Erase(nodes_[n].line);
    }
    nodes_[n] = Node{line, kNone, kNone, 0, 0};
    index_.Insert(line, n);
    return n;
  }
  void Unlink(uint32_t n) {
    Node& node = nodes_[n];
    (node.prev == kNone ? head_ : nodes_[node.prev].next) = node.next;
    (node.next == kNone ? tail_ : nodes_[node.next].prev) = node.prev;
  }
  void PushFront(uint32_t n) {
    nodes_[n].prev = kNone;
    nodes_[n].next = head_;
    (head_ == kNone ? tail_ : nodes_[head_].prev) = n;
    head_ = n;
  }
  uint64_t capacity_;
  std::vector<Node> nodes_;
  LineTable index_;
  uint32_t head_ = kNone, tail_ = kNone;
};

// ---------------------------------------------------------------------------------------
// State

struct Access {
  uintptr_t addr;
  uint32_t site, size;
};

struct Site {
  uintptr_t pc;
  bool write, shared;
  uint32_t size;
};

struct SiteStats {
  uint64_t execs = 0, lanes = 0, bytes = 0, sectors = 0, l1_hits = 0;
  std::vector<uint64_t> dram_read, dram_write;  // sectors, per L2 size
};

struct BlockBuffer {
  uint64_t block;
  std::vector<std::vector<Access>> lanes;  // per thread of the block
};

// What Record last found for the running fiber: valid until the fiber changes or its round of blocks ends.
struct FrameCache {
  const Coords* coords = nullptr;
  TraceFrame frame;
  std::vector<Access>* lane = nullptr;
};

// The site of each recent call-site address (direct mapped).
struct SiteCache {
  uintptr_t pc[256] = {};
  uint32_t site[256] = {};
};

struct Launch {
  std::string name;
  uintptr_t kernel = 0;
  dim3 grid, block;
  size_t shared_bytes = 0;
  std::unordered_map<uint32_t, SiteStats> sites;
  std::vector<uint32_t> block_ids, offsets{0}, site, total, busiest;
};

struct Image {
  uintptr_t lo, hi;
};

struct State {
  bool started = false;
  std::string dir;
  std::vector<double> l2_mb;
  std::vector<Lru> l2;
  int case_index = 0, sequence = 0;
  pthread_t thread{};
  uintptr_t os_stack_lo = 0, os_stack_hi = 0;
  std::vector<Image> images;  // loaded code and data: not device memory
  std::unordered_map<uintptr_t, uint32_t> site_index;
  std::vector<Site> sites;
  std::deque<BlockBuffer> blocks;  // the blocks in flight (stable addresses: FrameCache points into them)
  Launch launch;
  FrameCache frame;
  SiteCache site_cache;
};

State& G() {
  static State* s = new State;  // never destroyed: instrumented code may run during exit
  return *s;
}
thread_local bool tl_in_launch = false;

int CollectImage(dl_phdr_info* info, size_t, void* data) {
  auto* images = static_cast<std::vector<Image>*>(data);
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const auto& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_LOAD) continue;
    const uintptr_t lo = info->dlpi_addr + ph.p_vaddr;
    images->push_back({lo, lo + ph.p_memsz});
  }
  return 0;
}

bool InImage(uintptr_t a) {
  const auto& images = G().images;
  auto it = std::upper_bound(images.begin(), images.end(), a, [](uintptr_t v, const Image& m) { return v < m.lo; });
  return it != images.begin() && a < std::prev(it)->hi;
}

uint32_t SiteOf(uintptr_t pc, bool write, bool shared, uint32_t size) {
  State& g = G();
  auto [it, added] = g.site_index.emplace(pc, static_cast<uint32_t>(g.sites.size()));
  if (added) g.sites.push_back({pc, write, shared, size});
  Site& s = g.sites[it->second];
  s.size = std::max(s.size, size);
  return it->second;
}

void Record(const void* p, uint32_t size, bool write, const void* pc) {
  if (!tl_in_launch) return;
  State& g = G();
  FrameCache& c = g.frame;
  const Coords* coords = &Current();
  if (coords != c.coords) {  // another fiber: its frame and its block's buffer
    if (!CurrentTraceFrame(&c.frame)) return;
    BlockBuffer* b = nullptr;
    for (auto& candidate : g.blocks)
      if (candidate.block == c.frame.block) b = &candidate;
    if (!b) {
      const dim3 d = g.launch.block;
      g.blocks.push_back({c.frame.block, std::vector<std::vector<Access>>(size_t(d.x) * d.y * d.z)});
      b = &g.blocks.back();
    }
    c.coords = coords;
    c.lane = &b->lanes[c.frame.thread];
  }
  const TraceFrame& f = c.frame;
  const char* a = static_cast<const char*>(p);
  if (a >= f.stack_lo && a < f.stack_hi) return;  // the thread's registers and locals
  const auto* fields = reinterpret_cast<const char*>(coords);
  if (a >= fields && a < fields + sizeof(Coords)) return;  // threadIdx, blockIdx, blockDim, gridDim
  const bool shared = f.shared_lo && a >= f.shared_lo && a < f.shared_hi;
  const auto v = reinterpret_cast<uintptr_t>(p);
  if (!shared && ((v >= g.os_stack_lo && v < g.os_stack_hi) || InImage(v))) return;  // the launcher's, constants
  const auto where = reinterpret_cast<uintptr_t>(pc);
  const size_t slot = (where >> 1) & 255;
  if (g.site_cache.pc[slot] != where) {
    g.site_cache.pc[slot] = where;
    g.site_cache.site[slot] = SiteOf(where, write, shared, size);
  }
  c.lane->push_back({v, g.site_cache.site[slot], size});
}

void ForgetFrames() { G().frame = FrameCache{}; }

// ---------------------------------------------------------------------------------------
// Folding a block's lanes into warp-level instructions

// The lines a warp touched last: its share of the SM's L1 (256 KB over up to 64 warps), LRU.
class WarpL1 {
 public:
  void Clear() { size_ = 0; }
  // Whether every line of the sectors was present; all of them are the most recent afterwards.
  bool Touch(const std::vector<uint64_t>& sectors) {
    bool all = true;
    for (uint64_t s : sectors) {
      const uint64_t line = s * kSector / kLine;
      size_t i = 0;
      while (i < size_ && lines_[i] != line) ++i;
      all &= i < size_;
      if (i == size_) i = size_ < kLines ? size_++ : kLines - 1;
      for (; i > 0; --i) lines_[i] = lines_[i - 1];
      lines_[0] = line;
    }
    return all;
  }

 private:
  static constexpr size_t kLines = 32;
  uint64_t lines_[kLines];
  size_t size_ = 0;
};

struct WarpInstruction {
  uint32_t site;
  uint32_t lanes = 0;
  uint64_t bytes = 0;
  std::vector<uint64_t> sectors;
};

void FoldBlock(BlockBuffer& b) {
  State& g = G();
  Launch& l = g.launch;
  const size_t n_sites = g.sites.size();
  std::vector<uint64_t> block_total(n_sites, 0), warp_count, busiest;
  uint64_t busiest_memory = 0;
  std::vector<uint32_t> per_lane(n_sites);
  std::vector<std::vector<uint32_t>> nth(n_sites);  // per site: the warp instruction of its n-th execution
  std::vector<WarpInstruction> instructions;
  WarpL1 l1;
  const int threads = static_cast<int>(b.lanes.size());
  for (int w0 = 0; w0 < threads; w0 += kWarp) {
    for (auto& v : nth) v.clear();
    instructions.clear();
    for (int t = w0; t < std::min(threads, w0 + kWarp); ++t) {
      std::fill(per_lane.begin(), per_lane.end(), 0);
      for (const Access& a : b.lanes[t]) {
        const uint32_t n = per_lane[a.site]++;
        auto& order = nth[a.site];
        if (n == order.size()) {
          order.push_back(static_cast<uint32_t>(instructions.size()));
          instructions.push_back(WarpInstruction{a.site, 0, 0, {}});
        }
        WarpInstruction& wi = instructions[order[n]];
        ++wi.lanes;
        wi.bytes += a.size;
        for (uint64_t s = a.addr / kSector; s <= (a.addr + a.size - 1) / kSector; ++s)
          if (std::find(wi.sectors.begin(), wi.sectors.end(), s) == wi.sectors.end()) wi.sectors.push_back(s);
      }
      std::vector<Access>().swap(b.lanes[t]);
    }
    warp_count.assign(g.sites.size(), 0);
    uint64_t memory = 0;
    l1.Clear();
    for (const WarpInstruction& wi : instructions) {
      const Site& site = g.sites[wi.site];
      SiteStats& st = l.sites[wi.site];
      if (st.dram_read.empty()) st.dram_read.assign(g.l2.size(), 0), st.dram_write.assign(g.l2.size(), 0);
      ++st.execs;
      st.lanes += wi.lanes;
      st.bytes += wi.bytes;
      st.sectors += wi.sectors.size();
      ++warp_count[wi.site];
      ++memory;
      if (site.shared) continue;
      if (!site.write) st.l1_hits += l1.Touch(wi.sectors);
      for (size_t k = 0; k < g.l2.size(); ++k) {
        for (uint64_t s : wi.sectors) {
          const Lru::Result r = g.l2[k].Access(s, site.write);
          st.dram_read[k] += r.read_miss;
          st.dram_write[k] += r.dirtied;
        }
      }
    }
    for (size_t s = 0; s < warp_count.size(); ++s) block_total[s] += warp_count[s];
    if (memory > busiest_memory || busiest.empty()) {
      busiest_memory = memory;
      busiest = warp_count;
    }
  }
  l.block_ids.push_back(static_cast<uint32_t>(b.block));
  for (size_t s = 0; s < block_total.size(); ++s) {
    if (!block_total[s]) continue;
    l.site.push_back(static_cast<uint32_t>(s));
    l.total.push_back(static_cast<uint32_t>(block_total[s]));
    l.busiest.push_back(static_cast<uint32_t>(s < busiest.size() ? busiest[s] : 0));
  }
  l.offsets.push_back(static_cast<uint32_t>(l.site.size()));
}

// ---------------------------------------------------------------------------------------
// Output

std::string JsonString(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) >= 0x20) out += c;
  }
  return out + "\"";
}

uintptr_t Offset(uintptr_t address, std::string* object) {
  Dl_info info;
  if (!dladdr(reinterpret_cast<void*>(address), &info) || !info.dli_fbase) return address;
  if (object && info.dli_fname) *object = info.dli_fname;
  return address - reinterpret_cast<uintptr_t>(info.dli_fbase);
}

template <typename V>
std::string List(const V& values) {
  std::string s = "[";
  for (size_t i = 0; i < values.size(); ++i) s += (i ? "," : "") + std::to_string(values[i]);
  return s + "]";
}

void WriteLaunch(bool failed) {
  State& g = G();
  Launch& l = g.launch;
  char stem[64];
  std::snprintf(stem, sizeof stem, "/launch-%03d-%03d", g.case_index, g.sequence++);
  const std::string base = g.dir + stem;
  std::string object;
  const uintptr_t kernel = Offset(l.kernel, &object);
  std::string json = "{\"case\": " + std::to_string(g.case_index) + ", \"name\": " + JsonString(l.name) +
                     ", \"object\": " + JsonString(object) + ", \"kernel_offset\": " + std::to_string(kernel) +
                     ", \"grid\": " + List(std::vector<unsigned>{l.grid.x, l.grid.y, l.grid.z}) +
                     ", \"block\": " + List(std::vector<unsigned>{l.block.x, l.block.y, l.block.z}) +
                     ", \"shared_bytes\": " + std::to_string(l.shared_bytes) +
                     ", \"failed\": " + (failed ? "true" : "false") + ", \"l2_mb\": " + List(g.l2_mb) +
                     ", \"blocks\": " + std::to_string(l.block_ids.size()) +
                     ", \"entries\": " + std::to_string(l.site.size()) + ", \"sites\": [";
  bool first = true;
  std::vector<uint32_t> ids;
  for (const auto& [id, st] : l.sites) ids.push_back(id);
  std::sort(ids.begin(), ids.end());
  for (uint32_t id : ids) {
    const Site& s = g.sites[id];
    const SiteStats& st = l.sites[id];
    json += std::string(first ? "" : ",") + "\n {\"id\": " + std::to_string(id) +
            ", \"pc_offset\": " + std::to_string(Offset(s.pc, nullptr)) +
            ", \"write\": " + (s.write ? "true" : "false") +
            ", \"shared\": " + (s.shared ? "true" : "false") + ", \"lane_bytes\": " + std::to_string(s.size) +
            ", \"execs\": " + std::to_string(st.execs) + ", \"lanes\": " + std::to_string(st.lanes) +
            ", \"bytes\": " + std::to_string(st.bytes) + ", \"sectors\": " + std::to_string(st.sectors) +
            ", \"l1_hits\": " + std::to_string(st.l1_hits) +
            ", \"dram_read\": " + List(st.dram_read.empty() ? std::vector<uint64_t>(g.l2.size()) : st.dram_read) +
            ", \"dram_write\": " + List(st.dram_write.empty() ? std::vector<uint64_t>(g.l2.size()) : st.dram_write) +
            "}";
    first = false;
  }
  json += "]}\n";
  if (FILE* f = std::fopen((base + ".json").c_str(), "w")) {
    std::fwrite(json.data(), 1, json.size(), f);
    std::fclose(f);
  }
  if (FILE* f = std::fopen((base + ".bin").c_str(), "wb")) {
    for (const auto* v : {&l.block_ids, &l.offsets, &l.site, &l.total, &l.busiest})
      std::fwrite(v->data(), sizeof(uint32_t), v->size(), f);
    std::fclose(f);
  }
}

}  // namespace

void Start(const std::string& dir, const std::vector<double>& l2_mb) {
  State& g = G();
  g.dir = dir;
  g.l2_mb = l2_mb;
  g.l2.clear();
  for (double mb : l2_mb) g.l2.emplace_back(static_cast<uint64_t>(mb * (1 << 20)));
  g.images.clear();
  dl_iterate_phdr(CollectImage, &g.images);
  std::sort(g.images.begin(), g.images.end(), [](const Image& a, const Image& b) { return a.lo < b.lo; });
  g.started = true;
}

void SetCase(int index) {
  G().case_index = index;
  G().sequence = 0;
}

void Finish() { G().started = false; }

}  // namespace jgo_emulation::trace

// ---------------------------------------------------------------------------------------
// The launch hooks (jgo_emulation/trace.h)

using jgo_emulation::trace::G;

extern "C" void jgo_emulation_trace_launch(const char* name, const void* kernel, dim3 grid, dim3 block,
                                           size_t shared_bytes) {
  auto& g = G();
  if (!g.started) return;
  g.thread = pthread_self();
  pthread_attr_t attr;
  if (pthread_getattr_np(g.thread, &attr) == 0) {
    void* lo = nullptr;
    size_t size = 0;
    pthread_attr_getstack(&attr, &lo, &size);
    g.os_stack_lo = reinterpret_cast<uintptr_t>(lo);
    g.os_stack_hi = g.os_stack_lo + size;
    pthread_attr_destroy(&attr);
  }
  g.launch = {};
  g.launch.name = name;
  g.launch.kernel = reinterpret_cast<uintptr_t>(kernel);
  g.launch.grid = grid;
  g.launch.block = block;
  g.launch.shared_bytes = shared_bytes;
  g.blocks.clear();
  jgo_emulation::trace::ForgetFrames();
  jgo_emulation::trace::tl_in_launch = true;
}

extern "C" void jgo_emulation_trace_blocks_done() {
  auto& g = G();
  if (!jgo_emulation::trace::tl_in_launch) return;
  std::sort(g.blocks.begin(), g.blocks.end(), [](const auto& a, const auto& b) { return a.block < b.block; });
  for (auto& b : g.blocks) jgo_emulation::trace::FoldBlock(b);
  g.blocks.clear();
  jgo_emulation::trace::ForgetFrames();
}

extern "C" void jgo_emulation_trace_launch_done(bool failed) {
  if (!jgo_emulation::trace::tl_in_launch) return;
  jgo_emulation::trace::tl_in_launch = false;
  jgo_emulation::trace::WriteLaunch(failed);
}

// A memset between launches: a launch record named cudaMemsetAsync with one written site (pc 1) and no
// blocks, its sectors written through the L2 models.
extern "C" void jgo_emulation_trace_memset(const void* ptr, size_t bytes) {
  auto& g = G();
  if (!g.started || jgo_emulation::trace::tl_in_launch) return;
  g.launch = {};
  g.launch.name = "cudaMemsetAsync";
  g.launch.grid = g.launch.block = dim3(0, 0, 0);
  auto& st = g.launch.sites[jgo_emulation::trace::SiteOf(1, true, false, 16)];
  st.dram_read.assign(g.l2.size(), 0);
  st.dram_write.assign(g.l2.size(), 0);
  const uintptr_t at = reinterpret_cast<uintptr_t>(ptr);
  const uint64_t first = at / 32, last = (at + bytes - 1) / 32;
  st.bytes = bytes;
  st.sectors = last - first + 1;
  st.execs = (bytes + 511) / 512;  // 16 bytes a lane
  st.lanes = st.execs * 32;
  for (size_t k = 0; k < g.l2.size(); ++k)
    for (uint64_t s = first; s <= last; ++s) st.dram_write[k] += g.l2[k].Access(s, true).dirtied;
  jgo_emulation::trace::WriteLaunch(false);
}

// ---------------------------------------------------------------------------------------
// ThreadSanitizer's entry points, as the instrumented code calls them

#define JGO_PC __builtin_return_address(0)
using jgo_emulation::trace::Record;

extern "C" {
void __tsan_init() {}
void __tsan_func_entry(void*) {}
void __tsan_func_exit() {}
void __tsan_ignore_thread_begin() {}
void __tsan_ignore_thread_end() {}
void __tsan_vptr_update(void**, void*) {}
void __tsan_vptr_read(void**) {}

#define JGO_TSAN_ACCESS(n)                                                                  \
  void __tsan_read##n(void* p) { Record(p, n, false, JGO_PC); }                            \
  void __tsan_write##n(void* p) { Record(p, n, true, JGO_PC); }                            \
  void __tsan_unaligned_read##n(void* p) { Record(p, n, false, JGO_PC); }                  \
  void __tsan_unaligned_write##n(void* p) { Record(p, n, true, JGO_PC); }                  \
  void __tsan_volatile_read##n(void* p) { Record(p, n, false, JGO_PC); }                   \
  void __tsan_volatile_write##n(void* p) { Record(p, n, true, JGO_PC); }                   \
  void __tsan_read##n##_pc(void* p, void* pc) { Record(p, n, false, pc); }                 \
  void __tsan_write##n##_pc(void* p, void* pc) { Record(p, n, true, pc); }
JGO_TSAN_ACCESS(1)
JGO_TSAN_ACCESS(2)
JGO_TSAN_ACCESS(4)
JGO_TSAN_ACCESS(8)
JGO_TSAN_ACCESS(16)
#undef JGO_TSAN_ACCESS

// A range (an aggregate copy): recorded as one access per 16 bytes.
void __tsan_read_range(void* p, unsigned long size) {
  for (unsigned long i = 0; i < size; i += 16)
    Record(static_cast<char*>(p) + i, static_cast<uint32_t>(std::min(16ul, size - i)), false, JGO_PC);
}
void __tsan_write_range(void* p, unsigned long size) {
  for (unsigned long i = 0; i < size; i += 16)
    Record(static_cast<char*>(p) + i, static_cast<uint32_t>(std::min(16ul, size - i)), true, JGO_PC);
}

// Atomics: performed here (sequentially consistent), recorded as a write.
#define JGO_TSAN_ATOMIC(n, T)                                                                                 \
  T __tsan_atomic##n##_load(const volatile T* a, int) {                                                       \
    Record(const_cast<T*>(a), n / 8, false, JGO_PC);                                                          \
    return __atomic_load_n(a, __ATOMIC_SEQ_CST);                                                              \
  }                                                                                                           \
  void __tsan_atomic##n##_store(volatile T* a, T v, int) {                                                    \
    Record(const_cast<T*>(a), n / 8, true, JGO_PC);                                                           \
    __atomic_store_n(a, v, __ATOMIC_SEQ_CST);                                                                 \
  }                                                                                                           \
  T __tsan_atomic##n##_exchange(volatile T* a, T v, int) {                                                    \
    Record(const_cast<T*>(a), n / 8, true, JGO_PC);                                                           \
    return __atomic_exchange_n(a, v, __ATOMIC_SEQ_CST);                                                       \
  }                                                                                                           \
  T __tsan_atomic##n##_fetch_add(volatile T* a, T v, int) {                                                   \
    Record(const_cast<T*>(a), n / 8, true, JGO_PC);                                                           \
    return __atomic_fetch_add(a, v, __ATOMIC_SEQ_CST);                                                        \
  }                                                                                                           \
  T __tsan_atomic##n##_fetch_sub(volatile T* a, T v, int) {                                                   \
    Record(const_cast<T*>(a), n / 8, true, JGO_PC);                                                           \
    return __atomic_fetch_sub(a, v, __ATOMIC_SEQ_CST);                                                        \
  }                                                                                                           \
  T __tsan_atomic##n##_fetch_and(volatile T* a, T v, int) {                                                   \
    Record(const_cast<T*>(a), n / 8, true, JGO_PC);                                                           \
    return __atomic_fetch_and(a, v, __ATOMIC_SEQ_CST);                                                        \
  }                                                                                                           \
  T __tsan_atomic##n##_fetch_or(volatile T* a, T v, int) {                                                    \
    Record(const_cast<T*>(a), n / 8, true, JGO_PC);                                                           \
    return __atomic_fetch_or(a, v, __ATOMIC_SEQ_CST);                                                         \
  }                                                                                                           \
  T __tsan_atomic##n##_fetch_xor(volatile T* a, T v, int) {                                                   \
    Record(const_cast<T*>(a), n / 8, true, JGO_PC);                                                           \
    return __atomic_fetch_xor(a, v, __ATOMIC_SEQ_CST);                                                        \
  }                                                                                                           \
  T __tsan_atomic##n##_fetch_nand(volatile T* a, T v, int) {                                                  \
    Record(const_cast<T*>(a), n / 8, true, JGO_PC);                                                           \
    return __atomic_fetch_nand(a, v, __ATOMIC_SEQ_CST);                                                       \
  }                                                                                                           \
  int __tsan_atomic##n##_compare_exchange_strong(volatile T* a, T* c, T v, int, int) {                        \
    Record(const_cast<T*>(a), n / 8, true, JGO_PC);                                                           \
    return __atomic_compare_exchange_n(a, c, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);                   \
  }                                                                                                           \
  int __tsan_atomic##n##_compare_exchange_weak(volatile T* a, T* c, T v, int, int) {                          \
    Record(const_cast<T*>(a), n / 8, true, JGO_PC);                                                           \
    return __atomic_compare_exchange_n(a, c, v, true, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);                    \
  }                                                                                                           \
  T __tsan_atomic##n##_compare_exchange_val(volatile T* a, T c, T v, int, int) {                              \
    Record(const_cast<T*>(a), n / 8, true, JGO_PC);                                                           \
    __atomic_compare_exchange_n(a, &c, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);                         \
    return c;                                                                                                 \
  }
JGO_TSAN_ATOMIC(8, uint8_t)
JGO_TSAN_ATOMIC(16, uint16_t)
JGO_TSAN_ATOMIC(32, uint32_t)
JGO_TSAN_ATOMIC(64, uint64_t)
#undef JGO_TSAN_ATOMIC
void __tsan_atomic_thread_fence(int) { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
void __tsan_atomic_signal_fence(int) { __atomic_signal_fence(__ATOMIC_SEQ_CST); }
}  // extern "C"
