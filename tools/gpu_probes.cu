// Microbenchmarks that calibrate the GPU model (`python -m benchmarks.gpu_model`; issue 31, item 6c): copy
// bandwidth, row gathers against the table's size (the effective L2), an L2-resident gather, pointer chases
// (latency unloaded, under a streaming load, and with a chain per warp on every SM) and a one-hub row.
//
// Built here, where there is no GPU (tools/gpu_check.sh --prepare), and carried to a lent GPU as a file:
//   nvcc -O3 -std=c++17 -gencode arch=compute_90,code=sm_90 -cudart static -o .gpu/gpu_probes tools/gpu_probes.cu
// Run: gpu_probes [--ncu] [--scale S] [--help]
//   One JSON object per line and per measured quantity on stdout, flushed after each, so that a run stopped by
//   its time limit keeps every line it printed. Times are medians of REPS launches timed with CUDA events after
//   a warm-up, with the L2 flushed before each (a kernel writes 4x the L2's size): every launch starts cold.
//   --ncu: every kernel once at its representative sizes, nothing timed, an object {"probe": "launch", ...} per
//   launch in launch order (the rows of `ncu --kernel-name regex:probe_` follow that order).
//   --scale S multiplies the sizes (S < 1 for a quick look).
//
// The objects, by "probe" (bytes in bytes, ms/us/ns as named, GB/s = 1e9 bytes per second); the model reads these
// names (benchmarks.gpu_model):
//   device     name, cc (e.g. 90), sms, l2_bytes, global_bytes, clock_khz, mem_clock_khz, bus_width_bits
//   copy       method ("kernel": 16-byte loads and stores; "memcpy": cudaMemcpyAsync device to device),
//              bytes (one buffer), ms, gbps (bytes read + bytes written, over the time)
//   gather     table_bytes, row_bytes, gathers, degree (rows summed per output row), mlp (gathers issued before
//              the first is used), ms, gbps (gathered bytes over the time; the indices and the output not
//              counted): rows of a random table summed into output rows, the sweep over the table's size
//   gather_l2  the same fields, one table of l2_bytes / 8: the L2-to-SM bandwidth of row gathers
//   chase      mode ("unloaded": one thread; "loaded": one thread while every other block streams DRAM; "many":
//              one chain per warp, 32 warps on every SM), footprint_bytes, hops (per chain), chains, ns_per_hop
//              (the time of one dependent load of a chain), stream_gbps (loaded: the streaming blocks' read
//              bandwidth meanwhile), hops_per_us (many: all chains together)
//   hub        edges, row_bytes, table_bytes, mlp, staged (1: indices loaded 32 at a time and broadcast by
//              shuffles, as the row-walk engine does; 0: one index load per edge), us, ns_per_edge: one warp
//              summing the rows of one hub (13,012 edges: the power-law graph's largest in-degree)
//   launch     (--ncu only) kernel, and the parameters above of that launch
//   error      where, error: a CUDA call failed; the program exits 1 after printing it
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

namespace {

constexpr int kReps = 5;
constexpr int kHubEdges = 13012;
constexpr int kHubTableRows = 169343;  // the power-law graph's node count
constexpr int kDegree = 16;

// ---- output -------------------------------------------------------------------------------------------------

// One JSON object, printed as one line and flushed.
class Json {
 public:
  explicit Json(const char* probe) { text_ = std::string("{\"probe\": \"") + probe + "\""; }
  Json& str(const char* key, const std::string& value) {
    std::string escaped;
    for (char c : value) {
      if (c == '"' || c == '\\') escaped += '\\';
      if (static_cast<unsigned char>(c) >= 0x20) escaped += c;
    }
    text_ += std::string(", \"") + key + "\": \"" + escaped + "\"";
    return *this;
  }
  Json& num(const char* key, double value) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.6g", value);
    text_ += std::string(", \"") + key + "\": " + buf;
    return *this;
  }
  void print() const {
    std::printf("%s}\n", text_.c_str());
    std::fflush(stdout);
  }
  void print_unless(bool quiet) const {
    if (!quiet) print();
  }

 private:
  std::string text_;
};

void Check(cudaError_t status, const char* where) {
  if (status == cudaSuccess) return;
  Json("error").str("where", where).str("error", cudaGetErrorString(status)).print();
  std::exit(1);
}
#define CHECK(call) Check((call), #call)
#define CHECK_LAUNCH(what) Check(cudaGetLastError(), what)

