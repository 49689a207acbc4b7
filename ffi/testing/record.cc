// The FFI call recorder (record.h).
#include "testing/record.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <string>

#include "handlers.h"
#include "targets.h"
#include "testing/case_io.h"

namespace jgo::testing {
namespace {

constexpr int kDefaultLimit = 60;
constexpr int kDefaultMaxMegabytes = 4;
// Calls alike (Signature) beyond this many are not recorded, leaving room for other variants.
constexpr int kMaxAlike = 4;

struct Recorder {
  std::string dir;
  int limit = kDefaultLimit;
  size_t max_bytes = size_t{kDefaultMaxMegabytes} << 20;
  std::mutex mu;
  std::map<std::string, int> next;  // per target: the lowest file index that may be free
  std::map<std::string, int> alike;  // calls recorded per signature
};

// The recorder, or null when not recording. Never destroyed: XLA threads may still call handlers
// while the process exits.
Recorder* GetRecorder() {
  static Recorder* const recorder = []() -> Recorder* {
    const char* dir = std::getenv("JGO_FFI_RECORD");
    if (!dir || !*dir) return nullptr;
    auto* r = new Recorder;
    r->dir = dir;
    if (::mkdir(dir, 0755) != 0 && errno != EEXIST)  // the directory itself; its parent must exist
      std::fprintf(stderr, "jaxgraphops recorder: cannot create %s: %s\n", dir, std::strerror(errno));
    if (const char* limit = std::getenv("JGO_FFI_RECORD_LIMIT")) r->limit = std::atoi(limit);
    if (const char* mb = std::getenv("JGO_FFI_RECORD_MAX_MB")) r->max_bytes = size_t(std::atol(mb)) << 20;
    return r;
  }();
  return recorder;
}

// Creates the target's next free case file for a call of this signature; -1 once the target has
// its limit of files or the signature kMaxAlike of them (or on an error).
int ReserveFile(Recorder& r, const std::string& target, const std::string& signature) {
  std::lock_guard<std::mutex> lock(r.mu);
  if (r.alike[signature] >= kMaxAlike) return -1;
  for (int& n = r.next[target]; n < r.limit; ++n) {
    char index[16];
    std::snprintf(index, sizeof(index), ".%03d", n);
    const std::string path = r.dir + "/" + target + index + kCaseSuffix;
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd >= 0) {
      ++n;
      ++r.alike[signature];
      return fd;
    }
    if (errno != EEXIST) {
      std::fprintf(stderr, "jaxgraphops recorder: cannot create %s: %s\n", path.c_str(), std::strerror(errno));
      n = r.limit;
    }
  }
  return -1;
}

const char* PlatformOf(XLA_FFI_Handler* handler) {
#define JGO_CPU_PLATFORM(target, Stem) \
  if (handler == Jgo##Stem##Cpu) return "cpu";
  JGO_TARGETS(JGO_CPU_PLATFORM)
#undef JGO_CPU_PLATFORM
  return "cuda-emulation";
}

// An argument or result of the frame (all buffers, as CallBytes checks).
const XLA_FFI_Buffer* AsBuffer(void* arg) { return static_cast<const XLA_FFI_Buffer*>(arg); }

size_t BufferBytes(const XLA_FFI_Buffer* b) {
  size_t n = ByteWidth(b->dtype);
  for (int64_t i = 0; i < b->rank; ++i) n *= static_cast<size_t>(b->dims[i]);
  return n;
}

// Whether result b is an argument's buffer (input_output_aliases, e.g. jgo_check_edges): it holds the
// input, so it is not pre-filled with the sentinel.
bool AliasesAnArgument(const XLA_FFI_CallFrame* f, const XLA_FFI_Buffer* b) {
  for (int64_t i = 0; i < f->args.size; ++i) {
    if (AsBuffer(f->args.args[i])->data == b->data) return true;
  }
  return false;
}

// The bytes an attribute's value takes, or nothing if a case cannot hold it.
std::optional<size_t> AttrBytes(XLA_FFI_AttrType kind, const void* attr) {
  switch (kind) {
    case XLA_FFI_AttrType_SCALAR: {
      const auto* s = static_cast<const XLA_FFI_Scalar*>(attr);
      return ByteWidth(s->dtype) ? std::optional<size_t>(ByteWidth(s->dtype)) : std::nullopt;
    }
    case XLA_FFI_AttrType_ARRAY: {
      const auto* a = static_cast<const XLA_FFI_Array*>(attr);
      return ByteWidth(a->dtype) ? std::optional<size_t>(ByteWidth(a->dtype) * a->size) : std::nullopt;
    }
    case XLA_FFI_AttrType_STRING:
      return static_cast<const XLA_FFI_ByteSpan*>(attr)->len;
    default:
      return std::nullopt;
  }
}

// The bytes of the call's buffers, or nothing if a case cannot hold it (buffers of types without a
// byte width, dictionary attributes).
std::optional<size_t> CallBytes(const XLA_FFI_CallFrame* f) {
  size_t total = 0;
  for (int64_t i = 0; i < f->args.size; ++i) {
    const XLA_FFI_Buffer* b = AsBuffer(f->args.args[i]);
    if (f->args.types[i] != XLA_FFI_ArgType_BUFFER || ByteWidth(b->dtype) == 0) return std::nullopt;
    total += BufferBytes(b);
  }
  for (int64_t i = 0; i < f->rets.size; ++i) {
    const XLA_FFI_Buffer* b = AsBuffer(f->rets.rets[i]);
    if (f->rets.types[i] != XLA_FFI_RetType_BUFFER || ByteWidth(b->dtype) == 0) return std::nullopt;
    total += BufferBytes(b);
  }
  for (int64_t i = 0; i < f->attrs.size; ++i)
    if (!AttrBytes(f->attrs.types[i], f->attrs.attrs[i])) return std::nullopt;
  return total;
}

HostBuffer Copy(const XLA_FFI_Buffer* b) {
  const char* data = static_cast<const char*>(b->data);
  return {b->dtype, std::vector<int64_t>(b->dims, b->dims + b->rank), std::vector<char>(data, data + BufferBytes(b))};
}

Attribute CopyAttr(const XLA_FFI_ByteSpan* name, XLA_FFI_AttrType kind, const void* attr) {
  const size_t n = *AttrBytes(kind, attr);
  const char* bytes = nullptr;
  XLA_FFI_DataType dtype = XLA_FFI_DataType_INVALID;
  if (kind == XLA_FFI_AttrType_SCALAR) {
    dtype = static_cast<const XLA_FFI_Scalar*>(attr)->dtype;
    bytes = static_cast<const char*>(static_cast<const XLA_FFI_Scalar*>(attr)->value);
  } else if (kind == XLA_FFI_AttrType_ARRAY) {
    dtype = static_cast<const XLA_FFI_Array*>(attr)->dtype;
    bytes = static_cast<const char*>(static_cast<const XLA_FFI_Array*>(attr)->data);
  } else {
    bytes = static_cast<const XLA_FFI_ByteSpan*>(attr)->ptr;
  }
  return {std::string(name->ptr, name->len), kind, dtype, std::vector<char>(bytes, bytes + n)};
}

// What tells calls apart beyond their data: the target, the size class of the buffers (factors of
// 16), every buffer's type and rank (or emptiness) and every attribute's value.
std::string Signature(const char* target, const XLA_FFI_CallFrame* f, size_t bytes) {
  int size_class = 0;
  for (; bytes >= 16; bytes /= 16) ++size_class;
  std::string s = std::string(target) + "|" + std::to_string(size_class);
  auto add_buffer = [&](const XLA_FFI_Buffer* b) {
    s += "|" + std::to_string(b->dtype) + (BufferBytes(b) == 0 ? "e" : "r" + std::to_string(b->rank));
  };
  for (int64_t i = 0; i < f->args.size; ++i) add_buffer(AsBuffer(f->args.args[i]));
  for (int64_t i = 0; i < f->rets.size; ++i) add_buffer(AsBuffer(f->rets.rets[i]));
  for (int64_t i = 0; i < f->attrs.size; ++i) {
    const Attribute a = CopyAttr(f->attrs.names[i], f->attrs.types[i], f->attrs.attrs[i]);
    s += "|" + a.name + "=" + std::string(a.bytes.begin(), a.bytes.end());
  }
  return s;
}

std::string ErrorMessage(const XLA_FFI_Api* api, XLA_FFI_Error* error) {
  XLA_FFI_Error_GetMessage_Args args = {XLA_FFI_Error_GetMessage_Args_STRUCT_SIZE, nullptr, error, nullptr};
  api->XLA_FFI_Error_GetMessage(&args);
  return args.message ? args.message : "";
}

}  // namespace

XLA_FFI_Error* CallAndRecord(const char* target, XLA_FFI_Handler* handler, XLA_FFI_CallFrame* frame) {
  Recorder* recorder = GetRecorder();
  // Metadata queries (extensions) and other stages pass through.
  if (!recorder || frame->stage != XLA_FFI_ExecutionStage_EXECUTE || frame->extension_start) return handler(frame);
  const auto bytes = CallBytes(frame);
  if (!bytes || *bytes > recorder->max_bytes) return handler(frame);
  const int fd = ReserveFile(*recorder, target, Signature(target, frame, *bytes));
  if (fd < 0) return handler(frame);

  Case c;
  c.target = target;
  c.platform = PlatformOf(handler);
  for (int64_t i = 0; i < frame->args.size; ++i) c.args.push_back(Copy(AsBuffer(frame->args.args[i])));
  for (int64_t i = 0; i < frame->attrs.size; ++i)
    c.attrs.push_back(CopyAttr(frame->attrs.names[i], frame->attrs.types[i], frame->attrs.attrs[i]));
  for (int64_t i = 0; i < frame->rets.size; ++i) {
    const XLA_FFI_Buffer* b = AsBuffer(frame->rets.rets[i]);
    if (!AliasesAnArgument(frame, b)) FillSentinel(b->dtype, b->data, BufferBytes(b));
  }

  XLA_FFI_Error* error = handler(frame);

  for (int64_t i = 0; i < frame->rets.size; ++i) c.rets.push_back(Copy(AsBuffer(frame->rets.rets[i])));
  c.failed = error != nullptr;
  if (error) c.error = ErrorMessage(frame->api, error);
  if (!WriteCase(fd, c)) std::fprintf(stderr, "jaxgraphops recorder: writing a %s case failed\n", target);
  ::close(fd);
  return error;
}

}  // namespace jgo::testing
