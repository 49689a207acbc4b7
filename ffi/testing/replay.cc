// The replay driver: runs the FFI calls recorded by record.h again, outside JAX, so that the
// handlers can be checked under sanitizers (tools/sanitize.sh).
//
//   replay CASE_DIR [--platform cpu|cuda-emulation|both] [--threads N] [--limit K] [--no-malformed]
//          [--malformed-once]
//
// For every case (the first K per target in file name order):
//  - the recorded platform's handler, on fresh copies of the inputs and on results pre-filled with
//    the sentinel: the results must agree with the recorded ones (kReplayTolerance) and be written
//    wherever the recorded ones were; a recorded error must come back with the same message;
//  - if the case recorded no error and its floating-point buffers are all f32/f64, the other
//    platform's handler: its results must agree with the recorded ones within kCrossTolerance;
//  - a case recorded on the CUDA handlers with indices the CPU handler rejects (the platforms'
//    policies differ) is instead replayed like a malformed variant, below;
//  - unless --no-malformed, each malformed variant of the index arguments (malformed.h) on each
//    platform: any result or error will do, but no crash or sanitizer report; with --malformed-once,
//    only for the first case of each signature (the target, its attributes, and the element types and
//    ranks of its buffers: the code paths a variant can take), not again for another graph of it.
// --platform limits the handlers called (default both: the CPU ones alone in a build without the
// emulated CUDA handlers, -DJGO_WITH_CUDA_EMULATION); --threads sizes the host thread pool (2).
// Prints a line per target and a final "<N> passed, <M> failed"; exits 1 on any failure.
#include <dirent.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "handlers.h"
#include "targets.h"
#include "testing/case_io.h"
#include "testing/compare.h"
#include "testing/ffi_host.h"
#include "testing/malformed.h"

#ifdef JGO_WITH_CUDA_EMULATION
#define JGO_EMULATED(Stem) Jgo##Stem##CudaEmulation
#else
#define JGO_EMULATED(Stem) nullptr
#endif

// Set by the sanitizer runtimes that provide it: called when a report ends the process.
extern "C" __attribute__((weak)) void __sanitizer_set_death_callback(void (*callback)());