template <typename T>
T* Alloc(size_t count) {
  void* p = nullptr;
  CHECK(cudaMalloc(&p, count * sizeof(T)));
  return static_cast<T*>(p);
}

// ---- kernels --------------------------------------------------------------------------------------------------

__device__ __forceinline__ uint32_t Hash(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  x ^= x >> 33;
  return static_cast<uint32_t>(x);
}

__device__ __forceinline__ int64_t Tid() { return blockIdx.x * int64_t(blockDim.x) + threadIdx.x; }
__device__ __forceinline__ int64_t Threads() { return gridDim.x * int64_t(blockDim.x); }

__device__ __forceinline__ void Add(float4& a, const float4& b) {
  a.x += b.x;
  a.y += b.y;
  a.z += b.z;
  a.w += b.w;
}

// Values in [0, 1): no zeros to time on (METHOD.md), no NaN.
__global__ void probe_fill(float* __restrict__ p, int64_t n, uint32_t seed) {
  for (int64_t i = Tid(); i < n; i += Threads()) {
    p[i] = (Hash(i * 0x9e3779b97f4a7c15ull + seed) >> 8) * (1.0f / 16777216);
  }
}

__global__ void probe_indices(int* __restrict__ idx, int64_t n, int64_t range, uint32_t seed) {
  for (int64_t i = Tid(); i < n; i += Threads()) idx[i] = static_cast<int>(Hash(i + (uint64_t(seed) << 40)) % range);
}

// next[cycle[k]] = cycle[k + 1], the last back to the first: a chase visits every node once per lap.
__global__ void probe_link(uint32_t* __restrict__ next, const uint32_t* __restrict__ cycle, int64_t nodes) {
  for (int64_t k = Tid(); k < nodes; k += Threads()) next[cycle[k]] = cycle[k + 1 < nodes ? k + 1 : 0];
}

// Writes every byte of a buffer several times the L2: evicts whatever a probe left there.
__global__ void probe_flush(float4* __restrict__ p, int64_t n, float v) {
  for (int64_t i = Tid(); i < n; i += Threads()) p[i] = make_float4(v, v, v, v);
}

__global__ void probe_copy(const float4* __restrict__ src, float4* __restrict__ dst, int64_t n) {
  for (int64_t i = Tid(); i < n; i += Threads()) dst[i] = src[i];
}

// Groups of `lanes` = row_bytes / 16 lanes; each group sums kDegree rows table[idx[..]] into one output row, all
// kDegree gathers issued before the first is added (the SASS shows the 16 loads ahead of the adds).
__global__ void __launch_bounds__(256, 1) probe_gather(const float4* __restrict__ table, const int* __restrict__ idx,
                                                       float4* __restrict__ out, int64_t rows_out, int lanes) {
  const int lane = threadIdx.x % lanes;
  const int64_t groups = Threads() / lanes;
  for (int64_t r = Tid() / lanes; r < rows_out; r += groups) {
    const int* ids = idx + r * kDegree;
    float4 v[kDegree];
#pragma unroll
    for (int k = 0; k < kDegree; ++k) v[k] = table[int64_t(ids[k]) * lanes + lane];
    float4 acc = make_float4(0, 0, 0, 0);
#pragma unroll
    for (int k = 0; k < kDegree; ++k) Add(acc, v[k]);
    out[r * lanes + lane] = acc;
  }
}

__device__ __forceinline__ uint64_t GlobalTimerNs() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// `chains` chains (lane 0 of each warp of the grid, or the one thread of a one-thread launch) follow `next` for
// `hops` dependent loads each, through the L2 (ld.global.cg: not cached in L1).
__global__ void probe_chase(const uint32_t* __restrict__ next, int64_t hops, const uint32_t* __restrict__ starts,
                            uint32_t* __restrict__ sink) {
  if (threadIdx.x % 32 != 0) return;
  const int64_t chain = Tid() / 32;
  uint32_t p = starts[chain];
  for (int64_t h = 0; h < hops; ++h) p = __ldcg(next + p);
  sink[chain] = p;
}

