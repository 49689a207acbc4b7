// Reading and writing case files (case_io.h).
#include "testing/case_io.h"

#include <unistd.h>

#include <cstring>
#include <fstream>
#include <iterator>

namespace jgo::testing {
namespace {

class Writer {
 public:
  template <typename T>
  void Pod(T v) {
    out_.append(reinterpret_cast<const char*>(&v), sizeof(T));
  }
  void Bytes(const void* data, size_t n) {
    Pod<uint64_t>(n);
    out_.append(static_cast<const char*>(data), n);
  }
  void String(const std::string& s) { Bytes(s.data(), s.size()); }
  void Buffer(const HostBuffer& b) {
    Pod<int32_t>(b.dtype);
    Pod<uint64_t>(b.dims.size());
    for (int64_t d : b.dims) Pod<int64_t>(d);
    Bytes(b.bytes.data(), b.bytes.size());
  }
  const std::string& data() const { return out_; }

 private:
  std::string out_;
};

// Reads fields off the file's bytes; after the first short read every read fails.
class Reader {
 public:
  explicit Reader(std::string data) : data_(std::move(data)) {}
  template <typename T>
  bool Pod(T* v) {
    if (!Take(sizeof(T))) return false;
    std::memcpy(v, data_.data() + pos_ - sizeof(T), sizeof(T));
    return true;
  }
  template <typename Container>
  bool Bytes(Container* out) {
    uint64_t n;
    if (!Pod(&n) || !Take(n)) return false;
    out->assign(data_.data() + pos_ - n, data_.data() + pos_);
    return true;
  }
  bool Buffer(HostBuffer* b) {
    int32_t dtype;
    uint64_t rank;
    if (!Pod(&dtype) || !Pod(&rank) || rank > 64) return false;
    b->dtype = static_cast<XLA_FFI_DataType>(dtype);
    b->dims.resize(rank);
    for (auto& d : b->dims)
      if (!Pod(&d) || d < 0) return false;
    return Bytes(&b->bytes) && ByteWidth(b->dtype) != 0 &&
           b->bytes.size() == static_cast<size_t>(b->elements()) * ByteWidth(b->dtype);
  }
  bool Count(uint64_t* n) { return Pod(n) && *n <= data_.size(); }
  bool at_end() const { return ok_ && pos_ == data_.size(); }

 private:
  bool Take(uint64_t n) {
    ok_ = ok_ && n <= data_.size() - pos_;
    if (ok_) pos_ += n;
    return ok_;
  }
  std::string data_;
  size_t pos_ = 0;
  bool ok_ = true;
};

bool ParseCase(Reader& r, Case* c) {
  char magic[sizeof(kCaseMagic)];
  uint32_t version;
  uint8_t failed;
  for (char& m : magic)
    if (!r.Pod(&m)) return false;
  if (std::memcmp(magic, kCaseMagic, sizeof(magic)) != 0 || !r.Pod(&version) || version != kCaseVersion) return false;
  if (!r.Bytes(&c->target) || !r.Bytes(&c->platform) || !r.Pod(&failed) || !r.Bytes(&c->error)) return false;
  c->failed = failed != 0;
  for (auto* buffers : {&c->args, &c->rets}) {
    uint64_t n;
    if (!r.Count(&n)) return false;
    buffers->resize(n);
    for (auto& b : *buffers)
      if (!r.Buffer(&b)) return false;
  }
  uint64_t n;
  if (!r.Count(&n)) return false;
  c->attrs.resize(n);
  for (auto& a : c->attrs) {
    int32_t kind, dtype;
    if (!r.Bytes(&a.name) || !r.Pod(&kind) || !r.Pod(&dtype) || !r.Bytes(&a.bytes)) return false;
    a.kind = static_cast<XLA_FFI_AttrType>(kind);
    a.dtype = static_cast<XLA_FFI_DataType>(dtype);
  }
  return r.at_end();
}

}  // namespace

int64_t HostBuffer::elements() const {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

bool WriteCase(int fd, const Case& c) {
  Writer w;
  for (char m : kCaseMagic) w.Pod(m);
  w.Pod(kCaseVersion);
  w.String(c.target);
  w.String(c.platform);
  w.Pod<uint8_t>(c.failed);
  w.String(c.error);
  for (const auto* buffers : {&c.args, &c.rets}) {
    w.Pod<uint64_t>(buffers->size());
    for (const auto& b : *buffers) w.Buffer(b);
  }
  w.Pod<uint64_t>(c.attrs.size());
  for (const auto& a : c.attrs) {
    w.String(a.name);
    w.Pod<int32_t>(a.kind);
    w.Pod<int32_t>(a.dtype);
    w.Bytes(a.bytes.data(), a.bytes.size());
  }
  const std::string& data = w.data();
  for (size_t done = 0; done < data.size();) {
    const ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

std::optional<Case> ReadCase(const std::string& path, std::string* error) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    *error = "cannot open " + path;
    return std::nullopt;
  }
  Reader r(std::string(std::istreambuf_iterator<char>(in), {}));
  Case c;
  if (!ParseCase(r, &c)) {
    *error = path + " is not a version " + std::to_string(kCaseVersion) + " case file, or is truncated";
    return std::nullopt;
  }
  return c;
}

namespace {

// The sentinel's bytes for one element, or nothing for the 0x7f fill.
std::optional<uint64_t> NanBits(XLA_FFI_DataType dtype) {
  switch (dtype) {
    case XLA_FFI_DataType_F16: return 0x7e00;
    case XLA_FFI_DataType_BF16: return 0x7fc0;
    case XLA_FFI_DataType_F32: return 0x7fc00000;
    case XLA_FFI_DataType_F64: return 0x7ff8000000000000;
    default: return std::nullopt;
  }
}

}  // namespace

void FillSentinel(XLA_FFI_DataType dtype, void* data, size_t bytes) {
  const auto nan = NanBits(dtype);
  if (!nan) {
    if (bytes > 0) std::memset(data, 0x7f, bytes);
    return;
  }
  const size_t width = ByteWidth(dtype);
  for (size_t at = 0; at + width <= bytes; at += width) std::memcpy(static_cast<char*>(data) + at, &*nan, width);
}

bool IsSentinel(XLA_FFI_DataType dtype, const void* data, int64_t i) {
  const size_t width = ByteWidth(dtype);
  const char* element = static_cast<const char*>(data) + i * width;
  char expected[16];
  FillSentinel(dtype, expected, width);
  return std::memcmp(element, expected, width) == 0;
}

}  // namespace jgo::testing