namespace jgo::testing {
namespace {

constexpr char kCpu[] = "cpu";
constexpr char kEmulation[] = "cuda-emulation";

struct Handlers {
  const char* target;
  XLA_FFI_Handler* cpu;
  XLA_FFI_Handler* emulation;  // null without the emulated CUDA handlers
};

constexpr Handlers kHandlers[] = {
#define JGO_HANDLERS(target, Stem) {#target, Jgo##Stem##Cpu, JGO_EMULATED(Stem)},
    JGO_TARGETS(JGO_HANDLERS)
#undef JGO_HANDLERS
};

#ifdef JGO_WITH_CUDA_EMULATION
constexpr bool kWithEmulation = true;
#else
constexpr bool kWithEmulation = false;
#endif

XLA_FFI_Handler* HandlerOf(const Handlers& h, const std::string& platform) {
  return platform == kCpu ? h.cpu : platform == kEmulation ? h.emulation : nullptr;
}

struct Options {
  std::string dir;
  std::vector<std::string> platforms;
  int threads = 2;
  long limit = LONG_MAX;
  bool malformed = true;
  bool malformed_once = false;
};

std::optional<Options> ParseOptions(int argc, char** argv) {
  Options o;
  std::string platform = "both";
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool has_value = i + 1 < argc;
    if (a == "--platform" && has_value) {
      platform = argv[++i];
    } else if (a == "--threads" && has_value) {
      o.threads = std::atoi(argv[++i]);
    } else if (a == "--limit" && has_value) {
      o.limit = std::atol(argv[++i]);
    } else if (a == "--no-malformed") {
      o.malformed = false;
    } else if (a == "--malformed-once") {
      o.malformed_once = true;
    } else if (a[0] != '-' && o.dir.empty()) {
      o.dir = a;
    } else {
      return std::nullopt;
    }
  }
  if (platform == kCpu || platform == "both") o.platforms.push_back(kCpu);
  if ((platform == kEmulation || platform == "both") && kWithEmulation) o.platforms.push_back(kEmulation);
  if (o.dir.empty() || o.platforms.empty() || o.threads < 0 || o.limit < 0) return std::nullopt;
  return o;
}

// The case files of the directory, in name order.
std::vector<std::string> CaseFiles(const std::string& dir) {
  std::vector<std::string> names;
  if (DIR* d = opendir(dir.c_str())) {
    const size_t suffix = std::strlen(kCaseSuffix);
    while (const dirent* e = readdir(d)) {
      const std::string name = e->d_name;
      if (name.size() > suffix && name.compare(name.size() - suffix, suffix, kCaseSuffix) == 0) names.push_back(name);
    }
    closedir(d);
  }
  std::sort(names.begin(), names.end());
  return names;
}

// What is being replayed, for the death callback. Never destroyed: without halt_on_error a sanitizer calls it at
// exit, after the destructors of static objects (it then names the last call replayed).
std::string& g_current = *new std::string;

void PrintCurrent() { std::fprintf(stderr, "replay: the report above came while running %s\n", g_current.c_str()); }

struct Outcome {
  std::optional<std::string> error;
  std::vector<HostBuffer> rets;
};

// Calls the handler on fresh copies of the case's arguments (one of them replaced by the variant)
// and on results pre-filled with the sentinel. Every buffer gets an allocation of its exact size,
// so that a sanitizer sees accesses past its end.
Outcome Run(HostFfi& host, XLA_FFI_Handler* handler, const Case& c, const Variant* variant) {
  std::vector<std::unique_ptr<char[]>> storage;
  auto place = [&](const HostBuffer& b) -> BufferRef {
    storage.emplace_back(new char[b.bytes.size()]);
    if (!b.bytes.empty()) std::memcpy(storage.back().get(), b.bytes.data(), b.bytes.size());
    return {b.dtype, b.dims, storage.back().get()};
  };
  std::vector<BufferRef> args, rets;
  for (size_t i = 0; i < c.args.size(); ++i)
    args.push_back(place(variant && variant->arg == i ? variant->buffer : c.args[i]));
  Outcome out;
  for (const HostBuffer& r : c.rets) {
    HostBuffer b{r.dtype, r.dims, std::vector<char>(r.bytes.size())};
    FillSentinel(b.dtype, b.bytes.data(), b.bytes.size());
    rets.push_back(place(b));
    out.rets.push_back(std::move(b));
  }
  out.error = host.Call(handler, args, rets, c.attrs);
  for (size_t i = 0; i < rets.size(); ++i)
    if (!out.rets[i].bytes.empty()) std::memcpy(out.rets[i].bytes.data(), rets[i].data, out.rets[i].bytes.size());
  return out;
}

// Whether every floating-point buffer of the case is f32 or f64 (the platforms agree on those).
bool FloatTypesOnly(const Case& c) {
  for (const auto* buffers : {&c.args, &c.rets})
    for (const HostBuffer& b : *buffers)
      if (b.dtype == XLA_FFI_DataType_F16 || b.dtype == XLA_FFI_DataType_BF16 || b.dtype == XLA_FFI_DataType_C64 ||
          b.dtype == XLA_FFI_DataType_C128)
        return false;
  return true;
}

// The difference between a replay of the case and its record, or nothing.
std::optional<std::string> Check(const Case& c, const Outcome& got, const Tolerance& tol) {
  if (c.failed && !got.error) return "succeeded, but the recorded call failed: " + c.error;
  if (!c.failed && got.error) return "failed: " + *got.error;
  if (c.failed && *got.error != c.error) return "failed with \"" + *got.error + "\", recorded \"" + c.error + "\"";
  return c.failed ? std::nullopt : CompareResults(got.rets, c.rets, tol);
}

struct TargetStats {
  int cases = 0, mismatches = 0, skipped = 0, malformed = 0, rejected = 0, malformed_records = 0;
};

enum class Verdict { kPassed, kFailed, kSkipped };  // skipped: no handler of the case's target here

// Whether a CPU handler's error is its rejection of malformed indices: out-of-range ids, offsets
// that are not a partition, ids that are not a permutation (ffi/cpu/row_parallel.h, dimenet.cc),
// reverse-edge ids that are not an involution or name a padding edge (dmpnn.cc; the CUDA handlers write
// NaN rows there instead: docs/semantics.md).
bool IsIndexRejection(const std::string& error) {
  for (const char* what : {"out of range", "appears twice", "offsets decrease", "offsets must start at 0",
                           "must be an involution", "names a padding edge"})
    if (error.find(what) != std::string::npos) return true;
  return false;
}

// What decides the code paths of a case's malformed variants: its target, its attributes, and the element
// types and ranks of its buffers (not their sizes or contents).
std::string Signature(const Case& c) {
  std::string s = c.target;
  for (const Attribute& a : c.attrs) s += "|" + a.name + "=" + std::string(a.bytes.begin(), a.bytes.end());
  for (const auto* buffers : {&c.args, &c.rets})
    for (const HostBuffer& b : *buffers) s += "|" + std::to_string(b.dtype) + "/" + std::to_string(b.dims.size());
  return s;
}

Verdict ReplayCase(HostFfi& host, const Options& o, const Handlers& h, const std::string& name, const Case& c,
                   TargetStats& stats, bool malformed) {
  // A malformed call on every platform: any result or error will do, but no crash or sanitizer report.
  auto run_malformed = [&](const Variant* v, const std::string& what) {
    for (const std::string& platform : o.platforms) {
      if (XLA_FFI_Handler* handler = HandlerOf(h, platform)) {
        g_current = name + " [" + platform + "] with " + what;
        ++stats.malformed;
        if (Run(host, handler, c, v).error) ++stats.rejected;
      }
    }
  };
  // A case recorded on the CUDA handlers with indices the CPU handler rejects: their policy promises
  // memory safety and zeros where no edge writes, not a value where two rows name the same edge
  // (which row's write lands is unspecified), so it is replayed like a malformed variant.
  std::optional<Outcome> cpu;  // the CPU handler on a case recorded elsewhere
  if (c.platform != kCpu && !c.failed && h.cpu) {
    g_current = name + " [cpu]";
    cpu = Run(host, h.cpu, c, nullptr);
  }
  if (cpu && cpu->error && IsIndexRejection(*cpu->error)) {
    ++stats.malformed_records;
    if (malformed) run_malformed(nullptr, "the recorded (malformed) indices");
    return Verdict::kPassed;
  }
  bool ok = true, ran = false;
  for (const std::string& platform : o.platforms) {
    XLA_FFI_Handler* handler = HandlerOf(h, platform);
    const bool recorded = platform == c.platform;
    if (!handler || (!recorded && (c.failed || !FloatTypesOnly(c)))) continue;
    g_current = name + " [" + platform + "]";
    const Outcome got = platform == kCpu && cpu ? std::move(*cpu) : Run(host, handler, c, nullptr);
    const auto diff = Check(c, got, recorded ? kReplayTolerance : kCrossTolerance);
    ran = true;
    if (diff) {
      std::printf("FAIL %s [%s%s]: %s\n", name.c_str(), platform.c_str(), recorded ? "" : " vs recorded",
                  diff->c_str());
      ok = false;
    }
  }
  if (malformed)
    for (const Variant& v : MalformedVariants(c.args)) run_malformed(&v, v.what);
  return !ok ? Verdict::kFailed : ran ? Verdict::kPassed : Verdict::kSkipped;
}

int Main(int argc, char** argv) {
  const auto options = ParseOptions(argc, argv);
  if (!options) {
    std::fprintf(stderr,
                 "usage: %s CASE_DIR [--platform cpu|cuda-emulation|both] [--threads N] [--limit K] [--no-malformed]\n"
                 "       [--malformed-once]\n"
                 "(a cuda-emulation platform needs a build with -DJGO_WITH_CUDA_EMULATION)\n",
                 argv[0]);
    return 2;
  }
  if (__sanitizer_set_death_callback) __sanitizer_set_death_callback(PrintCurrent);
  HostFfi host(options->threads);
  int passed = 0, failed = 0;
  std::set<std::string> signatures;  // of the cases whose malformed variants ran (--malformed-once)
  const std::vector<std::string> files = CaseFiles(options->dir);
  // Files are named <target>.<n>.jgocase: each target's run of files is replayed, then summarised.
  for (size_t begin = 0, end; begin < files.size(); begin = end) {
    const std::string prefix = files[begin].substr(0, files[begin].find('.'));
    for (end = begin; end < files.size() && files[end].substr(0, files[end].find('.')) == prefix;) ++end;
    TargetStats stats;
    const int64_t scheduled = host.scheduled();
    for (size_t f = begin; f < end && stats.cases < options->limit; ++f) {
      std::string error;
      const auto c = ReadCase(options->dir + "/" + files[f], &error);
      const Handlers* h = nullptr;
      for (const Handlers& entry : kHandlers)
        if (c && c->target == entry.target) h = &entry;
      ++stats.cases;
      if (!h) {
        std::printf("FAIL %s: %s\n", files[f].c_str(), c ? ("unknown target " + c->target).c_str() : error.c_str());
      }
      const bool malformed =
          options->malformed && (!options->malformed_once || (c && signatures.insert(Signature(*c)).second));
      const Verdict v = h ? ReplayCase(host, *options, *h, files[f], *c, stats, malformed) : Verdict::kFailed;
      stats.mismatches += v == Verdict::kFailed;
      stats.skipped += v == Verdict::kSkipped;
      passed += v == Verdict::kPassed;
      failed += v == Verdict::kFailed;
    }
    std::printf("%s: %d cases (%d on indices the CPU rejects), %d mismatches, %d malformed variants run (%d rejected), "
                "%lld pool tasks%s\n",
                prefix.c_str(), stats.cases, stats.malformed_records, stats.mismatches, stats.malformed, stats.rejected,
                static_cast<long long>(host.scheduled() - scheduled),
                stats.skipped ? (", " + std::to_string(stats.skipped) + " not replayed (no handler here)").c_str() : "");
    std::fflush(stdout);
  }
  if (files.empty()) std::printf("no case files (*%s) in %s\n", kCaseSuffix, options->dir.c_str());
  std::printf("%d passed, %d failed\n", passed, failed);
  return failed > 0 || files.empty() ? 1 : 0;
}

}  // namespace
}  // namespace jgo::testing

int main(int argc, char** argv) { return jgo::testing::Main(argc, argv); }