// Block 0's thread 0 chases as above and times itself; every other block streams `stream` (reads, evict-first)
// pass after pass until the chase is over (at most max_passes passes: no block waits on another forever).
__global__ void probe_chase_loaded(const uint32_t* __restrict__ next, int64_t hops, uint32_t start,
                                   const float4* __restrict__ stream, int64_t stream_n, int max_passes,
                                   volatile int* done, unsigned long long* __restrict__ result) {
  if (blockIdx.x == 0) {
    if (threadIdx.x != 0) return;
    uint32_t p = start;
    const uint64_t t0 = GlobalTimerNs();
    for (int64_t h = 0; h < hops; ++h) p = __ldcg(next + p);
    const uint64_t t1 = GlobalTimerNs();
    result[0] = t1 - t0;
    result[1] = p;
    __threadfence();
    *done = 1;
    return;
  }
  const int64_t stride = (gridDim.x - 1) * int64_t(blockDim.x);
  float4 acc = make_float4(0, 0, 0, 0);
  unsigned long long vectors = 0;
  for (int pass = 0; pass < max_passes && !*done; ++pass) {
    for (int64_t i = (blockIdx.x - 1) * int64_t(blockDim.x) + threadIdx.x; i < stream_n; i += stride) {
      Add(acc, __ldcs(stream + i));
      ++vectors;
    }
  }
  if (acc.x == -1.0f) result[1] = 0;  // never: keeps the loads
  atomicAdd(result + 2, vectors);
}

// One warp sums the 512-byte rows table[idx[e]] of `edges` edges as MLP interleaved chains: the gather of edge
// e + MLP waits for that of edge e (its row id is offset by `zero` & a bit of the row loaded before; zero is 0 at
// run time, a dependence the compiler must keep), so that exactly MLP gathers are in flight, as in a row walk
// that issues MLP of them before the first is consumed. STAGED: the indices are loaded 32 at a time, one per
// lane, and broadcast by shuffles (the row-walk engine's staging); otherwise each edge's index is loaded by every
// lane.
template <int MLP, bool STAGED>
__global__ void __launch_bounds__(32, 1) probe_hub(const float4* __restrict__ table, const int* __restrict__ idx,
                                                   int64_t edges, int zero, float4* __restrict__ out) {
  const int lane = threadIdx.x;
  float4 acc = make_float4(0, 0, 0, 0);
  float4 last[MLP];
#pragma unroll
  for (int j = 0; j < MLP; ++j) last[j] = make_float4(0, 0, 0, 0);
  for (int64_t base = 0; base < edges; base += 32) {
    const int count = static_cast<int>(edges - base < 32 ? edges - base : 32);
    const int mine = STAGED && lane < count ? idx[base + lane] : 0;
    for (int k = 0; k < count; k += MLP) {
      float4 v[MLP];
#pragma unroll
      for (int j = 0; j < MLP; ++j) {
        const int e = k + j < count ? k + j : count - 1;
        const int staged = STAGED ? __shfl_sync(0xffffffffu, mine, e) : idx[base + e];
        const int id = staged + (__float_as_int(last[j].x) & zero);
        v[j] = table[int64_t(id) * 32 + lane];
      }
#pragma unroll
      for (int j = 0; j < MLP; ++j) {
        if (k + j < count) Add(acc, v[j]);
        last[j] = v[j];
      }
    }
  }
  out[lane] = acc;
}

// ---- host -----------------------------------------------------------------------------------------------------

struct Device {
  int sms = 0;
  int64_t l2_bytes = 0;
};

