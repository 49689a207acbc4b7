// A host implementation of the XLA FFI C API, enough to run the project's handlers outside XLA:
// errors, a thread pool of real threads, scratch memory from the heap, and no stream. Every other
// entry returns an error naming itself.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "xla/ffi/api/c_api.h"

namespace jgo::testing {

// A buffer handed to a handler: the caller owns the data.
struct BufferRef {
  XLA_FFI_DataType dtype;
  std::vector<int64_t> dims;
  void* data;
};

// An attribute as the call frame carries it: a scalar's value, an array's elements or a string's
// characters, as raw bytes.
struct Attribute {
  std::string name;
  XLA_FFI_AttrType kind;  // SCALAR, ARRAY or STRING
  XLA_FFI_DataType dtype;  // of the scalar or the array elements; INVALID for a string
  std::vector<char> bytes;
};

class HostFfi {
 public:
  explicit HostFfi(int num_threads = 2);
  ~HostFfi();
  HostFfi(const HostFfi&) = delete;
  HostFfi& operator=(const HostFfi&) = delete;

  const XLA_FFI_Api* api() const { return &api_; }
  int num_threads() const { return static_cast<int>(threads_.size()); }

  // Calls the handler at the execute stage on a frame of these buffers and attributes; returns
  // its error message, or nothing on success. Scratch memory the handler did not free is an error.
  std::optional<std::string> Call(XLA_FFI_Handler* handler, const std::vector<BufferRef>& args,
                                  const std::vector<BufferRef>& rets, const std::vector<Attribute>& attrs);

  // Runs task(data) on a pool thread.
  void Schedule(XLA_FFI_Task* task, void* data);
  // The number of tasks scheduled so far.
  int64_t scheduled() const { return scheduled_; }

 private:
  void Work();

  XLA_FFI_Api api_;
  std::mutex mu_;
  std::condition_variable wake_;
  std::deque<std::pair<XLA_FFI_Task*, void*>> queue_;
  bool stop_ = false;
  std::atomic<int64_t> scheduled_{0};
  std::vector<std::thread> threads_;
};

// The bytes of one element of the type; 0 for a type this code does not handle (sub-byte, token).
size_t ByteWidth(XLA_FFI_DataType dtype);
// The type's name ("f32", "s64", ...).
const char* DataTypeName(XLA_FFI_DataType dtype);

}  // namespace jgo::testing
