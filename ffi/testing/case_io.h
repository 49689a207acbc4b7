// A recorded FFI call ("case") and its file format, shared by the recorder and the replay driver.
//
// Format (native byte order, little-endian on every supported host), version 1:
//   magic "JGOCASE\0", u32 version,
//   string target, string platform ("cpu" or "cuda-emulation"),
//   u8 failed, string error message,
//   u64 n_args, n_args x buffer, u64 n_rets, n_rets x buffer (the results after the call),
//   u64 n_attrs, n_attrs x (string name, i32 kind, i32 dtype, string bytes)
// with string = u64 length + bytes and buffer = i32 dtype, u64 rank, rank x i64 dim, string bytes.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "testing/ffi_host.h"

namespace jgo::testing {

inline constexpr char kCaseMagic[8] = {'J', 'G', 'O', 'C', 'A', 'S', 'E', '\0'};
inline constexpr uint32_t kCaseVersion = 1;
inline constexpr char kCaseSuffix[] = ".jgocase";

// A buffer with its contents.
struct HostBuffer {
  XLA_FFI_DataType dtype;
  std::vector<int64_t> dims;
  std::vector<char> bytes;

  int64_t elements() const;
  // A view for HostFfi::Call.
  BufferRef ref() { return {dtype, dims, bytes.data()}; }
};

struct Case {
  std::string target;
  std::string platform;
  bool failed = false;  // the handler returned an error
  std::string error;
  std::vector<HostBuffer> args;
  std::vector<HostBuffer> rets;
  std::vector<Attribute> attrs;
};

// Writes the case to an open file descriptor; false on a write error.
bool WriteCase(int fd, const Case& c);
// Reads a case file; nothing (and *error set) if it cannot be read or is malformed.
std::optional<Case> ReadCase(const std::string& path, std::string* error);

// Fills the bytes with the sentinel of the type: a quiet NaN for floats, 0x7f bytes otherwise.
// An output element still holding it after a call was never written.
void FillSentinel(XLA_FFI_DataType dtype, void* data, size_t bytes);
// Whether element i of the data holds the sentinel.
bool IsSentinel(XLA_FFI_DataType dtype, const void* data, int64_t i);

}  // namespace jgo::testing