class Prober {
 public:
  Prober(bool ncu, double scale) : ncu_(ncu), scale_(scale) {
    cudaDeviceProp prop;
    CHECK(cudaGetDeviceProperties(&prop, 0));
    int clock_khz = 0, mem_clock_khz = 0;
    CHECK(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0));
    CHECK(cudaDeviceGetAttribute(&mem_clock_khz, cudaDevAttrMemoryClockRate, 0));
    dev_.sms = prop.multiProcessorCount;
    dev_.l2_bytes = prop.l2CacheSize;
    Json("device").str("name", prop.name).num("cc", prop.major * 10 + prop.minor).num("sms", dev_.sms)
        .num("l2_bytes", dev_.l2_bytes).num("global_bytes", double(prop.totalGlobalMem))
        .num("clock_khz", clock_khz).num("mem_clock_khz", mem_clock_khz).num("bus_width_bits", prop.memoryBusWidth)
        .print();
    flush_n_ = 4 * dev_.l2_bytes / 16;
    flush_ = Alloc<float4>(flush_n_);
    CHECK(cudaEventCreate(&start_));
    CHECK(cudaEventCreate(&stop_));
  }

  void Copy() {
    const int64_t bytes = Scaled(int64_t(1) << 30);
    const int64_t n = bytes / 16;
    float4* src = Alloc<float4>(n);
    float4* dst = Alloc<float4>(n);
    Fill(reinterpret_cast<float*>(src), n * 4, 1);
    if (ncu_) {
      Launch(Json("launch").str("kernel", "probe_copy").num("bytes", bytes));
    }
    const double kernel_ms = Time([&] { probe_copy<<<Blocks(probe_copy), 256>>>(src, dst, n); });
    Json("copy").str("method", "kernel").num("bytes", bytes).num("ms", kernel_ms).num("gbps", 2e-6 * bytes / kernel_ms)
        .print_unless(ncu_);
    if (!ncu_) {
      const double memcpy_ms = Time([&] { CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice)); });
      Json("copy").str("method", "memcpy").num("bytes", bytes).num("ms", memcpy_ms)
          .num("gbps", 2e-6 * bytes / memcpy_ms).print();
    }
    CHECK(cudaFree(src));
    CHECK(cudaFree(dst));
  }

  // The gather sweep (tables of 1 MiB to 4 GiB, rows of 512, 256 and 32 bytes) and the L2-resident gather.
  void Gathers() {
    const int64_t max_table = Scaled(int64_t(4) << 30);
    float4* table = Alloc<float4>(max_table / 16);
    Fill(reinterpret_cast<float*>(table), max_table / 4, 2);
    const int64_t gathers = std::max<int64_t>(Scaled(int64_t(4) << 20) / kDegree * kDegree, kDegree);
    int* idx = Alloc<int>(gathers);
    float4* out = Alloc<float4>(gathers / kDegree * 32);
    const std::vector<int> rows = {512, 256, 32};
    std::vector<int64_t> tables;
    for (int64_t t = int64_t(1) << 20; t <= max_table; t *= 2) tables.push_back(t);
    if (ncu_) tables = {int64_t(4) << 20, int64_t(32) << 20, int64_t(128) << 20, int64_t(1) << 30};
    for (int row : rows) {
      for (int64_t t : tables) {
        if (t > max_table) continue;
        Gather("gather", table, t, row, idx, gathers, out);
      }
      Gather("gather_l2", table, dev_.l2_bytes / 8, row, idx, gathers, out);
    }
    CHECK(cudaFree(table));
    CHECK(cudaFree(idx));
    CHECK(cudaFree(out));
  }

  // Chases over footprints of 2 MiB to 2 GiB (one 128-byte line per node), unloaded, loaded and many.
  void Chases() {
    std::vector<int64_t> footprints;
    for (int64_t f = int64_t(2) << 20; f <= Scaled(int64_t(2) << 30); f *= 4) footprints.push_back(f);
    if (ncu_) footprints = {int64_t(8) << 20, int64_t(512) << 20};
    const int64_t hops = std::max<int64_t>(Scaled(20000), 100);
    for (int64_t footprint : footprints) {
      std::vector<uint32_t> order;
      uint32_t* next = Cycle(footprint, &order);
      uint32_t* starts = Alloc<uint32_t>(dev_.sms * 32);
      uint32_t* sink = Alloc<uint32_t>(dev_.sms * 32);
      // unloaded: one thread
      Upload(starts, order, 1);
      if (ncu_) Launch(Json("launch").str("kernel", "probe_chase").num("footprint_bytes", footprint).num("hops", hops));
      const double one_ms = Time([&] { probe_chase<<<1, 1>>>(next, hops, starts, sink); });
      Json("chase").str("mode", "unloaded").num("footprint_bytes", footprint).num("hops", hops).num("chains", 1)
          .num("ns_per_hop", one_ms * 1e6 / hops).print_unless(ncu_);
      if (!ncu_) {
        Loaded(next, order[0], footprint, hops);
        // many: lane 0 of 32 one-warp blocks per SM, starts spread along the cycle
        const int chains = dev_.sms * 32;
        Upload(starts, order, chains);
        const int64_t many_hops = std::max<int64_t>(hops / 4, 50);
        const double many_ms = Time([&] { probe_chase<<<chains, 32>>>(next, many_hops, starts, sink); });
        Json("chase").str("mode", "many").num("footprint_bytes", footprint).num("hops", many_hops)
            .num("chains", chains).num("ns_per_hop", many_ms * 1e6 / many_hops)
            .num("hops_per_us", chains * many_hops / (many_ms * 1e3)).print();
      }
      CHECK(cudaFree(next));
      CHECK(cudaFree(starts));
      CHECK(cudaFree(sink));
    }
  }

  // One warp over a hub row of kHubEdges edges into a table of the power-law graph's size, 512-byte rows.
  void Hub() {
    const int64_t rows = kHubTableRows, edges = kHubEdges;
    float4* table = Alloc<float4>(rows * 32);
    Fill(reinterpret_cast<float*>(table), rows * 128, 3);
    int* idx = Alloc<int>(edges);
    probe_indices<<<64, 256>>>(idx, edges, rows, 4);
    CHECK_LAUNCH("probe_indices");
    float4* out = Alloc<float4>(32);
    HubCase<1, false>(table, idx, out);
    HubCase<2, false>(table, idx, out);
    HubCase<4, false>(table, idx, out);
    HubCase<8, false>(table, idx, out);
    HubCase<16, false>(table, idx, out);
    HubCase<8, true>(table, idx, out);
    HubCase<16, true>(table, idx, out);
    CHECK(cudaFree(table));
    CHECK(cudaFree(idx));
    CHECK(cudaFree(out));
  }

 private:
  int64_t Scaled(int64_t v) const { return std::max<int64_t>(int64_t(v * scale_) / 64 * 64, 64); }

  template <typename Kernel>
  int Blocks(Kernel kernel, int threads = 256) const {
    int per_sm = 0;
    CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, 0));
    return std::max(per_sm, 1) * dev_.sms;
  }

  void Fill(float* p, int64_t n, uint32_t seed) {
    probe_fill<<<Blocks(probe_fill), 256>>>(p, n, seed);
    CHECK_LAUNCH("probe_fill");
  }

  void Flush() {
    probe_flush<<<Blocks(probe_flush), 256>>>(flush_, flush_n_, float(++flushes_));
    CHECK_LAUNCH("probe_flush");
  }

  // The median time in ms of `launch` (after a warm-up and a flush each); in --ncu mode one untimed launch.
  template <typename F>
  double Time(F launch) {
    if (ncu_) {
      launch();
      CHECK_LAUNCH("probe launch");
      CHECK(cudaDeviceSynchronize());
      return 0;
    }
    launch();
    CHECK_LAUNCH("probe warm-up");
    std::vector<float> ms;
    for (int r = 0; r < kReps; ++r) {
      Flush();
      CHECK(cudaEventRecord(start_));
      launch();
      CHECK_LAUNCH("probe launch");
      CHECK(cudaEventRecord(stop_));
      CHECK(cudaEventSynchronize(stop_));
      float t = 0;
      CHECK(cudaEventElapsedTime(&t, start_, stop_));
      ms.push_back(t);
    }
    std::sort(ms.begin(), ms.end());
    return ms[ms.size() / 2];
  }

  void Launch(const Json& j) { j.print(); }

  void Gather(const char* probe, const float4* table, int64_t table_bytes, int row_bytes, int* idx, int64_t gathers,
              float4* out) {
    const int lanes = row_bytes / 16;
    const int64_t table_rows = table_bytes / row_bytes;
    probe_indices<<<Blocks(probe_indices), 256>>>(idx, gathers, table_rows, uint32_t(table_bytes >> 10) + row_bytes);
    CHECK_LAUNCH("probe_indices");
    const int64_t rows_out = gathers / kDegree;
    if (ncu_) {
      Launch(Json("launch").str("kernel", "probe_gather").num("table_bytes", table_bytes).num("row_bytes", row_bytes)
                 .num("gathers", gathers));
    }
    const double ms = Time([&] { probe_gather<<<Blocks(probe_gather), 256>>>(table, idx, out, rows_out, lanes); });
    Json(probe).num("table_bytes", table_bytes).num("row_bytes", row_bytes).num("gathers", gathers)
        .num("degree", kDegree).num("mlp", kDegree).num("ms", ms).num("gbps", 1e-6 * gathers * row_bytes / ms)
        .print_unless(ncu_);
  }

  // A random cycle through footprint / 128 nodes, one per 128-byte line: next[node * 32] = the next node * 32.
  // `order` gets the nodes in cycle order (element offsets).
  uint32_t* Cycle(int64_t footprint, std::vector<uint32_t>* order) {
    const int64_t nodes = footprint / 128;
    order->resize(nodes);
    std::iota(order->begin(), order->end(), 0u);
    std::mt19937_64 rng(footprint);
    std::shuffle(order->begin(), order->end(), rng);
    for (auto& v : *order) v *= 32;
    uint32_t* cycle = Alloc<uint32_t>(nodes);
    CHECK(cudaMemcpy(cycle, order->data(), nodes * 4, cudaMemcpyHostToDevice));
    uint32_t* next = Alloc<uint32_t>(nodes * 32);
    probe_link<<<Blocks(probe_link), 256>>>(next, cycle, nodes);
    CHECK_LAUNCH("probe_link");
    CHECK(cudaFree(cycle));
    return next;
  }

  // `count` start nodes spread evenly along the cycle.
  void Upload(uint32_t* starts, const std::vector<uint32_t>& order, int count) {
    std::vector<uint32_t> host(count);
    for (int c = 0; c < count; ++c) host[c] = order[int64_t(c) * order.size() / count];
    CHECK(cudaMemcpy(starts, host.data(), count * 4, cudaMemcpyHostToDevice));
  }

  void Loaded(const uint32_t* next, uint32_t start, int64_t footprint, int64_t hops) {
    const int64_t stream_n = (int64_t(1) << 30) / 16;
    float4* stream = Alloc<float4>(stream_n);
    Fill(reinterpret_cast<float*>(stream), stream_n * 4, 5);
    int* done = Alloc<int>(1);
    unsigned long long* result = Alloc<unsigned long long>(3);
    const int blocks = Blocks(probe_chase_loaded);  // all resident at once: block 0 cannot wait for a slot
    std::vector<double> ns, gbps;
    for (int r = 0; r < kReps; ++r) {
      Flush();
      CHECK(cudaMemset(done, 0, sizeof(int)));
      CHECK(cudaMemset(result, 0, 3 * sizeof(unsigned long long)));
      probe_chase_loaded<<<blocks, 256>>>(next, hops, start, stream, stream_n, 4096, done, result);
      CHECK_LAUNCH("probe_chase_loaded");
      unsigned long long host[3];
      CHECK(cudaMemcpy(host, result, sizeof host, cudaMemcpyDeviceToHost));
      ns.push_back(double(host[0]) / hops);
      gbps.push_back(16.0 * host[2] / std::max<double>(host[0], 1));
    }
    std::sort(ns.begin(), ns.end());
    std::sort(gbps.begin(), gbps.end());
    Json("chase").str("mode", "loaded").num("footprint_bytes", footprint).num("hops", hops).num("chains", 1)
        .num("ns_per_hop", ns[ns.size() / 2]).num("stream_gbps", gbps[gbps.size() / 2]).print();
    CHECK(cudaFree(stream));
    CHECK(cudaFree(done));
    CHECK(cudaFree(result));
  }

  template <int MLP, bool STAGED>
  void HubCase(const float4* table, const int* idx, float4* out) {
    if (ncu_) {
      Launch(Json("launch").str("kernel", "probe_hub").num("mlp", MLP).num("staged", STAGED));
    }
    const double ms = Time([&] { probe_hub<MLP, STAGED><<<1, 32>>>(table, idx, kHubEdges, 0, out); });
    Json("hub").num("edges", kHubEdges).num("row_bytes", 512).num("table_bytes", double(kHubTableRows) * 512)
        .num("mlp", MLP).num("staged", STAGED).num("us", ms * 1e3).num("ns_per_edge", ms * 1e6 / kHubEdges)
        .print_unless(ncu_);
  }

  bool ncu_;
  double scale_;
  Device dev_;
  float4* flush_ = nullptr;
  int64_t flush_n_ = 0;
  int flushes_ = 0;
  cudaEvent_t start_, stop_;
};

}  // namespace

int main(int argc, char** argv) {
  bool ncu = false;
  double scale = 1.0;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--help")) {
      std::printf("usage: %s [--ncu] [--scale S]  (tools/gpu_probes.cu says what it prints)\n", argv[0]);
      return 0;
    } else if (!std::strcmp(argv[i], "--ncu")) {
      ncu = true;
    } else if (!std::strcmp(argv[i], "--scale") && i + 1 < argc) {
      scale = std::atof(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: %s [--ncu] [--scale S]\n", argv[0]);
      return 2;
    }
  }
  if (!(scale > 0 && scale <= 1)) {
    std::fprintf(stderr, "%s: --scale must be in (0, 1], got %g\n", argv[0], scale);
    return 2;
  }
  Prober prober(ncu, scale);
  prober.Copy();
  prober.Gathers();
  prober.Hub();
  prober.Chases();
  return 0;
}
