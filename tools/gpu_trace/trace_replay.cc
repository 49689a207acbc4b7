// The traced replay: runs recorded FFI calls (ffi/testing/record.h) on the emulated CUDA handlers with
// the memory trace on (ffi/cuda_emulation/trace.cc), outside JAX, for the GPU model (benchmarks/gpu_model).
//
//   trace_replay OUT_DIR [--l2-mb MB,MB,...] CASE_FILE...
//
// The cases run in the order given, on one thread, each as case number i (0, 1, ...) of the trace: its
// launches are OUT_DIR/launch-iii-sss.{json,bin}; the L2 models carry their contents from one case to the
// next, as the GPU's L2 does from one kernel to the next. Prints a line per case; exits 1 when a case cannot
// be read, names a target without an emulated handler, or its handler fails.
// Built by tools/gpu_trace.mk (the kernels instrumented, this file and the runtime not).
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "handlers.h"
#include "jgo_emulation/trace.h"
#include "targets.h"
#include "testing/case_io.h"
#include "testing/ffi_host.h"

// Every emulated handler weak: a driver built with some kernels only (tools/gpu_trace.mk ONLY=...) links,
// and a case of a missing one fails with its name.
#define JGO_PRAGMA(x) _Pragma(#x)
#define JGO_WEAK_HANDLER(target, Stem) JGO_PRAGMA(weak Jgo##Stem##CudaEmulation)
JGO_TARGETS(JGO_WEAK_HANDLER)
#undef JGO_WEAK_HANDLER

namespace {

constexpr size_t kAlign = 256;  // XLA's GPU buffers start at 256-byte boundaries

struct Handler {
  const char* target;
  XLA_FFI_Handler* handler;
};

constexpr Handler kHandlers[] = {
#define JGO_EMULATED_HANDLER(target, Stem) {#target, Jgo##Stem##CudaEmulation},
    JGO_TARGETS(JGO_EMULATED_HANDLER)
#undef JGO_EMULATED_HANDLER
};

XLA_FFI_Handler* HandlerOf(const std::string& target) {
  for (const Handler& h : kHandlers)
    if (target == h.target) return h.handler;
  return nullptr;
}

std::vector<double> ParseSizes(const char* text) {
  std::vector<double> sizes;
  for (const char* p = text; *p;) {
    char* end = nullptr;
    const double v = std::strtod(p, &end);
    if (end == p || v <= 0) return {};
    sizes.push_back(v);
    p = *end == ',' ? end + 1 : end;
  }
  return sizes;
}

int Usage() {
  std::fprintf(stderr, "usage: trace_replay OUT_DIR [--l2-mb MB,MB,...] CASE_FILE...\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) return Usage();
  const std::string out = argv[1];
  std::vector<double> l2_mb = {25, 50};
  std::vector<std::string> cases;
  for (int i = 2; i < argc; ++i) {
    if (std::strcmp(argv[i], "--l2-mb") == 0 && i + 1 < argc) {
      l2_mb = ParseSizes(argv[++i]);
      if (l2_mb.empty()) return Usage();
    } else {
      cases.push_back(argv[i]);
    }
  }
  if (cases.empty()) return Usage();
  jgo::testing::HostFfi ffi(1);
  jgo_emulation::trace::Start(out, l2_mb);
  int status = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    std::string error;
    auto c = jgo::testing::ReadCase(cases[i], &error);
    if (!c) {
      std::fprintf(stderr, "%s: %s\n", cases[i].c_str(), error.c_str());
      return 1;
    }
    XLA_FFI_Handler* handler = HandlerOf(c->target);
    if (!handler) {
      std::fprintf(stderr, "%s: no emulated CUDA handler for %s\n", cases[i].c_str(), c->target.c_str());
      return 1;
    }
    std::vector<jgo::testing::BufferRef> args, rets;
    std::vector<std::unique_ptr<char, decltype(&std::free)>> memory;
    for (auto* buffers : {&c->args, &c->rets}) {
      for (auto& b : *buffers) {  // at XLA's alignment, so that rows start where they would on the GPU
        const size_t bytes = (b.bytes.size() + kAlign - 1) / kAlign * kAlign;
        memory.emplace_back(static_cast<char*>(std::aligned_alloc(kAlign, bytes ? bytes : kAlign)), &std::free);
        std::memcpy(memory.back().get(), b.bytes.data(), b.bytes.size());
        (buffers == &c->args ? args : rets).push_back({b.dtype, b.dims, memory.back().get()});
      }
    }
    jgo_emulation::trace::SetCase(static_cast<int>(i));
    const auto failure = ffi.Call(handler, args, rets, c->attrs);
    std::printf("case %zu %s: %s\n", i, c->target.c_str(), failure ? failure->c_str() : "ok");
    if (failure) status = 1;
  }
  jgo_emulation::trace::Finish();
  return status;
}
